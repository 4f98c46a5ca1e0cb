"""tensor-move-delete takes the op-name rows (``io_name``, rw_types.dl's input) from its InitRWConflictCheck instead
of listing them again: they must be the rows of the graph the rules run on, i.e. equal to a fresh listing whenever
the initialisation inserted no Identity (when it does, the pass lists them again)."""

from __future__ import annotations

from anchorlog.analysis import tensor_move as tmmod
from anchorlog.analysis.registry import PassContext
from anchorlog.analysis.rw_conflict import RWTypes, io_name_rows
from anchorlog.facts.generate import generate_transformer


def test_init_rows_equal_a_fresh_listing() -> None:
    m = generate_transformer(nodes=2000, seed=3, tensor_move_share=0.06)
    n_before = m.num_nodes()
    rw = RWTypes.init_rw_conflict_check(m, PassContext(options={}, engine="sqlite"), init_only=True)
    assert m.num_nodes() == n_before
    assert rw._io_rows and rw._io_rows == io_name_rows(m)


def test_rules_with_given_rows_derive_the_same_facts() -> None:
    m = generate_transformer(nodes=2000, seed=3, tensor_move_share=0.06)
    ctx = PassContext(options={}, engine="sqlite")
    rw = RWTypes.init_rw_conflict_check(m, ctx, init_only=True)
    from anchorlog.analysis.fact_cache import shared_facts

    db = shared_facts(m, ctx)
    seed = [(g.name, n.name) for g in m.graphs for n in g.nodes.values() if n.type == "TensorMove"]
    kw = {"engine": "sqlite", "primed": True, "reuse": tmmod.ReuseConfig()}
    given = tmmod.TMRules(m, db, io_rows=rw._io_rows, **kw).derive(seed, tmmod.DECISION_OUTPUTS + tmmod.REPORT_OUTPUTS)
    fresh = tmmod.TMRules(m, db, **kw).derive(seed, tmmod.DECISION_OUTPUTS + tmmod.REPORT_OUTPUTS)
    assert given == fresh
    assert given["tm_rw"]

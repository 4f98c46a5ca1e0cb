"""symbols.dl's demand-driven relations (ds_*: the founders of asked anchors, the anchors of asked founders, the
unions, GE's events and the founder count, without numbering every anchor) equal the whole-table relations
(the same rules with every anchor asked, sym_all) restricted to what was asked: asking for every anchor and every
founder gives the whole table back, asking for half of them gives exactly that half. On every conformance model (each graph as mapped graph) and on random
builder graphs. layout.dl reads these relations."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOLS_DL, symbol_inputs
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program
from tests.shared_paths import SHARED

try:  # tests/ is on sys.path in pytest's default import mode
    from test_symbols_oracle import builder_graphs
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.test_symbols_oracle import builder_graphs

CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []

# what is asked: rows computed from a run of the whole table (sym_all), every k-th node's anchors and founders
ASKING = """
.include "symbols.dl"
.decl ask_in(g: symbol, n: symbol, i: number)
.input ask_in
.decl ask_out(g: symbol, n: symbol, i: number)
.input ask_out
.decl ask_root(r: number)
.input ask_root
sym_ask_in(G, N, I) :- ask_in(G, N, I).
sym_ask_out(G, N, I) :- ask_out(G, N, I).
sym_ask_members(R) :- ask_root(R).
"""
WHOLE = [
    "tree_root",
    "sym_root",
    "root_reach",
    "sg_out_union",
    "merge_peer",
    "nextiter_out",
    "phantom_out",
    "late_link",
    "in_aid",
    "out_aid",
]
DEMAND = [
    "ds_tree",
    "ds_root_reach",
    "ds_sg_out_union",
    "ds_merge_peer",
    "ds_nextiter_out",
    "ds_phantom_out",
    "ds_late_link",
    "ds_member_in",
    "ds_member_out",
    "ds_root_count",
    "ds_in_aid",
    "ds_out_aid",
]


def _program() -> Program:
    return Program.from_text(ASKING, base_dir=SYMBOLS_DL.parent)


def assert_demand_equal(m: Model, prog: Program) -> None:
    db = FactDB.from_model(m)
    for g in m.graphs:
        top = None if g is m.root else g.name
        order = node_order_rows(m, g)
        base = symbol_inputs(order, top)
        whole = prog.run(db, extra=symbol_inputs(order, top, whole=True), outputs=WHOLE)
        name_in = {a: (gn, n, i) for gn, n, i, a in whole.set("in_aid")}
        name_out = {a: (gn, n, i) for gn, n, i, a in whole.set("out_aid")}
        tree = whole.set("tree_root")
        for k in (1, 2):
            where = (m.name, g.name, k)
            asked = {a for a in (*name_in, *name_out) if (a >> 20) % k == 0}
            roots = {r for (r,) in whole.set("sym_root") if (r >> 20) % k == 0}
            extra = {
                **base,
                "ask_in": [name_in[a] for a in asked if a in name_in],
                "ask_out": [name_out[a] for a in asked if a in name_out],
                "ask_root": [(r,) for r in roots],
            }
            res = prog.run(db, extra=extra, outputs=DEMAND)
            ds_tree = res.set("ds_tree")
            # every asked anchor with a symbol has its founder(s), and every founder found is the whole table's
            assert {(a, r) for a, r in tree if a in asked} == {(a, r) for a, r in ds_tree if a in asked}, where
            assert ds_tree <= tree, where
            # the anchors of the asked founders, by name
            assert res.set("ds_member_in") == {(r, *name_in[a], a) for a, r in tree if r in roots and a in name_in}
            assert res.set("ds_member_out") == {(r, *name_out[a], a) for a, r in tree if r in roots and a in name_out}
            assert res.set("ds_in_aid") <= whole.set("in_aid") and res.set("ds_out_aid") <= whole.set("out_aid"), where
            # unions, classes and GE's events: exactly the whole table's
            for whole_rel, part in (
                ("root_reach", "ds_root_reach"),
                ("sg_out_union", "ds_sg_out_union"),
                ("merge_peer", "ds_merge_peer"),
                ("nextiter_out", "ds_nextiter_out"),
                ("phantom_out", "ds_phantom_out"),
                ("late_link", "ds_late_link"),
            ):
                assert whole.set(whole_rel) == res.set(part), (*where, whole_rel)
            assert res.set("ds_root_count") == {(len(whole.set("sym_root")),)}, where


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_demand_equals_whole_table_on_conformance_models() -> None:
    prog = _program()
    for p in CASES:
        assert_demand_equal(read_model(p), prog)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder_graphs())
def test_demand_equals_whole_table_on_random_graphs(m: Model) -> None:
    assert_demand_equal(m, _program())

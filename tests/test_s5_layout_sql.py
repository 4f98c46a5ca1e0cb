"""Session 5: the cheaper SQL of the layout pass's rules (symbols.dl's root count, numbering without the
ds_*_have relations; the engine's covering lookup indexes and input-type scan) gives the same answers."""

from __future__ import annotations

import sqlite3

import pytest

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOLS_DL, symbol_inputs
from anchorlog.errors import AnchorlogError
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program, evaluate
from tests.shared_paths import SHARED

CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
# models with subgraphs, Merges, RefData, unvisited producers, ...: a sample of every family
SAMPLE = [p for p in CASES if p.parent.name.startswith(("layout_", "tm_", "rw_", "sym"))][::3]


# symbols.dl's founder count as it was before Session 5 (every out_anchor row probed through node_order, the
# unvisited producers' consumers counted inside the aggregate), kept as the oracle for orders that miss nodes
OLD_COUNT = """
.include "symbols.dl"
.decl old_root_count(n: number)
old_root_count(C1 + C2 - C3 + C4 + C5 + C6 + C7) :-
    C1 = count : { within(G1), node_order(G1, N1, _), out_anchor(G1, N1, _, _, _, _, _, _, _, _, _, _) },
    C2 = count : { ds_edge_only_out(_, _, _) },
    C3 = count : { ds_xsrc_out(_) },
    C4 = count : { within(G4), node_order(G4, N4, _), in_anchor(G4, N4, _, 0, _, _, _, _, _, _, _), !special_node(G4, N4) },
    C5 = count : { ds_unvisited_fed(G5, N5, I5), node_order(G5, N5, _), in_anchor(G5, N5, I5, _, _, _, _, _, _, _, _),
                   !special_node(G5, N5) },
    C6 = count : { ds_bare_data(G6, N6), node_order(G6, N6, _), !special_node(G6, N6), !ds_bare_fed(G6, N6) },
    C7 = count : { ds_special_member_in(A7), !ds_xsrc(A7) }.
"""
OUTPUTS = ["ds_root_count", "old_root_count", "sym_root", "ds_all_visited"]


def _counts(db: FactDB, order: list[tuple[str, str, int]], top: str | None) -> tuple[set, set, int, set]:
    prog = Program.from_text(OLD_COUNT, base_dir=SYMBOLS_DL.parent)
    res = prog.run(db, extra=symbol_inputs(order, top, whole=True), outputs=OUTPUTS)
    return res.set("ds_root_count"), res.set("old_root_count"), len(res.set("sym_root")), res.set("ds_all_visited")


def _check(m: Model) -> None:
    db = FactDB.from_model(m)
    for g in m.graphs:
        top = None if g is m.root else g.name
        order = node_order_rows(m, g)
        # every node of the mapped graphs visited: the out-anchors counted from the graph index; the count is the
        # whole table's founders and the old formula's
        count, old, roots, visited = _counts(db, order, top)
        assert count == old == {(roots,)}, (m.name, g.name)
        assert visited == {(1,)}, (m.name, g.name)
        if len(order) < 2:
            continue
        # an order missing nodes (outside the count's premise, where neither formula is the founders' number):
        # counted through node_order as before
        partial = [row for k, row in enumerate(order) if k % 3 != 1]
        count, old, _roots, visited = _counts(db, partial, top)
        assert count == old, (m.name, g.name, "partial")
        assert visited == set(), (m.name, g.name, "partial")


@pytest.mark.skipif(not SAMPLE, reason="../shared/conformance is not available")
def test_root_count_equals_the_founders_on_conformance_models() -> None:
    for p in SAMPLE:
        _check(read_model(p))


def test_root_count_equals_the_founders_on_a_generated_graph() -> None:
    _check(generate_transformer(nodes=600, seed=3))


def _evaluations(monkeypatch: pytest.MonkeyPatch) -> list:
    seen = []
    init = evaluate.SQLEvaluation.__init__

    def keep(self, *a, **kw):  # type: ignore[no-untyped-def]
        init(self, *a, **kw)
        seen.append(self)

    monkeypatch.setattr(evaluate.SQLEvaluation, "__init__", keep)
    return seen


def test_narrow_relation_gets_one_covering_index_for_lookups_by_its_prefixes(monkeypatch: pytest.MonkeyPatch) -> None:
    """A 3-column input looked up by (a) in one rule and by (a, b) in another: one index (a, b, c) serves both
    (the lookup reads c from it), and the answers are those of DuckDB (no indexes) and of a plain join."""
    text = """
    .decl e(a: number, b: number, c: number)
    .input e
    .decl q(x: number)
    .input q
    .decl q2(x: number, y: number)
    .input q2
    .decl p(x: number, c: number)
    .output p
    .decl r(x: number, y: number, c: number)
    .output r
    p(X, C) :- q(X), e(X, _, C).
    r(X, Y, C) :- q2(X, Y), e(X, Y, C).
    """
    e = [(i % 50, i % 7, i) for i in range(500)]
    q = [(i,) for i in range(0, 50, 5)]
    q2 = [(i, i % 7) for i in range(0, 50, 3)]
    seen = _evaluations(monkeypatch)
    res = Program.from_text(text).run(sqlite3.connect(":memory:"), extra={"e": e, "q": q, "q2": q2})
    want_p = {(x, c) for (x,) in q for a, _b, c in e if a == x}
    want_r = {(x, y, c) for x, y in q2 for a, b, c in e if (a, b) == (x, y)}
    assert res.set("p") == want_p and res.set("r") == want_r
    indexes = [s for s in seen[-1].statements if s.startswith("CREATE INDEX") and '"_al_e"' in s]
    assert len(indexes) == 1 and indexes[0].endswith('("a", "b", "c")'), indexes
    pytest.importorskip("duckdb")
    duck = Program.from_text(text).run(sqlite3.connect(":memory:"), engine="duckdb", extra={"e": e, "q": q, "q2": q2})
    assert duck.set("p") == want_p and duck.set("r") == want_r


def test_input_types_come_from_the_first_value_of_each_column_and_bad_rows_are_named() -> None:
    """Column types of an input relation are taken from its first non-null value per column (the scan stops once
    every column has one); a row of the wrong length is reported, wherever it is."""
    text = """
    .decl e(a: symbol, b: number)
    .input e
    .decl p(a: symbol, b: number)
    .output p
    p(A, B) :- e(A, B), B > 1.
    """
    rows = [(None, None)] * 100 + [("x", 2), ("y", 1)] + [("z", 3)] * 10
    res = Program.from_text(text).run(sqlite3.connect(":memory:"), extra={"e": rows})
    assert res.set("p") == {("x", 2), ("z", 3)}
    with pytest.raises(AnchorlogError, match=r"row \('w', 1, 2\) has 3 values, the program uses 2"):
        Program.from_text(text).run(sqlite3.connect(":memory:"), extra={"e": [*rows, ("w", 1, 2)]})

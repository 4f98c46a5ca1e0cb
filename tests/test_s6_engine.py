"""Session 6, engine: rules proven to derive no tuple twice run without DISTINCT (evaluate._needs_distinct).

A rule whose head names every argument of its positive atoms, over tables that hold no tuple twice, derives each
tuple once, so dropping its DISTINCT keeps the rows (off by default: SQLite may plan the query without DISTINCT
differently, e.g. scan a table instead of its unique index, and return the rows in another order). These tests check
the proof's conditions (fact tables, affinity conversions, mixed-affinity joins, NaN inputs keep the DISTINCT) and
that results AND row order equal those of the always-DISTINCT evaluation, down to whole passes on generated
graphs."""

from __future__ import annotations

import copy
import json
import sqlite3

import pytest

from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.ge_io import write_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.queries import Program
from anchorlog.queries import evaluate as ev


def evaluate(text: str, conn: sqlite3.Connection, extra: dict | None = None, proof: bool = True) -> tuple[dict, dict]:
    """Rows of every output relation (in the engine's order) and, per derived relation, whether each of its rules
    ran with a DISTINCT (the decision of the finished evaluation), with the proof on or off."""
    prog = Program.from_text(text)
    e = ev.SQLEvaluation(prog, conn, "sqlite", {k: [tuple(r) for r in v] for k, v in (extra or {}).items()})
    old = ev._DISTINCT_BY_PROOF
    ev._DISTINCT_BY_PROOF = proof
    try:
        res = e.run(prog.outputs)
        distinct: dict[str, list[bool]] = {}
        for r in prog.ast.rules:
            if r.body:
                distinct.setdefault(r.head.rel, []).append(e._needs_distinct(r))
    finally:
        ev._DISTINCT_BY_PROOF = old
    return {rel: res.rows(rel) for rel in prog.outputs}, distinct


def both_ways(text: str, make_db, extra: dict | None = None) -> tuple[dict, dict]:
    """Evaluate with and without the proof: the rows, and their order, must be the same."""
    rows, distinct = evaluate(text, make_db(), extra, proof=True)
    base, base_distinct = evaluate(text, make_db(), extra, proof=False)
    assert rows == base
    assert all(all(v) for v in base_distinct.values())
    return rows, distinct


def empty_db() -> sqlite3.Connection:
    return sqlite3.connect(":memory:")


DERIVED = """
.decl e(a: symbol, b: symbol)
.input e
.decl q(a: symbol, b: symbol)
q(A, B) :- e(A, B), A != B.
.decl p(b: symbol, a: symbol, t: symbol)
.output p
p(B, A, "x") :- q(A, B), q(B, A).
.decl r(a: symbol)
.output r
r(A) :- q(A, _).
"""


def test_injective_rule_over_derived_sets_runs_without_distinct() -> None:
    edges = [("a", "b"), ("b", "a"), ("c", "c"), ("a", "c"), ("c", "a"), ("a", "b")]
    rows, distinct = both_ways(DERIVED, empty_db, {"e": edges})
    assert sorted(rows["p"]) == [("a", "b", "x"), ("a", "c", "x"), ("b", "a", "x"), ("c", "a", "x")]
    assert sorted(rows["r"]) == [("a",), ("b",), ("c",)]
    assert distinct["q"] == [False]  # input rows, de-duplicated, of their columns' storage class
    assert distinct["p"] == [False]  # the head names every argument of both atoms
    assert distinct["r"] == [True]  # q's second column is projected away


def fact_table_with_repeats() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE edge (src TEXT, dst TEXT)")
    c.executemany("INSERT INTO edge VALUES (?, ?)", [("a", "b"), ("a", "b"), ("b", "c")])
    return c


def test_fact_table_rows_may_repeat_so_distinct_stays() -> None:
    text = """
    .decl out(s: symbol, d: symbol)
    .output out
    out(S, D) :- edge(S, D).
    .decl two(s: symbol, d: symbol, e: symbol)
    .output two
    two(S, D, E) :- edge(S, D), edge(D, E).
    """
    rows, distinct = both_ways(text, fact_table_with_repeats)
    assert rows["out"] == [("a", "b"), ("b", "c")]
    assert rows["two"] == [("a", "b", "c")]
    assert distinct == {"out": [True], "two": [True]}


def untyped_values() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE val (k, v)")  # no affinity: 1 and '1' are two values
    c.executemany("INSERT INTO val VALUES (?, ?)", [("a", 1), ("a", "1"), ("b", 2)])
    return c


def test_affinity_merging_two_derived_tuples_keeps_distinct_downstream() -> None:
    # q's number column turns '1' into 1: q holds ("a", 1) twice, so a rule reading q must keep its DISTINCT
    text = """
    .decl q(k: symbol, v: number)
    q(K, V) :- val(K, V).
    .decl p(v: number, k: symbol)
    .output p
    p(V, K) :- q(K, V), K != "z".
    """
    rows, distinct = both_ways(text, untyped_values)
    assert rows["p"] == [(1, "a"), (2, "b")]
    assert distinct["p"] == [True]


def test_input_rows_of_another_storage_class_keep_distinct() -> None:
    text = """
    .decl e(a: number)
    .input e
    .decl p(a: number, t: symbol)
    .output p
    p(A, "t") :- e(A), A >= 0.
    """
    rows, distinct = both_ways(text, empty_db, {"e": [(1,), ("1",), (2,)]})
    assert rows["p"] == [(1, "t"), (2, "t")]
    assert distinct["p"] == [True]
    rows, distinct = both_ways(text, empty_db, {"e": [(1,), (3,), (2,)]})
    assert sorted(rows["p"]) == [(1, "t"), (2, "t"), (3, "t")]
    assert distinct["p"] == [False]
    text_f = text.replace("a: number", "a: float")
    rows, distinct = both_ways(text_f, empty_db, {"e": [(1.5,), (float("nan"),), (None,), (2.5,)]})
    assert len(rows["p"]) == len(set(rows["p"]))
    assert distinct["p"] == [True]  # NaN is stored as NULL


def mixed_affinity_db() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE num (x INTEGER)")
    c.execute("CREATE TABLE txt (x TEXT)")
    c.executemany("INSERT INTO num VALUES (?)", [(1,), (2,)])
    c.executemany("INSERT INTO txt VALUES (?)", [("1",), ("01",), ("2",)])
    return c


def test_join_across_affinities_keeps_distinct() -> None:
    # an INTEGER and a TEXT column compared: 1 meets '1' and '01', one head value for two tuples of t
    text = """
    .decl n(x: number)
    n(X) :- num(X).
    .decl t(x: symbol)
    t(X) :- txt(X).
    .decl p(x: number)
    .output p
    p(X) :- n(X), t(X).
    """
    rows, distinct = both_ways(text, mixed_affinity_db)
    assert len(rows["p"]) == len(set(rows["p"]))
    assert distinct["p"] == [True]


def test_results_read_from_a_proven_set_keep_their_order() -> None:
    text = """
    .decl e(a: symbol, b: number)
    .input e
    .decl q(a: symbol, b: number)
    q(A, B) :- e(A, B), B > 0.
    .decl p(a: symbol, b: number)
    .output p
    p(A, B) :- q(A, B), B < 5.
    .decl s(a: symbol)
    .output s
    s(A) :- p(A, _).
    .decl c(n: number)
    .output c
    c(N) :- N = count : { q(_, _) }.
    """
    rows, distinct = both_ways(text, empty_db, {"e": [("a", 1), ("b", 2), ("a", 1), ("c", 7), ("d", 3)]})
    assert rows["p"] == [("a", 1), ("b", 2), ("d", 3)]
    assert rows["s"] == [("a",), ("b",), ("d",)]
    assert rows["c"] == [(4,)]
    assert distinct["q"] == [False] and distinct["p"] == [False] and distinct["s"] == [True]


@pytest.mark.parametrize("passes", [["mem-conflict", "graph-lint"], ["o3"], ["tensor-move-delete"]])
def test_whole_passes_decide_and_order_as_with_every_distinct(passes: list[str], tmp_path) -> None:
    model = generate_transformer(nodes=2000, seed=3)
    outputs = []
    for flag in (True, False):
        old = ev._DISTINCT_BY_PROOF
        ev._DISTINCT_BY_PROOF = flag
        try:
            m = copy.deepcopy(model)
            ctx = PassContext()
            run_passes(m, passes, ctx)
        finally:
            ev._DISTINCT_BY_PROOF = old
        path = tmp_path / f"out{flag}.pbtxt"
        write_model(m, path)
        report = json.dumps(_strip(ctx.report), sort_keys=True, default=str)
        outputs.append((path.read_bytes(), report))
    assert outputs[0][0] == outputs[1][0]
    assert outputs[0][1] == outputs[1][1]


def _strip(o):
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if not str(k).endswith("_s") and k != "output"}
    if isinstance(o, list):
        return [_strip(v) for v in o]
    return o


def test_lookup_of_a_fact_table_without_a_serving_index_runs() -> None:
    """A join that looks a fact table up by columns none of its indexes starts with (here `t` by `b`, its index is
    on `a`): the engine tried to make a TEMP index on the main table and SQLite rejected the statement. Now the
    statement runs with SQLite's automatic index; the rows are those of a plain evaluation."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE t (a TEXT, b TEXT)")
    c.execute("CREATE INDEX t_a ON t (a)")
    c.executemany("INSERT INTO t VALUES (?, ?)", [(f"x{i}", f"y{i % 50}") for i in range(200)])
    text = """
    .decl q(y: symbol)
    .input q
    .decl p(x: symbol, y: symbol)
    .output p
    p(X, Y) :- q(Y), t(X, Y).
    .decl n(y: symbol)
    .output n
    n(Y) :- q(Y), !t(_, Y).
    """
    res = Program.from_text(text).run(c, extra={"q": [("y1",), ("y2",), ("zz",)]})
    expected = {(f"x{i}", f"y{i % 50}") for i in range(200) if i % 50 in (1, 2)}
    assert set(res.rows("p")) == expected and len(res.rows("p")) == len(expected)
    assert res.rows("n") == [("zz",)]
    pyd = Program.from_text(text).run(c, engine="pydatalog", extra={"q": [("y1",), ("y2",), ("zz",)]})
    assert set(pyd.rows("p")) == expected


def test_by_default_every_rule_keeps_its_distinct() -> None:
    # without DISTINCT SQLite may scan a table where the DISTINCT query scans its unique index: other row order
    assert ev._DISTINCT_BY_PROOF is False
    rows, distinct = evaluate(DERIVED, empty_db(), {"e": [("a", "b"), ("b", "a")]}, proof=ev._DISTINCT_BY_PROOF)
    assert all(all(v) for v in distinct.values())
    assert sorted(rows["p"]) == [("a", "b", "x"), ("b", "a", "x")]

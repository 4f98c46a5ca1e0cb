"""Session 6, engine: a result read from a table known to hold each tuple once skips the Python de-duplication
(evaluate.SQLEvaluation._stored_set). These tests check the proof's conditions (fact tables may repeat a tuple, an
affinity conversion can merge two derived tuples, input rows of another storage class or NaN are not a set) and
that the rows, and their order, are those of a de-duplicated read. (Dropping the DISTINCT of rules proven to derive
no tuple twice was tried too and removed: SQLite planned some queries another way and the rows came in another
order; docs/rules.md.)"""

from __future__ import annotations

import sqlite3

from anchorlog.queries import Program
from anchorlog.queries import evaluate as ev


def evaluate(
    text: str, conn: sqlite3.Connection, extra: dict | None = None, tables: tuple[str, ...] = ()
) -> tuple[dict, dict]:
    """Rows of every output relation (in the engine's order) and, per relation derived by a rule, given as
    ``extra`` or named in ``tables`` (fact tables), whether its table is known to hold each tuple once (the
    decision of the finished evaluation)."""
    prog = Program.from_text(text)
    e = ev.SQLEvaluation(prog, conn, "sqlite", {k: [tuple(r) for r in v] for k, v in (extra or {}).items()})
    res = e.run(prog.outputs)
    stored = {r.head.rel: e._stored_set(r.head.rel) for r in prog.ast.rules if r.body}
    stored.update({rel: e._stored_set(rel) for rel in (*(extra or {}), *tables)})
    rows = {rel: res.rows(rel, sort=False) for rel in prog.outputs}
    for rel, got in rows.items():  # a read that skipped the de-duplication found no tuple twice
        assert len(got) == len(set(got)), rel
    return rows, stored


def empty_db() -> sqlite3.Connection:
    return sqlite3.connect(":memory:")


DERIVED = """
.decl e(a: symbol, b: symbol)
.input e
.decl q(a: symbol, b: symbol)
.output q
q(A, B) :- e(A, B), A != B.
.decl p(b: symbol, a: symbol, t: symbol)
.output p
p(B, A, "x") :- q(A, B), q(B, A).
.decl r(a: symbol)
.output r
r(A) :- q(A, _).
"""


def test_derived_relations_and_typed_input_rows_are_sets() -> None:
    edges = [("a", "b"), ("b", "a"), ("c", "c"), ("a", "c"), ("c", "a"), ("a", "b")]
    rows, stored = evaluate(DERIVED, empty_db(), {"e": edges})
    assert sorted(rows["p"]) == [("a", "b", "x"), ("a", "c", "x"), ("b", "a", "x"), ("c", "a", "x")]
    assert sorted(rows["r"]) == [("a",), ("b",), ("c",)]
    assert sorted(rows["q"]) == [("a", "b"), ("a", "c"), ("b", "a"), ("c", "a")]
    assert stored == {"e": True, "q": True, "p": True, "r": True}


def fact_table_with_repeats() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE edge (src TEXT, dst TEXT)")
    c.executemany("INSERT INTO edge VALUES (?, ?)", [("a", "b"), ("a", "b"), ("b", "c")])
    return c


def test_fact_table_rows_may_repeat_derived_ones_do_not() -> None:
    text = """
    .decl out(s: symbol, d: symbol)
    .output out
    out(S, D) :- edge(S, D).
    .decl two(s: symbol, d: symbol, e: symbol)
    .output two
    two(S, D, E) :- edge(S, D), edge(D, E).
    """
    rows, stored = evaluate(text, fact_table_with_repeats(), tables=("edge",))
    assert rows["out"] == [("a", "b"), ("b", "c")]
    assert rows["two"] == [("a", "b", "c")]
    assert stored == {"edge": False, "out": True, "two": True}


def untyped_values() -> sqlite3.Connection:
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE val (k, v)")  # no affinity: 1 and '1' are two values
    c.executemany("INSERT INTO val VALUES (?, ?)", [("a", 1), ("a", "1"), ("b", 2)])
    return c


def test_affinity_merging_two_derived_tuples_is_not_a_set() -> None:
    # q's number column turns '1' into 1: q's table holds ("a", 1) twice, so its read is de-duplicated in Python;
    # p, derived from q with values of q's own affinity, is a set again
    text = """
    .decl q(k: symbol, v: number)
    .output q
    q(K, V) :- val(K, V).
    .decl s(k: symbol)
    .output s
    s(K) :- q(K, V), V > 0.
    .decl p(v: number, k: symbol)
    .output p
    p(V, K) :- q(K, V), K != "z".
    """
    rows, stored = evaluate(text, untyped_values())
    assert rows["q"] == [("a", 1), ("b", 2)]
    assert rows["p"] == [(1, "a"), (2, "b")]
    assert rows["s"] == [("a",), ("b",)]
    assert stored == {"q": False, "s": True, "p": True}


def test_input_rows_of_another_storage_class_are_not_a_set() -> None:
    text = """
    .decl e(a: number)
    .input e
    .decl p(a: number, t: symbol)
    .output p
    p(A, "t") :- e(A), A >= 0.
    """
    rows, stored = evaluate(text, empty_db(), {"e": [(1,), ("1",), (2,)]})
    assert rows["p"] == [(1, "t"), (2, "t")]
    assert stored == {"e": False, "p": True}
    rows, stored = evaluate(text, empty_db(), {"e": [(1,), (3,), (2,)]})
    assert sorted(rows["p"]) == [(1, "t"), (2, "t"), (3, "t")]
    assert stored == {"e": True, "p": True}
    text_f = text.replace("a: number", "a: float")
    rows, stored = evaluate(text_f, empty_db(), {"e": [(1.5,), (float("nan"),), (None,), (2.5,)]})
    assert stored["e"] is False  # NaN is stored as NULL, next to the NULL row


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
    rows, stored = evaluate(text, empty_db(), {"e": [("a", 1), ("b", 2), ("a", 1), ("c", 7), ("d", 3)]})
    assert rows["p"] == [("a", 1), ("b", 2), ("d", 3)]
    assert rows["s"] == [("a",), ("b",), ("d",)]
    assert rows["c"] == [(4,)]
    assert stored["q"] and stored["p"] and stored["s"]


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

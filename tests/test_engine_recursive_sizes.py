"""A recursive stratum's rows found in its rounds count for the strata after it.

The SQLite evaluator remembers how many rows each relation holds (join order, and rules reading an empty
relation are skipped). A member of a recursive stratum whose non-recursive rules found nothing but whose
recursive rules found rows in later rounds was once recorded as empty, and a later stratum reading it derived
nothing."""

from __future__ import annotations

import sqlite3

import pytest

from anchorlog.queries import Program

# q's own non-recursive rule finds nothing; its recursive rule (two atoms of p: not a linear stratum) finds
# rows in the first round; r, in a later stratum, reads q
PROGRAM = """
.decl e(a: number, b: number)
e(1, 2). e(2, 3). e(3, 4). e(4, 5).
.decl p(a: number, b: number)
.decl q(a: number, b: number)
p(X, Y) :- e(X, Y).
q(X, Y) :- e(X, Y), X > 100.
q(X, Z) :- p(X, Y), p(Y, Z).
p(X, Z) :- q(X, Y), p(Y, Z), X < 0.
.decl r(a: number, b: number)
r(X, Y) :- q(X, Y), e(_, Y).
.output r
.decl n(c: number)
n(C) :- C = count : { q(_, _) }.
.output n
"""


@pytest.mark.parametrize(
    "engine,kw",
    [("sqlite", {}), ("sqlite", {"recursive_cte": False}), ("duckdb", {}), ("pydatalog", {})],
    ids=["sqlite", "sqlite-seminaive", "duckdb", "pydatalog"],
)
def test_rows_found_in_rounds_reach_later_strata(engine, kw):
    if engine == "duckdb":
        pytest.importorskip("duckdb")
    if engine == "pydatalog":
        pytest.importorskip("pyDatalog")
    res = Program.from_text(PROGRAM).run(sqlite3.connect(":memory:"), engine=engine, **kw)
    assert sorted(res.rows("r")) == [(1, 3), (2, 4), (3, 5)]
    assert res.rows("n") == [(3,)]


def test_pydatalog_count_over_a_mutually_recursive_relation():
    pytest.importorskip("pyDatalog")
    res = Program.from_text(PROGRAM).run(sqlite3.connect(":memory:"), engine="pydatalog")
    assert res.rows("n") == [(3,)]

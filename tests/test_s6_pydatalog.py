"""The pyDatalog backend evaluates stratum by stratum: each later stratum reads earlier strata's relations as
plain facts. Aggregates and negations over (mutually) recursive relations, nullary relations, input relations
that rules extend and never-derived relations agree with SQLite."""

from __future__ import annotations

import sqlite3

import pytest

from anchorlog.queries import Program

pytest.importorskip("pyDatalog")

EDGES = """
.decl e(a: number, b: number)
e(1, 2). e(2, 3). e(3, 1). e(3, 4). e(5, 6).
"""

PROGRAMS = {
    # count / sum / min / max over a mutually recursive pair, keyed and unkeyed
    "aggregates_over_mutual_recursion": EDGES
    + """
.decl odd(a: number, b: number)
.decl even(a: number, b: number)
odd(X, Y) :- e(X, Y).
odd(X, Z) :- even(X, Y), e(Y, Z).
even(X, Z) :- odd(X, Y), e(Y, Z).
.decl n(c: number)
n(C) :- C = count : { even(_, _) }.
.decl per(x: number, c: number, s: number, lo: number, hi: number)
per(X, C, S, L, H) :- e(X, _), C = count : { odd(X, _) }, S = sum A : { odd(X, A) },
    L = min B : { even(X, B) }, H = max D : { even(X, D) }.
.decl zero(x: number, c: number)
zero(X, C) :- e(_, X), C = count : { even(X, 99) }.
""",
    # negation over a recursive relation, and a chain of three strata
    "negation_over_recursion": EDGES
    + """
.decl node(x: number)
node(X) :- e(X, _). node(X) :- e(_, X).
.decl reach(a: number, b: number)
reach(X, Y) :- e(X, Y).
reach(X, Z) :- reach(X, Y), e(Y, Z).
.decl unreach(a: number, b: number)
unreach(X, Y) :- node(X), node(Y), !reach(X, Y).
.decl lonely(x: number)
lonely(X) :- node(X), !unreach(X, 1), X != 1.
""",
    # nullary relations, a relation never derived, an input relation that rules extend
    "nullary_empty_and_extended_inputs": """
.decl base(x: number)
.input base
.decl base2(x: number)
.input base2
base2(X) :- base(X), X > 1.
.decl never(x: number)
never(X) :- base(X), X > 100.
.decl some()
some() :- base2(_).
.decl none()
none() :- never(_).
.decl ok(x: number)
ok(X) :- base2(X), some(), !none(), !never(X).
.decl cnt(c: number)
cnt(C) :- C = count : { never(_) }.
""",
}

EXTRA = {"base": [(1,), (2,), (3,), (3,)], "base2": [(7,)]}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_pydatalog_strata_agree_with_sqlite(name):
    prog = Program.from_text(PROGRAMS[name])
    extra = {rel: rows for rel, rows in EXTRA.items() if rel in prog.arity}
    wanted = sorted(prog.arity)
    sql = prog.run(sqlite3.connect(":memory:"), extra=extra, outputs=wanted)
    for timeout in (None, 60.0):
        pyd = prog.run(sqlite3.connect(":memory:"), engine="pydatalog", extra=extra, outputs=wanted, timeout=timeout)
        for rel in wanted:
            assert pyd.rows(rel) == sql.rows(rel), rel
    # the programs are not trivial: the relations the checks rest on are non-empty
    assert any(sql.rows(rel) for rel in ("n", "unreach", "ok") if rel in prog.arity)

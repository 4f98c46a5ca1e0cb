"""Differential tests: random stratified programs over random facts give identical relations on every backend
(SQLite with recursive CTEs, SQLite semi-naive only, DuckDB, pyDatalog)."""

from __future__ import annotations

from contextlib import contextmanager

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.queries import Program

EDB = ["e", "f"]


@st.composite
def rule_for(draw, head: str, earlier: list[str], level: int) -> str:
    """One safe rule for `head` (binary). Positive atoms may use `head` itself (recursion) and earlier
    relations; negation and aggregates only earlier strata, so the program is stratifiable."""
    positive = EDB + earlier + [head]
    a = draw(st.sampled_from(positive))
    shape = draw(st.sampled_from(["copy", "swap", "join", "join3", "const", "agg", "arith"]))
    if shape == "copy":
        body = [f"{a}(X, Y)"]
    elif shape == "swap":
        body = [f"{a}(Y, X)"]
    elif shape == "join":
        b = draw(st.sampled_from(positive))
        body = [f"{a}(X, Z)", f"{b}(Z, Y)"]
    elif shape == "join3":
        b, c = draw(st.sampled_from(positive)), draw(st.sampled_from(EDB + earlier))
        body = [f"{a}(X, Z)", f"{b}(Z, W)", f"{c}(W, Y)"]
    elif shape == "const":
        k = draw(st.integers(0, 4))
        body = [f"{a}(X, {k})", f"{a}(Y, _)"]
    elif shape == "agg":
        src = draw(st.sampled_from(EDB + earlier))
        func = draw(st.sampled_from(["count", "sum", "min", "max"]))
        agg = "count : {" if func == "count" else f"{func} V : {{"
        body = (
            [f"{a}(X, _)", f"Y = {agg} {src}(X, V) }}"]
            if func != "count"
            else [f"{a}(X, _)", f"Y = {agg} {src}(X, _) }}"]
        )
        if a == head:  # aggregate values fed back into the same relation could grow without bound
            body[0] = f"{draw(st.sampled_from(EDB + earlier))}(X, _)"
    else:
        # bounded arithmetic keeps the recursion finite
        body = [f"{a}(X, Z)", "Z < 6", "Y = Z + 1"]
    extra = draw(st.sampled_from(["", "neg", "cmp", "ne"]))
    if extra == "neg":
        n = draw(st.sampled_from(EDB + earlier))
        body.append(draw(st.sampled_from([f"!{n}(X, Y)", f"!{n}(Y, _)", f"!{n}(_, X)"])))
    elif extra == "cmp":
        body.append(draw(st.sampled_from(["X < Y", "X >= Y", "X <= 3"])))
    elif extra == "ne":
        body.append("X != Y")
    return f"{head}(X, Y) :- {', '.join(body)}."


@st.composite
def programs(draw) -> str:
    n = draw(st.integers(1, 4))
    rules: list[str] = []
    names = [f"p{i}" for i in range(n)]
    for i, head in enumerate(names):
        k = draw(st.integers(1, 3))
        # the first rule of each relation avoids reading itself, so most relations are non-empty
        rules.append(draw(rule_for(head, names[:i], i)).replace(f"{head}(X, Z), ", "e(X, Z), ", 1))
        rules += [draw(rule_for(head, names[:i], i)) for _ in range(k - 1)]
    return "\n".join(rules)


facts = st.lists(st.tuples(st.integers(0, 6), st.integers(0, 6)), max_size=14)


def _negates_recursive_relation(text: str) -> bool:
    """True when an aggregate or negation reads a relation that has a self-recursive rule. pyDatalog resolves
    negation (and our count-of-nothing branch, which is a negation) top-down and may see such a relation
    incomplete: a known pyDatalog shortfall listed in docs/rules.md, so only the SQL backends are compared."""
    recursive = {
        line.split("(", 1)[0] for line in text.splitlines() if f"{line.split('(', 1)[0]}(" in line.split(":-", 1)[-1]
    }
    for line in text.splitlines():
        body = line.split(":-", 1)[-1]
        for rel in recursive:
            if f"!{rel}(" in body or (": {" in body and f"{rel}(" in body.split(": {", 1)[1]):
                return True
    return False


# derandomize: CI must not depend on which random programs a run happens to draw
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=programs(), e=facts, f=facts)
def test_backends_agree_on_random_stratified_programs(text, e, f):
    prog = Program.from_text(
        ".decl e(a: number, b: number)\n.decl f(a: number, b: number)\n.input e\n.input f\n" + text
    )
    extra = {"e": e, "f": f}
    reference = prog.run(None, engine="sqlite", extra=extra)
    engines = [("sqlite", {"recursive_cte": False}), ("duckdb", {})]
    if not _negates_recursive_relation(text):
        engines.append(("pydatalog", {}))
    for engine, options in engines:
        other = prog.run(None, engine=engine, extra=extra, **options)
        for rel in reference.relations:
            assert reference.set(rel) == other.set(rel), f"{engine} differs on {rel}\n{text}"


def test_pydatalog_shortfall_on_aggregates_over_recursive_relations_is_detected():
    text = "p1(X, Y) :- e(X, 0), e(Y, _).\np1(X, Y) :- p1(Y, X).\np3(X, Y) :- e(X, _), Y = count : { p1(X, _) }."
    assert _negates_recursive_relation(text)
    assert not _negates_recursive_relation("p0(X, Y) :- e(X, Y).\np1(X, Y) :- e(X, _), Y = count : { p0(X, _) }.")


@contextmanager
def linear_rounds(min_rows: int, thin: int = 8, thin_delta: int = 32):
    """Set the engine's choice between linear rounds and one WITH RECURSIVE statement for a block."""
    from anchorlog.queries.evaluate import SQLEvaluation as cls

    old = (cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta)
    cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta = min_rows, thin, thin_delta
    try:
        yield
    finally:
        cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta = old


# SQLite evaluates a linear recursive stratum in set-at-a-time rounds when the relations it joins are large, and
# hands a thin tail (few new tuples per round) to one WITH RECURSIVE statement. Forced here on small inputs: every
# linear stratum goes through rounds, and the tail switch happens after `thin` rounds.
@pytest.mark.parametrize("thin", [1, 1000])
@settings(max_examples=40, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(text=programs(), e=facts, f=facts)
def test_linear_rounds_agree_with_one_recursive_statement(thin, text, e, f):
    prog = Program.from_text(
        ".decl e(a: number, b: number)\n.decl f(a: number, b: number)\n.input e\n.input f\n" + text
    )
    extra = {"e": e, "f": f}
    with linear_rounds(min_rows=10**9):
        reference = prog.run(None, engine="sqlite", extra=extra)
    with linear_rounds(min_rows=0, thin=thin, thin_delta=2):
        rounds = prog.run(None, engine="sqlite", extra=extra)
    for rel in reference.relations:
        assert reference.rows(rel) == rounds.rows(rel), f"rounds differ on {rel}\n{text}"  # sets, no repeats

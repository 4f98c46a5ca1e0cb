"""The Datalog engine (anchorlog.queries): parsing, checks with places, evaluation on every backend, API."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from anchorlog.errors import RuleError
from anchorlog.queries import Program

ENGINES = ["sqlite", "duckdb", "pydatalog"]


@pytest.fixture
def edges() -> sqlite3.Connection:
    """A small DAG with a diamond and a separate chain; `edge` is an untyped SQLite table (no .decl needed)."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE edge (src, dst)")
    c.executemany("INSERT INTO edge VALUES (?, ?)", [(1, 2), (1, 3), (2, 4), (3, 4), (4, 5), (7, 8)])
    c.commit()
    return c


TC = """
.decl reach(x: number, y: number)
.output reach
reach(X, Y) :- edge(X, Y).
reach(X, Z) :- reach(X, Y), edge(Y, Z).
"""


def run(text: str, db=None, engine: str = "sqlite", **kw):
    return Program.from_text(text).run(db, engine=engine, **kw)


# ------------------------------------------------------------------------------------------------ evaluation


@pytest.mark.parametrize("engine", ENGINES)
def test_transitive_closure_on_every_engine(edges, engine):
    res = run(TC, edges, engine)
    assert res.rows("reach") == [(1, 2), (1, 3), (1, 4), (1, 5), (2, 4), (2, 5), (3, 4), (3, 5), (4, 5), (7, 8)]
    frame = res["reach"]
    assert list(frame.columns) == ["x", "y"] and len(frame) == 10


@pytest.mark.parametrize("cte", [True, False])
def test_sqlite_cte_and_seminaive_agree_on_nonlinear_recursion(edges, cte):
    prog = Program.from_text(
        """
        tc(X, Y) :- edge(X, Y).
        tc(X, Z) :- tc(X, Y), tc(Y, Z).
        sg(X, Y) :- edge(P, X), edge(P, Y), X != Y.
        sg(X, Y) :- edge(A, X), sg(A, B), edge(B, Y).
        """
    )
    res = prog.run(edges, recursive_cte=cte)
    assert len(res.rows("tc")) == 10
    assert res.rows("sg") == [(2, 3), (3, 2), (4, 4), (5, 5)]


@pytest.mark.parametrize("engine", ENGINES)
def test_negation_aggregates_arithmetic_disjunction(edges, engine):
    res = run(
        """
        node(X) :- edge(X, _) ; edge(_, X).
        source(X) :- node(X), !edge(_, X).
        outdeg(X, N) :- node(X), N = count : { edge(X, _) }.
        total(S) :- S = sum Y : { edge(_, Y) }.
        lo(M) :- M = min X : { edge(X, _) }.
        hi(M) :- M = max Y : { edge(_, Y) }.
        nothing(M) :- M = max Y : { edge(Y, Y) }.
        shifted(X, Y * 10 + 1) :- edge(X, Y), X >= 3, X <= 7.
        named("a", 1).
        named("b", X) :- X = 2 + 3.
        """,
        edges,
        engine,
    )
    assert res.rows("source") == [(1,), (7,)]
    assert dict(res.rows("outdeg")) == {1: 2, 2: 1, 3: 1, 4: 1, 5: 0, 7: 1, 8: 0}
    assert res.rows("total") == [(26,)]
    assert res.rows("lo") == [(1,)] and res.rows("hi") == [(8,)]
    assert res.rows("nothing") == []  # min/max over nothing derive nothing (count/sum give 0)
    assert res.rows("shifted") == [(3, 41), (4, 51), (7, 81)]
    assert res.rows("named") == [("a", 1), ("b", 5)]


@pytest.mark.parametrize("engine", ENGINES)
def test_extra_relations_constants_wildcards_and_nullary(engine):
    res = run(
        """
        .decl link(a: symbol, b: symbol)
        .input link
        hop2(A, C) :- link(A, B), link(B, C), A != C.
        from_x(B) :- link("x", B).
        any_link() :- link(_, _).
        no_self() :- !link("x", "x").
        """,
        None,
        engine,
        extra={"link": [("x", "y"), ("y", "z"), ("y", "x")]},
    )
    assert res.rows("hop2") == [("x", "z")]
    assert res.rows("from_x") == [("y",)]
    assert res.rows("any_link") == [()]
    assert res.rows("no_self") == [()]


def test_recursion_through_arithmetic_terminates_with_a_bound():
    res = run("n(0). n(X + 1) :- n(X), X < 50. even(X) :- n(X), X % 2 = 0.")
    assert len(res.rows("n")) == 51 and len(res.rows("even")) == 26


def test_string_functors_and_constraints():
    res = run(
        """
        s("tensor_move"). s("identity").
        l(S, N) :- s(S), N = strlen(S).
        c(T) :- s(S), T = cat(S, "_x").
        sub(T) :- s(S), T = substr(S, 0, 3).
        has(S) :- s(S), contains("move", S).
        m(S) :- s(S), match("id.*", S).
        """
    )
    assert res.rows("l") == [("identity", 8), ("tensor_move", 11)]
    assert res.rows("c") == [("identity_x",), ("tensor_move_x",)]
    assert res.rows("sub") == [("ide",), ("ten",)]
    assert res.rows("has") == [("tensor_move",)] and res.rows("m") == [("identity",)]


def test_outputs_default_and_selection(edges):
    prog = Program.from_text(TC + "helper(X) :- reach(X, 5).")
    assert prog.run(edges).relations == ["reach"]  # .output given: only those
    res = prog.run(edges, outputs=["helper"])
    assert res.rows("helper") == [(1,), (2,), (3,), (4,)]
    with pytest.raises(KeyError, match="outputs="):
        res.rows("reach")


def test_fact_database_inputs_path_connection_factdb(tmp_path, edges):
    from anchorlog.facts.relations import FactDB

    db = FactDB()
    db.conn.executemany(
        "INSERT INTO node VALUES (?, ?, ?)", [("g", "a", "Data"), ("g", "b", "Relu"), ("g", "c", "NetOutput")]
    )
    db.conn.executemany("INSERT INTO data_edge VALUES (?, ?, ?, ?, ?)", [("g", "a", 0, "b", 0), ("g", "b", 0, "c", 0)])
    db.conn.commit()
    text = """
    .decl down(g: symbol, a: symbol, b: symbol)
    down(G, A, B) :- data_edge(G, A, _, B, _).
    down(G, A, C) :- down(G, A, B), data_edge(G, B, _, C, _).
    relu_after_data(N) :- node(G, D, "Data"), down(G, D, N), node(G, N, "Relu").
    """
    prog = Program.from_text(text)
    want = [("g", "a", "b"), ("g", "a", "c"), ("g", "b", "c")]
    assert prog.run(db).rows("down") == want
    assert prog.run(db.conn).rows("down") == want
    path = tmp_path / "facts.sqlite"
    db.save(path)
    assert prog.run(path).rows("down") == want
    assert prog.run(str(path), engine="duckdb").rows("relu_after_data") == [("b",)]
    assert prog.run(db, engine="pydatalog").rows("down") == want


def test_no_pollution_of_the_database(edges):
    before = edges.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall()
    prog = Program.from_text(TC + "tc(X, Y) :- edge(X, Y). tc(X, Z) :- tc(X, Y), tc(Y, Z).")
    prog.run(edges)
    prog.run(edges, recursive_cte=False)
    assert edges.execute("SELECT name FROM sqlite_master ORDER BY name").fetchall() == before
    assert edges.execute("SELECT name FROM sqlite_temp_master").fetchall() == []
    assert edges.execute("SELECT count(*) FROM edge").fetchone() == (6,)
    assert not edges.in_transaction


def test_relation_also_a_table_is_seeded_from_it(edges):
    res = run("edge(X, Z) :- edge(X, Y), edge(Y, Z).", edges, outputs=["edge"])
    assert (1, 5) in res.rows("edge") and len(res.rows("edge")) == 10
    assert edges.execute("SELECT count(*) FROM edge").fetchone() == (6,)  # table untouched


def test_include_and_from_file(tmp_path, edges):
    (tmp_path / "base.dl").write_text(".decl reach(x: number, y: number)\nreach(X, Y) :- edge(X, Y).\n")
    main = tmp_path / "main.dl"
    main.write_text('.include "base.dl"\n// comment\n/* block\ncomment */ reach(X, Z) :- reach(X, Y), edge(Y, Z).\n')
    prog = Program.from_file(main)
    assert len(prog.run(edges).rows("reach")) == 10


def test_explain_lists_strata_and_sql(edges):
    text = Program.from_text(TC + "r1(Y) :- reach(1, Y), !edge(Y, _).").explain(edges)
    assert "stratum 0 [recursive linear]: reach" in text
    assert "WITH RECURSIVE" in text and "NOT EXISTS" in text
    assert "repeat" in Program.from_text("t(X,Y) :- edge(X,Y). t(X,Z) :- t(X,Y), t(Y,Z).").explain(edges)
    assert "pyDatalog clauses" in Program.from_text(TC).explain(engine="pydatalog")
    # without a database the agreed fact schema supplies the column names
    assert '"src"' in Program.from_text("r(A, B) :- data_edge(_, A, _, B, _).").explain()


# ---------------------------------------------------------------------------------------------------- checks


def error_of(text: str, db=None, **kw) -> RuleError:
    with pytest.raises(RuleError) as info:
        Program.from_text(text, **kw).run(db)
    return info.value


@pytest.mark.parametrize(
    ("text", "kind", "place", "words"),
    [
        ("p(X) :- q(X", "syntax", "<text>:1:12", "expected ')'"),
        ("p(X) :- q(X). p(X, Y) :- q(X), q(Y).", "arity_mismatch", "<text>:1:15", "arity"),
        ("q(1).\np(X, Y) :- q(X).", "unbound_variable", "<text>:2:6", "'Y'"),
        ("q(1).\np(X) :- q(X), !r(X, Y).\nr(1, 2).", "unsafe_negation", "<text>:2:21", "'Y'"),
        ("q(1).\np(X) :- q(X), !p(X).", "unstratifiable", "<text>:2:16", "negation"),
        ("q(1).\nc(N) :- q(X), N = count : { c(X) }.", "unstratifiable", "<text>:2:29", "aggregation"),
        ("q(1).\np(X) :- q(X), nosuch(X).", "unknown_relation", "<text>:2:15", "nosuch"),
        ("q(1).\np(_) :- q(_).", "wildcard_in_head", "<text>:2:3", "'_'"),
        ("q(1).\np(X) :- q(Y), X < Y.", "unbound_variable", "<text>:2:15", "'X'"),
        ("q(1).\np(N) :- q(N - 1).", "unbound_variable", "<text>:2:11", "'N'"),
    ],
)
def test_check_errors_carry_kind_and_place(text, kind, place, words):
    err = error_of(text)
    assert err.kind == kind
    assert err.place == place
    assert words in err.message
    assert str(err).startswith(place + ": ")


def test_errors_in_files_name_the_file(tmp_path):
    f = tmp_path / "bad.dl"
    f.write_text("ok(1).\n\nbad(X) :- ok(X), !bad(X).\n")
    with pytest.raises(RuleError) as info:
        Program.from_file(f)
    assert info.value.place == f"{f}:3:19"
    inc = tmp_path / "inc.dl"
    inc.write_text('.include "missing.dl"\n')
    with pytest.raises(RuleError, match="missing.dl") as info:
        Program.from_file(inc)
    assert info.value.place == f"{inc}:1:10"


def test_arity_against_database_table(edges):
    err = error_of("p(X) :- edge(X).", edges)
    assert err.kind == "arity_mismatch" and "edge" in err.message and err.place == "<text>:1:9"


def test_unknown_engine_and_bad_db():
    from anchorlog.errors import AnchorlogError

    with pytest.raises(AnchorlogError, match="engine"):
        Program.from_text("p(1).").run(None, engine="souffle")
    with pytest.raises(AnchorlogError, match="no such fact database"):
        Program.from_text("p(1).").run("/nonexistent/x.sqlite")


# ------------------------------------------------------------------------------------------------------ CLI


@pytest.fixture
def dbfile(tmp_path, edges) -> Path:
    path = tmp_path / "facts.sqlite"
    dest = sqlite3.connect(path)
    edges.backup(dest)
    dest.close()
    return path


def cli(*argv: str) -> int:
    from anchorlog.cli import main

    return main(list(argv))


def test_cli_query_sql_formats(dbfile, capsys):
    assert cli("query", str(dbfile), "SELECT src, dst FROM edge WHERE src = 1 ORDER BY dst") == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["src", "dst"] and "(2 rows)" in out
    assert cli("query", str(dbfile), "SELECT src, dst FROM edge ORDER BY src, dst LIMIT 2", "--format", "csv") == 0
    assert capsys.readouterr().out == "src,dst\n1,2\n1,3\n"
    assert cli("query", str(dbfile), "SELECT count(*) AS n FROM edge", "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 6}]


@pytest.mark.parametrize("engine", ENGINES)
def test_cli_query_datalog(dbfile, tmp_path, capsys, engine):
    rules = tmp_path / "tc.dl"
    rules.write_text(TC)
    assert (
        cli("query", str(dbfile), "--datalog", str(rules), "--output", "reach", "--engine", engine, "--format", "csv")
        == 0
    )
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == "x,y" and len(lines) == 11
    inline = "r(A) :- edge(A, _), !edge(_, A)."
    assert cli("query", str(dbfile), "--datalog", inline, "--engine", engine, "--format", "json") == 0
    assert json.loads(capsys.readouterr().out) == [{"A": 1}, {"A": 7}]


@pytest.mark.parametrize(
    "argv",
    [
        ["SELECT * FROM nosuch"],
        ["--datalog", "p(X) :- nosuch(X)."],
        ["--datalog", "p(X :- edge(X, _)."],
    ],
)
def test_cli_query_errors_are_one_line_exit_2(dbfile, capsys, argv):
    assert cli("query", str(dbfile), *argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and err.count("\n") == 1


def test_cli_query_missing_db(tmp_path, capsys):
    assert cli("query", str(tmp_path / "none.sqlite"), "SELECT 1") == 2
    assert "no such fact database" in capsys.readouterr().err
    junk = tmp_path / "junk.sqlite"
    junk.write_text("not a database at all, just text" * 10)
    assert cli("query", str(junk), "SELECT 1") == 2


# ---------------------------------------------------------------------------------------------------- magic


def test_datalog_cell_magic(edges, capsys):
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    try:
        shell.run_line_magic("load_ext", "anchorlog.queries.magic")
        shell.user_ns["conn"] = edges
        frame = shell.run_cell_magic("datalog", "conn --output reach --as res", TC)
        assert len(frame) == 10 and list(frame.columns) == ["x", "y"]
        assert shell.user_ns["res"].rows("reach")[0] == (1, 2)
        frame = shell.run_cell_magic("datalog", "conn --engine pydatalog", "s(X) :- edge(X, _), !edge(_, X).")
        assert sorted(frame["X"]) == [1, 7]
        assert shell.run_cell_magic("datalog", "conn", "p(X) :- q(X.") is None
        assert "error: <cell>:1:12" in capsys.readouterr().out
    finally:
        InteractiveShell.clear_instance()


def test_pydatalog_negation_of_an_empty_relation_is_true():
    # regression: pyDatalog failed every `~p(...)` literal whose predicate had no fact and no rule
    prog = Program.from_text(
        """
        .decl a(x: symbol)
        .decl b(x: symbol)
        .decl c(x: symbol)
        .output c
        a("x").
        c(X) :- a(X), !b(X).
        """
    )
    for engine in ("sqlite", "pydatalog"):
        assert prog.run(None, engine=engine).rows("c") == [("x",)], engine


# ------------------------------------------------------------------------------------- cost-control paths


def test_rows_unsorted_are_the_sorted_rows(edges):
    res = run(TC, edges)
    assert sorted(res.rows("reach", sort=False)) == res.rows("reach")
    assert res.rows("reach") == sorted(res.rows("reach"))


def test_sorted_rows_with_mixed_kinds_use_the_typed_order():
    # a column mixing NULL, numbers and strings: NULLs first, then numbers, then strings (per column)
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE v (x)")
    c.executemany("INSERT INTO v VALUES (?)", [("b",), (2,), (None,), ("a",), (1.5,)])
    res = run("r(X) :- v(X).", c)
    assert res.rows("r") == [(None,), (1.5,), (2,), ("a",), ("b",)]


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_terminal_relation_keeps_column_affinity_and_sets(engine):
    # r is returned straight from its SELECT on SQLite; a text '5' into a number column becomes 5 there as on
    # INSERT, and the two 5s are one tuple
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (x)")
    c.executemany("INSERT INTO e VALUES (?)", [("5",), (5,), (7,)])
    res = run(".decl r(x: number)\n.output r\nr(X) :- e(X).", c, engine=engine)
    assert res.rows("r") == [(5,), (7,)]


@pytest.mark.parametrize("engine", ["sqlite", "duckdb"])
def test_empty_relations_skip_rules_but_negation_sees_them_empty(engine):
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (x INTEGER)")
    c.execute("CREATE TABLE f (x INTEGER)")  # empty
    c.executemany("INSERT INTO e VALUES (?)", [(1,), (2,)])
    text = """
    .decl a(x: number)
    .decl b(x: number)
    .decl c(x: number)
    .decl d(x: number, y: number)
    a(X) :- f(X).
    b(X) :- e(X), !a(X).
    c(X) :- a(X), e(X).
    d(X, Y) :- a(X), e(Y).
    d(X, Y) :- d(Y, X).
    .output b
    .output c
    .output d
    """
    res = run(text, c, engine=engine)
    assert res.rows("b") == [(1,), (2,)]
    assert res.rows("c") == [] and res.rows("d") == []


def test_join_order_prefers_bound_names_over_bound_numbers():
    from anchorlog.queries.sqlgen import join_order

    prog = Program.from_text(
        """
        .decl delta(sg: symbol, o: number)
        .decl out_port(g: symbol, n: symbol, o: number)
        .decl sub(g: symbol, n: symbol, sg: symbol)
        h(G, N, O) :- delta(SG, O), out_port(G, N, O), sub(G, N, SG).
        """
    )
    rule = prog.rules[0]
    types = {"delta": ["symbol", "number"], "out_port": ["symbol", "symbol", "number"], "sub": ["symbol"] * 3}
    # without types: written order (both share one bound column); with them: the lookup by the bound name
    assert join_order(rule, 0) == [0, 1, 2]
    assert join_order(rule, 0, types) == [0, 2, 1]


def test_program_cached_parses_once_and_again_after_a_rule_file_changes(tmp_path):
    """Program.cached keeps one parsed program per file, and parses again when a file beside it (an include it
    may read) changed on disk."""
    import os
    import sqlite3

    (tmp_path / "base.dl").write_text(".decl b(x: number)\nb(1).\n")
    main = tmp_path / "main.dl"
    main.write_text('.include "base.dl"\n.decl a(x: number)\n.output a\na(X) :- b(X).\n')
    first = Program.cached(main)
    assert Program.cached(str(main)) is first
    (tmp_path / "base.dl").write_text(".decl b(x: number)\nb(2).\n")
    st = os.stat(tmp_path / "base.dl")
    os.utime(tmp_path / "base.dl", (st.st_atime, st.st_mtime + 5))
    again = Program.cached(main)
    assert again is not first
    assert again.run(sqlite3.connect(":memory:")).rows("a") == [(2,)]


@pytest.mark.parametrize("thin", [1, 1000])
def test_linear_rounds_keep_sets_with_nulls_and_typed_columns(thin):
    """Linear recursion in rounds (forced on a small input): tuples with a NULL are no unique-index conflict, yet
    every relation stays a set (a later count sees each tuple once), like the single WITH RECURSIVE statement."""
    from anchorlog.queries.evaluate import SQLEvaluation as cls

    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (a, b, tag)")
    rows = [(1, 2, None), (2, 3, None), (3, 1, None), (1, 3, None), (2, 4, "x"), (4, 5, None), (5, 6, None)]
    c.executemany("INSERT INTO e VALUES (?, ?, ?)", rows)
    text = """
    .decl p(x: number, t: symbol)
    .decl q(x: number, t: symbol)
    .decl n(x: number, c: number)
    .decl m(c: number)
    p(Y, T) :- e(1, Y, T).
    p(Z, T) :- p(Y, T), e(Y, Z, _).
    p(Z, T2) :- p(Y, _), e(Y, Z, T2).
    q(X, T) :- e(X, _, T).
    q(Y, T) :- q(X, T), e(X, Y, _).
    n(X, N) :- p(X, _), N = count : { p(X, _) }.
    m(N) :- N = count : { q(_, _) }.
    .output p
    .output n
    .output m
    """
    prog = Program.from_text(text)
    want = {rel: prog.run(c).rows(rel) for rel in ("p", "n", "m")}
    old = (cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta)
    cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta = 0, thin, 2
    try:
        res = prog.run(c)
    finally:
        cls.linear_rounds_min_rows, cls.linear_thin_rounds, cls.linear_thin_delta = old
    assert {rel: res.rows(rel) for rel in ("p", "n", "m")} == want
    assert (1, None) in want["p"] and (6, "x") in want["p"] and len(set(want["p"])) == len(want["p"])
    assert want["n"] == [(1, 1), (2, 1), (3, 1), (4, 2), (5, 2), (6, 2)] and want["m"] == [(12,)]


def test_callers_temp_tables_survive_a_run_and_repeated_runs_agree(edges):
    """The engine sets temp_store only on a connection without temp objects (changing it deletes every temp
    table); a caller's temp table and its rows are still there after runs, and the work tables are gone."""
    edges.execute("CREATE TEMP TABLE mine (x)")
    edges.execute("INSERT INTO temp.mine VALUES (1)")
    prog = Program.from_text(TC)
    first = prog.run(edges).rows("reach")
    assert prog.run(edges).rows("reach") == first  # compiled SQL reused: same result
    assert edges.execute("SELECT x FROM temp.mine").fetchall() == [(1,)]
    assert edges.execute("SELECT name FROM sqlite_temp_master").fetchall() == [("mine",)]
    fresh = sqlite3.connect(":memory:")
    fresh.execute("CREATE TABLE edge (src, dst)")
    fresh.executemany("INSERT INTO edge VALUES (?, ?)", [(1, 2), (2, 3)])
    assert prog.run(fresh).rows("reach") == [(1, 2), (1, 3), (2, 3)]
    assert fresh.execute("SELECT name FROM sqlite_temp_master").fetchall() == []


def test_result_membership_test_builds_no_dataframe(monkeypatch):
    """``"rel" in res`` answers from the relation names: Mapping's default went through ``res[rel]``, which
    builds a pandas DataFrame (and imports pandas) only to throw it away."""
    from anchorlog.queries.program import Result

    res = Result({"r": ["a"]}, {"r": [(1,)]})

    def no_frames(self, rel):
        raise AssertionError("membership test built a DataFrame")

    monkeypatch.setattr(Result, "__getitem__", no_frames)
    assert "r" in res
    assert "s" not in res


@pytest.fixture
def forced_rounds(monkeypatch):
    """Linear strata in rounds on any input (the size threshold off), no hand-over to WITH RECURSIVE."""
    from anchorlog.queries.evaluate import SQLEvaluation

    monkeypatch.setattr(SQLEvaluation, "linear_rounds_min_rows", 0)
    monkeypatch.setattr(SQLEvaluation, "linear_thin_rounds", 1000)
    return SQLEvaluation


def test_result_read_from_a_rounds_table_is_a_set_with_nulls(forced_rounds):
    """A wanted relation evaluated in rounds is read from its table without Python de-duplication: the two
    derivations of (4, NULL) in one round (no unique-index conflict for a NULL) must still give one row, also
    in the unsorted rows."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (a, b, tag)")
    c.executemany("INSERT INTO e VALUES (?, ?, ?)", [(1, 2, None), (1, 3, None), (2, 4, None), (3, 4, None)])
    text = """
    .decl r(x: number, t: symbol)
    .output r
    r(Y, T) :- e(1, Y, T).
    r(Z, T) :- r(Y, T), e(Y, Z, _).
    """
    rows = Program.from_text(text).run(c).rows("r", sort=False)
    assert sorted(rows, key=repr) == [(2, None), (3, None), (4, None)]


def test_every_statement_is_profiled_once_and_failures_name_the_sql(forced_rounds, monkeypatch):
    """One runner for every generated statement: with `profile` set, the profile lists exactly the statements
    run (rounds, direct result SELECTs and work-table DDL alike), and a backend error raised inside a round is
    reported with its SQL."""
    from anchorlog.errors import AnchorlogError
    from anchorlog.queries import evaluate

    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE edge (src INTEGER, dst INTEGER)")
    c.executemany("INSERT INTO edge VALUES (?, ?)", [(1, 2), (2, 3), (3, 4), (2, 5)])
    text = (
        TC
        + """
    .decl far(x: number, y: number)
    .output far
    far(X, Y) :- reach(X, Y), X + 2 <= Y.
    """
    )
    prog = Program.from_text(text)
    evaluations = []
    init = evaluate.SQLEvaluation.__init__

    def profiled(self, *a, **kw):
        init(self, *a, **kw)
        self.profile = []
        evaluations.append(self)

    monkeypatch.setattr(evaluate.SQLEvaluation, "__init__", profiled)
    res = prog.run(c)
    assert res.rows("far") == [(1, 3), (1, 4), (1, 5), (2, 4), (2, 5)]
    ev = evaluations[-1]
    assert [sql for _, sql in ev.profile] == ev.statements
    assert sum("INSERT OR IGNORE" in sql for sql in ev.statements) >= 3  # base + rounds
    assert all(seconds >= 0 for seconds, _ in ev.profile)
    c.execute("INSERT INTO edge VALUES (5, -9223372036854775808)")
    overflowing = Program.from_text(  # abs() of the smallest integer overflows inside a round
        """
        .decl p(x: number, a: number)
        .output p
        p(Y, 0) :- edge(1, Y).
        p(Z, A) :- p(Y, _), edge(Y, Z), A = abs(Z).
        """
    )
    with pytest.raises(AnchorlogError, match="failed on generated SQL: integer overflow; SQL: INSERT OR IGNORE"):
        overflowing.run(c)


def test_fetch_all_pauses_the_collector_and_restores_it():
    import gc

    from anchorlog.queries.evaluate import fetch_all

    c = sqlite3.connect(":memory:")
    assert gc.isenabled()
    assert fetch_all(c.execute("SELECT 1, 'a' UNION ALL SELECT 2, NULL")) == [(1, "a"), (2, None)]
    assert gc.isenabled()
    gc.disable()
    try:
        assert fetch_all(c.execute("SELECT 3")) == [(3,)]
        assert not gc.isenabled()  # a caller's choice is left alone
    finally:
        gc.enable()
    with pytest.raises(sqlite3.OperationalError):  # the second row fails, inside fetch_all
        fetch_all(c.execute("SELECT abs(x) FROM (SELECT 1 AS x UNION ALL SELECT -9223372036854775808)"))
    assert gc.isenabled()


def test_rounds_on_a_relation_whose_seed_rows_become_equal_by_affinity(forced_rounds):
    """Seed rows (facts, extra=) that differ in Python but are equal after the column's affinity (1 and "1" in
    a number column) are one tuple: rounds give the same result as the single statement (the unique index of
    the rounds used to fail on them)."""
    c = sqlite3.connect(":memory:")
    c.execute("CREATE TABLE e (a, b)")
    c.executemany("INSERT INTO e VALUES (?, ?)", [(1, 2), (2, 3)])
    facts = Program.from_text(
        """
        .decl r(x: number)
        .output r
        r(1). r("1").
        r(Y) :- r(X), e(X, Y).
        """
    )
    assert facts.run(c).rows("r", sort=False) == [(1,), (2,), (3,)]
    given = Program.from_text(
        """
        .decl r(x: number)
        .input r
        .output r
        r(Y) :- r(X), e(X, Y).
        """
    )
    assert sorted(given.run(c, extra={"r": [(1,), ("1",), (2,)]}).rows("r", sort=False)) == [(1,), (2,), (3,)]

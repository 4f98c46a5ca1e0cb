"""GraphLint (reference §7): each checker outcome, wrapper propagation, GE's first-finding report."""

from __future__ import annotations

from anchorlog.analysis.graph_lint import verify
from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model


def var_graph(ctrl: tuple[str, str] | None = None) -> Model:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r:ReLU")
    if ctrl:
        b.ctrl(*ctrl)
    return b.build()


def test_write_read_unordered_warns() -> None:
    res = verify(var_graph())
    assert res["first"]["nodes"] == ["asg", "r"]
    assert res["first"]["code"] == "W18888" and res["first"]["kind"] == "write-read"


def test_write_read_direct_ctrl_clean() -> None:
    assert verify(var_graph(("r", "asg")))["first"] is None


def test_write_read_indirect_path_clean() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign", "r2:ReLU")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r:ReLU")
    b.ctrl("r2", "r")
    assert verify(b.build())["first"] is None


def test_two_writers_unordered_warns_and_ordered_clean() -> None:
    def build(order: bool) -> Model:
        b = GraphBuilder("g")
        for a in ("a1", "a2"):
            b.chain("v:Variable", f"{a}:Assign")
            b.chain(f"c_{a}:Const", a)
            b.ref_op(a, {0: 0})
        if order:
            b.ctrl("a1", "a2")
        return b.build()

    assert verify(build(False))["first"]["kind"] == "write-write"
    assert verify(build(True))["first"] is None


def test_readers_only_clean() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU")
    b.chain("d", "b2:ReLU")
    assert verify(b.build())["unordered"] == []


def test_cmo_input_ignored() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "cmo:Cmo")
    assert verify(b.build())["first"] is None


def test_wrapper_takes_subgraph_writer_type() -> None:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=2, outputs=1)
    b.chain("p:Data", "if")
    b.chain("v:Variable", "if")
    b.chain("v", "r:ReLU")
    then = b.subgraph("then", owner="if")
    then.data("td", 1)
    then.chain("td", "asg:Assign")
    then.node("k", "Const")
    then.edge("k", 0, "asg", 1)
    then.ref_op("asg", {0: 0})
    then.output("asg", 0)
    els = b.subgraph("else", owner="if")
    els.data("ed", 1)
    els.output("ed", 0)
    res = verify(b.build())
    assert res["first"]["nodes"] == ["if", "r"]


def test_only_first_finding_reported_as_lint() -> None:
    b = GraphBuilder("g")
    for i in range(2):
        b.chain(f"v{i}:Variable", f"asg{i}:Assign")
        b.chain(f"c{i}:Const", f"asg{i}")
        b.ref_op(f"asg{i}", {0: 0})
        b.chain(f"v{i}", f"r{i}:ReLU")
    m = b.build()
    rep = run_passes(m, ["graph-lint"], PassContext())
    assert len(rep["lint"]) == 1
    sec = rep["passes"][0]
    assert len(sec["unordered"]) == 2
    assert [u["reported_by_ge"] for u in sec["unordered"]] == [True, False]


def test_lint_changes_nothing() -> None:
    m = var_graph()
    before = [(n.name, list(n.inputs), list(n.ctrl_inputs)) for n in m.all_nodes()]
    run_passes(m, ["graph-lint"], PassContext())
    assert before == [(n.name, list(n.inputs), list(n.ctrl_inputs)) for n in m.all_nodes()]


def test_pipeline_fact_database_gives_the_same_findings() -> None:
    # in a pipeline graph-lint reads the shared fact database (refreshed after edits) instead of a lean one
    from anchorlog.analysis.fact_cache import shared_facts
    from anchorlog.facts.relations import FactDB

    for model in (var_graph(), var_graph(("r", "asg"))):
        alone = verify(model)
        assert verify(model, db=FactDB.from_model(model)) == alone
        ctx = PassContext()
        db = shared_facts(model, ctx)
        tables = {r[0] for r in db.conn.execute("SELECT name FROM main.sqlite_master")}
        section = run_passes(model, ["graph-lint"], ctx)["passes"][0]
        assert section["unordered"] == alone["unordered"]
        # the shared database is only read: no auxiliary tables left in it
        assert {r[0] for r in db.conn.execute("SELECT name FROM main.sqlite_master")} == tables


def test_io_name_rows_named_and_default() -> None:
    """An op's name maps give its rows (first index of a repeated name kept); an op without them, or with
    lists of different lengths, gets GE's default names for each of its anchors."""
    from anchorlog.analysis.graph_lint import lint_io_name_rows

    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.chain("v", "r:ReLU")
    b.chain("c", "bad:Add")
    m = b.build()
    g = m.root
    asg = g.node("asg")
    asg.set_attr("_input_name_key", ["ref", "value", "ref"])
    asg.set_attr("_input_name_value", [0, 1, 1])
    asg.set_attr("_output_name_key", ["ref"])
    asg.set_attr("_output_name_value", [0])
    g.node("bad").set_attr("_input_name_key", ["x", "y"])
    g.node("bad").set_attr("_input_name_value", [0])  # lengths differ: GE ignores the pair
    rows = {(r[1], r[2], r[3], r[4]) for r in lint_io_name_rows(m)}
    assert {r for r in rows if r[0] == "asg"} == {
        ("asg", "in", 0, "ref"),
        ("asg", "in", 1, "value"),
        ("asg", "out", 0, "ref"),
    }
    assert {r for r in rows if r[0] == "r"} == {("r", "in", 0, "__input0"), ("r", "out", 0, "__output0")}
    assert {r for r in rows if r[0] == "bad"} == {("bad", "in", 0, "__input0"), ("bad", "out", 0, "__output0")}
    assert {r for r in rows if r[0] == "v"} == {("v", "out", 0, "__output0")}
    only = lint_io_name_rows(m, {("g", "r")})
    assert sorted(only) == [("g", "r", "in", 0, "__input0"), ("g", "r", "out", 0, "__output0")]

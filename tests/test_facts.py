"""Fact relations (anchorlog.facts.relations): every relation on small builder graphs, GE's IsRefFromInput
(reference §1.5) as ref_io, node-type sets as op_class, multi-model databases, refresh after edits, and the
pandas / pyDatalog views agreeing with SQLite."""

from __future__ import annotations

import json

import pytest

from anchorlog.errors import AnchorlogError
from anchorlog.facts.builder import CTRL, Edge, GraphBuilder, ModelBuilder
from anchorlog.facts.graph import Attr, Node, TensorDesc
from anchorlog.facts.relations import (
    COLUMNS,
    OP_CLASSES,
    RELATIONS,
    SCHEMA,
    FactDB,
    attr_fact_value,
    tables_from_model,
)


def rows(db: FactDB, rel: str, **where) -> list[tuple]:
    """Rows of ``rel`` whose named columns equal the given values."""
    cols = COLUMNS[rel]
    return [r for r in db.rows(rel) if all(r[cols.index(k)] == v for k, v in where.items())]


def if_model():
    """Root: data -> if(then, else) -> out; then: Data(idx 0) -> relu -> NetOutput(parent out 0)."""
    b = GraphBuilder("root", shape=[2, 3])
    b.chain("data:Data", "if:If", "out:NetOutput")
    b.node("pred:Const")
    b.edge("pred", 0, "if", 1)
    then = b.subgraph("then", owner="if")
    then.data("t_in", 0)
    then.chain("t_in", "t_relu:ReLU")
    then.output("t_relu", 0)
    els = b.subgraph("else", owner="if")
    els.data("e_in", 0)
    els.output("e_in", 0)
    return b.build()


# -- schema ---------------------------------------------------------------------------------------------------
def test_schema_has_the_agreed_relations_and_column_orders():
    assert COLUMNS["node"] == ("graph", "name", "type")
    assert COLUMNS["data_edge"] == ("graph", "src", "src_out", "dst", "dst_in")
    assert COLUMNS["ctrl_edge"] == ("graph", "src", "dst")
    assert COLUMNS["graph"] == ("graph", "model", "parent_graph", "parent_node", "is_root")
    assert COLUMNS["graph_attr"] == ("graph", "key", "kind", "value")
    assert COLUMNS["node_prop"] == ("graph", "node", "pos", "id", "stream_id", "n_in", "n_out")
    assert COLUMNS["parent_in"] == ("subgraph", "data_node", "parent_graph", "parent_node", "parent_in")
    assert COLUMNS["parent_out"] == ("subgraph", "netoutput", "net_in", "parent_graph", "parent_node", "parent_out")
    assert COLUMNS["ref_io"] == ("graph", "node", "out_idx", "in_idx")
    assert COLUMNS["op_class"] == ("type", "cls")
    assert set(RELATIONS) == set(SCHEMA)
    db = FactDB()
    for rel in RELATIONS:  # the SQLite tables have exactly these columns
        cols = [r[1] for r in db.conn.execute(f"PRAGMA table_info({rel})")]
        assert tuple(cols) == COLUMNS[rel]


# -- structure --------------------------------------------------------------------------------------------------
def test_node_edges_and_props():
    b = GraphBuilder("g")
    b.chain("a:Data", "b:ReLU", "c:NetOutput")
    b.chain("k:Const", Edge(0, 1), "add:Add")
    b.chain("b", Edge(0, 0), "add")
    b.chain("a", CTRL, "add")
    b.node("add", stream_id=3)
    m = b.build()
    db = FactDB.from_model(m)
    assert db.rows("node") == [
        ("g", "a", "Data"),
        ("g", "b", "ReLU"),
        ("g", "c", "NetOutput"),
        ("g", "k", "Const"),
        ("g", "add", "Add"),
    ]
    assert set(db.rows("data_edge")) == {
        ("g", "a", 0, "b", 0),
        ("g", "b", 0, "c", 0),
        ("g", "k", 0, "add", 1),
        ("g", "b", 0, "add", 0),
    }
    assert db.rows("ctrl_edge") == [("g", "a", "add")]
    props = {r[1]: r for r in db.rows("node_prop")}
    # pos = index in the op list; ids from the builder's topological numbering; -1 when unset
    assert [props[n][2] for n in ("a", "b", "c", "k", "add")] == [0, 1, 2, 3, 4]
    assert props["add"][4] == 3 and props["a"][4] == -1
    assert props["add"][5:] == (2, 1)  # n_in, n_out
    assert props["c"][5:] == (1, 0)  # NetOutput: one input, no output
    assert props["a"][5:] == (1, 1)  # Data: GE's one input desc, one output
    ids = {n: props[n][3] for n in props}
    assert ids["a"] < ids["b"] < ids["c"] and ids["k"] < ids["add"] and ids["b"] < ids["add"]


def test_ids_unset_are_minus_one():
    b = GraphBuilder("g")
    b.chain("a:Data", "b:NetOutput")
    m = b.build(assign_ids=False)
    db = FactDB.from_model(m)
    assert [r[3] for r in db.rows("node_prop")] == [-1, -1]


def test_graph_subgraph_parent_in_parent_out():
    db = FactDB.from_model(if_model(), name="m")
    assert db.rows("graph") == [
        ("root", "m", "", "", 1),
        ("then", "m", "root", "if", 0),
        ("else", "m", "root", "if", 0),
    ]
    assert db.rows("subgraph") == [("root", "if", 0, "then"), ("root", "if", 1, "else")]
    assert set(db.rows("parent_in")) == {("then", "t_in", "root", "if", 0), ("else", "e_in", "root", "if", 0)}
    assert set(db.rows("parent_out")) == {
        ("then", "then_netoutput", 0, "root", "if", 0),
        ("else", "else_netoutput", 0, "root", "if", 0),
    }
    # the NetOutput's input tensor attr and the Data's op attr are also plain facts
    assert rows(db, "tensor_attr", node="then_netoutput", key="_parent_node_index") == [
        ("then", "then_netoutput", "in", 0, "_parent_node_index", "i", 0)
    ]
    assert rows(db, "node_attr", node="t_in") == [("then", "t_in", "_parent_node_index", "i", 0)]


def test_parent_out_only_for_netoutput_inputs_with_the_attr():
    b = GraphBuilder("g")
    b.node("w:While", inputs=2, outputs=2)
    body = b.subgraph("body", owner="w")
    body.data("x", 0)
    body.data("y", 1)
    body.output("x", 1)  # NetOutput input 0 -> parent output 1
    body.output("y")  # NetOutput input 1 without _parent_node_index
    db = FactDB.from_model(b.build())
    assert db.rows("parent_out") == [("body", "body_netoutput", 0, "g", "w", 1)]


def test_subgraph_keeps_position_of_empty_names():
    b = GraphBuilder("g")
    b.node("c:Case", inputs=1)
    b.subgraph("b1", owner="c", index=1)
    m = b.build()
    assert m.root.node("c").subgraph_names == ["", "b1"]
    db = FactDB.from_model(m)
    assert db.rows("subgraph") == [("g", "c", 1, "b1")]


# -- anchors and attributes -------------------------------------------------------------------------------------
def test_in_and_out_anchors():
    b = GraphBuilder("g", shape=[4, 8], format="NCHW", dtype="DT_FLOAT16")
    b.chain("d:Data", "cast:Cast", "o:NetOutput")
    b.node("cast", inputs=2)  # second input unconnected
    b.out_desc("cast", 0, dtype="DT_FLOAT", shape=[32], size=128, name="y", origin_format="ND", origin_shape=[4, 8])
    b.in_desc("cast", 1, shape=None)
    b.reuse_input("cast", 0, 1)
    db = FactDB.from_model(b.build())
    ins = rows(db, "in_anchor", node="cast")
    assert ins == [
        ("g", "cast", 0, 1, "DT_FLOAT16", "NCHW", "[4,8]", "NCHW", "[4,8]", 0, ""),
        ("g", "cast", 1, 0, "DT_FLOAT16", "NCHW", "null", "NCHW", "null", 0, ""),
    ]
    assert rows(db, "out_anchor", node="cast") == [
        ("g", "cast", 0, "DT_FLOAT", "NCHW", "[32]", "ND", "[4,8]", 128, 1, 1, "y")
    ]
    assert rows(db, "in_anchor", node="d")[0][3] == 0  # Data's input is not connected
    ta = {(r[2], r[3], r[4]): (r[5], r[6]) for r in rows(db, "tensor_attr", node="cast")}
    assert ta == {("out", 0, "origin_format"): ("s", "ND"), ("out", 0, "origin_shape"): ("list", "[4,8]")}


def test_in_anchor_without_desc():
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU")
    m = b.build()
    m.root.node("r").input_desc.clear()
    db = FactDB.from_model(m)
    assert rows(db, "in_anchor", node="r") == [("g", "r", 0, 1, "", "", "null", "", "null", 0, "")]


def test_attr_values_native_scalars_and_json():
    b = GraphBuilder("g")
    n = b.node("n:Foo")
    n.set_attr("b_true", True)
    n.set_attr("b_false", False)
    n.set_attr("i", 7)
    n.set_attr("f", 0.5)
    n.set_attr("s", "hello")
    n.set_attr("dt", 3, kind="dt")
    n.set_attr("li", [1, 2, 3])
    n.set_attr("ls", ["a", "b"])
    n.set_attr("lb", [True, False])
    n.set_attr("lli", [[1, 2], [3]])
    n.set_attr("empty", [])
    n.set_attr("td", TensorDesc(dtype="DT_INT32", shape=[2], layout="ND"))
    db = FactDB.from_model(b.build())
    got = {r[2]: (r[3], r[4]) for r in rows(db, "node_attr", node="n")}
    assert got["b_true"] == ("b", 1) and got["b_false"] == ("b", 0)
    assert got["i"] == ("i", 7) and got["f"] == ("f", 0.5) and got["s"] == ("s", "hello")
    assert got["dt"] == ("dt", 3)
    assert got["li"] == ("list", "[1,2,3]")
    assert got["ls"] == ("list", '["a","b"]')
    assert got["lb"] == ("list", "[true,false]")
    assert got["lli"] == ("list_list_int", "[[1,2],[3]]")
    assert got["empty"] == ("list", "[]")
    assert got["td"][0] == "td" and json.loads(got["td"][1]) == {"dtype": "DT_INT32", "shape": [2], "layout": "ND"}
    # native types survive in SQLite: an integer attr joins with a number column
    q = "SELECT typeof(value) FROM node_attr WHERE key = ?"
    assert db.sql(q, ["i"]).iloc[0, 0] == "integer"
    assert db.sql(q, ["f"]).iloc[0, 0] == "real"
    assert db.sql(q, ["li"]).iloc[0, 0] == "text"


def test_attr_fact_value_of_unset_and_bytes():
    assert attr_fact_value(Attr(None)) == ("", "")
    assert attr_fact_value(Attr("bt", b"\x00\x01")) == ("bt", b"\x00\x01")
    assert attr_fact_value(Attr("s", b"\xff")) == ("s", b"\xff")


# -- ref_io: GraphUtils::IsRefFromInput -------------------------------------------------------------------------
def ref_rows(m) -> set[tuple]:
    return set(FactDB.from_model(m).rows("ref_io"))


def test_ref_io_pass_through_types_and_subgraph_data():
    b = GraphBuilder("g")
    b.node("w:While", inputs=3, outputs=3)
    b.node("sw:StatelessWhile", inputs=1, outputs=1)
    b.node("fw:For", inputs=1, outputs=1)  # For is not pass-through
    body = b.subgraph("body", owner="w")
    body.data("bd", 2)
    body.node("plain:Data")  # no _parent_node_index: not a subgraph input
    got = ref_rows(b.build())
    assert {r for r in got if r[1] == "w"} == {("g", "w", i, i) for i in range(3)}
    assert ("g", "sw", 0, 0) in got
    assert not {r for r in got if r[1] == "fw"}
    assert ("body", "bd", 0, 0) in got  # out[i] is in[i], not the parent index
    assert not {r for r in got if r[1] == "plain"}


def test_ref_io_subgraph_input_unknown_shape_exception():
    # parent op _is_unknown_shape in the root graph: its subgraph Data are not subgraph inputs
    b = GraphBuilder("g")
    b.node("if:If", inputs=1, attrs={"_is_unknown_shape": True})
    sub = b.subgraph("then", owner="if")
    sub.data("d", 0)
    assert ref_rows(b.build()) == set()
    # same parent one level down, in a graph without the unknown flag: the exception does not apply
    b = GraphBuilder("g")
    b.node("pc:PartitionedCall", inputs=1)
    inner = b.subgraph("inner", owner="pc")
    inner.node("if:If", inputs=1, attrs={"_is_unknown_shape": True})
    sub = inner.subgraph("then", owner="if")
    sub.data("d", 0)
    assert ("then", "d", 0, 0) in ref_rows(b.build())
    # ... but it does when that graph carries _graph_unknown_flag
    m = b.build()
    m.graph("inner").set_attr("_graph_unknown_flag", True)
    assert ("then", "d", 0, 0) not in ref_rows(m)


def test_ref_io_merge_and_reshape_output_zero_only():
    b = GraphBuilder("g")
    b.node("m:Merge", inputs=2, outputs=2)
    b.node("rm:RefMerge", inputs=2, outputs=2)
    b.node("sm:StreamMerge", inputs=2, outputs=1)
    b.node("r:Reshape", inputs=2, outputs=1)
    b.node("e:ExpandDims", inputs=2, outputs=1)
    got = ref_rows(b.build())
    assert got == {("g", "m", 0, 0), ("g", "r", 0, 0)}


def test_ref_io_reference_op_by_names():
    b = GraphBuilder("g")
    b.node("assign:Assign", inputs=2)
    b.ref_op("assign", {0: 0})
    b.node("hb:HcomBroadcast", inputs=2, outputs=2)
    b.ref_op("hb", {0: 1, 1: 0})
    b.node("nr:Assign", inputs=2)  # names match but attr reference is absent
    b.ref_op("nr", {0: 0})
    b.node("nr").del_attr("reference")
    b.node("nm:Foo", inputs=1)  # reference but no matching name
    b.ref_op("nm", {}, input_names=["x"], output_names=["y"])
    got = ref_rows(b.build())
    assert got == {("g", "assign", 0, 0), ("g", "hb", 0, 1), ("g", "hb", 1, 0)}


def test_ref_io_reference_names_come_only_from_the_name_attrs():
    # GE rebuilds OpDesc name maps from _input_name_key/_output_name_key (+ _value) only: tensor desc names
    # alone do not make a reference, and key/value lists of different lengths are ignored
    b = GraphBuilder("g")
    b.node("a:Foo", inputs=2, outputs=1, attrs={"reference": True})
    b.in_desc("a", 1, name="ref")
    b.out_desc("a", 0, name="ref")
    b.node("uneven:Foo", inputs=2, outputs=1)
    b.ref_op("uneven", {0: 1})
    b.attr("uneven", "_input_name_value", [0])
    b.node("dup:Foo", inputs=2, outputs=1)
    b.ref_op("dup", {0: 0}, input_names=["x", "x"], output_names=["x"])  # first index of a repeated name
    b.node("dup", attrs={"_input_name_value": [1, 0]})
    assert ref_rows(b.build()) == {("g", "dup", 0, 1)}


def test_ref_io_reuse_input_flag_and_precedence():
    b = GraphBuilder("g")
    b.node("a:Foo", inputs=3, outputs=2)
    b.reuse_input("a", 1, 2)
    b.node("r:Reshape", inputs=2, outputs=1)
    b.reuse_input("r", 0, 1)  # step 2 (Reshape) wins over step 4
    b.node("x:Foo", inputs=2, outputs=1)
    b.ref_op("x", {0: 0})
    b.reuse_input("x", 0, 1)  # step 3 (reference) wins over step 4
    got = ref_rows(b.build())
    assert got == {("g", "a", 1, 2), ("g", "r", 0, 0), ("g", "x", 0, 0)}


def test_ref_io_no_padding_reuse_is_input_zero_for_every_output():
    b = GraphBuilder("g")
    b.node(
        "split:Split",
        inputs=2,
        outputs=3,
        attrs={"_no_padding_continuous_output": True, "_output_reuse_input": True},
    )
    b.node("c:Concat", inputs=2, outputs=1, attrs={"_no_padding_continuous_input": True})  # no _output_reuse_input
    got = ref_rows(b.build())
    assert got == {("g", "split", i, 0) for i in range(3)}


def test_ref_io_attr_must_be_a_true_bool():
    b = GraphBuilder("g")
    b.node("x:Foo", inputs=1, outputs=1)
    b.ref_op("x", {0: 0})
    b.attr("x", "reference", 1)  # an int, not GE's bool attr
    assert ref_rows(b.build()) == set()


# -- op_class ---------------------------------------------------------------------------------------------------
def test_op_class_exact_ge_strings():
    db = FactDB()
    classes: dict[str, set[str]] = {}
    for t, c in db.rows("op_class"):
        classes.setdefault(c, set()).add(t)
    assert classes["case"] == {"Case"}
    assert "Case" not in classes["multi_branch_control_flow"]
    assert classes["multi_branch_control_flow"] == classes["if"] | classes["while"] | classes["for"] | classes["switch"]
    assert classes["const"] == {"Const", "Constant"}
    assert classes["const_like"] == {"Const", "Constant", "ConstPlaceHolder"}
    assert classes["layout_const"] == {"Const", "Constant", "FileConstant", "ConstPlaceHolder"}
    assert classes["data"] == {"Data", "RefData", "AippData", "AnnData"}
    assert classes["graph_input"] == classes["data"] | classes["var_like"] | classes["const_like"]
    assert classes["pass_through"] == {"NetOutput", "While", "_While", "StatelessWhile"}
    assert {c: set(ts) for c, ts in OP_CLASSES.items()} == classes


# -- databases with several models ------------------------------------------------------------------------------
def test_two_models_with_colliding_graph_names_are_qualified_everywhere():
    db = FactDB.from_model(if_model(), name="a")
    used = db.add_model(if_model(), name="b")
    assert used == "b"
    g = db.frame("graph")
    assert list(g[g.model == "b"].graph) == ["b/root", "b/then", "b/else"]
    assert list(g[g.model == "b"].parent_graph) == ["", "b/root", "b/root"]
    assert ("b/root", "if", 0, "b/then") in db.rows("subgraph")
    assert ("b/then", "t_in", "b/root", "if", 0) in db.rows("parent_in")
    assert ("b/then", "then_netoutput", 0, "b/root", "if", 0) in db.rows("parent_out")
    assert ("b/then", "t_in", 0, 0) in db.rows("ref_io")
    for rel, col in (
        ("node", "graph"),
        ("node_prop", "graph"),
        ("node_attr", "graph"),
        ("data_edge", "graph"),
        ("in_anchor", "graph"),
        ("out_anchor", "graph"),
        ("tensor_attr", "graph"),
    ):
        graphs = set(db.frame(rel)[col])
        assert graphs <= {"root", "then", "else", "b/root", "b/then", "b/else"}, rel
        assert any(x.startswith("b/") for x in graphs), rel
    # each model's rows are as many as alone
    alone = FactDB.from_model(if_model())
    assert db.count("node") == 2 * alone.count("node")
    assert db.count("op_class") == alone.count("op_class")  # op_class is shared, not per model


def test_models_without_collision_keep_names_and_duplicate_model_names_are_renamed():
    b = GraphBuilder("other")
    b.chain("x:Data", "y:NetOutput")
    db = FactDB.from_model(if_model(), name="m")
    assert db.add_model(b.build(), name="m") == "m_2"
    assert set(db.frame("graph").graph) == {"root", "then", "else", "other"}


def test_file_database_reopens_with_its_models(tmp_path):
    path = tmp_path / "f.sqlite"
    db = FactDB.from_model(if_model(), path, name="a")
    db.close()
    db = FactDB(path)
    assert db.models == {"a": {"root": "root", "then": "then", "else": "else"}}
    db.add_model(if_model(), name="b")
    assert "b/root" in set(db.frame("graph").graph)


# -- refresh after edits ----------------------------------------------------------------------------------------
def test_refresh_graph_and_replace_model():
    m = if_model()
    db = FactDB.from_model(m)
    then = m.graph("then")
    # edit the subgraph: insert an Identity between t_in and t_relu
    ident = Node("t_id", "Identity", inputs=[("t_in", 0)], input_desc=[TensorDesc()], output_desc=[TensorDesc()])
    then.add_node(ident)
    then.connect("t_id", 0, "t_relu", 0)
    db.refresh_graph(then)
    fresh = FactDB.from_model(m)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel
    # a root edit through replace_model
    m.root.add_ctrl("data", "out")
    db.replace_model(m)
    assert ("root", "data", "out") in db.rows("ctrl_edge")
    fresh = FactDB.from_model(m)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


def test_refresh_in_a_shared_db_keeps_qualified_names():
    db = FactDB.from_model(if_model(), name="a")
    m = if_model()
    db.add_model(m, name="b")
    m.graph("then").remove_node("t_relu")
    db.refresh_graph("then", m, name="b")
    assert not rows(db, "node", graph="b/then", name="t_relu")
    assert rows(db, "node", graph="then", name="t_relu")  # model a untouched
    assert rows(db, "graph", graph="b/then") == [("b/then", "b", "b/root", "if", 0)]
    with pytest.raises(AnchorlogError):
        db.refresh_graph("then", m)  # two models: which one?


# -- views: pandas, SQL, pyDatalog ------------------------------------------------------------------------------
def test_frames_and_sql_match_sqlite():
    db = FactDB.from_model(if_model())
    frames = db.frames()
    assert set(frames) == set(RELATIONS)
    for rel, df in frames.items():
        assert tuple(df.columns) == COLUMNS[rel]
        assert [tuple(r) for r in df.itertuples(index=False)] == db.rows(rel)
    df = db.sql("SELECT dst FROM data_edge WHERE graph = ? AND src = ?", ["root", "data"])
    assert list(df.dst) == ["if"]
    df = db.sql("SELECT name FROM node WHERE type = :t ORDER BY name", {"t": "Data"})
    assert list(df.name) == ["data", "e_in", "t_in"]
    with pytest.raises(AnchorlogError):
        db.frame("no_such_relation")


def test_pydatalog_facts_equal_sqlite():
    from pyDatalog import pyDatalog

    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    b.attr("r", "alpha", 0.5)
    b.attr("r", "axes", [0, 1])
    db = FactDB.from_model(b.build())
    pyDatalog.clear()
    try:
        db.to_pydatalog()
        for rel in RELATIONS:
            vs = ", ".join(f"X{i}" for i in range(len(COLUMNS[rel])))
            ans = pyDatalog.ask(f"{rel}({vs})")
            got = set(ans.answers) if ans else set()
            assert got == set(db.rows(rel)), rel
        # a rule over the facts
        pyDatalog.load("feeds(A, B) <= data_edge(G, A, O, B, I)")
        assert set(pyDatalog.ask("feeds(A, B)").answers) == {("d", "r"), ("r", "o")}
    finally:
        pyDatalog.clear()


def test_tables_from_model_restricted_to_graphs():
    m = if_model()
    t = tables_from_model(m, "m", graphs=["then"], include_op_class=False)
    assert {r[0] for r in t["node"]} == {"then"}
    assert t["graph"] == [("then", "m", "root", "if", 0)]
    assert t["op_class"] == []


def test_indexes_exist_on_join_columns():
    db = FactDB.from_model(if_model())
    idx = {r[0] for r in db.conn.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    assert "idx_node_graph_name" in idx
    assert "idx_data_edge_graph_src_src_out" in idx
    assert "idx_data_edge_graph_dst_dst_in" in idx
    plan = " ".join(
        str(r[-1])
        for r in db.conn.execute(
            "EXPLAIN QUERY PLAN SELECT * FROM data_edge WHERE graph = 'root' AND dst = 'if' AND dst_in = 0"
        )
    )
    assert "idx_data_edge_graph_dst_dst_in" in plan


def test_builder_model_matches_modelbuilder_root():
    mb = ModelBuilder("mm")
    g = mb.graph("main")
    g.chain("a:Data", "b:NetOutput")
    db = FactDB.from_model(mb.build())
    assert db.rows("graph") == [("main", "mm", "", "", 1)]


@pytest.mark.parametrize("engine", ["sqlite", "duckdb", "pydatalog"])
def test_rule_engine_reads_every_relation_by_name(engine):
    from anchorlog.queries import Program

    if engine == "duckdb":
        pytest.importorskip("duckdb")
    db = FactDB.from_model(if_model())
    decls, rules = [], []
    for rel in RELATIONS:
        vs = [f"X{i}" for i in range(len(COLUMNS[rel]))]
        # the value columns hold integers here (_parent_node_index): declare them as numbers
        types = ["number" if t in ("number", "value") else "symbol" for _, t in SCHEMA[rel]]
        decls.append(f".decl q_{rel}({', '.join(f'{v}: {t}' for v, t in zip(vs, types))})")
        rules.append(f"q_{rel}({', '.join(vs)}) :- {rel}({', '.join(vs)}).")
    res = Program.from_text("\n".join(decls + rules)).run(db, engine=engine)
    for rel in RELATIONS:
        assert sorted(res.rows(f"q_{rel}"), key=repr) == sorted(db.rows(rel), key=repr), rel


def test_restricted_relations():
    m = if_model()
    full = FactDB.from_model(m)
    db = FactDB.from_model(m, relations=["node", "data_edge", "parent_in", "op_class"])
    for rel in RELATIONS:
        if rel in ("node", "data_edge", "parent_in", "op_class", "graph"):
            assert db.rows(rel) == full.rows(rel), rel
        else:
            assert db.count(rel) == 0, rel
    m.graph("then").remove_node("t_relu")
    db.refresh_graph("then", m)  # keeps the restriction
    assert db.count("node_attr") == 0 and db.count("node") == full.count("node") - 1
    with pytest.raises(AnchorlogError):
        FactDB.from_model(m, relations=["nodes"])


def test_refresh_nodes_after_local_edits_and_owner_removal():
    m = if_model()
    db = FactDB.from_model(m)
    root = m.root
    root.node("if").set_attr("_some_flag", True)
    root.add_ctrl("data", "out")
    db.refresh_nodes(root, ["if", "out"])
    assert ("root", "if", "_some_flag", "b", 1) in db.rows("node_attr")
    assert ("root", "data", "out") in db.rows("ctrl_edge")
    # removing the owner of subgraphs re-derives the whole model (its subgraphs are orphaned)
    root.remove_node("if")
    db.refresh_nodes(root, ["if", "out"])
    fresh = FactDB.from_model(m)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel
    assert db.rows("parent_in") == [] and db.rows("subgraph") == []
    assert rows(db, "graph", graph="then") == [("then", "model", "", "", 0)]


def test_model_release_frees_by_reference_counting():
    import gc
    import weakref

    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    from anchorlog.facts import ge_io

    m = ge_io.read_model_text(ge_io.model_to_text(b.build()))  # as `anchorlog facts` reads it
    node = weakref.ref(m.root.node("r"))
    graph = weakref.ref(m.root)
    was = gc.isenabled()
    gc.disable()
    try:
        m.release()
        del m
        assert node() is None and graph() is None  # no collector pass needed
    finally:
        if was:
            gc.enable()


def test_fact_db_build_leaves_the_collector_as_it_was():
    """FactDB derives and inserts with the collector paused and frees the rows before resuming it: the rows equal
    tables_from_model's, the collector is enabled/disabled as before, and objects the program froze stay frozen."""
    import gc

    m = if_model()
    expected = tables_from_model(m, "model")
    was = gc.isenabled()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        for enabled in (True, False):
            gc.enable() if enabled else gc.disable()
            db = FactDB.from_model(m)
            assert gc.isenabled() is enabled
            assert gc.get_freeze_count() == frozen
            for rel in RELATIONS:
                assert db.rows(rel) == expected[rel], rel
            db.replace_model(m)
            db.refresh_graph(m.graph("then"))
            assert gc.isenabled() is enabled
            for rel in RELATIONS:
                assert sorted(db.rows(rel), key=repr) == sorted(expected[rel], key=repr), rel
            db.close()
    finally:
        gc.unfreeze()
        gc.enable() if was else gc.disable()


@pytest.mark.parametrize("n_nodes", [1, 49, 50, 51, 120])
def test_batched_insert_keeps_every_row_its_order_and_value_types(n_nodes):
    """FactDB inserts several rows per INSERT statement: every relation read back in rowid order equals the
    derivation exactly (value types included: compared as repr), for row counts below, at and across the batch
    size, with values of every storage class (int, real, text, non-UTF-8 text as BLOB, bytes)."""
    b = GraphBuilder("g", shape=[2, 3])
    b.node("n0", "Data")
    for i in range(1, n_nodes):
        b.chain(f"n{i - 1}", f"n{i}:ReLU")
        b.attr(f"n{i}", "alpha", 0.5 * i)
        b.attr(f"n{i}", "flag", i % 2 == 0)
        b.attr(f"n{i}", "count", i)
        b.attr(f"n{i}", "label", f"relu {i}")
        b.attr(f"n{i}", "dims", [i, i + 1])
    m = b.build()
    m.root.node("n0").set_attr("raw", Attr("bt", b"\x00\xff"))
    m.root.node("n0").set_attr("blob_text", Attr("s", b"\xff\xfe"))
    expected = tables_from_model(m, "model")
    db = FactDB.from_model(m)
    for rel in RELATIONS:
        assert repr(db.rows(rel)) == repr(expected[rel]), rel
    assert db.count("node") == n_nodes
    db.replace_model(m)
    for rel in RELATIONS:
        assert repr(db.rows(rel)) == repr(expected[rel]), rel


@pytest.mark.parametrize(
    ("value", "column"),
    [(5, "5"), (["a", "b"], '["a","b"]'), ([1.5, 2.0], "[1.5,2.0]"), (True, "1")],
    ids=["int", "strings", "floats", "bool"],
)
def test_origin_shape_attr_that_is_no_integer_list(value, column):
    """An ``origin_shape`` attr that is not an integer list (a hand-edited or foreign dump) is kept as it is:
    the anchor column holds its fact text and it keeps its ``tensor_attr`` row; deriving must not fail."""
    b = GraphBuilder("g", shape=[4, 8])
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    m = b.build()
    attr = Attr.of(value)
    m.root.node("r").output_desc[0].attrs["origin_shape"] = attr
    db = FactDB.from_model(m)
    (out,) = rows(db, "out_anchor", node="r")
    assert out[7] == column
    (ta,) = rows(db, "tensor_attr", node="r", key="origin_shape")
    assert ta[5:] == attr_fact_value(attr)


def test_graph_attrs_are_facts_of_their_graph():
    m = if_model()
    m.graph("then").attrs["_graph_unknown_flag"] = Attr.of(True)
    m.root.attrs["note"] = Attr.of("x")
    db = FactDB.from_model(m)
    assert sorted(db.rows("graph_attr")) == [("root", "note", "s", "x"), ("then", "_graph_unknown_flag", "b", 1)]
    db.refresh_graph("then", m)  # graph-level rows follow the graph
    assert sorted(db.rows("graph_attr")) == [("root", "note", "s", "x"), ("then", "_graph_unknown_flag", "b", 1)]

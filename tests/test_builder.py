"""The builder DSL (anchorlog.facts.builder): nodes from "name:Type" specs, chains with explicit anchors and
control edges, automatic tensor descs, subgraph helpers, reference-op helpers, id numbering; plus the
``anchorlog facts`` command on a built model."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys

import pytest

from anchorlog.facts.builder import CTRL, EDGE, Edge, GraphBuilder, ModelBuilder
from anchorlog.facts.graph import Node


def test_chain_creates_nodes_and_default_edges():
    b = GraphBuilder("g")
    b.chain("data:Data", "tm:TensorMove", "out:NetOutput")
    m = b.build()
    g = m.root
    assert [(n.name, n.type) for n in g] == [("data", "Data"), ("tm", "TensorMove"), ("out", "NetOutput")]
    assert list(g.data_edges()) == [("data", 0, "tm", 0), ("tm", 0, "out", 0)]
    assert g.consumers("data", 0) == [("tm", 0)]


def test_chain_fills_first_free_input_and_explicit_edges():
    b = GraphBuilder("g")
    b.chain("a:Data", "add:Add")
    b.chain("b:Data", "add")  # next free input: 1
    b.chain("c:Const", Edge(0, 3), "add")  # explicit, leaves input 2 unconnected
    b.chain("s:Split", EDGE(1, 2), "add")
    b.chain("a", (0, 0), "r:ReLU")  # tuple form
    add = b.build().root.node("add")
    assert add.inputs == [("a", 0), ("b", 0), ("s", 1), ("c", 0)]
    assert len(add.input_desc) == 4
    assert b.graph.node("s").num_outputs == 2  # grown to the used output


def test_ctrl_edges():
    b = GraphBuilder("g")
    b.chain("a:Data", CTRL, "b:NoOp", "c:NetOutput")
    b.ctrl("a", "c")
    g = b.build().root
    assert list(g.ctrl_edges()) == [("a", "b"), ("a", "c")]
    assert list(g.data_edges()) == [("b", 0, "c", 0)]


def test_chain_rejects_misplaced_edge_specs():
    b = GraphBuilder("g")
    with pytest.raises(ValueError):
        b.chain(Edge(0, 0), "a:Data")
    with pytest.raises(ValueError):
        b.chain("a:Data", Edge(0, 0))


def test_unknown_node_and_type_mismatch():
    b = GraphBuilder("g")
    with pytest.raises(KeyError):
        b.chain("nobody")
    b.node("a:Data")
    with pytest.raises(ValueError):
        b.node("a:Const")


def test_default_anchor_counts_by_type():
    b = GraphBuilder("g")
    for spec in ("d:Data", "k:Const", "o:NetOutput", "r:ReLU", "v:Variable"):
        b.node(spec)
    g = b.build().root
    counts = {n.name: (len(n.input_desc), len(n.output_desc)) for n in g}
    assert counts == {"d": (1, 1), "k": (0, 1), "o": (0, 0), "r": (0, 1), "v": (0, 1)}
    assert g.node("d").inputs == [None]


def test_tensor_desc_defaults_and_overrides():
    b = GraphBuilder("g", dtype="DT_FLOAT16", shape=[2, 2], format="NCHW")
    b.node("x:Add", inputs=2, outputs=1, shape=[4, 4], dtype="DT_INT32")
    b.chain("d:Data", "x")
    b.node("n:Foo", shape=None)
    b.out_desc("x", 0, format="ND", size=64, name="y", origin_shape=[16])
    g = b.build().root
    x = g.node("x")
    assert [(t.dtype, t.shape, t.layout) for t in x.input_desc] == [("DT_INT32", [4, 4], "NCHW")] * 2
    out = x.output_desc[0]
    assert (out.layout, out.size, out.name, out.attr("origin_shape")) == ("ND", 64, "y", [16])
    d = g.node("d")
    assert (d.output_desc[0].dtype, d.output_desc[0].shape) == ("DT_FLOAT16", [2, 2])
    assert g.node("n").output_desc[0].shape is None
    # later anchors of a styled node keep its style
    b.edge("x", 1, "d", 0)
    assert g.node("x").output_desc[1].shape == [4, 4]


def test_attrs_and_tensor_attrs():
    b = GraphBuilder("g")
    b.node("n:Foo", inputs=1, attrs={"k": 1})
    b.attr("n", "flag", True).attr("n", "t", 3, kind="dt")
    b.in_attr("n", 0, "_special_input_size", 1)
    b.out_attr("n", 0, "ref_var_src_var_name", "var")
    n = b.build().root.node("n")
    assert n.attr("k") == 1 and n.attr("flag") is True and n.attrs["t"].kind == "dt"
    assert n.input_desc[0].attr("_special_input_size") == 1
    assert n.output_desc[0].attr("ref_var_src_var_name") == "var"


def test_node_objects_are_accepted():
    b = GraphBuilder("g")
    n = Node("mine", "ReLU")
    b.chain("d:Data", n)
    assert b.graph.node("mine") is n and n.inputs == [("d", 0)]


def test_reuse_input_and_ref_op():
    b = GraphBuilder("g")
    b.node("tm:TensorMove", inputs=1)
    b.reuse_input("tm", 0, 0)
    b.node("assign:Assign", inputs=2)
    b.ref_op("assign", {0: 0})
    b.node("hb:HcomBroadcast", inputs=2, outputs=2)
    b.ref_op("hb", {0: 0, 1: 1})
    g = b.build().root
    td = g.node("tm").output_desc[0]
    assert td.reuse_input and td.reuse_input_index == 0
    a = g.node("assign")
    assert a.attr("reference") is True
    assert a.attr("_input_name_key") == ["x0", "x1"] and a.attr("_input_name_value") == [0, 1]
    assert a.attr("_output_name_key") == ["x0"] and a.attr("_output_name_value") == [0]
    assert g.node("hb").attr("_output_name_key") == ["x0", "x1"]


def test_subgraph_helpers():
    b = GraphBuilder("root")
    b.chain("d0:Data", "if:If", "out:NetOutput")
    b.chain("d1:Data", "if")
    then = b.subgraph("then", owner="if")
    then.data("t0", 0)
    then.data("t1:RefData", 1)
    then.chain("t0", "add:Add")
    then.chain("t1", "add")
    then.output("add", 0)
    then.output("t1", 1, netoutput="then_out")  # the existing NetOutput is reused
    els = b.subgraph("else", owner="if")
    els.data("e0", 0)
    els.output("e0", 0, netoutput="e_out")
    m = b.build()
    assert [g.name for g in m.graphs] == ["root", "then", "else"]
    assert m.root.node("if").subgraph_names == ["then", "else"]
    assert m.graph("then").parent_node is m.root.node("if")
    t = m.graph("then")
    assert t.node("t0").attr("_parent_node_index") == 0
    assert t.node("t1").type == "RefData" and t.node("t1").attr("_parent_node_index") == 1
    net = t.nodes_of_type("NetOutput")
    assert len(net) == 1
    assert net[0].inputs == [("add", 0), ("t1", 0)]
    assert [d.attr("_parent_node_index") for d in net[0].input_desc] == [0, 1]
    assert m.graph("else").node("e_out").input_desc[0].attr("_parent_node_index") == 0


def test_ids_are_topological_with_subgraph_nodes_after_their_owner():
    b = GraphBuilder("g")
    b.node("late:NetOutput")
    b.chain("d:Data", "w:While", "late")
    body = b.subgraph("body", owner="w")
    body.data("bd", 0)
    body.output("bd", 0)
    b.node("d", id=None)
    m = b.build()
    ids = {n.name: n.id for n in m.all_nodes()}
    assert ids["d"] < ids["w"] < ids["bd"] < ids["body_netoutput"] < ids["late"]
    assert sorted(ids.values()) == list(range(len(ids)))


def test_explicit_ids_are_kept():
    b = GraphBuilder("g")
    b.node("a:Data", id=10)
    b.chain("a", "b:NetOutput")
    m = b.build()
    assert m.root.node("a").id == 10 and m.root.node("b").id == 0


def test_model_builder_several_graphs():
    mb = ModelBuilder("m", shape=[1])
    root = mb.graph("main")
    root.node("pc:PartitionedCall", inputs=1, outputs=1)
    sub = root.subgraph("f", owner="pc")
    assert mb.graph("f") is sub and mb.root is root
    sub.data("x", 0)
    sub.output("x", 0)
    m = mb.build()
    assert m.name == "m" and [g.name for g in m.graphs] == ["main", "f"]


def test_built_model_round_trips_through_ge_text(tmp_path):
    from anchorlog.facts import ge_io

    b = GraphBuilder("g")
    b.chain("d:Data", "assign:Assign", "o:NetOutput")
    b.chain("v:Variable", "assign")
    b.ref_op("assign", {0: 0})
    path = tmp_path / "m.pbtxt"
    ge_io.write_model(b.build(), path)
    back = ge_io.read_model(path)
    assert [(n.name, n.type) for n in back.root] == [(n.name, n.type) for n in b.model.root]
    assert back.root.node("assign").attr("_output_name_key") == ["x0"]


# -- the CLI ----------------------------------------------------------------------------------------------------
def _cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "anchorlog.cli", *args], capture_output=True, text=True, timeout=120)


def test_cli_facts_writes_a_database(tmp_path):
    from anchorlog.facts import ge_io

    b = GraphBuilder("g", model_name="m")
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    src = tmp_path / "m.pbtxt"
    ge_io.write_model(b.build(), src)
    out = tmp_path / "f.sqlite"
    res = _cli("facts", str(src), str(src), "--db", str(out), "-q")
    assert res.returncode == 0, res.stderr
    conn = sqlite3.connect(out)
    assert conn.execute("SELECT COUNT(*) FROM node").fetchone()[0] == 6
    models = [r[0] for r in conn.execute("SELECT model FROM graph ORDER BY rowid")]
    graphs = [r[0] for r in conn.execute("SELECT graph FROM graph ORDER BY rowid")]
    assert models == ["m", "m_2"] and graphs == ["g", "m_2/g"]
    conn.close()
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_cli_facts_errors_leave_no_output(tmp_path):
    out = tmp_path / "f.sqlite"
    res = _cli("facts", str(tmp_path / "missing.pbtxt"), "--db", str(out))
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1 and "missing.pbtxt" in res.stderr
    assert not out.exists() and not os.listdir(tmp_path)
    bad = tmp_path / "bad.pbtxt"
    bad.write_text("graph { op { name: ")
    res = _cli("facts", str(bad), "--db", str(out))
    assert res.returncode == 2 and not out.exists()


def test_cli_facts_relations_option(tmp_path):
    from anchorlog.facts import ge_io

    b = GraphBuilder("g", model_name="m")
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    src = tmp_path / "m.pbtxt"
    ge_io.write_model(b.build(), src)
    out = tmp_path / "f.sqlite"
    res = _cli("facts", str(src), "--db", str(out), "--relations", "node,data_edge", "-q")
    assert res.returncode == 0, res.stderr
    conn = sqlite3.connect(out)
    assert conn.execute("SELECT COUNT(*) FROM node").fetchone()[0] == 3
    assert conn.execute("SELECT COUNT(*) FROM node_attr").fetchone()[0] == 0
    conn.close()
    res = _cli("facts", str(src), "--db", str(out), "--relations", "nodes")
    assert res.returncode == 2 and "nodes" in res.stderr

"""InnerIdentityAddPass (inner-identity-add) and its collaboration with TensorMove (seed 000 §4.6)."""

from __future__ import annotations

from anchorlog.analysis.inner_identity_add import run_inner_identity_add, update_ref_attr
from anchorlog.facts.builder import GraphBuilder


def _assign_graph(producer: str = "relu:ReLU"):
    b = GraphBuilder("g")
    b.chain("x:Data", producer, "assign:Assign")
    pname = producer.split(":")[0]
    b.chain("v:Data", "assign")
    b.chain("assign", "add:Add")
    b.chain(pname, "add")
    b.ref_op("assign", {0: 0})
    return b


def test_identity_isolates_ref_input_and_takes_reachable_consumers():
    m = _assign_graph().build()
    sec = run_inner_identity_add(m)
    g = m.root
    (ins,) = sec["inserted"]
    ident = ins["identity"]
    node = g.nodes[ident]
    assert node.type == "Identity"
    assert all(node.attr(k) is True for k in ("_inner_identity", "_cannot_be_deleted", "no_need_constant_folding"))
    assert g.nodes["assign"].inputs[0] == (ident, 0)
    assert g.nodes["add"].inputs[1] == (ident, 0)  # add is reachable from assign: it reads before the write
    assert ins["moved_consumers"] == ["add:1"]


def test_single_output_tensormove_already_isolates():
    m = _assign_graph("tm:TensorMove").build()
    g = m.root
    g.disconnect("add", 1)  # the TensorMove feeds only the Assign
    sec = run_inner_identity_add(m)
    assert sec["inserted"] == [] and "TensorMove" in sec["skipped"][0]["why"]


def test_tensormove_with_two_consumers_does_not_isolate():
    m = _assign_graph("tm:TensorMove").build()
    sec = run_inner_identity_add(m)
    assert len(sec["inserted"]) == 1


def test_variable_input_needs_no_identity():
    b = GraphBuilder("g")
    b.chain("var:Variable", "rs:Reshape", "assign:Assign")
    b.chain("v:Data", "assign")
    b.ref_op("assign", {0: 0})
    m = b.build()
    sec = run_inner_identity_add(m)
    assert sec["inserted"] == [] and "var-like" in sec["skipped"][0]["why"]


def test_update_ref_attr_marks_name_matched_ops():
    b = GraphBuilder("g")
    b.chain("x:Data", "op:Foo")
    n = b.node("op")
    n.set_attr("_input_name_key", ["ref"])
    n.set_attr("_input_name_value", [0])
    n.set_attr("_output_name_key", ["ref"])
    n.set_attr("_output_name_value", [0])
    m = b.build()
    assert update_ref_attr(m) == ["op"] and m.root.nodes["op"].attr("reference") is True


# ---------------------------------------------------------------------------------------------- inner-identity-delete
def _with_inner_identity(producer: str = "relu:ReLU"):
    """relu feeds an Assign's ref input and an Add that reads the Assign's output (GE InnerIdentity_Delete1)."""
    b = GraphBuilder("g")
    b.chain("x:Data", producer)
    pname = producer.split(":")[0]
    b.node("assign:Assign", inputs=2, outputs=1)
    b.edge(pname, 0, "assign", 0)
    b.node("v:Data")
    b.edge("v", 0, "assign", 1)
    b.node("add:Add", inputs=2, outputs=1)
    b.edge(pname, 0, "add", 0)
    b.edge("assign", 0, "add", 1)
    b.ref_op("assign", {0: 0})
    m = b.build()
    run_inner_identity_add(m)
    return m


def test_inner_identity_deleted_when_every_reader_follows_the_write():
    from anchorlog.analysis.inner_identity_add import run_inner_identity_delete

    m = _with_inner_identity()
    assert any(n.type == "Identity" for n in m.root.nodes.values())
    sec = run_inner_identity_delete(m, {})
    assert not any(n.type == "Identity" for n in m.root.nodes.values())
    assert m.root.nodes["assign"].inputs[0] == ("relu", 0) and len(sec["deleted"]) == 1


def test_inner_identity_kept_when_another_reader_is_unordered():
    from anchorlog.analysis.inner_identity_add import run_inner_identity_delete

    m = _with_inner_identity()
    g = m.root
    ident = next(n.name for n in g.nodes.values() if n.type == "Identity")
    from anchorlog.facts.graph import Node

    # a reader of relu that is not ordered before the Assign, and a second consumer of the Identity

    g.add_node(Node("reader", "ReLU", inputs=[("relu", 0)]))
    g.add_node(Node("w", "ReLU", inputs=[(ident, 0)]))  # identity gets a second, unordered consumer
    sec = run_inner_identity_delete(m, {})
    assert sec["deleted"] == [] and ident in g.nodes
    sec = run_inner_identity_delete(m, {"ge.topoSortingMode": "3"})  # stable RDFS: always deletable
    assert ident not in g.nodes and len(sec["deleted"]) == 1

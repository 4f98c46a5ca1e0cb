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

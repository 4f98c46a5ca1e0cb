"""The shared rewriter primitives (anchorlog.runtime.rewrite) with GE's side effects."""

from __future__ import annotations

import pytest

from anchorlog.errors import PassFailure
from anchorlog.facts.builder import GraphBuilder
from anchorlog.runtime.rewrite import (
    NOOP_OPTIMIZE_THRESHOLD,
    CtrlEdgeBatch,
    insert_identity_after,
    insert_identity_before,
    isolate_and_delete,
    reaches,
    would_create_cycle,
)


def _chain():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "t:TensorMove", "c:ReLU")
    b.chain("t", "d:ReLU")
    return b.build().root


def test_isolate_and_delete_relinks_every_consumer():
    g = _chain()
    res = isolate_and_delete(g, "t")
    assert "t" not in g.nodes
    assert g.nodes["c"].inputs[0] == ("a", 0) and g.nodes["d"].inputs[0] == ("a", 0)
    assert sorted(res.data_edges) == [("a", 0, "c", 0), ("a", 0, "d", 0)]
    assert res.ctrl_edges == []  # producer and consumers are already joined by the relinked data edges
    assert sorted(d for d, _ in g.consumers("a", 0)) == ["c", "d"]


def test_isolate_and_delete_moves_control_edges_to_neighbours():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "t:TensorMove", "c:ReLU")
    b.node("x:ReLU")
    b.node("y:ReLU")
    b.ctrl("x", "t")
    b.ctrl("t", "y")
    b.ctrl("x", "y")  # already linked: not added twice
    g = b.build().root
    res = isolate_and_delete(g, "t")
    assert sorted(res.ctrl_edges) == [("a", "y"), ("x", "c")]
    assert g.nodes["y"].ctrl_inputs.count("x") == 1
    assert "t" not in g.nodes["y"].ctrl_inputs


def test_isolate_and_delete_uses_noop_hub_above_threshold():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "t:TensorMove", "c:ReLU")
    n = 40  # 41 in-nodes x 41 out-nodes > threshold
    for i in range(n):
        b.node(f"i{i}:ReLU")
        b.node(f"o{i}:ReLU")
        b.ctrl(f"i{i}", "t")
        b.ctrl("t", f"o{i}")
    g = b.build().root
    assert (n + 1) * (n + 1) > NOOP_OPTIMIZE_THRESHOLD
    res = isolate_and_delete(g, "t")
    assert res.noop is not None and g.nodes[res.noop].type == "NoOp"
    assert "i0" in g.nodes[res.noop].ctrl_inputs and res.noop in g.nodes["o0"].ctrl_inputs


def test_isolate_and_delete_unknown_node_fails():
    g = _chain()
    with pytest.raises(PassFailure):
        isolate_and_delete(g, "nope")


def test_reachability_and_cycle_check():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "b:ReLU", "c:ReLU")
    b.node("z:ReLU")
    b.ctrl("c", "z")
    g = b.build().root
    assert reaches(g, "a", "z") and not reaches(g, "z", "a")
    assert would_create_cycle(g, "z", "a") and not would_create_cycle(g, "a", "z")


def test_ctrl_batch_skips_existing_refuses_cycles_and_rolls_back():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "b:ReLU", "c:ReLU")
    b.node("x:ReLU")
    b.ctrl("a", "x")
    g = b.build().root
    batch = CtrlEdgeBatch(g)
    assert batch.add("a", "x") is False  # existed before: not recorded
    assert batch.add("x", "c") is True
    with pytest.raises(PassFailure):
        batch.add_all([("b", "x"), ("c", "a")])  # the second edge closes a cycle -> whole batch undone
    assert batch.added == []
    assert "a" in g.nodes["x"].ctrl_inputs  # pre-existing edge survives the rollback
    assert "x" not in g.nodes["c"].ctrl_inputs and "b" not in g.nodes["x"].ctrl_inputs
    with pytest.raises(PassFailure):
        CtrlEdgeBatch(g).add("a", "a")


def test_insert_identity_after_moves_source_out_control_edges():
    b = GraphBuilder("g")
    b.chain("p:ReLU", "r:Assign")
    b.chain("p", "q:Add")
    b.node("z:ReLU")
    b.ctrl("p", "z")
    g = b.build().root
    ident = insert_identity_after(g, ("p", 0), [("r", 0)], name="inner_identity_0", attrs={"_inner_identity": True})
    node = g.nodes[ident]
    assert node.type == "Identity" and node.attr("_inner_identity") is True
    assert node.inputs[0] == ("p", 0) and g.nodes["r"].inputs[0] == (ident, 0)
    assert g.nodes["q"].inputs[0] == ("p", 0)  # other consumers untouched
    assert g.nodes["z"].ctrl_inputs == [ident]  # GE InsertNodeAfter moves the source's out-control edges
    assert node.output_desc[0].reuse_input is False


def test_insert_identity_before_moves_in_control_edges_except_atomic_clean():
    b = GraphBuilder("g")
    b.chain("p:ReLU", "r:Add")
    b.node("x:ReLU")
    b.node("clean:AtomicAddrClean")
    b.ctrl("x", "r")
    b.ctrl("clean", "r")
    g = b.build().root
    ident = insert_identity_before(g, ("r", 0), name="id")
    assert g.nodes["r"].inputs[0] == (ident, 0) and g.nodes[ident].inputs[0] == ("p", 0)
    assert g.nodes[ident].ctrl_inputs == ["x"]
    assert g.nodes["r"].ctrl_inputs == ["clean"]
    with pytest.raises(PassFailure):
        insert_identity_before(g, ("p", 0), name="id2")  # input not connected


def test_insert_identity_names_are_unique():
    b = GraphBuilder("g")
    b.chain("p:ReLU", "r:Add")
    b.chain("p", "s:Add")
    g = b.build().root
    a = insert_identity_after(g, ("p", 0), [("r", 0)], name="id")
    c = insert_identity_after(g, ("p", 0), [("s", 0)], name="id")
    assert a != c


def test_add_node_after_keeps_every_other_node_in_place():
    """Graph.add_node(after=...) puts the node right after ``after`` (first, middle and last position), leaves the
    order of the others unchanged and keeps the consumer index; an unknown ``after`` is a KeyError."""
    from anchorlog.facts.graph import Node

    b = GraphBuilder("g")
    b.chain("a:Data", "b:Relu", "c:Relu", "d:NetOutput")
    g = b.build().root
    g.consumers("a", 0)  # build the index before the insertions
    for after, name in (("a", "x"), ("c", "y"), ("d", "z")):
        n = Node(name, "Identity")
        n.inputs = [("a", 0)]
        g.add_node(n, after=after)
    assert list(g.nodes) == ["a", "x", "b", "c", "y", "d", "z"]
    assert sorted(g.consumers("a", 0)) == [("b", 0), ("x", 0), ("y", 0), ("z", 0)]
    with pytest.raises(KeyError):
        g.add_node(Node("w", "Identity"), after="nope")
    assert "w" not in g.nodes


def test_unique_name_avoids_names_in_every_graph_of_the_model():
    """GE node names are model-wide: a name used in a subgraph is taken for the root graph too."""
    from anchorlog.facts.graph import Graph, Model, Node

    model = Model()
    root, sub = Graph("root"), Graph("sub")
    for g in (root, sub):
        g.model = model
        model.graphs.append(g)
    root.add_node(Node("id", "Identity"))
    sub.add_node(Node("id_1", "Identity"))
    assert root.unique_name("fresh") == "fresh"
    assert root.unique_name("id") == "id_2"
    assert sub.unique_name("id") == "id_2"
    loose = Graph("loose")
    loose.add_node(Node("n", "Relu"))
    assert loose.unique_name("n") == "n_1"

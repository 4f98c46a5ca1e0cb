"""The shared fact database follows the edits passes make through the IR."""

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Node, TensorDesc
from anchorlog.facts.relations import RELATIONS, FactDB


def _model():
    b = GraphBuilder("g")
    b.chain("data:Data", "relu:ReLU", "tm:TensorMove", "out:NetOutput")
    b.edge("relu", 0, "out", 1)
    return b.build()


def _contents(db: FactDB) -> dict[str, list[tuple]]:
    return {rel: sorted(map(repr, db.rows(rel))) for rel in RELATIONS}


def test_cache_is_built_once_and_reused():
    model = _model()
    ctx = PassContext()
    first = shared_facts(model, ctx)
    assert shared_facts(model, ctx) is first


def test_cache_follows_edits_made_through_the_ir():
    model = _model()
    ctx = PassContext()
    shared_facts(model, ctx)
    g = model.root
    g.connect("relu", 0, "out", 0)  # bypass the TensorMove
    g.remove_node("tm")
    g.add_node(Node("id", "Identity", output_desc=[TensorDesc()], input_desc=[TensorDesc()]))
    g.connect("relu", 0, "id", 0)
    g.add_ctrl("data", "id")
    g.nodes["relu"].set_attr("_cannot_be_deleted", True)
    cached = shared_facts(model, ctx)
    fresh = FactDB.from_model(model)
    assert _contents(cached) == _contents(fresh)
    assert ("g", "tm", "TensorMove") not in cached.rows("node")
    assert ("g", "data", "id") in cached.rows("ctrl_edge")


def test_cache_rebuilds_when_subgraphs_change():
    model = _model()
    ctx = PassContext()
    first = shared_facts(model, ctx)
    from anchorlog.facts.graph import Graph

    model.add_graph(Graph("extra"))
    assert shared_facts(model, ctx) is not first

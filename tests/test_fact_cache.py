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


def _chain_model(n: int):
    b = GraphBuilder("g")
    b.node("n0:Data")
    for i in range(1, n):
        b.chain(f"n{i - 1}", f"n{i}:ReLU")
        if i % 5 == 0:
            b.ctrl(f"n{i - 5}", f"n{i}")
    b.chain(f"n{n - 1}", "out:NetOutput")
    model = b.build()
    model.root.touched.clear()
    return model


def _reverse(g) -> None:
    reordered = {name: g.nodes[name] for name in list(g.nodes)[::-1]}
    g.nodes.clear()
    g.nodes.update(reordered)
    g.invalidate()


def _layout(db: FactDB) -> dict[str, list]:
    """Everything a fresh build fixes: every relation in rowid order, the indexes, the planner statistics."""
    out: dict[str, list] = {rel: db.rows(rel) for rel in RELATIONS}
    out["indexes"] = sorted(db.conn.execute("SELECT name, tbl_name, sql FROM sqlite_master WHERE type = 'index'"))
    out["stat1"] = sorted(db.conn.execute("SELECT * FROM sqlite_stat1"), key=repr)
    return out


def test_large_edit_rebuilds_the_same_database_as_a_fresh_build():
    """More than REBUILD_SHARE of the nodes touched (every node moved): the shared database is re-derived whole,
    in place, and then equals a fresh build exactly -- rowid order, indexes and statistics included."""
    from anchorlog.analysis import fact_cache

    model = _chain_model(60)
    ctx = PassContext()
    first = shared_facts(model, ctx)
    stamp = fact_cache.facts_stamp(model, ctx)
    _reverse(model.root)
    model.root.node("n7").set_attr("_edited", True)
    cached = shared_facts(model, ctx)
    assert cached is first  # passes may hold the database across a sync
    assert fact_cache.facts_stamp(model, ctx) != stamp
    assert not model.root.touched
    assert _layout(cached) == _layout(FactDB.from_model(model))


def test_share_decides_between_refresh_and_rebuild(monkeypatch):
    calls: list[str] = []
    monkeypatch.setattr(FactDB, "rebuild_model", lambda self, *a, **k: calls.append("rebuild"))
    monkeypatch.setattr(FactDB, "refresh_nodes", lambda self, *a, **k: calls.append("refresh"))
    from anchorlog.analysis.fact_cache import REBUILD_SHARE

    model = _chain_model(100)
    ctx = PassContext()
    shared_facts(model, ctx)
    n = model.num_nodes()
    names = list(model.root.nodes)
    model.root.touched.update(names[: int(REBUILD_SHARE * n)])  # at the share: refreshed
    shared_facts(model, ctx)
    assert calls == ["refresh"]
    model.root.touched.update(names[: int(REBUILD_SHARE * n) + 1])  # above it: rebuilt
    shared_facts(model, ctx)
    assert calls == ["refresh", "rebuild"]


def test_rebuild_model_keeps_restricted_relations_and_other_models():
    model = _chain_model(20)
    db = FactDB.from_model(model, relations=["node", "data_edge"])
    _reverse(model.root)
    db.rebuild_model(model)
    assert _layout(db) == _layout(FactDB.from_model(model, relations=["node", "data_edge"]))
    # a second model in the database: only this model's rows are re-derived (replace_model)
    other = _model()
    db2 = FactDB.from_model(other)
    db2.add_model(model, name="chain")
    _reverse(model.root)
    db2.rebuild_model(model, "chain")
    fresh = FactDB.from_model(other)
    fresh.add_model(model, name="chain")
    assert _contents(db2) == _contents(fresh)

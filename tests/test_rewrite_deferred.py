"""``runtime.rewrite.deferred_placement``: Identities placed once at the end give the op list (and the facts) the
one-by-one insertions give."""

from __future__ import annotations

import copy
import random

import pytest

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Graph, Model
from anchorlog.facts.relations import FactDB
from anchorlog.runtime.rewrite import (
    deferred_placement,
    insert_identity_after,
    insert_identity_before,
    isolate_and_delete,
)


def _chain_model(n: int) -> Model:
    b = GraphBuilder("g")
    b.chain("d:Data")
    last = "d"
    for i in range(n):
        b.chain(last, f"a{i}:ReLU")
        if i % 3 == 0:
            b.chain(last, f"s{i}:Square")  # a second consumer of the same output
        last = f"a{i}"
    b.chain(last, "out:NetOutput")
    return b.build()


def _edits(g: Graph, rng: random.Random, steps: int) -> None:
    """Random Identity insertions before/after anchors (also next to earlier Identities) and removals."""
    for _ in range(steps):
        names = sorted(g.nodes)  # not the op-list order, which is provisional inside the block
        kind = rng.random()
        if kind < 0.45:
            dsts = [n for n in names if g.nodes[n].inputs and g.nodes[n].inputs[0] is not None]
            dst = rng.choice(dsts)
            insert_identity_before(g, (dst, 0), name=f"{dst}_id")
        elif kind < 0.85:
            srcs = [n for n in names if g.consumers(n, 0)]
            src = rng.choice(srcs)
            cons = g.consumers(src, 0)
            insert_identity_after(g, (src, 0), [rng.choice(cons)], name=f"{src}_ida")
        else:
            idents = [n for n in names if g.nodes[n].type == "Identity"]
            if idents:
                isolate_and_delete(g, rng.choice(idents), {0: 0})
        if rng.random() < 0.1:
            g.add_node(type(g.nodes["d"])(g.unique_name("tail"), "NoOp"))  # appended at the end meanwhile


def _state(g: Graph) -> list[tuple]:
    return [(n.name, n.type, list(n.inputs), list(n.ctrl_inputs)) for n in g.nodes.values()]


@pytest.mark.parametrize("seed", range(12))
def test_deferred_placement_gives_the_one_by_one_op_list(seed: int) -> None:
    m = _chain_model(20)
    one_by_one, deferred = copy.deepcopy(m), copy.deepcopy(m)
    # consumer lists in edge order from the start in both (the index, built lazily, otherwise follows the op list
    # of the moment it is first used)
    one_by_one.root.consumers("d", 0)
    _edits(one_by_one.root, random.Random(seed), 40)
    with deferred_placement(deferred.graphs):
        _edits(deferred.root, random.Random(seed), 40)
    assert _state(deferred.root) == _state(one_by_one.root)
    g = deferred.root
    assert [c for c in g.consumers("d", 0)] == one_by_one.root.consumers("d", 0)


def test_nodes_stay_appended_inside_the_block() -> None:
    m = _chain_model(3)
    g = m.root
    with deferred_placement(m.graphs):
        name = insert_identity_before(g, ("a1", 0), name="x")
        assert list(g.nodes)[-1] == name  # provisional place: the end
        assert g.nodes["a1"].inputs[0] == (name, 0)
    order = list(g.nodes)
    assert order.index(name) == order.index("a0") + 1


def _node_prop(db: FactDB) -> list[tuple]:
    return sorted(db.conn.execute("SELECT graph, node, pos FROM node_prop").fetchall())


@pytest.mark.parametrize("sync_at", ["none", "middle", "end"])
def test_shared_facts_positions_match_a_fresh_database(sync_at: str) -> None:
    # a fact sync inside the block sees the provisional order; the moved nodes are refreshed after the block
    m = _chain_model(12)
    ctx = PassContext()
    shared_facts(m, ctx)
    g = m.root
    with deferred_placement(m.graphs):
        insert_identity_before(g, ("a5", 0), name="p")
        insert_identity_after(g, ("a2", 0), [("a3", 0)], name="q")
        if sync_at == "middle":
            shared_facts(m, ctx)
        insert_identity_before(g, ("a8", 0), name="r")
        if sync_at == "end":  # every inserted node is in the facts, at its provisional place
            shared_facts(m, ctx)
    db = shared_facts(m, ctx)
    assert _node_prop(db) == _node_prop(FactDB.from_model(m))

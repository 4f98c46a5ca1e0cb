"""GE's node order (:mod:`anchorlog.analysis.order`) against the verbatim pre-optimisation implementation kept as
an oracle (``tests/oracles/ge_order.py``): the same DFS orders, the same failures on cycles, the same ids after
``topological_sorting``/``topological_resort`` and the same ``node_order`` rows, on random graphs (subgraphs,
control edges, NextIteration loops, declared inputs, multi-output producers, holes, random edits) and on every
conformance model and real GE dump."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from anchorlog.analysis import order as new
from anchorlog.errors import PassFailure
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.graph import Graph, Model, Node
from tests.oracles import ge_order as oracle
from tests.shared_paths import SHARED

_TYPES = ["Data", "RefData", "Const", "Add", "Relu", "NextIteration", "RefNextIteration", "Input", "Send", "Recv"]
_TYPE_WEIGHTS = [4, 1, 3, 8, 6, 1, 1, 1, 1, 1]


def _random_graph(rng: random.Random, name: str, prefix: str, owners_of: list[tuple[Node, Graph]]) -> Graph:
    """A random graph: nodes stored in shuffled order; data edges mostly follow a hidden topological order,
    with loops closed through NextIteration nodes and, rarely, a real cycle; control edges; holes."""
    g = Graph(name)
    size = rng.randint(0, 14)
    ranked = [Node(f"{prefix}n{i}", rng.choices(_TYPES, _TYPE_WEIGHTS)[0]) for i in range(size)]
    stored = ranked[:]
    rng.shuffle(stored)
    for n in stored:
        g.add_node(n)
    build_index_midway = rng.random() < 0.5  # edges added before and after the consumer index exists
    for pos, dst in enumerate(ranked):
        if build_index_midway and pos == size // 2:
            g.consumers(dst.name, 0)
        for slot in range(rng.randint(0, 3)):
            if rng.random() < 0.15:
                continue  # a hole: input slot left empty
            if pos and rng.random() < 0.9:
                src = ranked[rng.randrange(pos)]
            elif size:
                src = ranked[rng.randrange(size)]  # maybe backwards: a loop (fine through NextIteration)
                if src.type not in ("NextIteration", "RefNextIteration") and rng.random() < 0.8:
                    continue
            else:
                continue
            if src is dst and rng.random() < 0.9:
                continue
            g.connect(src.name, rng.choice([0, 0, 0, 1, 2]), dst.name, slot)
        for _ in range(rng.choice([0, 0, 1, 2])):
            if pos:
                g.add_ctrl(ranked[rng.randrange(pos)].name, dst.name)
            elif size > 1 and rng.random() < 0.1:
                g.add_ctrl(ranked[-1].name, dst.name)  # a control cycle: the sort must fail the same way
    if stored and rng.random() < 0.5:
        # declared graph inputs: some nodes (maybe with an out index, maybe unknown names), in random order
        declared = rng.sample(stored, min(len(stored), rng.randint(1, 4)))
        g.input = [n.name + (":0" if rng.random() < 0.3 else "") for n in declared]
        if rng.random() < 0.2:
            g.input.append("no_such_node")
    for n in stored:
        if rng.random() < 0.2:
            owners_of.append((n, g))
    return g


def _random_model(seed: int) -> Model:
    rng = random.Random(seed)
    owners: list[tuple[Node, Graph]] = []
    model = Model("m", [_random_graph(rng, "root", "r_", owners)])
    for k in range(rng.randint(0, 4)):
        sub = _random_graph(rng, f"sub{k}", f"s{k}_", owners)
        model.add_graph(sub)
    subs = [g.name for g in model.graphs[1:]]
    for node, _g in owners:
        # a node owns some subgraphs (shared, nested, cyclic or unknown names are all possible)
        node.subgraph_names = rng.sample(subs, min(len(subs), rng.randint(1, 2))) if subs else []
        if rng.random() < 0.1:
            node.subgraph_names.append("missing_graph")
    return model


def _sort(mod, g: Graph) -> list[str] | str:  # type: ignore[no-untyped-def]
    try:
        return [n.name for n in mod.dfs_topo_order(g)]
    except PassFailure as err:
        return f"failed: {err}"


def _state(mod, model: Model) -> tuple:  # type: ignore[no-untyped-def]
    ids = [(g.name, n.name, n.id) for g in model.graphs for n in g.nodes.values()]
    graph_orders = {g.name: [n.name for n in mod.graph_nodes(model, g)] for g in model.graphs}
    walk = [(g.name, n.name) for g, n in mod.ge_all_nodes(model)]
    all_nodes = [n.name for n in mod.all_nodes(model, model.root)]
    per_graph_rows = {g.name: mod.node_order_rows(model, g) for g in model.graphs}
    return ids, graph_orders, walk, all_nodes, mod.node_order_rows(model), per_graph_rows


def _sort_both(model: Model, resort_of: set[str] | None = None) -> tuple[tuple, tuple] | tuple[str, str]:
    """Sort (or re-sort ``resort_of``) with the oracle, then with the package, on the same model: each module
    keeps its own remembered orders; ids are read right after each."""
    outcome = []
    for mod in (oracle, new):
        try:
            if resort_of is None:
                mod.topological_sorting(model)
            else:
                mod.topological_resort(model, resort_of)
        except PassFailure as err:
            outcome.append(f"failed: {err}")
            continue
        outcome.append(_state(mod, model))
    return outcome[0], outcome[1]


def _random_edit(rng: random.Random, model: Model) -> str | None:
    """One edit GE's passes make (an Identity on an edge, a control edge, a removed node or edge); returns the
    edited graph's name."""
    g = rng.choice(model.graphs)
    names = list(g.nodes)
    if not names:
        return None
    kind = rng.choice(["identity", "identity", "ctrl", "remove", "disconnect"])
    if kind == "identity":
        dst = g.nodes[rng.choice(names)]
        slots = [i for i, a in enumerate(dst.inputs) if a is not None]
        if not slots:
            return None
        slot = rng.choice(slots)
        src, out = dst.inputs[slot]  # type: ignore[misc]
        ident = g.add_node(Node(g.unique_name("ident"), "Identity"), after=rng.choice([None, src]))
        g.connect(src, out, ident.name, 0)
        g.connect(ident.name, 0, dst.name, slot)
    elif kind == "ctrl":
        a, b = rng.choice(names), rng.choice(names)
        if a == b:
            return None
        g.add_ctrl(a, b)
    elif kind == "remove":
        g.remove_node(rng.choice(names))
    else:
        dst = g.nodes[rng.choice(names)]
        if not dst.inputs:
            return None
        g.disconnect(dst.name, rng.randrange(len(dst.inputs)))
    return g.name


@settings(max_examples=300, deadline=None)
@given(st.integers(min_value=0, max_value=2**32 - 1))
def test_random_models_sort_like_the_oracle(seed: int) -> None:
    model = _random_model(seed)
    for g in model.graphs:
        assert _sort(new, g) == _sort(oracle, g)
        assert [n.name for n in new.ge_graph_nodes(model, g)] == [n.name for n in oracle.ge_graph_nodes(model, g)]
    # unsorted model: the order computed on the fly
    assert new.node_order_rows(model) == oracle.node_order_rows(model)
    before, after = _sort_both(model)
    assert after == before
    rng = random.Random(seed ^ 0x5EED)
    for _ in range(rng.randint(1, 4)):
        edited = {name for name in (_random_edit(rng, model) for _ in range(rng.randint(1, 3))) if name}
        # also re-sort with a graph missing from ``edited``: a changed node count must still be caught
        if edited and rng.random() < 0.3:
            edited.discard(rng.choice(sorted(edited)))
        before, after = _sort_both(model, edited)
        assert after == before


def test_multi_output_producer_walks_its_anchors_by_index() -> None:
    # consumers linked out 2 first, then out 0: GE visits out anchor 0's consumers first (pushed first,
    # popped last), so ``b`` (out 2) is visited before ``a`` (out 0)
    g = Graph("g")
    for name, typ in [("src", "Data"), ("b", "Relu"), ("a", "Relu")]:
        g.add_node(Node(name, typ))
    g.connect("src", 2, "b", 0)
    g.connect("src", 0, "a", 0)
    assert [n.name for n in new.dfs_topo_order(g)] == ["src", "b", "a"] == _sort(oracle, g)


def _model_files() -> list[Path]:
    cases = sorted(Path(f"{SHARED}/conformance/cases").glob("*/model.pbtxt"))
    dumps = sorted(p for p in Path(f"{SHARED}/real-graphs").glob("*.txt"))
    return cases + dumps


@pytest.mark.skipif(not _model_files(), reason="shared conformance models not available")
def test_conformance_models_and_real_dumps_sort_like_the_oracle() -> None:
    checked = 0
    for path in _model_files():
        try:
            model = read_model(str(path))
        except Exception:  # noqa: BLE001  (a case may hold a deliberately malformed model)
            continue
        for g in model.graphs:
            assert _sort(new, g) == _sort(oracle, g), path
        assert new.node_order_rows(model) == oracle.node_order_rows(model), path
        before, after = _sort_both(model)
        assert after == before, path
        checked += 1
    assert checked > 100

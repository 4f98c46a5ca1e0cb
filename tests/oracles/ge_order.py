"""ORACLE (tests only): GE's node order as ``anchorlog/analysis/order.py`` computed it before Session 3b's
speed-up (commit fb762f7), kept verbatim so that ``tests/test_order.py`` can check the optimised functions give
exactly the same orders, ids and ``node_order`` rows. Keeps its own remembered orders (``_TOPO``), separate from
the package's. Not used by the pipeline.

Original module docstring: GE's node order: ``ComputeGraph::TopologicalSorting`` (default DFS mode) and
``GetAllNodes``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node

# OpTypeUtils::IsDataNode
DATA_TYPES = frozenset({"Data", "RefData", "AippData", "AnnData"})

# Source nodes GE keeps in original order at the bottom of the DFS stack (so they are popped first).
_INPUT_LIKE = DATA_TYPES | {"Input", "Recv", "Send"}
_NEXT_ITERATION = frozenset({"NextIteration", "RefNextIteration"})


def dfs_topo_order(g: Graph) -> list[Node]:
    """GE's DFS topological order of ``g``'s direct nodes (``DFSTopologicalSorting``, not reversed).

    Start stack: sources without any in-edge; data-like sources keep their order and are popped first,
    other sources follow in their order. A popped node's newly ready successors are pushed per out anchor
    (data consumers in link order), then its control successors; the last pushed is popped first.
    """
    g._ensure_index()
    consumers = g._consumers  # type: ignore[union-attr]
    ctrl_succ = g._ctrl_succ  # type: ignore[union-attr]
    nodes = g.nodes
    # edges from NextIteration do not count: they close a loop (GetInEdgeSize)
    nexts = {n.name for n in nodes.values() if n.type in _NEXT_ITERATION}
    outs_of: dict[str, list[int]] = {}
    for src, out in consumers:
        lst = outs_of.get(src)
        if lst is None:
            outs_of[src] = [out]
        else:
            lst.append(out)
    for lst in outs_of.values():
        if len(lst) > 1:
            lst.sort()
    pending: dict[str, int] = {}
    non_data: list[Node] = []
    data: list[Node] = []
    for n in nodes.values():
        ins = n.inputs
        if nexts:
            k = len(n.ctrl_inputs) + sum(1 for a in ins if a is not None and a[0] not in nexts)
        else:
            k = len(n.ctrl_inputs) + len(ins) - ins.count(None)
        pending[n.name] = k
        if k == 0:
            (data if n.type in _INPUT_LIKE else non_data).append(n)
    # GE inserts each non-data source at the front and each data source right after them: popping from the
    # back then yields the data sources in order, then the others in order.
    stack: list[Node] = non_data[::-1] + data[::-1]
    # The graph's declared input order wins among the sources it names (GE's swap loop leaves them in
    # descending declared position in the stack, so they pop in declared order).
    declared = {name.rsplit(":", 1)[0] if ":" in name else name: i for i, name in enumerate(g.input)}
    if declared:
        slots = [i for i, n in enumerate(stack) if n.name in declared]
        ranked = sorted((stack[i] for i in slots), key=lambda n: -declared[n.name])
        for i, n in zip(slots, ranked):
            stack[i] = n
    order: list[Node] = []
    push = stack.append
    while stack:
        n = stack.pop()
        order.append(n)
        name = n.name
        outs = outs_of.get(name)
        if outs is not None and name not in nexts:  # a NextIteration's consumers were never waiting on it
            for out in outs:
                # newly ready consumers of one out anchor are pushed in link order
                for dst, _ in consumers[(name, out)]:
                    left = pending[dst]
                    if left == 0:
                        continue
                    left -= 1
                    pending[dst] = left
                    if left == 0:
                        push(nodes[dst])
        succ = ctrl_succ.get(name)
        if succ:
            for dst in succ:
                left = pending[dst] - 1
                pending[dst] = left
                if left == 0:
                    push(nodes[dst])
    if len(order) != len(nodes):
        left = [n for n in nodes if n not in {o.name for o in order}]
        raise PassFailure(f"topological sorting failed: graph {g.name} has a cycle through {left[:5]}", g.name)
    return order


# GE keeps its node list in topological order; our IR keeps the stored (file) order, which is also the
# consumer link order, so the sorted order is remembered beside the model instead of reordering its nodes.
_TOPO: weakref.WeakKeyDictionary[Model, dict[str, list[Node]]] = weakref.WeakKeyDictionary()


def topological_sorting(model: Model) -> None:
    """``root.TopologicalSorting()``: GE's DFS order for every graph (remembered for :func:`graph_nodes`) and
    ``id`` renumbered over ``GetAllNodes(root)``."""
    _TOPO[model] = {g.name: dfs_topo_order(g) for g in model.graphs}
    for i, n in enumerate(all_nodes(model, model.root)):
        n.id = i


def topological_resort(model: Model, edited: Iterable[str]) -> None:
    """:func:`topological_sorting` after edits confined to the graphs named ``edited`` since the last sort of
    ``model``: a graph's DFS order depends on its own nodes and edges only, so only those graphs are sorted
    again (plus any graph whose node count changed); ids are renumbered over ``GetAllNodes(root)`` as a full
    sort does. A full sort when the model was never sorted or its list of graphs changed."""
    cached = _TOPO.get(model)
    if cached is None or len(cached) != len(model.graphs) or any(g.name not in cached for g in model.graphs):
        topological_sorting(model)
        return
    names = set(edited)
    order = dict(cached)
    for g in model.graphs:
        if g.name in names or len(order[g.name]) != len(g.nodes):
            order[g.name] = dfs_topo_order(g)
    _TOPO[model] = order
    for i, n in enumerate(all_nodes(model, model.root)):
        n.id = i


def graph_nodes(model: Model, g: Graph) -> list[Node]:
    """The direct nodes of ``g`` in GE's order: the last topological sort, then nodes added since (GE appends
    new nodes to the list); the stored order when the model was never sorted."""
    order = _TOPO.get(model, {}).get(g.name)
    if order is None:
        return list(g.nodes.values())
    kept = [n for n in order if g.nodes.get(n.name) is n]
    if len(kept) == len(g.nodes):
        return kept
    known = {id(n) for n in kept}
    return kept + [n for n in g.nodes.values() if id(n) not in known]


def all_nodes(model: Model, g: Graph) -> list[Node]:
    """``ComputeGraph::GetAllNodes``: pre-order; a node is followed by all nodes of its subgraphs (first
    subgraph first, recursively) before its next sibling."""
    return [n for _g, n in _walk_all(model, g, graph_nodes)]


def _walk_all(model: Model, top: Graph, nodes_of: Callable[[Model, Graph], list[Node]]) -> list[tuple[Graph, Node]]:
    """``GetAllNodes`` from ``top`` with each graph's direct nodes in the order ``nodes_of`` gives."""
    out: list[tuple[Graph, Node]] = []
    seen: set[str] = set()
    graphs = {x.name: x for x in model.graphs}

    def walk(graph: Graph) -> None:
        if graph.name in seen:
            return
        seen.add(graph.name)
        for n in nodes_of(model, graph):
            out.append((graph, n))
            for s in n.subgraph_names:
                if s in graphs:
                    walk(graphs[s])

    walk(top)
    return out


def ge_graph_nodes(model: Model, g: Graph) -> list[Node]:
    """The direct nodes of ``g`` in the order GE walks them: the remembered order of the last
    :func:`topological_sorting` (plus nodes added since), else GE's DFS order computed now (without remembering
    it or renumbering ids). A graph with a cycle, which GE cannot sort, keeps its stored order."""
    if _TOPO.get(model, {}).get(g.name) is not None:
        return graph_nodes(model, g)
    try:
        return dfs_topo_order(g)
    except PassFailure:
        return list(g.nodes.values())


def ge_all_nodes(model: Model, g: Graph | None = None) -> list[tuple[Graph, Node]]:
    """``GetAllNodes`` of ``g`` (root by default) as ``(graph, node)`` pairs, every graph in GE's order
    (:func:`ge_graph_nodes`): a node is followed by the nodes of its subgraphs, first subgraph first."""
    return _walk_all(model, model.root if g is None else g, ge_graph_nodes)


def node_order_rows(model: Model, g: Graph | None = None) -> list[tuple[str, str, int]]:
    """The relation ``node_order(graph, node, ord)``: each node's position in :func:`ge_all_nodes` of ``g``."""
    return [(gr.name, n.name, i) for i, (gr, n) in enumerate(ge_all_nodes(model, g))]

"""GE's node order: ``ComputeGraph::TopologicalSorting`` (default DFS mode) and ``GetAllNodes``.

Shared by every pass that depends on GE's order (reference §10): the symbol table (symbol names and the anchor
order inside a symbol, which decides ``node_a`` in the layout checkers), topological ids used as tie-breaks,
and which pair first triggers an as-symbol checker. :func:`node_order_rows` hands the order to the rules as
the relation ``node_order(graph, node, ord)``.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable, Iterable
from itertools import repeat

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
    # Waiting count of every node (its data and control in-edges) and the sources in stored order. Edges from
    # NextIteration do not count (GetInEdgeSize: they close a loop); such nodes are rare, so the counts are
    # first taken over all edges and taken again, excluding those edges, only when the graph has one.
    pending: dict[str, int] = {}
    sources: list[Node] = []
    nexts: set[str] = set()
    for name, n in nodes.items():
        ins = n.inputs
        k = len(n.ctrl_inputs) + len(ins) - ins.count(None)
        pending[name] = k
        if k == 0:
            sources.append(n)
        if n.type in _NEXT_ITERATION:
            nexts.add(name)
    if nexts:
        sources = []
        for name, n in nodes.items():
            k = len(n.ctrl_inputs) + sum(1 for a in n.inputs if a is not None and a[0] not in nexts)
            pending[name] = k
            if k == 0:
                sources.append(n)
    # Each producer's consumer lists straight from the consumer index, by ascending out anchor: the list
    # itself for a producer with one used out anchor (the common case: no container built per node), else a
    # tuple of lists. A NextIteration's consumers were never waiting on it, so it has no entry.
    users_of: dict[str, list[tuple[str, int]] | tuple[list[tuple[str, int]], ...]] = {}
    first_out: dict[str, int] = {}
    outs_of_multi: dict[str, list[int]] = {}
    for key, users in consumers.items():
        src = key[0]
        if src in first_out:
            outs = outs_of_multi.get(src)
            if outs is None:
                outs_of_multi[src] = [first_out[src], key[1]]
            else:
                outs.append(key[1])
        else:
            first_out[src] = key[1]
            users_of[src] = users
    for src, outs in outs_of_multi.items():
        # several used out anchors: walked by ascending out index, as GE walks its out anchors
        outs.sort()
        users_of[src] = tuple(consumers[(src, out)] for out in outs)
    for name in nexts:
        users_of.pop(name, None)
    # GE inserts each non-data source at the front and each data source right after them: popping from the
    # back then yields the data sources in order, then the others in order.
    stack: list[Node] = [n for n in reversed(sources) if n.type not in _INPUT_LIKE]
    stack += [n for n in reversed(sources) if n.type in _INPUT_LIKE]
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
    pop = stack.pop
    visit = order.append
    users_get = users_of.get
    succ_get = ctrl_succ.get
    while stack:
        n = pop()
        visit(n)
        name = n.name
        users = users_get(name)
        if users is not None:
            if type(users) is list:
                # newly ready consumers of one out anchor are pushed in link order
                for dst, _ in users:
                    left = pending[dst]
                    if left:
                        left -= 1
                        pending[dst] = left
                        if not left:
                            push(nodes[dst])
            else:
                for per_out in users:
                    for dst, _ in per_out:
                        left = pending[dst]
                        if left:
                            left -= 1
                            pending[dst] = left
                            if not left:
                                push(nodes[dst])
        succ = succ_get(name)
        if succ:
            for dst in succ:
                left = pending[dst] - 1
                pending[dst] = left
                if left == 0:
                    push(nodes[dst])
    if len(order) != len(nodes):
        done = {o.name for o in order}
        left_over = [n for n in nodes if n not in done]
        raise PassFailure(f"topological sorting failed: graph {g.name} has a cycle through {left_over[:5]}", g.name)
    return order


# GE keeps its node list in topological order; our IR keeps the stored (file) order, which is also the
# consumer link order, so the sorted order is remembered beside the model instead of reordering its nodes.
_TOPO: weakref.WeakKeyDictionary[Model, dict[str, list[Node]]] = weakref.WeakKeyDictionary()


def topological_sorting(model: Model) -> None:
    """``root.TopologicalSorting()``: GE's DFS order for every graph (remembered for :func:`graph_nodes`) and
    ``id`` renumbered over ``GetAllNodes(root)``."""
    order = {g.name: dfs_topo_order(g) for g in model.graphs}
    _TOPO[model] = order
    _renumber(model, order, set(order))


def forget_topological_order(model: Model) -> None:
    """Drop the order remembered by the last :func:`topological_sorting` of ``model`` (if any): after an edit
    that re-links a graph's consumers without a sort, the remembered order describes the old links, so
    :func:`ge_graph_nodes` sorts afresh and :func:`topological_resort` makes a full sort."""
    _TOPO.pop(model, None)


def remembered_topological_order(model: Model) -> dict[str, list[Node]] | None:
    """The per-graph orders remembered by the last :func:`topological_sorting` of ``model`` (None: none). Its
    identity changes with every sort, so callers caching results derived from GE's order can key on it."""
    return _TOPO.get(model)


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
    fresh: set[str] = set()
    for g in model.graphs:
        if g.name in names or len(order[g.name]) != len(g.nodes):
            order[g.name] = dfs_topo_order(g)
            fresh.add(g.name)
    _TOPO[model] = order
    _renumber(model, order, fresh)


def _renumber(model: Model, order: dict[str, list[Node]], fresh: set[str]) -> None:
    """``id`` = position in ``GetAllNodes(root)`` (:func:`all_nodes`). A graph sorted just now (named in
    ``fresh``) is walked in its new order as is: that order holds exactly the graph's current nodes, so the
    check :func:`graph_nodes` makes for nodes added or removed since a sort cannot change it."""

    def nodes_of(model: Model, g: Graph) -> list[Node]:
        return order[g.name] if g.name in fresh else graph_nodes(model, g)

    i = 0
    for _graph, run in _runs(model, model.root, nodes_of):
        for n in run:
            n.id = i
            i += 1


def graph_nodes(model: Model, g: Graph) -> list[Node]:
    """The direct nodes of ``g`` in GE's order: the last topological sort, then nodes added since (GE appends
    new nodes to the list); the stored order when the model was never sorted."""
    order = _TOPO.get(model, {}).get(g.name)
    if order is None:
        return list(g.nodes.values())
    stored = g.nodes.get
    kept = [n for n in order if stored(n.name) is n]
    if len(kept) == len(g.nodes):
        return kept
    known = {id(n) for n in kept}
    return kept + [n for n in g.nodes.values() if id(n) not in known]


def all_nodes(model: Model, g: Graph) -> list[Node]:
    """``ComputeGraph::GetAllNodes``: pre-order; a node is followed by all nodes of its subgraphs (first
    subgraph first, recursively) before its next sibling."""
    out: list[Node] = []
    for _graph, run in _runs(model, g, graph_nodes):
        out += run
    return out


def _runs(model: Model, top: Graph, nodes_of: Callable[[Model, Graph], list[Node]]) -> list[tuple[Graph, list[Node]]]:
    """``GetAllNodes`` from ``top`` as runs of consecutive nodes of one graph, each graph's direct nodes in the
    order ``nodes_of`` gives: a run ends at a node owning subgraphs, whose subgraphs' runs follow (first
    subgraph first, recursively; a graph is walked once). Runs instead of one ``(graph, node)`` pair per node:
    no container per node is built."""
    out: list[tuple[Graph, list[Node]]] = []
    seen: set[str] = set()
    graphs = {x.name: x for x in model.graphs}

    def walk(graph: Graph) -> None:
        if graph.name in seen:
            return
        seen.add(graph.name)
        nodes = nodes_of(model, graph)
        start = 0
        for i in [i for i, n in enumerate(nodes) if n.subgraph_names]:
            out.append((graph, nodes[start : i + 1]))
            start = i + 1
            for s in nodes[i].subgraph_names:
                if s in graphs:
                    walk(graphs[s])
        if start < len(nodes):
            out.append((graph, nodes[start:] if start else nodes))

    walk(top)
    return out


def _walk_all(model: Model, top: Graph, nodes_of: Callable[[Model, Graph], list[Node]]) -> list[tuple[Graph, Node]]:
    """``GetAllNodes`` from ``top`` with each graph's direct nodes in the order ``nodes_of`` gives."""
    return [(graph, n) for graph, run in _runs(model, top, nodes_of) for n in run]


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
    rows: list[tuple[str, str, int]] = []
    k = 0
    for graph, run in _runs(model, model.root if g is None else g, ge_graph_nodes):
        rows += zip(repeat(graph.name), [n.name for n in run], range(k, k + len(run)))
        k += len(run)
    return rows

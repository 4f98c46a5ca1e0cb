"""Consistency checks run on every model read from a file (:func:`anchorlog.facts.ge_io.read_model`).

Each problem raises :class:`~anchorlog.errors.InputError` with one line naming the place (file, graph,
node, input index). Checked, per graph:

* node names are unique within a graph, graph names within the model;
* every data/control input names a node of the same graph (no dangling reference);
* data input anchors: index ``-1`` is reserved for control inputs, any other negative index is an error,
  and an index at or beyond the producer's output count is an error when the producer declares its outputs
  (``output_desc``);
* every non-empty ``subgraph_name`` of a node names a graph of the model;
* no cycle. GE's ``ComputeGraph::TopologicalSorting`` counts data *and* control in-edges and fails the
  compile on a closed loop; only data edges leaving ``NextIteration``/``RefNextIteration`` (the back edge
  of a v1 while loop) are not counted. We follow that: a cycle over data+control edges, minus those back
  edges, is rejected and its nodes are named.
"""

from __future__ import annotations

from anchorlog.errors import InputError
from anchorlog.facts.graph import Graph, Model

# Producers whose outgoing data edges GE's topological sort does not count (loop back edges).
LOOP_BACK_TYPES = frozenset({"NextIteration", "RefNextIteration"})


def _q(name: str) -> str:
    return repr(name)


def validate(model: Model) -> None:
    """Raise :class:`InputError` for the first inconsistency found (see the module docstring)."""
    place = model.source
    dup_graphs = model.other.pop("#duplicate_graphs", None)
    if dup_graphs:
        raise InputError(f"duplicate graph name {_q(dup_graphs[0])}", place)
    if not model.graphs:
        raise InputError("model has no graph", place)
    graph_names = {g.name for g in model.graphs}
    for g in model.graphs:
        _validate_graph(g, graph_names, place)


def _validate_graph(g: Graph, graph_names: set[str], place: str | None) -> None:
    dups = g.other.pop("#duplicate_nodes", None)
    if dups:
        raise InputError(f"graph {_q(g.name)}: duplicate node name {_q(dups[0])}", place)
    nodes = g.nodes
    # GE writes ops in topological order: when every counted edge comes from an earlier op, no cycle is
    # possible and the full check (find_cycle) is skipped.
    earlier: set[str] = set()
    forward = True
    for name, n in nodes.items():
        for i, a in enumerate(n.inputs):
            if a is None:
                continue
            src, idx = a
            prod = nodes.get(src)
            if prod is None:
                raise InputError(
                    f"graph {_q(g.name)}: node {_q(n.name)} input {i} refers to missing node {_q(src)}", place
                )
            if idx < 0:
                raise InputError(
                    f"graph {_q(g.name)}: node {_q(n.name)} input {i} has negative output index {idx} "
                    f"(producer {_q(src)}; -1 is only for control inputs)",
                    place,
                )
            n_out = len(prod.output_desc)
            if n_out and idx >= n_out:
                raise InputError(
                    f"graph {_q(g.name)}: node {_q(n.name)} input {i} reads output {idx} of {_q(src)}, "
                    f"which has {n_out} output(s)",
                    place,
                )
            if forward and src not in earlier and prod.type not in LOOP_BACK_TYPES:
                forward = False
        for c in n.ctrl_inputs:
            if c not in nodes:
                raise InputError(
                    f"graph {_q(g.name)}: node {_q(n.name)} control input refers to missing node {_q(c)}", place
                )
            if forward and c not in earlier:
                forward = False
        for s in n.subgraph_names:
            if s and s not in graph_names:
                raise InputError(f"graph {_q(g.name)}: node {_q(n.name)} names unknown subgraph {_q(s)}", place)
        earlier.add(name)
    cycle = [] if forward else find_cycle(g)
    if cycle:
        shown = " -> ".join(cycle[:12]) + (" -> ..." if len(cycle) > 12 else f" -> {cycle[0]}")
        raise InputError(f"graph {_q(g.name)}: cycle over data/control edges: {shown}", place)


def _predecessors(g: Graph) -> dict[str, list[str]]:
    nodes = g.nodes
    preds: dict[str, list[str]] = {}
    for n in nodes.values():
        ps = [a[0] for a in n.inputs if a is not None and nodes[a[0]].type not in LOOP_BACK_TYPES]
        ps.extend(n.ctrl_inputs)
        preds[n.name] = ps
    return preds


def find_cycle(g: Graph) -> list[str]:
    """Nodes of one cycle over data+control edges (GE's topological-sort view), in edge order; [] if none."""
    preds = _predecessors(g)
    indeg = {name: len(ps) for name, ps in preds.items()}
    succ: dict[str, list[str]] = {name: [] for name in preds}
    for name, ps in preds.items():
        for p in ps:
            succ[p].append(name)
    ready = [name for name, d in indeg.items() if d == 0]
    done = 0
    while ready:
        name = ready.pop()
        done += 1
        for s in succ[name]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    if done == len(preds):
        return []
    # Every remaining node has a remaining predecessor: walk predecessors until a node repeats.
    remaining = {name for name, d in indeg.items() if d > 0}
    start = next(name for name in g.nodes if name in remaining)
    seen: dict[str, int] = {}
    path: list[str] = []
    cur = start
    while cur not in seen:
        seen[cur] = len(path)
        path.append(cur)
        cur = next(p for p in preds[cur] if p in remaining)
    loop = path[seen[cur] :]
    loop.reverse()  # predecessor walk -> edge direction
    # Start at the node that comes first in the graph, so the message is stable.
    order = {name: i for i, name in enumerate(g.nodes)}
    first = min(range(len(loop)), key=lambda i: order[loop[i]])
    return loop[first:] + loop[:first]

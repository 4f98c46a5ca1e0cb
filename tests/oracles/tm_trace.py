"""Oracle: GE's ``TraceRealSourceNode`` replayed in plain Python over the IR (reference §5.2).

The pass takes its traceback from the rules (``queries/tm_trace.dl``); this replay is kept only to test the
rules against (tests/test_tensor_move.py)."""

from __future__ import annotations

from anchorlog.analysis.tensor_move import PathStep
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import OP_CLASSES, ModelIndex, ref_from_input

MULTI_BRANCH = frozenset(OP_CLASSES["multi_branch_control_flow"])


class ModelView:
    """Look-ups the pass needs, computed once per model: subgraph owners, subgraph NetOutputs, root."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.index = ModelIndex(model)
        self.root = model.graphs[0].name if model.graphs else ""
        self.graphs = {g.name: g for g in model.graphs}

    def parent(self, graph_name: str) -> tuple[Graph, Node] | None:
        own = self.index.owner.get(graph_name)
        return None if own is None else (own[0], own[1])

    def netoutput(self, graph_name: str) -> Node | None:
        g = self.graphs.get(graph_name)
        if g is None:
            return None
        return next((n for n in g.nodes.values() if n.type == "NetOutput"), None)

    def ref_in(self, graph: Graph, node: Node, out: int) -> int | None:
        return ref_from_input(self.index, graph, node, out)

    def is_wrapper(self, node: Node) -> bool:
        return bool(node.subgraph_names)


def trace_source(view: ModelView, graph: Graph, tm: Node) -> list[PathStep]:
    """GE ``TraceRealSourceNode(tm, 0)``; raises :class:`PassFailure` where GE's trace fails the pass."""
    path: list[PathStep] = []
    cur_g, cur_node, cur_in = graph, tm, 0
    guard = 0
    while True:
        guard += 1
        if guard > 100000:
            raise PassFailure(f"source trace of {tm.name} does not terminate", f"{graph.name}/{tm.name}")
        if cur_in >= cur_node.num_inputs:
            # the input anchor does not exist: GE's loop ends with a failure
            raise PassFailure(
                f"source trace of {tm.name} reached {cur_node.name} input {cur_in}, which does not exist",
                f"{cur_g.name}/{cur_node.name}",
            )
        src = cur_node.inputs[cur_in] if cur_in < len(cur_node.inputs) else None
        if src is None:
            return path
        node = cur_g.nodes[src[0]]
        out = src[1]
        path.append(PathStep(cur_g.name, node.name, out))
        if node.type in MULTI_BRANCH:
            return path
        if node.type == "Data" and cur_g.name != view.root:
            par = view.parent(cur_g.name)
            pidx = node.attr("_parent_node_index")
            if (
                par is None
                or not isinstance(pidx, int)
                or isinstance(pidx, bool)
                or pidx >= par[1].num_inputs
                or pidx < 0
            ):
                raise PassFailure(
                    f"subgraph Data {node.name} has no parent input to jump out to", f"{cur_g.name}/{node.name}"
                )
            pg, pnode = par
            path.append(PathStep(pg.name, pnode.name, None))
            cur_g, cur_node, cur_in = pg, pnode, pidx
            continue
        if node.type == "PartitionedCall":
            sub_name = node.subgraph_names[0] if node.subgraph_names else ""
            if sub_name not in view.graphs:
                raise PassFailure(f"PartitionedCall {node.name} has no subgraph 0", f"{cur_g.name}/{node.name}")
            net = view.netoutput(sub_name)
            if net is None:
                raise PassFailure(f"subgraph {sub_name} of {node.name} has no NetOutput", sub_name)
            sub = view.graphs[sub_name]
            hit = None
            for k in range(net.num_inputs):
                desc = net.input_desc[k] if k < len(net.input_desc) else None
                pidx = desc.attr("_parent_node_index") if desc is not None else None
                if not isinstance(pidx, int) or isinstance(pidx, bool):
                    raise PassFailure(
                        f"NetOutput {net.name} input {k} has no _parent_node_index", f"{sub_name}/{net.name}"
                    )
                if pidx == out:
                    hit = k
                    break
            if hit is None:
                raise PassFailure(
                    f"no NetOutput input of {sub_name} maps output {out} of {node.name}", f"{sub_name}/{net.name}"
                )
            peer = net.inputs[hit] if hit < len(net.inputs) else None
            path.append(PathStep(sub_name, net.name, None if peer is None else peer[1]))
            cur_g, cur_node, cur_in = sub, net, hit
            continue
        k = view.ref_in(cur_g, node, out)
        if k is not None:
            cur_node, cur_in = node, k
            continue
        return path

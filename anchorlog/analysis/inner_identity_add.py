"""``inner-identity-add``: GE's InnerIdentityAddPass (graph pass, level O0; reference §5 / seed §4.6).

For every ref op (op attr ``reference`` true after ``UpdateRefAttr`` marks name-matched inputs/outputs) and
every output that reuses an input, the pass isolates the producer of that input behind an ``Identity``
(``inner_identity_<n>``, attrs ``_inner_identity``/``_cannot_be_deleted``/``no_need_constant_folding`` = true):

* skipped when the producer is a ``TensorMove`` whose output has exactly one consumer -- the copy already
  isolates the ref op (seed 000 §4.6, the TensorMove/InnerIdentity collaboration);
* skipped when, following ref outputs upward (and out of subgraphs through their Data), the real input is a
  var-like node (Variable/VariableV2/RefData) or a RefSwitch/RefMerge/ReadVariableOp;
* otherwise the Identity feeds the ref input, and every other consumer of the producer that the ref op reaches
  (data or control path) is moved behind the same Identity, so they read the value before the write.

Runs on the root graph and then on every subgraph (PassManager), each with its own reachability.
"""

from __future__ import annotations

from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import OP_CLASSES, _ModelIndex, io_names, ref_from_input
from anchorlog.runtime.rewrite import insert_identity_after, out_indices, reaches

INNER_IDENTITY_ATTR = "_inner_identity"
_VAR_LIKE = frozenset(OP_CLASSES["var_like"])
_DATA = frozenset(OP_CLASSES["data"])
_CHANGED_BY_REF = frozenset({"RefSwitch", "RefMerge", "ReadVariableOp"})


def update_ref_attr(model: Model) -> list[str]:
    """GE ``PassUtils::UpdateRefAttr``: set op attr ``reference`` = true where an input name equals an output
    name (and the input descriptor exists). Returns the nodes marked."""
    marked = []
    for g in model.graphs:
        for n in g.nodes.values():
            outs = io_names(n, "out")
            if any(name in outs and i < max(len(n.input_desc), len(n.inputs)) for name, i in io_names(n, "in").items()):
                n.set_attr("reference", True)
                marked.append(n.name)
    return marked


def _parent_input(index: _ModelIndex, graph: Graph, data: Node) -> tuple[Graph, Node] | None:
    """``NodeUtils::GetParentInput``: the parent's producer for a subgraph Data, recursing through nested Data."""
    g, d = graph, data
    for _ in range(1000):
        own = index.owner.get(g.name)
        pidx = d.attr("_parent_node_index")
        if own is None or not isinstance(pidx, int) or isinstance(pidx, bool):
            return None
        pg, parent, _ = own
        if pidx >= len(parent.inputs) or parent.inputs[pidx] is None:
            return None
        p = pg.nodes[parent.inputs[pidx][0]]
        if p.type == "Data" and index.owner.get(pg.name) is not None and "_parent_node_index" in p.attrs:
            g, d = pg, p
            continue
        return pg, p
    return None


def no_need_identity(index: _ModelIndex, graph: Graph, anchor: tuple[str, int]) -> bool:
    """GE ``IsNoNeedInsertIdentity``: the ref input's real producer is var-like or changed by a ref node."""
    stack = [(graph, anchor)]
    input_node = graph.nodes[anchor[0]]
    guard = 0
    while stack:
        guard += 1
        if guard > 100000:
            break
        g, (name, out) = stack.pop()
        node = g.nodes[name]
        if node.type in _DATA:
            parent = _parent_input(index, g, node)
            if parent is not None:
                g, node = parent
                out = 0
        k = ref_from_input(index, g, node, out)
        if k is None:
            input_node = node
            continue
        if k >= node.num_inputs:
            raise PassFailure(
                f"{node.name} output {out} reuses input {k}, which does not exist", f"{g.name}/{node.name}"
            )
        src = node.inputs[k] if k < len(node.inputs) else None
        if src is not None:
            stack.append((g, src))
    return input_node.type in _VAR_LIKE or input_node.type in _CHANGED_BY_REF


def run_inner_identity_add(model: Model) -> dict:
    """Apply the pass to every graph of ``model``; returns the report section."""
    update_ref_attr(model)
    index = _ModelIndex(model)
    inserted: list[dict] = []
    skipped: list[dict] = []
    counter = 0
    for graph in list(model.graphs):
        for node in list(graph.nodes.values()):
            if node.attr("reference") is not True:
                continue
            for o in out_indices(graph, node.name):
                k = ref_from_input(index, graph, node, o)
                if k is None:
                    continue
                if k >= node.num_inputs:
                    raise PassFailure(
                        f"{node.name} output {o} reuses input {k}, which does not exist", f"{graph.name}/{node.name}"
                    )
                src = node.inputs[k] if k < len(node.inputs) else None
                if src is None:
                    raise PassFailure(f"ref input {k} of {node.name} is not connected", f"{graph.name}/{node.name}")
                producer = graph.nodes[src[0]]
                consumers = graph.consumers(src[0], src[1])
                if producer.type == "TensorMove" and len(consumers) == 1:
                    skipped.append(
                        {
                            "ref_node": node.name,
                            "input": k,
                            "producer": src[0],
                            "why": "single-output TensorMove already isolates the ref input",
                        }
                    )
                    continue
                if no_need_identity(index, graph, src):
                    skipped.append(
                        {
                            "ref_node": node.name,
                            "input": k,
                            "producer": src[0],
                            "why": "the real input is var-like or changed by a ref node",
                        }
                    )
                    continue
                targets = [
                    (d, i)
                    for d, i in consumers
                    if not (d == node.name and i == k) and d != node.name and reaches(graph, node.name, d)
                ]
                name = graph.unique_name(f"inner_identity_{counter}")
                counter += 1
                ident = insert_identity_after(
                    graph,
                    src,
                    [(node.name, k)],
                    name=name,
                    attrs={INNER_IDENTITY_ATTR: True, "_cannot_be_deleted": True, "no_need_constant_folding": True},
                )
                for d, i in targets:
                    graph.connect(ident, 0, d, i)
                inserted.append(
                    {
                        "identity": ident,
                        "graph": graph.name,
                        "ref_node": node.name,
                        "input": k,
                        "producer": f"{src[0]}:{src[1]}",
                        "moved_consumers": [f"{d}:{i}" for d, i in targets],
                    }
                )
    return {"inserted": inserted, "skipped": skipped}


@register("inner-identity-add")
def run(model: Model, ctx: PassContext) -> dict:
    """Isolate ref-op inputs behind an inner Identity (GE InnerIdentityAddPass)."""
    return run_inner_identity_add(model)

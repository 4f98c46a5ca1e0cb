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


# --------------------------------------------------------------------------------------------------------------
# inner-identity-delete (GE InnerIdentityDeletePass, O0, OptimizeStage2 after-merge)
# --------------------------------------------------------------------------------------------------------------
OPT_TOPO_SORTING_MODE = "ge.topoSortingMode"
TENSOR_MEMORY_SCOPE = "_tensor_memory_scope"
_STABLE_RDFS = 3
_CONST_LIKE = frozenset(OP_CLASSES["const_like"])


def _is_inner_identity(node: Node) -> bool:
    return node.type == "Identity" and node.attr(INNER_IDENTITY_ATTR) is True


def _has_memory_scope(node: Node) -> bool:
    return any(TENSOR_MEMORY_SCOPE in td.attrs for td in node.output_desc)


def _input_from_data(graph: Graph, node: Node) -> bool:
    return any(a is not None and graph.nodes[a[0]].type in _DATA for a in node.inputs)


def _cannot_delete(graph: Graph, ident: Node) -> bool:
    """GE ``IsCannotDelete``: the nano-form memory-scope guard."""
    if _has_memory_scope(ident):
        return not _input_from_data(graph, ident)
    outs = [graph.nodes[d] for d, _ in graph.consumers(ident.name, 0)]
    if not any(_has_memory_scope(o) for o in outs):
        return False
    return _input_from_data(graph, ident)


def _stable_rdfs(options: dict[str, str]) -> bool:
    text = options.get(OPT_TOPO_SORTING_MODE, "")
    if not text:
        return False
    import re

    m = re.match(r"\s*([+-]?\d+)", text)  # strtol: leading number, 0 when none
    return (int(m.group(1)) if m else 0) == _STABLE_RDFS


def _out_data_nodes(graph: Graph, name: str) -> list[str]:
    return [d for o in out_indices(graph, name) for d, _ in graph.consumers(name, o)]


def _ref_consumer(graph: Graph, ident: str) -> str | None:
    """GE ``FindRefNode``: the first data consumer carrying op attr ``reference`` = true."""
    for d in _out_data_nodes(graph, ident):
        if graph.nodes[d].attr("reference") is True:
            return d
    return None


def _real_out(graph: Graph, name: str) -> str | None:
    """GE ``FindRealOutNode``: an inner Identity stands for the ref node behind it."""
    return _ref_consumer(graph, name) if _is_inner_identity(graph.nodes[name]) else name


def _connected(graph: Graph, a: str | None, b: str | None) -> bool:
    return a is not None and b is not None and reaches(graph, a, b)


def _delete_decision(graph: Graph, ident: Node, options: dict[str, str]) -> tuple[bool, str]:
    """GE ``DeleteInnerIdentity``: (delete?, why)."""
    srcs = [a for a in ident.inputs if a is not None]
    if len(srcs) != 1:
        raise PassFailure(
            f"inner identity {ident.name} has {len(srcs)} data inputs, expected 1", f"{graph.name}/{ident.name}"
        )
    src = srcs[0]
    producer = graph.nodes[src[0]]
    if producer.type in _CONST_LIKE:
        return False, f"its input {producer.name} is a {producer.type} (not writable)"
    if _stable_rdfs(options):
        return True, f"{OPT_TOPO_SORTING_MODE} is stable RDFS"
    outs = _out_data_nodes(graph, ident.name)
    if not any(graph.nodes[o].attr("reference") is True for o in outs):
        return True, "no consumer is a ref op"
    ref = _ref_consumer(graph, ident.name)
    others = [o for o in outs if o != ref]
    if len(graph.consumers(src[0], src[1])) == 1:
        if len(outs) == 1:
            return True, "its input and itself each have a single consumer"
        if all(_connected(graph, ref, _real_out(graph, o)) for o in others):
            return True, f"every other consumer runs after the ref op {ref}"
        return False, f"a consumer does not depend on the ref op {ref}"
    siblings = [
        d for o in out_indices(graph, producer.name) for d, _ in graph.consumers(producer.name, o) if d != ident.name
    ]
    before_ref = all(_connected(graph, _real_out(graph, s), ref) for s in siblings)
    if len(outs) == 1:
        if before_ref:
            return True, f"every other reader of {producer.name} runs before the ref op {ref}"
        return False, f"another reader of {producer.name} is not ordered before the ref op {ref}"
    if before_ref and all(_connected(graph, ref, _real_out(graph, o)) for o in others):
        return True, f"readers of {producer.name} run before, its other consumers after the ref op {ref}"
    return False, f"readers around the ref op {ref} are not ordered"


def run_inner_identity_delete(model: Model, options: dict[str, str]) -> dict:
    """Apply GE's InnerIdentityDeletePass to every graph (root first); returns the report section."""
    from anchorlog.runtime.rewrite import isolate_and_delete

    update_ref_attr(model)
    deleted: list[dict] = []
    kept: list[dict] = []
    for graph in list(model.graphs):
        for node in list(graph.nodes.values()):
            if node.name not in graph.nodes or not _is_inner_identity(node):
                continue
            if _cannot_delete(graph, node):
                kept.append({"identity": node.name, "graph": graph.name, "why": f"{TENSOR_MEMORY_SCOPE} guard"})
                continue
            ok, why = _delete_decision(graph, node, options)
            if ok:
                isolate_and_delete(graph, node.name, {0: 0})
                deleted.append({"identity": node.name, "graph": graph.name, "why": why})
            else:
                kept.append({"identity": node.name, "graph": graph.name, "why": why})
    return {"deleted": deleted, "kept": kept}


@register("inner-identity-delete", options=(OPT_TOPO_SORTING_MODE,))
def run_delete(model: Model, ctx: PassContext) -> dict:
    """Remove inner Identities whose isolation is not needed (GE InnerIdentityDeletePass)."""
    return run_inner_identity_delete(model, ctx.options)

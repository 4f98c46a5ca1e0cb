"""Control-node subgraph conflicts (reference §4.7, ``CtrlNodeConflict``), run before the symbol walk.

* If / Case branches: a branch output that is a same-level ``Data``, a constant, a var-like node or an op
  referring to a RefData (``ref_var_src_var_name``), or one buffer returned on several branch outputs, gets
  an Identity before the branch ``NetOutput`` (one multi-input Identity per branch).
* While body: a body ``Data`` passed straight to ``NetOutput`` at another index gets an Identity after it;
  the body outputs get one in front of ``NetOutput`` unless the body is a single pass-through or a single
  inner node (``IsWhileNeedInsertIdentityAtOutput``).
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import compress
from operator import attrgetter
from typing import Any

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex
from anchorlog.runtime.rewrite import insert_node_before_anchors

from ._ge import (
    LAYOUT_CONST_TYPES,
    PARENT_NODE_INDEX,
    REF_VAR_SRC_VAR_NAME,
    VAR_LIKE_TYPES,
    attr_int,
    in_desc,
    n_in,
    n_out,
    subgraph,
)
from .attributes import is_continuous_input, is_nopadding_continuous_input
from .checkers import consumers, producer
from .order import all_nodes, graph_nodes
from .refmap import AnchorRef, get_ref_mapping
from .solve import IdentityNamer, create_identity, is_skip_insert_in, update_netoutput_offsets

_TYPE = attrgetter("type")
IF_TYPES = frozenset({"If", "StatelessIf"})  # `_If` is not handled by GE here
CASE_TYPES = frozenset({"Case", "StatelessCase"})
WHILE_TYPES = frozenset({"While", "StatelessWhile"})
_CTRL_TYPES = IF_TYPES | CASE_TYPES | WHILE_TYPES


def _ctrl_nodes(model: Model, g: Graph) -> list[Node]:
    """The If/Case/While nodes of ``GetAllNodes(g)``, in that order (a snapshot): the only nodes the control-node
    step acts on, picked out in C instead of testing every node's type in the loop."""
    nodes = all_nodes(model, g)
    return list(compress(nodes, map(_CTRL_TYPES.__contains__, map(_TYPE, nodes))))


@dataclass
class Conflict:
    anchor: AnchorRef
    reason: str


def netoutput_of(g: Graph) -> Node:
    """``GetOrUpdateNetOutputNode``: the graph's NetOutput (required)."""
    for n in g.nodes.values():
        if n.type == "NetOutput":
            return n
    raise PassFailure(f"subgraph {g.name} has no NetOutput", g.name)


def check_one_subgraph(model: Model, sg: Graph, index: ModelIndex, ctx: Any = None) -> list[Conflict]:
    """``CheckOneSubGraphConflict``: branch outputs that must not alias what they alias. ``ctx``: the pass
    context whose shared fact database the branch's symbol table is computed on (default: a private one)."""
    net = netoutput_of(sg)
    table = get_ref_mapping(model, sg, index, ctx=ctx)
    seen: set[str] = set()
    found: list[Conflict] = []
    for k in range(n_in(net)):
        a = AnchorRef(net, "in", k)
        s = table.a2s.get(a.name, "")
        reason = None
        for o in table.s2a.get(s, []):
            if o.is_in:
                continue
            t = o.node.type
            if t == "Data" and o.node.graph is net.graph:
                reason = f"branch output is the branch input {o.node.name} (Data straight to NetOutput)"
            elif t in LAYOUT_CONST_TYPES or t in VAR_LIKE_TYPES:
                reason = f"branch output is the {t} {o.node.name} (immutable / var-like)"
            elif REF_VAR_SRC_VAR_NAME in o.node.attrs:
                reason = f"branch output refers to a RefData via {o.node.name} ({REF_VAR_SRC_VAR_NAME})"
            if reason:
                break
        if reason:
            found.append(Conflict(a, reason))
            continue
        if s in seen:
            found.append(Conflict(a, f"one buffer (symbol {s}) feeds several branch outputs"))
        else:
            seen.add(s)
    return found


def while_body_data_to_netoutput(model: Model, body: Graph) -> tuple[list[Node], set[int]]:
    """``GetWhileBodyDataToNetoutputNodes``: body Data passed straight to NetOutput; index changed / kept."""
    changed: list[Node] = []
    bypass: set[int] = set()
    for n in graph_nodes(model, body):
        if n.type != "Data":
            continue
        p = attr_int(n, PARENT_NODE_INDEX)
        if p is None or n_out(n) < 1:
            continue
        cons = consumers(AnchorRef(n, "out", 0))
        if len(cons) != 1 or cons[0].node.type != "NetOutput":
            continue
        d = in_desc(cons[0].node, cons[0].idx)
        q = attr_int(d, PARENT_NODE_INDEX) if d is not None else None
        if q is None:
            continue
        if p != q:
            changed.append(n)
        else:
            bypass.add(cons[0].idx)
    return changed, bypass


def while_needs_output_identity(model: Model, body: Graph, index: ModelIndex, ctx: Any = None) -> tuple[bool, str]:
    """``IsWhileNeedInsertIdentityAtOutput`` with the reason."""
    net = netoutput_of(body)
    if n_in(net) != 1:
        return True, f"body NetOutput has {n_in(net)} inputs"
    data = next((n for n in graph_nodes(model, body) if n.type == "Data"), None)
    if data is None:
        raise PassFailure(f"while body {body.name} has no Data", body.name)
    if n_out(data) != 1:
        return True, f"body Data {data.name} has {n_out(data)} outputs"
    peer = producer(net, 0)
    if peer is None:
        raise PassFailure(f"while body {body.name} NetOutput input 0 is not connected", net.name)
    table = get_ref_mapping(model, body, index, ctx=ctx)
    if len(table.s2a) == 2:
        return True, "body has exactly one inner node (2 symbols)"
    s = table.a2s.get(peer.name)
    for a in table.s2a.get(s, []) if s is not None else []:
        if a.is_in and (is_nopadding_continuous_input(a.node) or is_continuous_input(a.node)):
            return True, f"body result shares memory with continuous input {a.name}"
    return False, ""


def _first_consumers(changed: list[Node]) -> list[Conflict]:
    return [
        Conflict(
            consumers(AnchorRef(d, "out", 0))[0], f"while body Data {d.name} changes index on the way to NetOutput"
        )
        for d in changed
    ]


def check_while(model: Model, w: Node, index: ModelIndex, ctx: Any = None) -> tuple[list[Conflict], list[Node]]:
    """``CheckWhileConflict``: (output-Identity anchors, body Data nodes needing an input Identity)."""
    body = subgraph(model, w, 1)
    if body is None:
        raise PassFailure(f"While {w.name} has no body subgraph (index 1)", w.name)
    changed, bypass = while_body_data_to_netoutput(model, body)
    net = netoutput_of(body)
    need, why = while_needs_output_identity(model, body, index, ctx)
    outs: list[Conflict] = []
    if need:
        for k in range(n_in(net)):
            a = AnchorRef(net, "in", k)
            if k in bypass or is_skip_insert_in(a):
                continue
            outs.append(Conflict(a, f"while body output: {why}"))
    return outs, changed


def _solve_nodes(
    graph: Graph, found: list[Conflict], namer: IdentityNamer, step: str, records: list[dict[str, Any]]
) -> None:
    """``SolveNodesConflict``: one multi-input Identity, input/output ``i`` in front of conflict anchor ``i``."""
    if not found:
        return
    anchors = [c.anchor for c in found]
    ident = create_identity(graph, anchors, namer)
    insert_node_before_anchors(graph, ident, [(a.node.name, a.idx) for a in anchors])
    update_netoutput_offsets(anchors, ident)
    records.append(
        {
            "identity": ident.name,
            "graph": graph.name,
            "step": step,
            "before": [a.name for a in anchors],
            "rule": [c.reason for c in found],
        }
    )


def solve_ctrl_node_subgraph_conflict(
    model: Model, static_graph: Graph, namer: IdentityNamer, ctx: Any = None, index: ModelIndex | None = None
) -> list[dict[str, Any]]:
    """``SolveCtrlNodeSubGraphConflict`` over ``GetAllNodes(static_graph)`` (a snapshot). ``ctx``: the pass
    context (its shared fact database serves every branch's symbol table, kept in step with the Identities
    inserted here); ``index``: the model's parent look-ups, when the caller has them (built otherwise)."""
    records: list[dict[str, Any]] = []
    index = index if index is not None else ModelIndex(model)
    for node in _ctrl_nodes(model, static_graph):
        if node.type in IF_TYPES or node.type in CASE_TYPES:
            count = 2 if node.type in IF_TYPES else len(node.subgraph_names)
            for i in range(count):
                sg = subgraph(model, node, i)
                if sg is None:
                    raise PassFailure(f"{node.type} {node.name} has no subgraph {i}", node.name)
                _solve_nodes(
                    sg, check_one_subgraph(model, sg, index, ctx), namer, f"{node.type} {node.name} branch {i}", records
                )
        elif node.type in WHILE_TYPES:
            outs, changed = check_while(model, node, index, ctx)
            body = subgraph(model, node, 1)
            assert body is not None
            _solve_nodes(body, outs, namer, f"While {node.name} body outputs", records)
            # The input Identity goes in front of each changed Data's *current* first consumer (after the
            # output Identity, if any: Data -> in-Identity -> out-Identity -> NetOutput).
            _solve_nodes(body, _first_consumers(changed), namer, f"While {node.name} body inputs", records)
    return records


def ctrl_node_subgraph_has_conflict(model: Model, g: Graph, ctx: Any = None) -> bool:
    """``IsCtrlNodeSubgraphExistMemConflictSymbol``: any If/Case/While of ``g`` would get an Identity."""
    index = ModelIndex(model)
    for node in _ctrl_nodes(model, g):
        if node.type in IF_TYPES or node.type in CASE_TYPES:
            count = 2 if node.type in IF_TYPES else len(node.subgraph_names)
            for i in range(count):
                sg = subgraph(model, node, i)
                if sg is not None and check_one_subgraph(model, sg, index, ctx):
                    return True
        elif node.type in WHILE_TYPES:
            outs, ins = check_while(model, node, index, ctx)
            if outs or ins:
                return True
    return False


def ctrl_node_conflicts(model: Model, g: Graph, ctx: Any = None) -> list[Conflict]:
    """Every anchor the control-node step would give an Identity (If/Case branch outputs, While body outputs
    and the first consumer of each index-changing body Data), with the reason; nothing is inserted."""
    index = ModelIndex(model)
    found: list[Conflict] = []
    for node in _ctrl_nodes(model, g):
        if node.type in IF_TYPES or node.type in CASE_TYPES:
            count = 2 if node.type in IF_TYPES else len(node.subgraph_names)
            for i in range(count):
                sg = subgraph(model, node, i)
                if sg is not None:
                    found.extend(check_one_subgraph(model, sg, index, ctx))
        elif node.type in WHILE_TYPES:
            outs, changed = check_while(model, node, index, ctx)
            found.extend(outs)
            found.extend(_first_consumers(changed))
    return found

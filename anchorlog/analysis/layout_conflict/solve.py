"""Solving (reference §4.5, §3.6): an Identity before a conflicting in-anchor, or after a conflicting
out-anchor for all its current consumers, built and attributed exactly as GE's ``CreateIdentityOpDesc``.

Every graph edit goes through the shared rewriter (``anchorlog.runtime.rewrite``: GE's ``InsertNodeBefore`` /
``InsertNodeAfter`` with their control-edge moves; the control-node step's multi-input Identity through
``insert_node_before_anchors``). This module only builds and attributes the Identity.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Node, TensorDesc
from anchorlog.runtime.rewrite import insert_identity_after, insert_identity_before

from ._ge import (
    CANNOT_BE_DELETED,
    MEMCPY_TYPES,
    NO_NEED_CONSTANT_FOLDING,
    REF_VAR_SRC_VAR_NAME,
    attr_bool,
    attr_str,
    in_desc,
    out_desc,
    shape_unknown,
)
from .checkers import consumers, producer
from .refmap import AnchorRef


@dataclass
class IdentityNamer:
    """GE names inserted Identities ``identity_<k>_<dst>_MemLayoutConflict_<N>`` with a global counter N."""

    counter: int = 0
    names: list[str] = field(default_factory=list)

    def name(self, graph: Graph, in_idx: int, dst: str) -> str:
        base = f"identity_{in_idx}_{dst}_MemLayoutConflict_{self.counter}"
        self.counter += 1
        return graph.unique_name(base)


def is_skip_insert_in(a: AnchorRef) -> bool:
    """``IsSkipInsert(in)``: unknown shape, or already fed by a single-consumer Identity/memcpy."""
    if shape_unknown(in_desc(a.node, a.idx)):
        return True
    p = producer(a.node, a.idx)
    return p is not None and p.node.type in MEMCPY_TYPES and len(consumers(p)) == 1


def is_skip_insert_out(a: AnchorRef) -> bool:
    """``IsSkipInsert(out)``: unknown shape, or its only consumer is already an Identity/memcpy."""
    if shape_unknown(out_desc(a.node, a.idx)):
        return True
    cons = consumers(a)
    return len(cons) == 1 and cons[0].node.type in MEMCPY_TYPES


def _identity_desc(src: AnchorRef) -> TensorDesc:
    d = out_desc(src.node, src.idx)
    td = d.copy() if d is not None else TensorDesc()
    td.reuse_input = False
    td.reuse_input_index = 0
    td.del_attr(REF_VAR_SRC_VAR_NAME)
    return td


def _decorate(ident: Node, in_anchors: list[AnchorRef], producers: list[AnchorRef | None]) -> None:
    """What ``CreateIdentityOpDesc`` adds besides the descriptors: input/output names, GE's ``CopyAttr``
    from each (producer, consumer) pair, and the not-deletable marks."""
    single = len(in_anchors) == 1
    in_names = ["x" if single else f"x{i}" for i in range(len(in_anchors))]
    out_names = ["y" if single else f"y{i}" for i in range(len(in_anchors))]
    ident.set_attr("_input_name_key", in_names)
    ident.set_attr("_input_name_value", list(range(len(in_names))))
    ident.set_attr("_output_name_key", out_names)
    ident.set_attr("_output_name_value", list(range(len(out_names))))
    for a, src in zip(in_anchors, producers):
        if src is not None:
            _copy_attr(src.node, a.node, ident)
    ident.set_attr(NO_NEED_CONSTANT_FOLDING, False)
    ident.set_attr(CANNOT_BE_DELETED, True)


def create_identity(graph: Graph, in_anchors: list[AnchorRef], namer: IdentityNamer) -> Node:
    """``CreateIdentityOpDesc``: one input/output per conflicting in-anchor (``x``/``y`` or ``x<i>``/``y<i>``),
    descriptors copied from the producers, GE's attributes copied, marked not deletable."""
    first = in_anchors[0]
    node = Node(namer.name(graph, first.idx, first.node.name), "Identity")
    producers = [producer(a.node, a.idx) for a in in_anchors]
    for src in producers:
        td = _identity_desc(src) if src is not None else TensorDesc()
        node.input_desc.append(td.copy())
        node.output_desc.append(td.copy())
    _decorate(node, in_anchors, producers)
    return node


def _copy_attr(src: Node, dst: Node, ident: Node) -> None:
    """GE's ``CopyAttr``: stream label / rts label from the consumer, batch label from the producer, and the
    connected-to-data / connected-to-netoutput flags move onto the Identity."""
    label = attr_str(dst, "_stream_label")
    if label is not None:
        ident.set_attr("_stream_label", label)
    if "_rts_label_node" in dst.attrs and dst.attrs["_rts_label_node"].kind == "b":
        ident.set_attr("_rts_label_node", bool(dst.attrs["_rts_label_node"].value))
    batch = attr_str(src, "_batch_label")
    if batch:
        ident.set_attr("_batch_label", batch)
    if attr_bool(dst, "_is_connected_to_data"):
        dst.set_attr("_is_connected_to_data", False)
        ident.set_attr("_is_connected_to_data", True)
    if attr_bool(src, "_is_connected_to_netoutput"):
        src.set_attr("_is_connected_to_netoutput", False)
        ident.set_attr("_is_connected_to_netoutput", True)


def update_netoutput_offsets(in_anchors: list[AnchorRef], ident: Node) -> None:
    """``UpdateIsInputConstForNetoutput``: a NetOutput input's data offset moves onto the Identity input."""
    for a in in_anchors:
        if a.node.type != "NetOutput":
            continue
        d = in_desc(a.node, a.idx)
        if d is None or "data_offset" not in d.other:
            continue
        p = producer(a.node, a.idx)
        k = p.idx if p is not None else 0
        if k < len(ident.input_desc):
            ident.input_desc[k].other["data_offset"] = d.other["data_offset"]
        d.other["data_offset"] = 0


def solve_in_anchor(a: AnchorRef, namer: IdentityNamer) -> Node:
    """``SolveInAnchorConflict``: one Identity before ``a`` (shared rewriter primitive)."""
    g = a.node.graph
    assert g is not None
    src = producer(a.node, a.idx)
    if src is None:
        raise PassFailure(f"cannot insert an Identity before unconnected input {a.name}", a.node.name)
    name = insert_identity_before(
        g, (a.node.name, a.idx), name=namer.name(g, a.idx, a.node.name), desc=_identity_desc(src)
    )
    ident = g.nodes[name]
    _decorate(ident, [a], [src])
    update_netoutput_offsets([a], ident)
    return ident


def solve_out_anchor(a: AnchorRef, namer: IdentityNamer) -> Node | None:
    """``SolveOutAnchorConflict``: one Identity after ``a`` for all its current consumers, named after the
    first consumer."""
    dsts = consumers(a)
    if not dsts:
        return None
    g = a.node.graph
    assert g is not None
    name = insert_identity_after(
        g,
        (a.node.name, a.idx),
        [(d.node.name, d.idx) for d in dsts],
        name=namer.name(g, dsts[0].idx, dsts[0].node.name),
        desc=_identity_desc(a),
    )
    ident = g.nodes[name]
    _decorate(ident, [dsts[0]], [a])
    update_netoutput_offsets(dsts, ident)
    return ident


def insertion_record(ident: Node, where: str, anchor: AnchorRef, extra: dict[str, Any]) -> dict[str, Any]:
    return {"identity": ident.name, "graph": ident.graph.name if ident.graph else "", where: anchor.name, **extra}

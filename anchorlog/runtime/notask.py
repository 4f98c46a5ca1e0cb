"""Applying a no-task decision: the attributes GE's ``NotaskPassBase::SetNotaskAttr`` writes.

GE marks rather than rewrites: the Concat stays in the graph (dumps and later passes need it) but becomes a
virtual op whose output is its inputs' memory laid end to end. Exact strings from GE (reference §6.6,
appendix A)."""

from __future__ import annotations

from anchorlog.facts.graph import Graph, Node

ATTR_NOTASK = "_no_task"
ATTR_NOPADDING_CONTINUOUS_INPUT = "_no_padding_continuous_input"
ATTR_OUTPUT_REUSE_INPUT = "_output_reuse_input"
ATTR_REUSE_INPUT_ON_DIM_INDEX = "_reuse_input_on_dim_index"
# The lock a no-task concat puts on each producer output it takes over (a second concat may not take it).
CONCAT_LOCK_ATTR = "can_reused_for_concat_optimize"

NOTASK_NODE_ATTRS: tuple[tuple[str, object], ...] = (
    (ATTR_NOTASK, True),
    (ATTR_NOPADDING_CONTINUOUS_INPUT, True),
    (ATTR_OUTPUT_REUSE_INPUT, True),
    (ATTR_REUSE_INPUT_ON_DIM_INDEX, 0),
)


def mark_notask(graph: Graph, node: Node, lock_attr: str = CONCAT_LOCK_ATTR) -> list[tuple[str, int]]:
    """Mark ``node`` no-task (bool attrs true, dim index 0) and lock every connected producer output with
    ``lock_attr`` = false. Returns the producer anchors locked, in input order."""
    for key, value in NOTASK_NODE_ATTRS:
        node.set_attr(key, value, kind="b" if isinstance(value, bool) else "i")
    locked: list[tuple[str, int]] = []
    for src in node.inputs:
        if src is None or src[0] not in graph.nodes:
            continue
        producer = graph.nodes[src[0]]
        if src[1] < len(producer.output_desc):
            producer.output_desc[src[1]].set_attr(lock_attr, False, kind="b")
            producer.touch()  # a descriptor edited in place: its facts are re-derived for the next pass
            locked.append(src)
    return locked

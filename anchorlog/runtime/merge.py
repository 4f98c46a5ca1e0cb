"""Merging one node into an equal one (what GE's CSE does with ReplaceNodeAnchors + RemoveNodeWithoutRelink)."""

from __future__ import annotations

from anchorlog.facts.graph import Graph


def merge_node_into(graph: Graph, keep: str, drop: str) -> list[tuple[str, int, str, int]]:
    """Make every reader of ``drop``'s outputs read the same output of ``keep``, move ``drop``'s control
    successors to ``keep``, then remove ``drop`` with all its edges. Returns the re-pointed data edges as
    (keep, out, consumer, in). Both nodes must have the same number of outputs (the caller checks)."""
    moved: list[tuple[str, int, str, int]] = []
    dropped = graph.nodes[drop]
    for out in range(dropped.num_outputs):
        for dst, di in graph.consumers(drop, out):
            graph.connect(keep, out, dst, di)
            moved.append((keep, out, dst, di))
    for succ in graph.ctrl_successors(drop):
        if succ != keep:
            graph.add_ctrl(keep, succ)
    graph.remove_node(drop)
    return moved

"""``engine-partition``: what GE's engine partition and merge leave behind in a graph's edge order.

A whole compile (``GraphManager::OptimizeSubgraph``, between OptimizeStage1 and OptimizeStage2) cuts every graph
into per-engine partitions and merges them back (``EnginePartitioner::Partition`` /
``MergeAfterSubGraphOptimization``, ``compiler/graph/partition/engine_partitioner.cc``). The cut does not move
the original edges over: it topologically sorts the graph, then visits its nodes in that order and re-creates
each node's incoming edges (data inputs by index, then control inputs) in the partition copies
(``SplitSubGraphs`` / ``SplitNodeInputs``); an edge between two partitions becomes an End/PlaceHolder pair that
the merge replaces by the original edge again, in the order the pairs were made
(``RemoveNodeAndEdgeBetweenEndPld``). Either way every out-anchor afterwards lists its consumers in the
topological order of that sort, whatever order the user linked them in.

That order is what every later order-sensitive decision sees: the next sort (a DFS pops the last-linked consumer
first, so siblings swap places and topological ids with them), the layout checkers' "first/second continuous
consumer", the RW pass's consumer walk. Our IR keeps a graph's consumer lists in the order of its stored node
list, so the pass stores each graph's nodes in GE's topological order (:func:`dfs_topo_order`) and drops the
consumer index. Engines are not modelled (the dump does not say which engine takes an op): all nodes are taken
as one partition, which orders an anchor's consumers exactly as GE does when they all sit in one partition or
all in others; when some consumers share the producer's partition and some do not, GE links the former first.

Subgraphs are cut too, except those marked ``_no_need_partition`` / ``_no_need_partition_and_merge``. A graph
GE cannot sort (a cycle) is left as it is: the sort reports it where a pass needs the order.
"""

from __future__ import annotations

from anchorlog.analysis import order as order_mod
from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model

# Graph attrs that make GE's Partition skip a subgraph.
NO_PARTITION_ATTRS = ("_no_need_partition", "_no_need_partition_and_merge")


def relink_in_topological_order(g: Graph) -> bool:
    """Store ``g``'s nodes in GE's topological order so that every consumer list follows it; True when the
    order changed. A graph with a cycle keeps its order (False)."""
    try:
        topo = order_mod.dfs_topo_order(g)
    except PassFailure:
        return False
    names = [n.name for n in topo]
    if names == list(g.nodes):
        return False
    nodes = g.nodes
    reordered = {name: nodes[name] for name in names}
    nodes.clear()
    nodes.update(reordered)
    g.invalidate()
    return True


def partitioned_graphs(model: Model) -> list[Graph]:
    """The graphs GE's partition cuts: the root and every subgraph not marked as exempt."""
    out = [model.root]
    for g in model.graphs[1:]:
        if any(g.attr(key, False) for key in NO_PARTITION_ATTRS):
            continue
        out.append(g)
    return out


@register("engine-partition")
def run(model: Model, ctx: PassContext) -> dict:
    """GE's engine partition and merge: every graph's edges re-created in topological order of their consumers."""
    relinked = [g.name for g in partitioned_graphs(model) if relink_in_topological_order(g)]
    if relinked:
        # A remembered sort of the old link order no longer describes the graph. Every node of a relinked graph
        # counts as edited, so the shared fact database re-derives itself whole (fact_cache.shared_facts
        # rebuilds in place when most nodes are touched) rather than node by node.
        order_mod.forget_topological_order(model)
    return {"relinked": relinked}

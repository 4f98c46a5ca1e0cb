"""GE's node order, shared with every pass: see :mod:`anchorlog.analysis.order`."""

from anchorlog.analysis.order import (  # noqa: F401  (re-exported for the layout pass and its tests)
    all_nodes,
    dfs_topo_order,
    ge_all_nodes,
    ge_graph_nodes,
    graph_nodes,
    node_order_rows,
    topological_resort,
    topological_sorting,
)

"""Frozen oracle: GraphLint's demand set of named ops as ``anchorlog.analysis.graph_lint.lint_named_demand`` computed
it at 358f18b (session 6 base: one UNION query, the producer looked up before the consumer count). The session-6
version must return the same set (tests/test_s6_lint_demand.py). Do not edit."""

from __future__ import annotations

import sqlite3

from anchorlog.facts.graph import Model
from anchorlog.facts.relations import INPUT_NAME_KEY, OUTPUT_NAME_KEY


def lint_named_demand_s6base(model: Model, conn: sqlite3.Connection) -> set[tuple[str, str]]:
    """The named ops (an input or output name map among their attrs) whose input types the check can need: a
    demand set, as magic sets would compute, over-approximated cheaply — consumers of an output with two or
    more consumer edges, and consumers of a Data in a subgraph (their types become the wrapper's). Every other
    op has GE's default names, whose types the rules know without rows. The named ops are read from the fact
    database ``conn`` (``node_attr`` by its key index: no walk over every node)."""
    named: dict[str, list[str]] = {}
    for g, n in conn.execute(
        'SELECT "graph", "node" FROM "node_attr" WHERE "key" = ? UNION SELECT "graph", "node" FROM "node_attr" '
        'WHERE "key" = ?',
        (INPUT_NAME_KEY, OUTPUT_NAME_KEY),
    ):
        named.setdefault(g, []).append(n)
    keep: set[tuple[str, str]] = set()
    if not named:
        return keep
    root = model.graphs[0]
    for g in model.graphs:
        names = named.get(g.name)
        if not names:
            continue
        in_subgraph = g is not root
        nodes = g.nodes
        for name in names:
            n = nodes.get(name)
            for a in n.inputs if n is not None else ():
                if a is None:
                    continue
                src = nodes.get(a[0])
                if (in_subgraph and src is not None and src.type == "Data") or len(g.consumers(a[0], a[1])) >= 2:
                    keep.add((g.name, name))
                    break
    return keep

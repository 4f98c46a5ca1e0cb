"""GraphLint — GE ``GraphLint::Verify`` (``compiler/graph/preprocess/checker/graph_lint.cc``, reference §7).

Diagnostic only: for every output with two or more consumer edges, each writer must be ordered (a path of
data/control edges, either way) with every other writer and every reader; otherwise GE warns ``W18888``.
``queries/graph_lint.dl`` derives the input types, the pairs to check and which of them are ordered (with the
demand-driven reachability of ``queries/reach.dl``); this module walks them in GE's order.

GE stops at its first finding (graph by graph: root first, then subgraphs; node by node; output by output),
so the report's ``lint`` list holds that one ``W18888``; the pass section lists every unordered pair under
``unordered`` (``reported_by_ge`` false for the ones GE never gets to). Nothing in the graph changes.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchorlog.analysis.registry import PassContext, register
from anchorlog.analysis.rw_conflict import io_name_rows
from anchorlog.analysis.symbols import out_anchor_count, topo_nodes
from anchorlog.facts.graph import Model

GRAPH_LINT_DL = Path(__file__).resolve().parent.parent / "queries" / "graph_lint.dl"

MSG_WRITE = (
    "There is no control relation between write node[{a}] and other write node[{b}]. Please check graph make it "
    "valid, sometimes it may cause problem (precision problem)."
)
MSG_READ = (
    "There is no control relation between write node[{a}] and read node[{b}]. Please check graph make it valid, "
    "sometimes it may cause problem (precision problem)."
)


def topo_positions(model: Model) -> list[tuple[str, str, int]]:
    """Relation ``reach_pos(graph, node, pos)``: each node's position in a topological order of its graph."""
    rows: list[tuple[str, str, int]] = []
    for g in model.graphs:
        rows.extend((g.name, n.name, i) for i, n in enumerate(topo_nodes(g)))
    return rows


def lint_io_name_rows(model: Model) -> list[tuple[str, str, str, int, str]]:
    """Input/output names as GraphLint sees them: the op's name maps; an op without any gets GE's default
    names (``__input<i>`` / ``__output<i>``, what ``OpDesc::AddInputDesc`` assigns to unnamed tensors)."""
    rows = io_name_rows(model)
    named = {(g, n, io) for g, n, io, _i, _x in rows}
    for g in model.graphs:
        for n in g.nodes.values():
            if (g.name, n.name, "in") not in named:
                rows.extend((g.name, n.name, "in", i, f"__input{i}") for i in range(n.num_inputs))
            if (g.name, n.name, "out") not in named:
                rows.extend((g.name, n.name, "out", i, f"__output{i}") for i in range(n.num_outputs))
    return rows


def verify(model: Model, *, engine: str = "sqlite", db: Any = None) -> dict[str, Any]:
    """Run GraphLint on ``model``; returns ``{"first": entry|None, "unordered": [...], "aborted": str|None}``."""
    from anchorlog.facts.relations import FactDB
    from anchorlog.queries import Program

    if db is None:
        db = FactDB.from_model(model)
    prog = Program.from_file(GRAPH_LINT_DL)
    res = prog.run(db, engine=engine, extra={"io_name": lint_io_name_rows(model), "reach_pos": topo_positions(model)})
    in_types = {(g, n, i): t for g, n, i, t in res.rows("lint_in")}
    ordered = {(g, a, b) for g, a, b in res.rows("lint_ordered")}
    unordered: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    aborted: str | None = None
    for g in model.graphs:  # root first, then the subgraphs in registration order
        for node in topo_nodes(g):
            for o in range(out_anchor_count(g, node)):
                cons = g.consumers(node.name, o)
                if len(cons) < 2:
                    continue
                writers: list[str] = []
                readers: list[str] = []
                for c, k in cons:
                    t = in_types.get((g.name, c, k))
                    if t is None:
                        if aborted is None and first is None:
                            aborted = f"{c} input {k} has no read/write type (GE's Verify fails without W18888)"
                        continue
                    if t == "W" and c not in writers:
                        writers.append(c)
                    elif t == "R" and c not in readers:
                        readers.append(c)
                for w in writers:
                    others = [(x, "write") for x in writers if x != w] + [(x, "read") for x in readers if x != w]
                    for x, kind in others:
                        if (g.name, w, x) in ordered:
                            continue
                        entry = {
                            "code": "W18888",
                            "nodes": [w, x],
                            "graph": g.name,
                            "kind": f"write-{kind}",
                            "anchor": f"{node.name}:{o}",
                            "message": (MSG_WRITE if kind == "write" else MSG_READ).format(a=w, b=x),
                        }
                        reported = first is None and aborted is None
                        unordered.append({**entry, "reported_by_ge": reported})
                        if reported:
                            first = entry
    return {"first": first, "unordered": unordered, "aborted": aborted}


@register("graph-lint")
def run(model: Model, ctx: PassContext) -> dict:
    """GraphLint: W18888 when a writer of a shared output is unordered with another writer or a reader."""
    result = verify(model, engine=ctx.engine)
    if result["first"] is not None:
        ctx.report.setdefault("lint", []).append(result["first"])
    section: dict[str, Any] = {
        "warnings": 1 if result["first"] is not None else 0,
        "unordered": result["unordered"],
    }
    if result["aborted"]:
        section["aborted"] = result["aborted"]
    return section

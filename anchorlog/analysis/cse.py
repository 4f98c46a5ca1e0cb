"""Pass ``common-subexpression-elimination``: GE's CommonSubexpressionEliminationPass (an O3 pass of
OptimizeStage1).

``queries/cse.dl`` derives the candidates (consumers of a shared producer output that have a same-type sibling
there, of an op type GE can fold) and the candidate pairs whose CSE keys are equal. This module walks the
candidates in GE's queue order — producers in graph order, their outputs, sibling types by name, siblings by
position — keeps the first node of each key and merges every later equal node into it. GE then looks again at
the consumers of the kept node (a merge can make their keys equal); here the facts are refreshed and the rules
run again until a round merges nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext, register
from anchorlog.facts.graph import Model
from anchorlog.runtime.merge import merge_node_into

CSE_DL = Path(__file__).resolve().parent.parent / "queries" / "cse.dl"
OPT_OO_LEVEL = "ge.oo.level"

# Op types GE has a host constant-folding kernel for (its host_kernels registrations). GE restricts CSE to these
# because they are known to be stateless; any other op type is never merged.
FOLDING_KERNEL_TYPES: frozenset[str] = frozenset(
    {
        "Add", "BroadcastArgs", "BroadcastGradientArgs", "Cast", "ConcatOffset", "ConcatV2", "DynamicStitch",
        "Empty", "ExpandDims", "Fill", "FlattenV2", "FloorDiv", "FloorMod", "GatherV2", "Greater", "Identity",
        "Maximum", "Mul", "Pack", "Permute", "Range", "Rank", "ReduceProd", "ReFormat", "Reshape", "Rsqrt",
        "Shape", "ShapeN", "Size", "Slice", "SliceD", "Squeeze", "SSDPriorBox", "StridedSlice", "Sub",
        "TransData", "Transpose", "Unpack", "Unsqueeze",
    }
)  # fmt: skip


def _queue_order(model: Model, candidates: list[tuple]) -> list[tuple[str, str]]:
    """(graph, node) candidates in the order GE's CSE queue holds them (first enqueue wins)."""
    pos = {g.name: {n: i for i, n in enumerate(g.nodes)} for g in model.graphs}
    keyed = sorted(candidates, key=lambda r: (r[0], pos[r[0]].get(r[1], -1), r[2], r[4], pos[r[0]].get(r[3], -1)))
    seen: set[tuple[str, str]] = set()
    order: list[tuple[str, str]] = []
    for g, _s, _o, n, _t in keyed:
        if (g, n) not in seen:
            seen.add((g, n))
            order.append((g, n))
    return order


@register("common-subexpression-elimination", options=())
def run(model: Model, ctx: PassContext) -> dict[str, Any]:
    """Common subexpression elimination (GE CommonSubexpressionEliminationPass): merge equal stateless nodes."""
    from anchorlog.queries import Program

    level = ctx.options.get(OPT_OO_LEVEL)
    if level is not None and level.upper() != "O3":
        return {
            "changed": False,
            "skipped": f"CommonSubexpressionEliminationPass is an O3 pass; {OPT_OO_LEVEL}={level}",
        }
    prog = Program.cached(CSE_DL)
    foldable = [(t,) for t in sorted(FOLDING_KERNEL_TYPES)]
    merged: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    rounds = 0
    while True:
        rounds += 1
        res = prog.run(shared_facts(model, ctx), engine=ctx.engine, extra={"cse_foldable": foldable})
        same: dict[tuple[str, str], set[str]] = {}
        for g, a, b in res.rows("cse_same"):
            same.setdefault((g, a), set()).add(b)
        if not same:
            break
        kept: dict[str, list[str]] = {}  # graph -> nodes registered as the first of their key, in order
        dropped: set[tuple[str, str]] = set()
        progress = False
        for g, n in _queue_order(model, res.rows("cse_candidate")):
            if (g, n) in dropped:
                continue
            peers = same.get((g, n), set())
            first = next((k for k in kept.get(g, []) if k in peers), None)
            if first is None:
                kept.setdefault(g, []).append(n)
                continue
            graph = model.graph(g)
            if graph.nodes[first].num_outputs != graph.nodes[n].num_outputs:
                skipped.append({"graph": g, "node": n, "same_key_as": first, "reason": "different output count"})
                continue
            edges = merge_node_into(graph, first, n)
            dropped.add((g, n))
            merged.append(
                {"graph": g, "removed": n, "kept": first, "rewired": [f"{a}:{o} -> {d}:{i}" for a, o, d, i in edges]}
            )
            progress = True
        if not progress:
            break
    return {"changed": bool(merged), "merged": merged, "skipped_merges": skipped, "rounds": rounds}

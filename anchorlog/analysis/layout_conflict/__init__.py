"""Pass ``layout-conflict``: GE's memory layout conflict optimizer (``MemLayoutConflictOptimizer::Run``,
reference §4). Anchors that share one memory symbol but carry incompatible attributes (user I/O, immutable
addresses, continuous memory, special memory types, address-unrefreshable operators) get an Identity on the
side GE chooses.

Pipeline per top static graph: control-node subgraph step (If/Case branches, While bodies), then the symbol
table, the 14 attributes, the pair checks of every symbol in lexicographic symbol order, and the solving.
The report lists each inserted Identity with the anchor pair, their attributes and the table row or checker
that fired.
"""

from __future__ import annotations

import copy
import os
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import InputError
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex
from anchorlog.gcpause import paused_gc
from anchorlog.runtime.rewrite import deferred_placement

from ._ge import (
    ENV_STATIC_MEMORY,
    OPT_BUILD_GRAPH_MODE,
    OPT_FEATURE_BASE_REFRESHABLE,
    OPT_STATIC_MEMORY_POLICY,
    is_static_graph,
)
from .api import forget_layout_attributes, graph_has_mem_conflict_symbol
from .attributes import AnchorAttribute, GraphInfo, LayoutOptions, Marks, graph_info
from .checkers import dead_checkers, find_conflict_nodes, producer
from .ctrl_node import ctrl_node_conflicts, ctrl_node_subgraph_has_conflict, solve_ctrl_node_subgraph_conflict
from .order import all_nodes, topological_resort, topological_sorting
from .refmap import AnchorRef, SymbolTable, anchor_name, get_ref_mapping
from .rules import LayoutFacts, layout_facts, run_layout_rules
from .solve import IdentityNamer, is_skip_insert_in, is_skip_insert_out, solve_in_anchor, solve_out_anchor

__all__ = [
    "run",
    "explain_anchor",
    "graph_has_mem_conflict_symbol",
    "forget_layout_attributes",
    "is_graph_exist_mem_conflict_symbol",
    "construct_single_node_symbol_table",
    "ctrl_node_subgraph_has_conflict",
    "top_static_graphs",
]


def _check_flag(value: str) -> bool:
    """``ge.featureBaseRefreshable``: GE accepts "0" or "1"."""
    if value not in ("0", "1"):
        raise ValueError(f"expected 0 or 1, got {value!r}")
    return value == "1"


def _check_build_mode(value: str) -> str:
    """``ge.buildGraphMode``: only "offline" changes this pass; GE's other mode is "online"."""
    if value not in ("offline", "online"):
        raise ValueError(f"expected offline or online, got {value!r}")
    return value


def _check_static_memory_policy(value: str) -> int:
    """``ge.exec.staticMemoryPolicy``: GE's policies 0..4."""
    if value not in ("0", "1", "2", "3", "4"):
        raise ValueError(f"expected one of 0, 1, 2, 3, 4, got {value!r}")
    return int(value)


OPTION_VALIDATORS = {
    OPT_FEATURE_BASE_REFRESHABLE: _check_flag,
    OPT_BUILD_GRAPH_MODE: _check_build_mode,
    OPT_STATIC_MEMORY_POLICY: _check_static_memory_policy,
}
OPTIONS = tuple(OPTION_VALIDATORS)


def top_static_graphs(model: Model) -> list[Graph]:
    """The root when static, else every static subgraph whose parent node sits in a non-static graph."""
    root = model.root
    if is_static_graph(root):
        return [root]
    out = []
    for g in model.graphs[1:]:
        parent = g.parent_node
        if is_static_graph(g) and parent is not None and parent.graph is not None and not is_static_graph(parent.graph):
            out.append(g)
    return out


def marks_from_rules(model: Model, table: SymbolTable, facts: LayoutFacts) -> Marks:
    """The checkers' state built from the rule results (no Python marking): attributes of the anchors of
    candidate symbols, and the ref map (out-anchor -> the var node of its symbol it refers to)."""
    marks = Marks()
    for (gname, node, io, idx), names in facts.attrs.items():
        marks.types[AnchorRef(model.graph(gname).nodes[node], io, idx)] = [AnchorAttribute[x] for x in names]
    for (gname, node, _io, idx), var in facts.ref_var.items():
        a = AnchorRef(model.graph(gname).nodes[node], "out", idx)
        sym = table.a2s.get(a.name)
        target = anchor_name(var, "out", 0)
        for x in table.s2a.get(sym, []) if sym is not None else []:
            if x.name == target:
                marks.ref_map[a] = x.node
                break
    return marks


def marks_from_facts(model: Model, table: SymbolTable, facts: LayoutFacts) -> Marks:
    """:func:`marks_from_rules` for :func:`rules.layout_facts` results, which list only the anchors with an
    attribute other than NORMAL: every other anchor of the table is NORMAL_INPUT / NORMAL_OUTPUT."""
    marks = marks_from_rules(model, table, facts)
    for anchors in table.s2a.values():
        for x in anchors:
            if x not in marks.types:
                marks.types[x] = [AnchorAttribute.NORMAL_INPUT if x.is_in else AnchorAttribute.NORMAL_OUTPUT]
    return marks


def environment_influence(options: Mapping[str, str], env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """What the environment changed: GE reads ``GE_USE_STATIC_MEMORY`` besides ``ge.exec.staticMemoryPolicy``
    (``VarManager::IsGeUseExtendSizeMemoryFull``). Empty when the variable is unset or changes nothing."""
    env = os.environ if env is None else env
    value = env.get(ENV_STATIC_MEMORY)
    if value is None:
        return {}
    with_env = LayoutOptions.parse(dict(options), env={ENV_STATIC_MEMORY: value}).physical_memory_refreshable
    without = LayoutOptions.parse(dict(options), env={}).physical_memory_refreshable
    return {
        ENV_STATIC_MEMORY: value,
        "is_physical_memory_refreshable": with_env,
        "changed_graph_info": with_env != without,
    }


def _process(
    model: Model,
    g: Graph,
    opts: LayoutOptions,
    namer: IdentityNamer,
    records: list[dict[str, Any]],
    ctx: PassContext,
    index: ModelIndex,
) -> dict[str, Any]:
    """``MemLayoutConflictOptimizer::Process`` for one top static graph (``index``: the model's parent look-ups)."""
    info = graph_info(g, opts)
    db = shared_facts(model, ctx)
    engine = ctx.engine if ctx.engine in ("sqlite", "duckdb") else "sqlite"
    # The facts every decision rests on come from layout.dl (with symbols.dl) on the shared fact database: the
    # symbol classes, the attributes of the anchors of candidate symbols, the candidate anchor pairs, GE's ref
    # map; GE's symbol names and anchor order are assembled for the walked symbols only.
    # (the pairs only a checker that cannot mark on this graph acts on are not walked: dead_checkers)
    facts, table, n_symbols = run_layout_rules(db, model, g, opts, engine, dead_checkers(info))
    marks = marks_from_rules(model, table, facts)
    # the Identities go to their places in the op lists once, after the walk (see deferred_placement)
    with deferred_placement(model.graphs):
        _walk(model, g, facts, table, marks, info, index, namer, records)
    # "symbols_walked": the symbols holding a candidate pair (GE's walk can only act there), walked or not
    return {"graph": g.name, "graph_info": info.as_dict(), "symbols": n_symbols, "symbols_walked": facts.pair_symbols}


def _walk(
    model: Model,
    g: Graph,
    facts: LayoutFacts,
    table: SymbolTable,
    marks: Marks,
    info: GraphInfo,
    index: ModelIndex,
    namer: IdentityNamer,
    records: list[dict[str, Any]],
) -> None:
    """GE's ordered walk over the symbols with a candidate pair, and the solving (``records`` gets a row per
    Identity inserted or insertion skipped)."""
    for symbol in sorted(facts.conflict_symbols):
        anchors = table.s2a[symbol]
        found = find_conflict_nodes(anchors, marks, info, index, facts.pairs[symbol])
        for anchor in sorted(found, key=lambda a: a.name):
            why = found[anchor]
            rec: dict[str, Any] = {
                "symbol": symbol,
                "anchor": anchor.name,
                "anchor_attrs": [str(t) for t in marks.of(anchor)],
                **why.as_dict(),
            }
            if anchor.is_in:
                if is_skip_insert_in(anchor):
                    records.append({**rec, "skipped": "unknown shape or already fed by an Identity/memcpy"})
                    continue
                ident = solve_in_anchor(anchor, namer)
                rec.update(
                    {"identity": ident.name, "graph": ident.graph.name if ident.graph else "", "before": anchor.name}
                )
            else:
                if is_skip_insert_out(anchor):
                    records.append({**rec, "skipped": "unknown shape or single consumer already an Identity/memcpy"})
                    continue
                ident = solve_out_anchor(anchor, namer)
                if ident is None:
                    continue
                rec.update(
                    {"identity": ident.name, "graph": ident.graph.name if ident.graph else "", "after": anchor.name}
                )
            records.append(rec)


@register("layout-conflict", options=OPTION_VALIDATORS)
def run(model: Model, ctx: PassContext) -> dict[str, Any]:
    """Memory layout conflicts (GE MemLayoutConflictOptimizer): Identity where anchor attributes clash.

    The cyclic garbage collector is paused meanwhile (as the other passes do): a large model is millions of
    long-lived objects that every full collection would rescan while the pass allocates short-lived rows."""
    with paused_gc():
        return _run(model, ctx)


def _run(model: Model, ctx: PassContext) -> dict[str, Any]:
    opts = LayoutOptions.parse(ctx.options)
    tops = top_static_graphs(model)
    if not tops:
        return {
            "changed": False,
            "skipped": "no static graph (root unknown-shape, no static subgraph)",
            "identities": [],
        }
    namer = IdentityNamer()
    topological_sorting(model)
    # one index of subgraph owners for the whole pass: the Identities it inserts own no subgraph
    index = ModelIndex(model)
    records: list[dict[str, Any]] = []
    for g in tops:
        records.extend(solve_ctrl_node_subgraph_conflict(model, g, namer, ctx, index))
    # GE sorts the whole root again after the control-node step and after MemConflictProc (new nodes get ids);
    # the only edits since the last sort are this pass's insertions, so only the graphs they landed in are
    # sorted again (the others' order cannot have changed) and ids are renumbered over the whole model
    if records:  # without insertions the order and ids are unchanged
        topological_resort(model, {r["graph"] for r in records if "identity" in r})
    graphs = [_process(model, g, opts, namer, records, ctx, index) for g in tops]
    if any("identity" in r for r in records):
        topological_resort(model, {r["graph"] for r in records if "identity" in r})
    inserted = [r for r in records if "identity" in r]
    env_used = environment_influence(ctx.options)
    return {
        "changed": bool(inserted),
        "options": {k: v for k, v in ctx.options.items() if k in OPTIONS},
        **({"environment": env_used} if env_used else {}),
        "graphs": graphs,
        "identities": inserted,
        "skipped_insertions": [r for r in records if "skipped" in r],
    }


# ---------------------------------------------------------------------------------------------------------
# API for other passes (TensorMove rule 5, inplace): conflict check on a hypothetical symbol table
# ---------------------------------------------------------------------------------------------------------
AnchorLike = AnchorRef | tuple[str, str, int] | str


def _to_anchor(model: Model, a: AnchorLike, by_name: dict[str, Node]) -> AnchorRef:
    if isinstance(a, AnchorRef):
        return a
    if isinstance(a, tuple):
        node_name, io, idx = a
    else:
        node_name, io, idx_s = a.rsplit("_", 2)
        idx = int(idx_s)
    node = by_name.get(node_name)
    if node is None:
        raise InputError(f"anchor {a!r}: no node {node_name!r}")
    return AnchorRef(node, io, int(idx))


def construct_single_node_symbol_table(
    in_symbol: str, out_symbol: str, a2s: Mapping[str, str], s2a: Mapping[str, Sequence[AnchorLike]]
) -> tuple[dict[str, str], dict[str, list[AnchorLike]]]:
    """``ConstructSingleNodeSymbolTable``: one symbol named ``in_symbol`` holding the anchors of ``in_symbol``
    followed by those of ``out_symbol`` (TensorMove deletion asks "what if these two merged?")."""
    out_a2s: dict[str, str] = {}
    out_s2a: dict[str, list[AnchorLike]] = {in_symbol: []}
    for sym in (in_symbol, out_symbol):
        for a in s2a.get(sym, []):
            key = a.name if isinstance(a, AnchorRef) else (a if isinstance(a, str) else f"{a[0]}_{a[1]}_{a[2]}")
            if key in a2s:
                out_a2s[key] = in_symbol
            out_s2a[in_symbol].append(a)
    return out_a2s, out_s2a


def is_graph_exist_mem_conflict_symbol(
    model: Model,
    graph: Graph | str,
    a2s: Mapping[str, str],
    s2a: Mapping[str, Sequence[AnchorLike]],
    options: Mapping[str, str] | None = None,
) -> bool:
    """GE ``MemLayoutConflictUtil::IsGraphExistMemConflictSymbol``: True when some symbol of the given table
    has an anchor pair whose attributes conflict. Nothing is inserted; the graph is not modified.

    Parameters:
        model: the model (nodes must carry topological ids, as after any pass that sorted it).
        graph: the graph GE passes (the TensorMove's owner graph): decides which Data/NetOutput are user I/O.
        a2s: anchor name (``"<node>_out_<i>"`` / ``"<node>_in_<k>"``) -> symbol name.
        s2a: symbol name -> ordered anchors; each anchor an :class:`AnchorRef`, a ``(node_name, "in"|"out",
            index)`` tuple or an anchor-name string.
        options: GE option strings (``ge.featureBaseRefreshable``, ``ge.buildGraphMode``,
            ``ge.exec.staticMemoryPolicy``); default none.

    Typical use (TensorMove rule 5): ``a2, s2 = construct_single_node_symbol_table(si, so, A2S, S2A)`` then
    ``not is_graph_exist_mem_conflict_symbol(model, tm.graph, a2, s2, ctx.options)``.
    """
    g = model.resolve_graph(graph)
    by_name: dict[str, Node] = {}
    for gg in model.graphs:
        for n in gg.nodes.values():
            by_name.setdefault(n.name, n)
    a2s4: dict[tuple[str, str, str, int], str] = {}
    s2a4: dict[str, list[tuple[str, str, str, int]]] = {}
    for s, lst in s2a.items():
        out = s2a4[s] = []
        for a in lst:
            r = _to_anchor(model, a, by_name)
            key = (r.node.graph.name if r.node.graph else "", r.node.name, r.io, r.idx)
            out.append(key)
            sym = a2s.get(r.name)
            if sym is not None:
                a2s4[key] = sym
    ctx = PassContext(options=dict(options or {}))
    return graph_has_mem_conflict_symbol(model, (a2s4, s2a4), list(s2a4), ctx, g)


# ---------------------------------------------------------------------------------------------------------
# explain
# ---------------------------------------------------------------------------------------------------------
def _fmt_attrs(types: Iterable[Any]) -> str:
    return ", ".join(str(t) for t in types)


def explain_anchor(model: Model, node: str, out: int, options: Mapping[str, str] | None = None) -> str:
    """Why ``node:out`` does or does not get an Identity from ``layout-conflict``: its symbol, every anchor of
    that symbol with its attributes, and each anchor the pair checks would mark with the rule that fired.
    Works on a copy: the model is not changed."""
    work = copy.deepcopy(model)
    target = work.find_node(node)
    if target is None:
        raise InputError(f"no node {node!r}", "--anchor")
    if out >= max(target.num_outputs, 1) and out != 0:
        raise InputError(f"node {node!r} has no output {out}", "--anchor")
    opts = LayoutOptions.parse(dict(options or {}))
    lines = [f"anchor {node}:{out} ({target.type}) in graph {target.graph.name if target.graph else '?'}"]
    tops = top_static_graphs(work)
    if not tops:
        return "\n".join(lines + ["layout-conflict skips this model: no static graph"])
    topological_sorting(work)
    top = next((g for g in tops if target in all_nodes(work, g)), None)
    if top is None:
        return "\n".join(lines + ["the node is not in a static graph layout-conflict processes"])
    index = ModelIndex(work)
    info = graph_info(top, opts)
    table = get_ref_mapping(work, top, index)
    # the attributes and the ref map as layout.dl derives them for this graph (every anchor, this table)
    marks = marks_from_facts(work, table, layout_facts(work, top, dict(options or {})))
    a = AnchorRef(target, "out", out)
    sym = table.a2s.get(a.name)
    lines.append(f"processed graph: {top.name}; graph info: {info.as_dict()}")
    if sym is None:
        return "\n".join(lines + ["the anchor has no symbol"])
    anchors = table.s2a.get(sym, [])
    lines.append(f"symbol {sym} ({len(anchors)} anchors, in GE's order):")
    for x in anchors:
        lines.append(f"  {x.name:40s} [{_fmt_attrs(marks.of(x))}]" + ("   <- this anchor" if x == a else ""))
    found = find_conflict_nodes(anchors, marks, info, index)
    if not found:
        lines.append("no conflict: no attribute pair of this symbol is an absolute conflict or fires a checker")
    else:
        lines.append("conflicts (an Identity goes before an in-anchor / after an out-anchor):")
        for x in sorted(found, key=lambda y: y.name):
            f = found[x]
            skip = ""
            if (x.is_in and is_skip_insert_in(x)) or (not x.is_in and is_skip_insert_out(x)):
                skip = "  (insertion skipped: unknown shape or already an Identity/memcpy there)"
            lines.append(
                f"  {x.name}: {f.rule}; pair {f.pair[0]} [{_fmt_attrs(f.attrs[0])}] / {f.pair[1]} [{_fmt_attrs(f.attrs[1])}]{skip}"
            )
    related = [c for c in ctrl_node_conflicts(work, top) if producer(c.anchor.node, c.anchor.idx) == a]
    for c in related:
        lines.append(f"control-node step (runs first): Identity before {c.anchor.name}: {c.reason}")
    if not related and ctrl_node_subgraph_has_conflict(work, top):
        lines.append("the control-node step (If/Case branches, While bodies) inserts Identities elsewhere first")
    return "\n".join(lines)


@register_explainer("layout-conflict", anchors=True)
def explain(model: Model, name: str, *, options: dict[str, str], anchor: tuple[str, int] | None = None) -> str:
    """``anchorlog explain IN NAME --anchor NODE:OUT`` for layout conflicts (see :func:`explain_anchor`)."""
    node, out = anchor if anchor is not None else (name, 0)
    return explain_anchor(model, node, out, options)

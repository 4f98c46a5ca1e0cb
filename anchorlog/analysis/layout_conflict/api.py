"""Conflict checks on a hypothetical symbol table, for other passes (TensorMove rule 5, inplace).

GE ``MemLayoutConflictUtil::IsGraphExistMemConflictSymbol`` marks every node the given table names with the 14
attributes and runs the pair checks on each symbol. Here the attributes come from ``layout.dl``
(``layout_marked_attr`` with every graph in scope, ``layout_var_ref_cand``), derived once per pass context and
graph and cached in ``ctx.state``; a call then costs only the anchors of the symbols it asks about.

Only REFERENCE_OUTPUT through ``ref_var_src_var_name`` depends on the table (the var's ``out_0`` must share the
anchor's symbol): the rules give the candidates, the check against the table at hand happens per call, as GE's
``MarkOutTypes`` does with the table it is given.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex

from .attributes import AnchorAttribute, GraphInfo, LayoutOptions, Marks, graph_info
from .checkers import find_conflict_nodes
from .refmap import AnchorRef

Anchor = tuple[str, str, str, int]  # (graph, node, "in"|"out", idx)

_STATE_KEY = "layout_conflict.attribute_base"
_REF_RANK = 6  # REFERENCE_OUTPUT's place in GE's out-anchor append order (layout.dl ranks)


@dataclass
class AttributeBase:
    """The table-independent attributes of every anchor of the model, as ``layout.dl`` derives them for one
    processed graph ``graph`` and one set of options."""

    model: Model
    graph: str
    structure: int
    attrs: dict[Anchor, list[tuple[int, str]]] = field(default_factory=dict)  # (rank, attribute)
    var_ref: dict[tuple[str, str, int], str] = field(default_factory=dict)  # out-anchor -> var node name
    nodes: set[tuple[str, str]] = field(default_factory=set)  # (graph, node) the rules saw
    info: GraphInfo | None = None
    index: ModelIndex | None = None

    def types(
        self, a: Anchor, a2s: Mapping[Anchor, str], symbol_anchors: Sequence[Anchor]
    ) -> tuple[list[AnchorAttribute], Anchor | None]:
        """The attribute list of anchor ``a`` (GE's append order) in the given table, and the ``out_0`` anchor
        of the var it refers to (REFERENCE_OUTPUT through ``ref_var_src_var_name``; GE's ref map), if any."""
        ranked = list(self.attrs.get(a, ()))
        var_anchor = None
        if a[2] == "out":
            v = self.var_ref.get((a[0], a[1], a[3]))
            if v is not None:
                s = a2s.get(a)
                target = next((x for x in symbol_anchors if x[1] == v and x[2] == "out" and x[3] == 0), None)
                if s is not None and target is not None and a2s.get(target) == s:
                    var_anchor = target
                    if all(name != "REFERENCE_OUTPUT" for _, name in ranked):
                        ranked.append((_REF_RANK, "REFERENCE_OUTPUT"))
        if not ranked:
            return [AnchorAttribute.NORMAL_INPUT if a[2] == "in" else AnchorAttribute.NORMAL_OUTPUT], None
        ranked.sort()
        return [AnchorAttribute[name] for _, name in ranked], var_anchor


def _derive(
    model: Model, g: Graph, opts: LayoutOptions, ctx: Any, ask: set[tuple[str, str]] | None = None
) -> AttributeBase:
    """The attributes of every anchor of the model (``ask`` None: ``layout_marked_attr``), or of the anchors of
    the ``ask`` nodes only (``layout_asked_attr``: the same rows for those nodes, without the symbol demand)."""
    from anchorlog.analysis.fact_cache import shared_facts

    from .rules import _program, layout_inputs

    db = shared_facts(model, ctx)
    engine = ctx.engine if getattr(ctx, "engine", None) in ("sqlite", "duckdb") else "sqlite"
    extra = layout_inputs(model, g, opts, scope_all=True, db=db)
    attr_rel = "layout_marked_attr"
    if ask is not None:
        attr_rel = "layout_asked_attr"
        extra["layout_ask_node"] = sorted(ask)
    res = _program().run(db, engine=engine, extra=extra, outputs=[attr_rel, "layout_var_ref_cand"])
    base = AttributeBase(model, g.name, model.structure_version)
    # without a symbol table the rules derive REFERENCE_OUTPUT only through ref_io (table-independent); the
    # var case is checked per call against the table at hand (layout_var_ref_cand)
    for gname, node, io, idx, attr, rank in res.rows(attr_rel, sort=False):
        base.attrs.setdefault((gname, node, io, int(idx)), []).append((int(rank), attr))
    base.var_ref = {(gname, node, int(idx)): v for gname, node, idx, v in res.rows("layout_var_ref_cand", sort=False)}
    base.nodes = set(ask) if ask is not None else {(gr.name, n) for gr in model.graphs for n in gr.nodes}
    base.info = graph_info(g, opts)
    base.index = ModelIndex(model)
    return base


def attribute_base(
    model: Model,
    g: Graph,
    ctx: Any,
    anchors: Iterable[Anchor] = (),
    asked_nodes: Iterable[tuple[str, str]] | None = None,
) -> AttributeBase:
    """The cached :class:`AttributeBase` of ``model`` for processed graph ``g`` under ``ctx``'s options;
    re-derived when the model's structure changed or one of ``anchors`` belongs to a node the rules have not
    seen (inserted since, or not asked).

    ``asked_nodes`` (demand-driven): the (graph, node) pairs whose anchors the caller may ask about in this and
    later calls; the rules derive the attributes of those nodes (and of ``anchors``' nodes) only, once, and again
    for the union when a later call names another node. None: every node of the model (one derivation)."""
    key = (g.name, tuple(sorted((k, v) for k, v in ctx.options.items())), asked_nodes is not None)
    cache: dict = ctx.state.setdefault(_STATE_KEY, {})
    base = cache.get(key)
    anchors = list(anchors)
    if (
        base is None
        or base.model is not model
        or base.structure != model.structure_version
        or any((a[0], a[1]) not in base.nodes for a in anchors)
    ):
        opts = LayoutOptions.parse(dict(ctx.options))
        ask = None
        if asked_nodes is not None:
            ask = set(asked_nodes) | {(a[0], a[1]) for a in anchors}
            if base is not None and base.model is model and base.structure == model.structure_version:
                ask |= base.nodes  # grow: what was asked stays asked
        base = cache[key] = _derive(model, g, opts, ctx, ask)
    return base


def forget_layout_attributes(ctx: Any) -> None:
    """Drop the cached attributes (after changing a node's own type, attributes or descriptors between calls)."""
    ctx.state.pop(_STATE_KEY, None)


def _table(symbol_table: Any) -> tuple[Mapping[Anchor, str], Mapping[str, Sequence[Anchor]]]:
    if hasattr(symbol_table, "anchor_to_symbol"):
        return symbol_table.anchor_to_symbol, symbol_table.symbol_to_anchors
    a2s, s2a = symbol_table
    return a2s, s2a


def graph_has_mem_conflict_symbol(
    model: Model,
    symbol_table: Any,
    symbols: Iterable[str],
    ctx: Any,
    graph: Graph | str | None = None,
    *,
    asked_nodes: Iterable[tuple[str, str]] | None = None,
) -> bool:
    """GE ``IsGraphExistMemConflictSymbol`` restricted to ``symbols``: True when, for some symbol named there,
    the anchors ``symbol_table`` lists for it hold a pair an absolutely-conflict row or a registered checker
    marks. Nothing is modified.

    ``symbol_table``: an :class:`anchorlog.analysis.symbols.SymbolTable` or ``(anchor_to_symbol,
    symbol_to_anchors)`` with ``(graph, node, "in"|"out", idx)`` anchors (typically one merged symbol, GE's
    ``ConstructSingleNodeSymbolTable``); anchors of nodes that no longer exist are ignored. ``ctx``: the running
    pass's context (options, shared facts, the attribute cache). ``graph``: GE's graph argument (the
    TensorMove's owner graph), default the root: it decides user input/output and the graph info.
    ``asked_nodes``: the nodes a caller making many calls may ask about (see :func:`attribute_base`): the rules
    then derive the attributes of those nodes only; None: of every node."""
    g = model.resolve_graph(graph)
    a2s, s2a = _table(symbol_table)
    wanted = [s for s in symbols if s2a.get(s)]
    if not wanted:
        return False
    graphs = {x.name: x for x in model.graphs}
    live: dict[str, list[Anchor]] = {}
    for s in wanted:
        lst = []
        for a in s2a[s]:
            gr = graphs.get(a[0])
            if gr is not None and a[1] in gr.nodes:
                lst.append(a)
        live[s] = lst
    base = attribute_base(model, g, ctx, (a for lst in live.values() for a in lst), asked_nodes)
    assert base.info is not None and base.index is not None
    for s in wanted:
        anchors = live[s]
        if len(anchors) < 2:
            continue
        marks = Marks()
        refs: list[AnchorRef] = []
        for a in anchors:
            node: Node = graphs[a[0]].nodes[a[1]]
            ref = AnchorRef(node, a[2], a[3])
            types, var = base.types(a, a2s, anchors)
            marks.types[ref] = types
            if var is not None:
                marks.ref_map[ref] = graphs[var[0]].nodes[var[1]]
            refs.append(ref)
        if find_conflict_nodes(refs, marks, base.info, base.index):
            return True
    return False

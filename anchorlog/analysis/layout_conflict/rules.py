"""The rule side of the layout pass: ``anchorlog/queries/layout.dl`` over a fact database.

The pass takes every fact its decisions rest on from here: the 14 attributes of the anchors that matter (in
GE's append order), the candidate conflicting anchor pairs per symbol, and GE's ref map (REFERENCE_OUTPUT
through ``ref_var_src_var_name``). The absolutely-conflict table and the checker registrations are supplied to
the rules from :mod:`.tables` / :mod:`.checkers` (one table, no copy in the rule file; the absolutely-no-conflict
table names no pair the rules look for, see :func:`table_rows`), with the checkers that cannot mark on the
processed graph (:func:`.checkers.dead_checkers`).

:func:`run_layout_rules` is the pipeline entry (shared fact database, the pass's symbol table);
:func:`layout_facts` is the stand-alone form (own database, all attributes) used by tests and notebooks.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlog.analysis.symbols import symbol_inputs
from anchorlog.facts.graph import Graph, Model, Node

from ._ge import INPUT_MEM_TYPE_LIST, OUTPUT_MEM_TYPE_LIST, attr_int_list
from .attributes import LayoutOptions, is_graph_feature_map_refreshable

if TYPE_CHECKING:  # pragma: no cover
    from anchorlog.facts.relations import FactDB
    from anchorlog.queries import Program

    from .refmap import SymbolTable

LAYOUT_DL = Path(__file__).resolve().parents[2] / "queries" / "layout.dl"

AnchorKey = tuple[str, str, str, int]  # (graph, node, "in"|"out", idx)


@dataclass
class LayoutFacts:
    """``attrs``: (graph, node, io, idx) -> attribute names in GE's order (all anchors for :func:`layout_facts`,
    the anchors of candidate symbols for :func:`run_layout_rules`); ``conflict_symbols``: symbols with a
    candidate pair; ``pairs``: symbol -> set of unordered candidate anchor pairs; ``ref_var``: out-anchor ->
    the var node name it refers to; ``checkers``: (attr, attr) -> checker; ``pair_symbols``: how many symbols
    hold a candidate pair, counting those whose pairs only a checker that cannot mark on the graph names (the
    pass's ``dead_checkers``: such symbols are not in ``conflict_symbols``)."""

    attrs: dict[AnchorKey, list[str]] = field(default_factory=dict)
    conflict_symbols: set[str] = field(default_factory=set)
    pairs: dict[str, set[frozenset[AnchorKey]]] = field(default_factory=dict)
    ref_var: dict[AnchorKey, str] = field(default_factory=dict)
    checkers: dict[tuple[str, str], str] = field(default_factory=dict)
    pair_symbols: int = 0


def _program() -> Program:
    from anchorlog.queries import Program

    return Program.cached(LAYOUT_DL)


def table_rows() -> dict[str, list[tuple[str, ...]]]:
    """GE's tables as the rules' input relations, from the one Python table module and the checker registry.
    The absolutely-no-conflict rows are not among them: they name no pair the rules look for (no row is also an
    absolute-conflict or checker pair), so only the Python walk consults them."""
    from .checkers import CHECKERS
    from .tables import ABSOLUTE_CONFLICT_ROWS

    return {
        "layout_abs_conflict_row": [(x.name, y.name) for x, y in ABSOLUTE_CONFLICT_ROWS],
        "layout_checker_row": [
            (x.name, y.name, name) for name, chks in CHECKERS.items() for c in chks for x, y in c.pairs
        ],
    }


def layout_inputs(
    model: Model, g: Graph, opts: LayoutOptions, *, scope_all: bool = False, db: FactDB | Any = None
) -> dict[str, list[tuple[Any, ...]]]:
    """The ``extra=`` relations for processed graph ``g``: options/graph flags, memory types, the tables, and
    no node order (no symbols: callers that want them add ``symbols.symbol_inputs``). ``scope_all``: mark
    the anchors of every graph of the model, not only ``g`` and its nested subgraphs (the hypothetical-table
    API). ``db``: the fact database of ``model`` the rules will run on (in step with it), to find the nodes
    carrying memory types without visiting every node (see :func:`mem_type_rows`)."""
    mem_rows = mem_type_rows(model, db)
    return {
        "layout_ctx": [(g.name,)],
        "layout_scope_all": [(1,)] if scope_all else [],
        **symbol_inputs([]),
        "layout_fm_graph": [(x.name,) for x in model.graphs if is_graph_feature_map_refreshable(x, opts)],
        "layout_dead_checker": [],
        "layout_mem_type": mem_rows,
        **table_rows(),
    }


def mem_type_rows(model: Model, db: FactDB | Any = None) -> list[tuple[str, str, str, int, int]]:
    """``layout_mem_type``: (graph, node, io, idx, memory type) for every node of the model with an input or
    output memory type list, in model order (graph by graph, each in its op order).

    The rules use them only on the scoped graphs (lay_graph), so no walk of GE's node order is needed. The
    nodes that hold the attributes are looked up in ``db``'s ``node_attr`` (through its ``key`` index) when
    ``db`` is a fact database of ``model`` in step with it (the rules read every other attribute from there
    too): a large model has few or none, and visiting every node costs ~40 ms at 100 k nodes. Without such a
    database, or when its names do not resolve in the IR, every node is visited."""
    holders = _mem_type_holders(model, db)
    if holders is None:
        holders = [
            (x, n)
            for x in model.graphs
            for n in x.nodes.values()
            if INPUT_MEM_TYPE_LIST in n.attrs or OUTPUT_MEM_TYPE_LIST in n.attrs
        ]
    rows = []
    for x, n in holders:
        attrs = n.attrs
        for io, key in (("in", INPUT_MEM_TYPE_LIST), ("out", OUTPUT_MEM_TYPE_LIST)):
            if key in attrs:
                for i, t in enumerate(attr_int_list(n, key)):
                    rows.append((x.name, n.name, io, i, int(t)))
    return rows


def _mem_type_holders(model: Model, db: FactDB | Any) -> list[tuple[Graph, Node]] | None:
    """The (graph, node) pairs of ``model`` with a memory type list attribute, in model order, found through
    ``db``'s ``node_attr`` rows; None when ``db`` is not a SQLite fact database or names a graph or node the
    IR does not have (e.g. facts with qualified graph names): the caller then visits every node."""
    import sqlite3

    conn = getattr(db, "conn", db)
    if not isinstance(conn, sqlite3.Connection):
        return None
    try:
        found = conn.execute(
            "SELECT graph, node FROM node_attr WHERE key IN (?, ?)", (INPUT_MEM_TYPE_LIST, OUTPUT_MEM_TYPE_LIST)
        ).fetchall()
    except sqlite3.Error:
        return None
    if not found:
        return []
    graph_of = {x.name: x for x in model.graphs}
    names: dict[str, set[str]] = {}
    for gname, node in found:
        x = graph_of.get(gname)
        if x is None or node not in x.nodes:
            return None
        names.setdefault(gname, set()).add(node)
    # model order: the graphs in order, each holder graph's nodes in its op order (only those graphs are visited)
    holders: list[tuple[Graph, Node]] = []
    for x in model.graphs:
        wanted = names.get(x.name)
        if wanted is not None:
            holders.extend([(x, n) for n in x.nodes.values() if n.name in wanted])
    return holders


# what the pass reads back
PASS_OUTPUTS = ["layout_candidate_attr", "layout_candidate_pair", "layout_ref_var", "layout_checker"]
# GE's table for the walked symbols, and the symbol count
TABLE_OUTPUTS = [
    "layout_sub_tree",
    "layout_sub_union",
    "layout_sub_merge",
    "layout_sub_nextiter",
    "layout_sub_phantom",
    "layout_late_link",
    "layout_symbol_count",
]
# the roles of anchorlog.analysis.symbols.assemble_symbol_table -> layout.dl's subsets for the walked symbols
_SUB_ROLES = {
    "tree": "layout_sub_tree",
    "sg_out_union": "layout_sub_union",
    "merge_peer": "layout_sub_merge",
    "nextiter_out": "layout_sub_nextiter",
    "phantom_out": "layout_sub_phantom",
    "late_link": "layout_late_link",
}


def _run(
    db: FactDB | Any,
    model: Model,
    g: Graph,
    opts: LayoutOptions,
    engine: str,
    outputs: list[str],
    dead_checkers: Iterable[str] = (),
) -> tuple[Any, Any, dict[int, str]]:
    """One run of ``layout.dl`` (with ``symbols.dl``) for processed graph ``g``: the result, GE's table of the
    walked symbols (``symbols.assemble_symbol_table`` on their rows) and symbol id -> GE's symbol name.
    ``dead_checkers``: checkers that cannot mark on ``g`` (their pairs are not walked)."""
    from anchorlog.analysis.order import node_order_rows
    from anchorlog.analysis.symbols import assemble_symbol_table

    extra = layout_inputs(model, g, opts, db=db)
    extra["layout_dead_checker"] = [(c,) for c in sorted(dead_checkers)]
    extra.update(symbol_inputs(node_order_rows(model, g), g.name))
    res = _program().run(db, engine=engine, extra=extra, outputs=outputs + TABLE_OUTPUTS)
    st = assemble_symbol_table(res, g.name, relations=_SUB_ROLES)
    # every anchor of a symbol has its GE name; the walked symbols are named after any of theirs
    ge_name: dict[int, str] = {}
    for s, g1, n1, io1, i1, *_ in res.rows("layout_candidate_pair", sort=False):
        if s not in ge_name:
            ge_name[s] = st.anchor_to_symbol[(g1, n1, io1, int(i1))]
    return res, st, ge_name


def _symbol_counts(res: Any) -> tuple[int, int, int, int, int]:
    """``layout_symbol_count``'s row: founders, founders joined by unions, union classes, phantom outputs, and
    symbols holding a candidate pair (zeros when the rules derived no row)."""
    roots, involved, joined, phantoms, pair_symbols = next(iter(res.rows("layout_symbol_count", sort=False)), (0,) * 5)
    return int(roots), int(involved), int(joined), int(phantoms), int(pair_symbols)


def _facts(res: Any, ge_name: dict[int, str], attrs_rel: str) -> LayoutFacts:
    out = LayoutFacts()
    for gname, node, io, idx, attr, _rank in sorted(
        res.rows(attrs_rel, sort=False), key=lambda r: (r[0], r[1], r[2], r[3], r[5])
    ):
        out.attrs.setdefault((gname, node, io, int(idx)), []).append(attr)
    for s, g1, n1, io1, i1, g2, n2, io2, i2 in res.rows("layout_candidate_pair", sort=False):
        out.pairs.setdefault(ge_name[s], set()).add(frozenset(((g1, n1, io1, int(i1)), (g2, n2, io2, int(i2)))))
    out.conflict_symbols = set(out.pairs)
    out.ref_var = {(gn, n, "out", int(i)): v for gn, n, i, v in res.rows("layout_ref_var", sort=False)}
    out.checkers = {(a, b): c for a, b, c in res.rows("layout_checker", sort=False)}
    out.pair_symbols = _symbol_counts(res)[4]
    return out


def run_layout_rules(
    db: FactDB | Any,
    model: Model,
    g: Graph,
    opts: LayoutOptions,
    engine: str = "sqlite",
    dead_checkers: Iterable[str] = (),
) -> tuple[LayoutFacts, SymbolTable, int]:
    """The pass's run of ``layout.dl`` on ``db`` (the pipeline's shared fact database) for processed graph
    ``g``: the symbols come from ``symbols.dl`` in the same run (GE's ``GetRefMapping(g)`` partition), and only
    the symbols the pass walks are assembled into GE's names and anchor order. Returns the facts (attributes
    of the anchors of walked symbols, candidate pairs keyed by GE's symbol names, ref map), GE's table of the
    walked symbols, and the number of symbols of GE's whole table. ``dead_checkers``: the registered checkers
    that cannot mark anything on ``g`` (:func:`.checkers.dead_checkers` of its graph info): the pairs only they
    act on are not candidates, so their symbols are neither walked nor assembled (``pair_symbols`` counts them)."""
    from .refmap import from_rule_table

    res, st, ge_name = _run(db, model, g, opts, engine, PASS_OUTPUTS, dead_checkers)
    roots, involved, joined, phantoms, _pair_symbols = _symbol_counts(res)
    count = roots - involved + joined + phantoms
    return _facts(res, ge_name, "layout_candidate_attr"), from_rule_table(model, st), count


def layout_facts(
    model: Model, graph: Graph | None = None, options: dict[str, str] | None = None, engine: str = "sqlite"
) -> LayoutFacts:
    """Run ``layout.dl`` for ``graph`` (default: the root) of ``model`` on a fresh fact database; ``attrs``
    holds every anchor of the processed graph with an attribute other than NORMAL_INPUT / NORMAL_OUTPUT (an
    anchor not listed is NORMAL), for tests, notebooks and ``explain``; pairs and conflict symbols by GE's
    symbol names."""
    from anchorlog.facts.relations import FactDB

    g = graph or model.root
    opts = LayoutOptions.parse(dict(options or {}))
    db = FactDB.from_model(model)
    res, _st, ge_name = _run(db, model, g, opts, engine, PASS_OUTPUTS + ["layout_marked_attr"])
    return _facts(res, ge_name, "layout_marked_attr")

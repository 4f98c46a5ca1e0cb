"""The rule side of the layout pass: ``anchorlog/queries/layout.dl`` over a fact database.

The pass takes every fact its decisions rest on from here: the 14 attributes of the anchors that matter (in
GE's append order), the candidate conflicting anchor pairs per symbol, and GE's ref map (REFERENCE_OUTPUT
through ``ref_var_src_var_name``). The absolutely-(no-)conflict tables and the checker registrations are
supplied to the rules from :mod:`.tables` / :mod:`.checkers` (one table, no copy in the rule file).

:func:`run_layout_rules` is the pipeline entry (shared fact database, the pass's symbol table);
:func:`layout_facts` is the stand-alone form (own database, all attributes) used by tests and notebooks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlog.facts.graph import Graph, Model

from ._ge import INPUT_MEM_TYPE_LIST, OUTPUT_MEM_TYPE_LIST, attr_int_list
from .attributes import LayoutOptions, is_graph_feature_map_refreshable
from .order import all_nodes

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
    the var node name it refers to; ``checkers``: (attr, attr) -> checker."""

    attrs: dict[AnchorKey, list[str]] = field(default_factory=dict)
    conflict_symbols: set[str] = field(default_factory=set)
    pairs: dict[str, set[frozenset[AnchorKey]]] = field(default_factory=dict)
    ref_var: dict[AnchorKey, str] = field(default_factory=dict)
    checkers: dict[tuple[str, str], str] = field(default_factory=dict)


@lru_cache(maxsize=1)
def _program() -> Program:
    from anchorlog.queries import Program

    return Program.from_file(LAYOUT_DL)


def table_rows() -> dict[str, list[tuple[str, ...]]]:
    """GE's tables as the rules' input relations, from the one Python table module and the checker registry."""
    from .checkers import CHECKERS
    from .tables import ABSOLUTE_CONFLICT_ROWS, ABSOLUTE_NO_CONFLICT_ROWS

    return {
        "layout_no_conflict_row": [(x.name, y.name) for x, y in ABSOLUTE_NO_CONFLICT_ROWS],
        "layout_abs_conflict_row": [(x.name, y.name) for x, y in ABSOLUTE_CONFLICT_ROWS],
        "layout_checker_row": [
            (x.name, y.name, name) for name, chks in CHECKERS.items() for c in chks for x, y in c.pairs
        ],
    }


def layout_inputs(
    model: Model, g: Graph, opts: LayoutOptions, table: SymbolTable | None, *, scope_all: bool = False
) -> dict[str, list[tuple[Any, ...]]]:
    """The ``extra=`` relations for processed graph ``g``: options/graph flags, memory types, symbol table
    (none: REFERENCE_OUTPUT through a var is not derived). ``scope_all``: mark the anchors of every graph of the
    model, not only ``g`` and its nested subgraphs (the hypothetical-table API)."""
    mem_rows = []
    nodes = [n for x in model.graphs for n in x.nodes.values()] if scope_all else all_nodes(model, g)
    for n in nodes:
        for io, key in (("in", INPUT_MEM_TYPE_LIST), ("out", OUTPUT_MEM_TYPE_LIST)):
            if key in n.attrs:
                for i, t in enumerate(attr_int_list(n, key)):
                    mem_rows.append((n.graph.name if n.graph else "", n.name, io, i, int(t)))
    sym_rows = (
        [
            (a.node.graph.name if a.node.graph else "", a.node.name, a.io, a.idx, s)
            for s, anchors in table.s2a.items()
            for a in anchors
        ]
        if table is not None
        else []
    )
    return {
        "layout_ctx": [(g.name,)],
        "layout_scope_all": [(1,)] if scope_all else [],
        "layout_use_classes": [],
        "node_order": [],
        "sym_top": [],
        "layout_fm_graph": [(x.name,) for x in model.graphs if is_graph_feature_map_refreshable(x, opts)],
        "layout_mem_type": mem_rows,
        "layout_symbol": sym_rows,
        **table_rows(),
    }


def run_layout_rules(
    db: FactDB | Any, model: Model, g: Graph, opts: LayoutOptions, table: SymbolTable, engine: str = "sqlite"
) -> LayoutFacts:
    """Run ``layout.dl`` for processed graph ``g`` on ``db`` (the pipeline's shared fact database)."""
    res = _program().run(db, engine=engine, extra=layout_inputs(model, g, opts, table), outputs=PASS_OUTPUTS)
    return _pass_facts(res)


# what the pass reads back
PASS_OUTPUTS = ["layout_candidate_attr", "layout_candidate_pair", "layout_ref_var", "layout_checker"]
# class mode: GE's table for the walked classes, and the symbol count
CLASS_OUTPUTS = [
    "layout_sub_tree",
    "layout_sub_union",
    "layout_sub_merge",
    "layout_sub_nextiter",
    "layout_sub_phantom",
    "layout_late_link",
    "layout_class_count",
    "layout_phantom_count",
]
# symbols.dl's relation names, as anchorlog.analysis.symbols assembles them, for the class-mode subsets
_SUB_ROWS = {
    "anchor_tree": "layout_sub_tree",
    "sg_out_union": "layout_sub_union",
    "merge_peer": "layout_sub_merge",
    "nextiter_out": "layout_sub_nextiter",
    "phantom_out": "layout_sub_phantom",
    "late_link": "layout_late_link",
}


class _SubResult:
    """symbols.dl's result relations restricted to the walked classes (what ``symbols._assemble`` reads)."""

    def __init__(self, res: Any) -> None:
        self.res = res

    def rows(self, name: str, **kw: Any) -> list[tuple]:
        return self.res.rows(_SUB_ROWS[name], **kw)


def _pass_facts(res: Any) -> LayoutFacts:
    out = LayoutFacts()
    for gname, node, io, idx, attr, _rank in sorted(
        res.rows("layout_candidate_attr", sort=False), key=lambda r: (r[0], r[1], r[2], r[3], r[5])
    ):
        out.attrs.setdefault((gname, node, io, int(idx)), []).append(attr)
    for s, g1, n1, io1, i1, g2, n2, io2, i2 in res.rows("layout_candidate_pair", sort=False):
        out.pairs.setdefault(s, set()).add(frozenset(((g1, n1, io1, int(i1)), (g2, n2, io2, int(i2)))))
    out.conflict_symbols = set(out.pairs)
    out.ref_var = {(gn, n, "out", int(i)): v for gn, n, i, v in res.rows("layout_ref_var", sort=False)}
    out.checkers = {(a, b): c for a, b, c in res.rows("layout_checker", sort=False)}
    return out


def run_layout_rules_on_classes(
    db: FactDB | Any, model: Model, g: Graph, opts: LayoutOptions, engine: str = "sqlite"
) -> tuple[LayoutFacts, SymbolTable, int]:
    """The pass's form without a precomputed symbol table: ``layout.dl`` takes the symbol classes from
    ``symbols.dl`` in the same run (GE's ``GetRefMapping(g)`` partition), finds the candidate pairs on them, and
    only the classes it walks are assembled into GE's names and anchor order (``symbols._assemble``, as for the
    whole table). Returns the facts keyed by GE's symbol names, the symbol table of the walked symbols, and the
    number of symbols of GE's whole table."""
    from anchorlog.analysis.order import node_order_rows
    from anchorlog.analysis.symbols import _assemble

    from .refmap import from_rule_table

    extra = layout_inputs(model, g, opts, None)
    extra["layout_use_classes"] = [(1,)]
    extra["node_order"] = node_order_rows(model, g)
    extra["sym_top"] = [(g.name,)]
    res = _program().run(db, engine=engine, extra=extra, outputs=PASS_OUTPUTS + CLASS_OUTPUTS)
    st = _assemble(_SubResult(res), g.name)
    facts = _pass_facts(res)
    # class id -> GE's symbol name (every anchor of a class has the same one)
    ge_name: dict[str, str] = {}
    for cls, pairs in facts.pairs.items():
        anchor = next(iter(next(iter(pairs))))
        ge_name[cls] = st.anchor_to_symbol[anchor]
    facts.pairs = {ge_name[c]: p for c, p in facts.pairs.items()}
    facts.conflict_symbols = set(facts.pairs)
    count = sum(int(r[0]) for r in res.rows("layout_class_count", sort=False)) + sum(
        int(r[0]) for r in res.rows("layout_phantom_count", sort=False)
    )
    return facts, from_rule_table(model, st), count


def layout_facts(
    model: Model,
    graph: Graph | None = None,
    options: dict[str, str] | None = None,
    engine: str = "sqlite",
    *,
    table: SymbolTable | None = None,
) -> LayoutFacts:
    """Run ``layout.dl`` for ``graph`` (default: the root) of ``model`` on a fresh fact database; ``attrs``
    holds every anchor of the processed graph with an attribute other than NORMAL_INPUT / NORMAL_OUTPUT (an
    anchor not listed is NORMAL), for tests, notebooks and ``explain``. ``table``: the graph's symbol table
    when the caller has it (default: computed)."""
    from anchorlog.facts.relations import FactDB, _ModelIndex

    from .refmap import get_ref_mapping

    g = graph or model.root
    opts = LayoutOptions.parse(dict(options or {}))
    if table is None:
        table = get_ref_mapping(model, g, _ModelIndex(model))
    db = FactDB.from_model(model)
    res = _program().run(
        db,
        engine=engine,
        extra=layout_inputs(model, g, opts, table),
        outputs=PASS_OUTPUTS + ["layout_marked_attr", "layout_conflict_symbol"],
    )
    out = LayoutFacts()
    for gname, node, io, idx, attr, _rank in sorted(
        res.rows("layout_marked_attr", sort=False), key=lambda r: (r[0], r[1], r[2], r[3], r[5])
    ):
        out.attrs.setdefault((gname, node, io, int(idx)), []).append(attr)
    for s, g1, n1, io1, i1, g2, n2, io2, i2 in res.rows("layout_candidate_pair", sort=False):
        out.pairs.setdefault(s, set()).add(frozenset(((g1, n1, io1, int(i1)), (g2, n2, io2, int(i2)))))
    out.conflict_symbols = {r[0] for r in res.rows("layout_conflict_symbol", sort=False)}
    out.ref_var = {(gn, n, "out", int(i)): v for gn, n, i, v in res.rows("layout_ref_var", sort=False)}
    out.checkers = {(a, b): c for a, b, c in res.rows("layout_checker", sort=False)}
    return out

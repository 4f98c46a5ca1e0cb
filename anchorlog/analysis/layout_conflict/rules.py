"""The rule side of the layout pass: ``anchorlog/queries/layout.dl`` over a fact database.

:func:`layout_facts` runs the rules for one processed graph and returns the 14 attributes of every anchor (in
GE's append order) and the symbols that can conflict at all. The pass itself marks anchors with the same
conditions in Python (:mod:`.attributes`) because it must re-mark nodes of hypothetical symbol tables
(TensorMove rule 5) without rebuilding a database; ``tests/test_layout_rules.py`` checks that both agree.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from anchorlog.facts.graph import Graph, Model

from ._ge import INPUT_MEM_TYPE_LIST, OUTPUT_MEM_TYPE_LIST, attr_int_list
from .attributes import LayoutOptions, is_graph_feature_map_refreshable
from .order import all_nodes

LAYOUT_DL = Path(__file__).resolve().parents[2] / "queries" / "layout.dl"


@dataclass
class LayoutFacts:
    """``attrs``: (graph, node, io, idx) -> attribute names in GE's order; ``conflict_symbols``: symbols with an
    active attribute pair (symbol names as ``symbols.dl`` gives them); ``checkers``: (attr, attr) -> checker."""

    attrs: dict[tuple[str, str, str, int], list[str]] = field(default_factory=dict)
    conflict_symbols: set[str] = field(default_factory=set)
    checkers: dict[tuple[str, str], str] = field(default_factory=dict)


def layout_facts(
    model: Model, graph: Graph | None = None, options: dict[str, str] | None = None, engine: str = "sqlite"
) -> LayoutFacts:
    """Run ``layout.dl`` for ``graph`` (default: the root) of ``model``."""
    from anchorlog.analysis.symbols import node_order
    from anchorlog.facts.relations import FactDB
    from anchorlog.queries import Program

    g = graph or model.root
    opts = LayoutOptions.parse(dict(options or {}))
    mem_rows = []
    for n in all_nodes(model, g):
        for io, key in (("in", INPUT_MEM_TYPE_LIST), ("out", OUTPUT_MEM_TYPE_LIST)):
            for i, t in enumerate(attr_int_list(n, key)):
                mem_rows.append((n.graph.name if n.graph else "", n.name, io, i, int(t)))
    extra = {
        "node_order": node_order(model),
        "sym_top": [(g.name,)],
        "layout_ctx": [(g.name,)],
        "layout_fm_graph": [(x.name,) for x in model.graphs if is_graph_feature_map_refreshable(x, opts)],
        "layout_mem_type": mem_rows,
    }
    db = FactDB.from_model(model)
    res = Program.from_file(LAYOUT_DL).run(db, engine=engine, extra=extra)
    out = LayoutFacts()
    for gname, node, io, idx, attr, _rank in sorted(
        res.rows("layout_attr"), key=lambda r: (r[0], r[1], r[2], r[3], r[5])
    ):
        out.attrs.setdefault((gname, node, io, int(idx)), []).append(attr)
    out.conflict_symbols = {r[0] for r in res.rows("layout_conflict_symbol")}
    out.checkers = {(a, b): c for a, b, c in res.rows("layout_checker")}
    return out

"""The layout pass's view of the shared symbol table (``GraphUtils::GetRefMapping``, reference §3).

The table itself comes from the rules (:func:`anchorlog.analysis.symbols.symbol_table_rules`, symbols.dl), with
GE's symbol names and anchor order inside each symbol, which the layout pass depends on (which anchor is
``node_a``, which pair triggers an as-symbol checker first, lexicographic symbol processing; reference §10).
This module only re-keys it the way the checkers use it: anchors as :class:`AnchorRef` (node objects), the
anchor -> symbol map keyed by GE's anchor-name strings.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, NamedTuple

from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex


class AnchorRef(NamedTuple):
    """One data anchor (``NodeIndexIO``): ``io`` is ``"in"`` or ``"out"``."""

    node: Node
    io: str
    idx: int

    @property
    def name(self) -> str:
        """GE's anchor name string ``<node>_in_<k>`` / ``<node>_out_<k>``."""
        return f"{self.node.name}_{self.io}_{self.idx}"

    @property
    def is_in(self) -> bool:
        return self.io == "in"

    def __repr__(self) -> str:
        return self.name


def anchor_name(node: str, io: str, idx: int) -> str:
    return f"{node}_{io}_{idx}"


@dataclass
class SymbolTable:
    """``AnchorToSymbol`` (anchor name -> symbol) and ``SymbolToAnchors`` (symbol -> ordered anchors)."""

    a2s: dict[str, str] = field(default_factory=dict)
    s2a: dict[str, list[AnchorRef]] = field(default_factory=dict)

    def symbol_of(self, a: AnchorRef | str) -> str | None:
        return self.a2s.get(a if isinstance(a, str) else a.name)

    def anchors(self, symbol: str) -> list[AnchorRef]:
        return self.s2a.get(symbol, [])


def get_ref_mapping(
    model: Model, graph: Graph, index: ModelIndex | None = None, *, ctx: Any = None, db: Any = None
) -> SymbolTable:
    """``GraphUtils::GetRefMapping(graph)`` from the shared rule-computed table, in GE's DFS node order
    (``ctx``: a pass context whose shared fact database to use; ``db``: a fact database of ``model``).
    ``index`` is accepted for the callers' convenience and not needed."""
    from anchorlog.analysis.symbols import cached_symbol_table, symbol_table_rules

    # The pass context's engine (SQLite by default): since the engine forces a size-guided join order, SQLite
    # evaluates symbols.dl linearly and avoids copying the fact tables into DuckDB ("auto" would above 3000 nodes).
    engine = getattr(ctx, "engine", "sqlite") if ctx is not None else "auto"
    engine = engine if engine in ("sqlite", "duckdb") else "auto"
    if ctx is not None and db is None:
        # the pipeline's table of this model state (computed once per pass context, on the shared fact database)
        st = cached_symbol_table(model, ctx, graph, engine=engine)
    else:
        st = symbol_table_rules(model, graph, ctx=ctx, db=db, engine=engine)
    return from_rule_table(model, st)


def from_rule_table(model: Model, st: Any) -> SymbolTable:
    """Re-key an :class:`anchorlog.analysis.symbols.SymbolTable` (anchors as ``(graph, node, io, idx)``) for
    the checkers."""
    graphs = {g.name: g for g in model.graphs}
    refs: dict[tuple, AnchorRef] = {}

    def ref(a: tuple) -> AnchorRef:
        r = refs.get(a)
        if r is None:
            r = refs[a] = AnchorRef(graphs[a[0]].nodes[a[1]], a[2], a[3])
        return r

    t = SymbolTable()
    t.s2a = {s: [ref(a) for a in lst] for s, lst in st.symbol_to_anchors.items()}
    t.a2s = {anchor_name(a[1], a[2], a[3]): s for a, s in st.anchor_to_symbol.items()}
    return t

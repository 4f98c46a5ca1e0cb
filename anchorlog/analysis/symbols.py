"""Memory symbols: GE's anchor -> symbol equivalence classes (``GraphUtils::GetRefMapping``, reference §3).

Anchors sharing a symbol share memory. ``anchorlog/queries/symbols.dl`` derives the classes as a recursive query
over the fact database (founders ``tree_root`` / ``tree_link`` + ``sym_root``, GE's unions, classes
``sym_class`` / ``anchor_symbol``; the whole table is the demand-driven ``ds_*`` relations with every anchor asked,
``sym_all``); this module lays the result out the way GE's procedure leaves it: symbol
*names* (the founding anchor, e.g. ``conv1_out_0``) and the *order* of anchors inside a symbol (nodes in
``GetAllNodes`` order after a topological sort, in-anchors before out-anchors, unions keep the longer list),
both of which GE's layout checkers depend on (reference §10). A step-by-step replay of GE's procedure is kept as
a test oracle only (tests/oracles/ge_refmap.py).

Anchors are ``(graph, node, io, idx)`` tuples with ``io`` in ``{"in", "out"}``; symbols are GE anchor-name
strings (``<node>_out_<i>`` / ``<node>_in_<i>``).

Public API::

    a2s, s2a = symbol_table(model)                 # dict anchor->symbol, dict symbol->[anchors] (GE order)
    st = ref_mapping(model, graph="sub")           # SymbolTable; GetRefMapping called on a subgraph (§3.4)
    st.symbol_of(("g", "relu", "out", 0)); st.same(a, b); st.anchors(sym)
    st = cached_symbol_table(model, ctx, graph)    # once per model state per pass context (read-only)
    rows = cached_node_order(model, ctx, graph)    # GE's visiting order (node_order rows), same cache
    st = assemble_symbol_table(res, top, order=rows, relations={...})  # GE's table from symbols.dl's result rows
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlog.errors import InputError, PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex

if TYPE_CHECKING:  # pragma: no cover
    from anchorlog.facts.relations import FactDB

Anchor = tuple[str, str, str, int]  # (graph, node, "in"|"out", index)

QUERIES = Path(__file__).resolve().parent.parent / "queries"
SYMBOLS_DL = QUERIES / "symbols.dl"

PARENT_NODE_INDEX = "_parent_node_index"
REF_VAR_SRC_VAR_NAME = "ref_var_src_var_name"
NEXT_ITERATION = "_next_iteration_node"


def anchor_name(node: str, io: str, idx: int) -> str:
    """GE's ``NodeIndexIO::ToString``: ``<node>_out_<i>`` / ``<node>_in_<i>``."""
    return f"{node}_{io}_{idx}"


# ------------------------------------------------------------------------------------------------ node order
def topo_nodes(graph: Graph) -> list[Node]:
    """The direct nodes of ``graph`` in a topological order over data and control edges.

    Stable: among ready nodes the one stored first goes first, so an already sorted graph keeps its order
    (GE dumps are stored after ``TopologicalSorting``). Nodes on a cycle keep their stored order at the end.
    """
    nodes = list(graph.nodes.values())
    pos = {n.name: i for i, n in enumerate(nodes)}
    if _stored_order_is_topological(nodes, pos):
        # the stable sort below would return exactly the stored order: skip building the successor lists
        return nodes
    indeg = [0] * len(nodes)
    succ: list[list[int]] = [[] for _ in nodes]
    for i, n in enumerate(nodes):
        preds = {a[0] for a in n.inputs if a is not None and a[0] in pos} | {c for c in n.ctrl_inputs if c in pos}
        preds.discard(n.name)
        indeg[i] = len(preds)
        for p in preds:
            succ[pos[p]].append(i)
    ready = [i for i, d in enumerate(indeg) if d == 0]
    heapq.heapify(ready)
    out: list[int] = []
    while ready:
        i = heapq.heappop(ready)
        out.append(i)
        for j in succ[i]:
            indeg[j] -= 1
            if indeg[j] == 0:
                heapq.heappush(ready, j)
    if len(out) < len(nodes):
        seen = set(out)
        out.extend(i for i in range(len(nodes)) if i not in seen)
    return [nodes[i] for i in out]


def _stored_order_is_topological(nodes: list[Node], pos: dict[str, int]) -> bool:
    """Whether every data/control predecessor of each node is stored before it (self-loops ignored)."""
    get = pos.get
    for i, n in enumerate(nodes):
        for a in n.inputs:
            if a is not None:
                p = get(a[0])
                if p is not None and p > i:
                    return False
        for c in n.ctrl_inputs:
            p = get(c)
            if p is not None and p > i:
                return False
    return True


def all_nodes(model: Model, graph: Graph | str | None = None, *, sort: bool = True) -> list[tuple[Graph, Node]]:
    """GE ``ComputeGraph::GetAllNodes`` of ``graph`` (root by default): each node, then, recursively, the
    nodes of its subgraphs in subgraph order, then the next node (reference §1.1)."""
    g = model.resolve_graph(graph)
    out: list[tuple[Graph, Node]] = []
    visiting: set[str] = set()

    def visit(gr: Graph) -> None:
        if gr.name in visiting:  # a malformed model whose subgraphs own each other
            return
        visiting.add(gr.name)
        for n in topo_nodes(gr) if sort else list(gr.nodes.values()):
            out.append((gr, n))
            for s in n.subgraph_names:
                if s and model.has_graph(s):
                    visit(model.graph(s))
        visiting.discard(gr.name)

    visit(g)
    return out


# ------------------------------------------------------------------------------------------------ the table
@dataclass
class SymbolTable:
    """``anchor_to_symbol`` and ``symbol_to_anchors`` (anchor lists in GE's append order)."""

    anchor_to_symbol: dict[Anchor, str] = field(default_factory=dict)
    symbol_to_anchors: dict[str, list[Anchor]] = field(default_factory=dict)
    graph: str = ""

    def symbol_of(self, anchor: Anchor) -> str | None:
        return self.anchor_to_symbol.get(anchor)

    def anchors(self, symbol: str) -> list[Anchor]:
        return list(self.symbol_to_anchors.get(symbol, []))

    def same(self, a: Anchor, b: Anchor) -> bool:
        sa = self.anchor_to_symbol.get(a)
        return sa is not None and sa == self.anchor_to_symbol.get(b)

    def classes(self) -> list[frozenset[Anchor]]:
        """The partition (each symbol's anchor set), for comparing tables regardless of naming."""
        return [frozenset(v) for v in self.symbol_to_anchors.values()]

    def as_pair(self) -> tuple[dict[Anchor, str], dict[str, list[Anchor]]]:
        return self.anchor_to_symbol, self.symbol_to_anchors

    def copy(self) -> SymbolTable:
        return SymbolTable(
            dict(self.anchor_to_symbol), {k: list(v) for k, v in self.symbol_to_anchors.items()}, self.graph
        )


def ref_mapping(model: Model, graph: Graph | str | None = None, *, ctx: Any = None) -> SymbolTable:
    """GE ``GraphUtils::GetRefMapping(graph)`` (root by default) from the rules: see :func:`symbol_table_rules`."""
    return symbol_table_rules(model, graph, ctx=ctx)


def _io_owner_ok(idx: ModelIndex, gr: Graph) -> bool:
    """The owner part of ``NodeUtils::IsSubgraphInput/Output`` (§1.4): the graph has a parent node, and that
    parent is not an unknown-shape wrapper living in an unknown-shape graph or in the root graph."""
    own = idx.owner.get(gr.name)
    if own is None:
        return False
    parent_graph, parent, _ = own
    if parent.attr("_is_unknown_shape") is True:
        if parent_graph.attr("_graph_unknown_flag") is True or parent_graph.name == idx.root_name:
            return False
    return True


def is_subgraph_input(idx: ModelIndex, gr: Graph, n: Node) -> bool:
    return PARENT_NODE_INDEX in n.attrs and _io_owner_ok(idx, gr)


def out_anchor_count(gr: Graph, n: Node) -> int:
    """Out-anchors of ``n``: its output descs, or more when consumers use higher indexes (descs missing)."""
    k = n.num_outputs
    used = _used_outputs(gr).get(n.name)
    return max(k, used + 1) if used is not None else k


def _used_outputs(gr: Graph) -> dict[str, int]:
    """Highest output index used by a consumer, per producer; cached on the graph until its next edit."""
    cache = getattr(gr, "_anchorlog_used_outs", None)
    if cache is not None and cache[0] is gr._consumers and gr._consumers is not None:
        return cache[1]
    gr._ensure_index()
    used: dict[str, int] = {}
    for (src, o), users in (gr._consumers or {}).items():
        if users and o > used.get(src, -1):
            used[src] = o
    gr._anchorlog_used_outs = (gr._consumers, used)  # type: ignore[attr-defined]
    return used


# ------------------------------------------------------------------------------------------------ the rules
# the fact relations symbols.dl reads (a private database derives only these)
SYMBOL_RELATIONS = (
    "graph",
    "graph_attr",
    "node",
    "node_attr",
    "in_anchor",
    "out_anchor",
    "data_edge",
    "ctrl_edge",
    "tensor_attr",
    "ref_io",
    "parent_in",
    "parent_out",
    "subgraph",
)
_RULE_OUTPUTS = ["tree_link", "sym_root", "sg_out_union", "merge_peer", "nextiter_out", "phantom_out", "late_link"]
_NODE_BITS = 20  # aid = ord * 2^20 + io * 2^19 + idx (symbols.dl)
_NODE_SHIFT = 1 << _NODE_BITS
_IO_BIT = _NODE_SHIFT >> 1
_IDX_MASK = _IO_BIT - 1


# ``engine="auto"`` used DuckDB from this many nodes while SQLite's plans for symbols.dl were quadratic. Since
# the engine forces size-guided join orders (commit 730908e) SQLite is linear and the faster of the two
# (100 k nodes, CPU: rules 3.6 s on SQLite vs 5.3 s on DuckDB, 30 Nov 2026), so "auto" means SQLite; the
# constant stays (None = never) for callers that read it.
DUCKDB_FROM_NODES: int | None = None


def _pick_engine(engine: str, nodes: int) -> str:
    if engine != "auto":
        return engine
    if DUCKDB_FROM_NODES is not None and nodes >= DUCKDB_FROM_NODES:
        try:
            import duckdb  # noqa: F401

            return "duckdb"
        except ImportError:
            pass
    return "sqlite"


def _program() -> Any:
    from anchorlog.queries import Program

    return Program.cached(SYMBOLS_DL)


def symbol_table_rules(
    model: Model | None = None,
    graph: Graph | str | None = None,
    *,
    db: FactDB | None = None,
    ctx: Any = None,
    engine: str = "auto",
) -> SymbolTable:
    """GE ``GraphUtils::GetRefMapping(graph)`` (root by default; the table covers the graph and its nested
    subgraphs), computed by ``queries/symbols.dl``.

    The rules derive which anchors share memory: every anchor's founder (``anchor_tree``) and the unions GE
    performs (``sg_out_union`` for subgraph outputs, ``merge_peer`` for Merge inputs). They number anchors
    in GE's visiting order (``node_order``, :func:`anchorlog.analysis.order.node_order_rows`: DFS topological
    order, ``GetAllNodes`` nesting; in-anchors before out-anchors). This function only lays the result out the
    way GE's procedure leaves it (reference §3.1, §10): a symbol is named after its founder and lists its
    anchors in visiting order; where unions join symbols they are applied in visiting order, the longer list
    surviving (ties: the second argument), its anchors followed by the shorter list's. Like GE it keeps the
    one-anchor "phantom" entry of an output aliasing a RefData, and gives unconnected in-anchors a symbol.

    ``engine``: ``"sqlite"``, ``"duckdb"`` or ``"auto"`` (SQLite: linear and faster than DuckDB here since
    the engine forces size-guided join orders; see :data:`DUCKDB_FROM_NODES`). ``db``: a fact database of ``model`` (default: ``shared_facts(model, ctx)`` when a pass context is
    given, else a private database of the relations the rules read). Without ``model``, ``db`` alone is used
    (GE's order rebuilt from its node and edge rows). Raises :class:`InputError` where GE's mapping fails
    because a producer comes after its consumer in GE's order, :class:`PassFailure` where it fails otherwise.
    """
    from anchorlog.analysis.order import node_order_rows

    if model is not None:
        g = model.resolve_graph(graph)
        order = node_order_rows(model, g)
        if db is None:
            if ctx is not None:
                from anchorlog.analysis.fact_cache import shared_facts

                db = shared_facts(model, ctx)
            else:
                from anchorlog.facts.relations import FactDB

                db = FactDB.from_model(model, relations=SYMBOL_RELATIONS)
        gname: str | None = g.name if graph is not None else None
    elif db is not None:
        gname = graph.name if isinstance(graph, Graph) else graph
        order = node_order_from_db(db, gname)
    else:
        raise TypeError("symbol_table_rules needs a model or a fact database")
    return _rules_table(db, order, gname, engine)


def symbol_inputs(
    order: list[tuple[str, str, int]], top: str | None = None, *, whole: bool = False
) -> dict[str, list[tuple]]:
    """The input relations of ``symbols.dl`` (as ``extra=`` of a run): GE's node ``order`` (``node_order`` rows),
    the mapped graph ``top`` (None: each root graph) and, with ``whole``, every anchor asked (the whole table;
    otherwise the including program asks through ``sym_ask_in`` / ``sym_ask_out`` / ``sym_ask_members``)."""
    return {
        "node_order": order,
        "sym_top": [(top,)] if top is not None else [],
        "sym_all": [(1,)] if whole else [],
    }


def _rules_table(db: Any, order: list[tuple[str, str, int]], gname: str | None, engine: str) -> SymbolTable:
    """symbols.dl on ``db`` with GE's ``order`` (mapped graph ``gname``; None: each root graph), laid out."""
    extra = symbol_inputs(order, gname, whole=True)
    res = _program().run(db, engine=_pick_engine(engine, len(order)), extra=extra, outputs=_RULE_OUTPUTS)
    return assemble_symbol_table(
        res,
        gname or (order[0][0] if order else ""),
        order=order,
        relations={"tree": "tree_link", "founders": "sym_root"},
    )


# The roles of symbols.dl's result relations in the assembly, and their names in symbols.dl.
SYMBOL_ROWS = {
    "tree": "tree_root",
    "sg_out_union": "sg_out_union",
    "merge_peer": "merge_peer",
    "nextiter_out": "nextiter_out",
    "phantom_out": "phantom_out",
    "late_link": "late_link",
}


# The roles of the assembly -> symbols.dl's demand-driven relations (complete whatever is asked); the "tree" role
# is the includer's (aid, founder) rows of the classes it wants assembled.
DEMAND_ROWS = {
    "sg_out_union": "ds_sg_out_union",
    "merge_peer": "ds_merge_peer",
    "nextiter_out": "ds_nextiter_out",
    "phantom_out": "ds_phantom_out",
    "late_link": "ds_late_link",
}


def asked_symbol_table(
    model: Model, ctx: Any, program: Any, tree: str, *, engine: str = "auto", extra: dict[str, Any] | None = None
) -> SymbolTable | None:
    """GE's table of the root graph (as :func:`cached_symbol_table`), restricted to the classes a program that
    includes ``symbols.dl`` asks for: ``tree`` names its ``(aid, founder)`` relation holding every anchor of
    those classes (``ds_member_in`` / ``ds_member_out`` of the founders asked through ``sym_ask_members``). The
    program must also ask for every class a union, a Merge, an anchor with two founders or a late link touches
    (their names and order depend on the whole of each, as GE's mapping does them; tm_symtab.dl shows how): then
    every listed symbol has the whole table's name and anchors, in the same order, and the same errors are raised.

    None when a symbol name could collide across graphs (a founder or phantom anchor of a node whose name occurs in
    two mapped graphs: in the whole table one such symbol replaces the other, which a part cannot tell): the caller
    then needs the whole table.

    ``extra``: further input relations of ``program`` (beside symbols.dl's own), e.g. which nodes to ask about."""
    from anchorlog.analysis.fact_cache import shared_facts

    g = model.resolve_graph(None)
    order = cached_node_order(model, ctx, g)
    res = program.run(
        shared_facts(model, ctx),
        engine=_pick_engine(engine, len(order)),
        extra={**(extra or {}), **symbol_inputs(order)},
        outputs=[tree, *DEMAND_ROWS.values()],
    )
    graph_of: dict[str, str] = {}
    twice: set[str] = set()
    for gname, node, _ in order:
        seen = graph_of.setdefault(node, gname)
        if seen != gname:
            twice.add(node)
    if twice:
        by_ord = {o: n for _, n, o in order}
        named = {r for _, r in res.rows(tree, sort=False)} | {a for (a,) in res.rows(DEMAND_ROWS["phantom_out"])}
        if any(by_ord[int(a) >> _NODE_BITS] in twice for a in named):
            return None
    return assemble_symbol_table(
        res, order[0][0] if order else "", order=order, relations={"tree": tree, **DEMAND_ROWS}
    )


def _decoder(order: list[tuple[str, str, int]]) -> tuple[Any, Any]:
    """aid -> (graph, node, io, idx) for anchors numbered over ``order`` (``aid = ord * 2^20 + io * 2^19 + idx``):
    one anchor, and a list of them."""
    if order and (order[0][2] != 0 or order[-1][2] != len(order) - 1):
        by_ord: Any = {o: (g, n) for g, n, o in order}
    else:
        by_ord = [(g, n) for g, n, _ in order]

    def anchor(aid: int) -> Anchor:
        g, n = by_ord[aid >> _NODE_BITS]
        return (g, n, "out" if aid & _IO_BIT else "in", aid & _IDX_MASK)

    def anchors(aids: list[int]) -> list[Anchor]:
        return [(*by_ord[a >> _NODE_BITS], "out" if a & _IO_BIT else "in", a & _IDX_MASK) for a in aids]

    return anchor, anchors


def assemble_symbol_table(
    result: Any,
    top: str,
    *,
    order: list[tuple[str, str, int]] | None = None,
    relations: dict[str, str] | None = None,
) -> SymbolTable:
    """GE's symbol table (names, anchor order inside each symbol, phantom entries) from ``symbols.dl``'s result
    relations: the public form of the assembly :func:`symbol_table_rules` does (see there for GE's rules).

    ``result``: a rule result (anything with ``rows(name, sort=False)``), e.g. of ``symbols.dl`` or of a program
    including it. ``relations``: role -> relation name in ``result`` for the roles of :data:`SYMBOL_ROWS`
    (``tree``, ``sg_out_union``, ``merge_peer``, ``nextiter_out``, ``phantom_out``, ``late_link``); missing roles
    use symbols.dl's names. The ``tree`` relation holds ``(aid, founder)`` rows (symbols.dl ``tree_root``;
    anchors decoded with ``order``, the ``node_order`` rows the rules ran with) or ``(graph, node, io, idx, aid,
    founder)`` rows (``anchor_tree``, or a subset such as layout.dl's rows for the walked symbols: then only
    those symbols are laid out, and ``order`` is not needed). An optional role ``founders`` names a relation of
    ``(aid,)`` rows whose own ``(aid, aid)`` rows the ``tree`` relation leaves out (symbols.dl: ``tree_link`` +
    ``sym_root`` = ``tree_root``, two results SQLite never writes to a work table). ``top``: the mapped graph (for messages).
    Raises :class:`InputError` / :class:`PassFailure` where GE's mapping fails."""
    names = dict(SYMBOL_ROWS)
    if relations:
        names.update(relations)
    pairs = result.rows(names["tree"], sort=False)
    if "founders" in names:  # the tree without the founders' own rows, and the founders
        pairs.extend((a, a) for (a,) in result.rows(names["founders"], sort=False))
    if pairs and len(pairs[0]) != 2:
        by_aid: dict[int, Anchor] = {}
        wide = pairs
        pairs = []
        for g, n, io, i, aid, root in wide:
            aid = int(aid)
            by_aid[aid] = (g, n, io, int(i))
            pairs.append((aid, int(root)))
        anchor_of: Any = by_aid.__getitem__

        def anchors_of(aids: list[int]) -> list[Anchor]:
            return [by_aid[a] for a in aids]

    else:
        if order is None and pairs:
            raise TypeError("assemble_symbol_table: (aid, founder) rows need the node_order rows to decode anchors")
        anchor_of, anchors_of = _decoder(order or [])
    return _assemble_pairs(result, names, pairs, anchor_of, anchors_of, top)


def _assemble_pairs(
    res: Any, names: dict[str, str], pairs: list[tuple], anchor_of: Any, anchors_of: Any, top: str
) -> SymbolTable:
    """The layout: ``pairs`` = (aid, founder) per anchor with a symbol (an anchor may have two founders);
    ``anchor_of``: aid -> anchor; ``anchors_of``: a list of aids -> their anchors."""
    pairs.sort()  # visiting order (the rules' result usually comes sorted: then this is one linear pass)
    root_of: dict[int, int] = dict(pairs)
    two_roots: dict[int, list[int]] = {}
    if len(root_of) != len(pairs):
        # an output aliasing a RefData that also reuses an input: fine only if both are one symbol by then; the
        # anchor keeps the smaller founder as its own
        founders: dict[int, list[int]] = {}
        for aid, root in pairs:
            founders.setdefault(aid, []).append(root)
        two_roots = {aid: roots for aid, roots in founders.items() if len(roots) > 1}
        for aid, roots in two_roots.items():
            roots.sort()
            root_of[aid] = roots[0]
        pairs = sorted(root_of.items())
    known = root_of.__contains__  # anchors with a symbol (every founder has a tree row)

    def name(aid: int) -> str:
        if not known(aid):  # only founders are looked up here, and every founder has a tree row
            raise PassFailure(f"symbol table: anchor #{aid} has no symbol", top)
        a = anchor_of(aid)
        return anchor_name(a[1], a[2], a[3])

    late = sorted(res.rows(names["late_link"], sort=False))
    if late:
        a, b = (int(x) for x in late[0])
        ga = anchor_of(a) if known(a) else (top, f"#{a}", "in", 0)
        gb = anchor_of(b) if known(b) else (top, f"#{b}", "out", 0)
        raise InputError(
            f"symbol table: {anchor_name(ga[1], ga[2], ga[3])} consumes {anchor_name(gb[1], gb[2], gb[3])}, which "
            "comes later in GE's node order: the graph (or the subgraph it sits in) is not topologically sortable",
            ga[0],
        )

    # the unions, as GE performs them: key (time, 0, ...) sorts before the appends (time, 1) of that anchor
    events: list[tuple] = []
    involved: set[int] = set()
    for t, p, q in res.rows(names["sg_out_union"], sort=False):
        t, p, q = int(t), int(p), int(q)
        events.append((t, 0, "union", p, q))
        involved.update((root_of.get(p, p), root_of.get(q, q)))
    merges: dict[int, list[tuple[int, int]]] = {}
    for t, p in res.rows(names["merge_peer"], sort=False):
        merges.setdefault(int(t) // _NODE_SHIFT, []).append((int(t), int(p)))
    for peers in merges.values():
        peers.sort()
        events.append((peers[0][0], 0, "merge", [p for _, p in peers], None))
        involved.update(root_of.get(p, p) for _, p in peers)
    after: dict[int, int] = {int(x): int(t) for x, t in res.rows(names["nextiter_out"], sort=False)}
    for roots in two_roots.values():
        involved.update(roots)

    # symbols without unions: named after the founder, anchors in visiting order (a symbol's place in the table:
    # where its first anchor is visited)
    aids = [aid for aid, _ in pairs]
    founders = [r for _, r in pairs]
    members: dict[int, list[Anchor]] = {}
    get = members.get
    for a, r in zip(anchors_of(aids), founders):
        lst_ = get(r)
        if lst_ is None:
            members[r] = [a]
        else:
            lst_.append(a)
    if after:  # a NextIteration output comes right behind its Merge input in its symbol
        for r in {root_of[x] for x in after if x in root_of}:
            own = sorted((x for x, y in pairs if y == r), key=lambda x: (after.get(x, x), 1 if x in after else 0))
            members[r] = anchors_of(own)
    st = SymbolTable(graph=top)
    s2a = st.symbol_to_anchors
    for root, lst in members.items():
        if root not in involved:
            s2a[name(root)] = lst
    st.anchor_to_symbol = a2s = {a: s for s, lst in s2a.items() for a in lst}

    # symbols that unions join: replay appends and unions in visiting order
    if involved:
        for aid, root in pairs:
            if root in involved:
                if aid in after:
                    events.append((after[aid], 2, "append", aid, None))
                else:
                    events.append((aid, 1, "append", aid, None))
        events.sort(key=lambda e: (e[0], e[1]))
        sym_of_root: dict[int, str] = {}
        roots_of: dict[str, list[int]] = {}

        def symbol_of(aid: int) -> str:
            s = sym_of_root.get(root_of.get(aid, -1))
            if s is None:
                a = anchor_of(aid) if known(aid) else None
                raise InputError(
                    f"symbol table: {name(aid) if a else aid} has no symbol yet where GE joins it "
                    "(its producer comes later in GE's node order)",
                    a[0] if a else top,
                )
            return s

        def union(x: int, y: int) -> str:
            s1, s2 = symbol_of(x), symbol_of(y)
            if s1 == s2:
                return s1
            keep, drop = (s1, s2) if len(s2a[s1]) > len(s2a[s2]) else (s2, s1)
            moved = s2a.pop(drop)
            s2a[keep].extend(moved)
            for a in moved:
                a2s[a] = keep
            moved_roots = roots_of.pop(drop)
            for r in moved_roots:
                sym_of_root[r] = keep
            roots_of[keep].extend(moved_roots)
            return keep

        for _t, _k, kind, x, y in events:
            if kind == "append":
                r = root_of[x]
                s = sym_of_root.get(r)
                if s is None:  # the founder opens its symbol
                    s = name(r)
                    sym_of_root[r] = s
                    roots_of[s] = [r]
                    s2a[s] = []
                a = anchor_of(x)
                if x in two_roots and len({sym_of_root.get(r) for r in two_roots[x]}) > 1:
                    raise PassFailure(
                        f"symbol table: {name(x)} aliases a RefData and reuses an input of another symbol",
                        a[0],
                    )
                s2a[s].append(a)
                a2s[a] = s
            elif kind == "union":
                union(x, y)
            else:  # Merge: the peer with the longest list first, then every peer joined to it
                best, best_n = None, 0
                for p in x:
                    r = sym_of_root.get(root_of.get(p, -1))
                    if r is not None and len(s2a[r]) > best_n:
                        best, best_n = p, len(s2a[r])
                if best is None:
                    raise PassFailure(f"symbol table: no input of Merge {name(x[0])} has a symbol", top)
                for p in x:
                    union(best, p)

    # GE's one-anchor entries for outputs aliasing a RefData (their anchor keeps the RefData's symbol)
    for (aid,) in res.rows(names["phantom_out"], sort=False):
        if known(int(aid)):
            a = anchor_of(int(aid))
            s2a.setdefault(anchor_name(a[1], a[2], a[3]), [a])
    return st


def node_order(model: Model, graph: Graph | str | None = None) -> list[tuple[str, str, int]]:
    """The ``node_order(graph, node, ord)`` rows of ``graph`` (root by default): GE's visiting order
    (:func:`anchorlog.analysis.order.node_order_rows`)."""
    from anchorlog.analysis.order import node_order_rows

    g = None if graph is None else (model.graph(graph) if isinstance(graph, str) else graph)
    return node_order_rows(model, g)


def node_order_from_db(db: FactDB, graph: str | None = None) -> list[tuple[str, str, int]]:
    """``node_order`` rows for a fact database: GE's order of ``graph`` (default: each root graph in turn),
    the graphs rebuilt from the node/data_edge/ctrl_edge/subgraph rows."""
    from anchorlog.analysis.order import node_order_rows

    graphs: dict[str, Graph] = {}
    roots: list[str] = []
    for g, _m, _pg, _pn, is_root in db.conn.execute("SELECT * FROM graph ORDER BY rowid"):
        graphs[g] = Graph(g)
        if is_root:
            roots.append(g)
    for g, n, t in db.conn.execute("SELECT graph, name, type FROM node ORDER BY rowid"):
        if g in graphs:
            graphs[g].nodes[n] = Node(n, t)
    for g, s, o, d, i in db.conn.execute("SELECT * FROM data_edge ORDER BY rowid"):
        node = graphs[g].nodes.get(d) if g in graphs else None
        if node is not None:
            while len(node.inputs) <= i:
                node.inputs.append(None)
            node.inputs[i] = (s, o)
    for g, s, d in db.conn.execute("SELECT * FROM ctrl_edge ORDER BY rowid"):
        node = graphs[g].nodes.get(d) if g in graphs else None
        if node is not None:
            node.ctrl_inputs.append(s)
    for g, n, i, sub in db.conn.execute("SELECT * FROM subgraph ORDER BY graph, node, idx"):
        node = graphs[g].nodes.get(n) if g in graphs else None
        if node is not None:
            while len(node.subgraph_names) <= i:
                node.subgraph_names.append("")
            node.subgraph_names[i] = sub
    for gr in graphs.values():
        gr.invalidate()
    out: list[tuple[str, str, int]] = []
    for r in [graph] if graph is not None else roots:
        model = Model("facts", [graphs[r]] + [g for name, g in graphs.items() if name != r])
        for g, n, _ in node_order_rows(model, graphs[r]):
            out.append((g, n, len(out)))
        for g in list(model.graphs):
            model.remove_graph(g.name)
    return out


def symbol_table_datalog(
    db: FactDB, graph: str | None = None, *, engine: str = "auto", model: Model | None = None
) -> SymbolTable:
    """:func:`symbol_table_rules` over a fact database (kept for callers of the earlier API)."""
    return symbol_table_rules(model, graph, db=db, engine=engine)


# ------------------------------------------------------------------------------------------------ per model state
_CACHE_KEY = "symbol_tables"


def _model_state(model: Model, ctx: Any) -> tuple:
    """What a symbol table of ``model`` depends on, as identities: the shared fact database's stamp (every edit
    the IR tracks bumps it once synced), the subgraph structure, and the remembered GE order (a topological
    sort replaces it)."""
    from anchorlog.analysis import order as order_mod
    from anchorlog.analysis.fact_cache import facts_stamp

    return (facts_stamp(model, ctx), model.structure_version, id(order_mod.remembered_topological_order(model)))


def _state_entry(model: Model, ctx: Any) -> dict[str, Any]:
    """The cache of ``ctx`` for the current state of ``model`` (emptied when the state changed)."""
    from anchorlog.analysis import order as order_mod

    state = _model_state(model, ctx)
    entry = ctx.state.get(_CACHE_KEY)
    if entry is None or entry["model"] is not model or entry["state"] != state:
        # the remembered order object is kept alive with the entry, so that its id is not reused meanwhile
        entry = {
            "model": model,
            "state": state,
            "topo": order_mod.remembered_topological_order(model),
            "order": {},
            "table": {},
        }
        ctx.state[_CACHE_KEY] = entry
    return entry


def cached_node_order(model: Model, ctx: Any, graph: Graph | str | None = None) -> list[tuple[str, str, int]]:
    """The ``node_order`` rows of ``graph`` (root by default; GE's visiting order, see :func:`node_order`),
    computed once per model state in the pass context ``ctx`` (see :func:`cached_symbol_table`). Do not modify
    the list."""
    from anchorlog.analysis.order import node_order_rows

    g = model.resolve_graph(graph)
    entry = _state_entry(model, ctx)
    rows = entry["order"].get(g.name)
    if rows is None:
        rows = entry["order"][g.name] = node_order_rows(model, g)
    return rows


def cached_symbol_table(
    model: Model, ctx: Any, graph: Graph | str | None = None, *, engine: str = "auto"
) -> SymbolTable:
    """GE ``GetRefMapping(graph)`` (root by default) as :func:`symbol_table_rules` computes it on the pipeline's
    shared fact database, done once per model state per pass context: passes of one pipeline asking for the
    table of an unchanged model share one computation. The state is the shared fact database's stamp
    (:func:`anchorlog.analysis.fact_cache.facts_stamp`: any edit made through the IR, synced), the subgraph
    structure and GE's remembered order; an edit between two calls means a new computation.

    The table is shared: treat it as read-only (``.copy()`` before merging symbols, as TensorMove does). Errors
    (GE's mapping failing) are not cached."""
    g = model.resolve_graph(graph)
    entry = _state_entry(model, ctx)
    key = (g.name, graph is None)
    st = entry["table"].get(key)
    if st is None:
        from anchorlog.analysis.fact_cache import shared_facts

        order = cached_node_order(model, ctx, g)
        st = _rules_table(shared_facts(model, ctx), order, g.name if graph is not None else None, engine)
        entry["table"][key] = st
    return st


def symbol_table(
    model_or_db: Model | FactDB | Any,
    graph: str | None = None,
    *,
    ctx: Any = None,
    engine: str = "auto",
    method: str = "rules",
) -> tuple[dict[Anchor, str], dict[str, list[Anchor]]]:
    """``(anchor_to_symbol, symbol_to_anchors)`` for ``graph`` (root by default) and all its subgraphs, from
    the rules (:func:`symbol_table_rules`). With a pass context ``ctx`` the table is the one
    :func:`cached_symbol_table` keeps for the current model state (on the shared fact database): read-only,
    copy the dicts before editing them. Anchors are ``(graph, node, io, idx)``; symbols GE's anchor-name
    strings; lists in GE's order."""
    if method not in ("rules", "auto", "datalog"):
        raise ValueError(f"symbol_table: unknown method {method!r} (the table always comes from the rules)")
    if isinstance(model_or_db, Model):
        if ctx is not None:
            return cached_symbol_table(model_or_db, ctx, graph, engine=engine).as_pair()
        return symbol_table_rules(model_or_db, graph, ctx=ctx, engine=engine).as_pair()
    return symbol_table_rules(None, graph, db=model_or_db, engine=engine).as_pair()

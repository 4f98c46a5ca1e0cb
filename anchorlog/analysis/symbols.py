"""Memory symbols: GE's anchor -> symbol equivalence classes (``GraphUtils::GetRefMapping``, reference §3).

Anchors sharing a symbol share memory. Two ways to get the table, giving the same partition:

* :func:`ref_mapping` replays GE's procedure over a :class:`~anchorlog.facts.graph.Model` (nodes in
  ``GetAllNodes`` order after a topological sort, in-anchors before out-anchors, unions keep the longer
  list). It reproduces GE's symbol *names* (the founding anchor, e.g. ``conv1_out_0``) and the *order* of
  anchors inside a symbol, both of which GE's layout checkers depend on (reference §10).
* ``anchorlog/queries/symbols.dl`` states the same equivalence as a recursive query over the fact database
  (relations ``anchor_symbol`` / ``same_symbol``); :func:`symbol_table` on a :class:`FactDB` uses it.

Anchors are ``(graph, node, io, idx)`` tuples with ``io`` in ``{"in", "out"}``; symbols are GE anchor-name
strings (``<node>_out_<i>`` / ``<node>_in_<i>``).

Public API::

    a2s, s2a = symbol_table(model)                 # dict anchor->symbol, dict symbol->[anchors] (GE order)
    st = ref_mapping(model, graph="sub")           # SymbolTable; GetRefMapping called on a subgraph (§3.4)
    st.symbol_of(("g", "relu", "out", 0)); st.same(a, b); st.anchors(sym)
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import _ModelIndex, ref_from_input

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


def all_nodes(model: Model, graph: Graph | str | None = None, *, sort: bool = True) -> list[tuple[Graph, Node]]:
    """GE ``ComputeGraph::GetAllNodes`` of ``graph`` (root by default): each node, then, recursively, the
    nodes of its subgraphs in subgraph order, then the next node (reference §1.1)."""
    g = model.root if graph is None else (model.graph(graph) if isinstance(graph, str) else graph)
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


class _Mapper:
    """GE's GetRefMapping primitives over anchor tuples (symbol names are GE anchor strings)."""

    def __init__(self) -> None:
        self.a2s: dict[Anchor, str] = {}
        self.s2a: dict[str, list[Anchor]] = {}

    def new(self, a: Anchor) -> None:
        s = anchor_name(a[1], a[2], a[3])
        self.s2a[s] = [a]
        self.a2s.setdefault(a, s)  # emplace: an anchor mapped earlier keeps its symbol (§3.2 step 4)

    def update(self, cur: Anchor, exist: Anchor) -> None:
        s = self.a2s.get(exist)
        if s is None or s not in self.s2a:
            raise PassFailure(
                f"symbol table: anchor {anchor_name(exist[1], exist[2], exist[3])} is not visible before "
                f"{anchor_name(cur[1], cur[2], cur[3])} (graph not topologically sortable?)",
                cur[0],
            )
        old = self.a2s.get(cur)
        if old is not None and old != s:
            raise PassFailure(
                f"symbol table: anchor {anchor_name(cur[1], cur[2], cur[3])} already in symbol {old}, cannot join {s}",
                cur[0],
            )
        self.s2a[s].append(cur)
        self.a2s.setdefault(cur, s)

    def union(self, a1: Anchor, a2: Anchor) -> str | None:
        s1, s2 = self.a2s.get(a1, ""), self.a2s.get(a2, "")
        if s1 == s2:
            return s1 or None
        if s1 not in self.s2a or s2 not in self.s2a:
            return None
        l1, l2 = self.s2a[s1], self.s2a[s2]
        keep, drop = (s1, s2) if len(l1) > len(l2) else (s2, s1)  # tie: the second survives
        moved = self.s2a.pop(drop)
        self.s2a[keep].extend(moved)
        for a in moved:
            self.a2s[a] = keep
        return keep


def ref_mapping(model: Model, graph: Graph | str | None = None) -> SymbolTable:
    """GE ``GraphUtils::GetRefMapping(graph)`` (root by default), replayed exactly (reference §3.2).

    Raises :class:`PassFailure` where GE's mapping fails (a producer not seen before its consumer)."""
    g = model.root if graph is None else (model.graph(graph) if isinstance(graph, str) else graph)
    idx = _ModelIndex(model)
    m = _Mapper()
    order = all_nodes(model, g)
    by_name: dict[str, Node] = {}
    for _, n in order:
        by_name.setdefault(n.name, n)

    def is_subgraph_output(gr: Graph, n: Node) -> bool:
        return (
            n.type == "NetOutput" and _io_owner_ok(idx, gr) and any(PARENT_NODE_INDEX in d.attrs for d in n.input_desc)
        )

    for gr, n in order:
        # ---- in-anchors
        nested = gr is not g
        if nested and is_subgraph_output(gr, n):
            _, parent, _ = idx.owner[gr.name]
            pg = idx.owner[gr.name][0]
            for k, src in enumerate(n.inputs):
                if src is None:
                    raise PassFailure(f"symbol table: subgraph output {n.name} input {k} is unconnected", gr.name)
                pidx = n.input_desc[k].attr(PARENT_NODE_INDEX) if k < len(n.input_desc) else None
                if pidx is None:
                    continue
                s = m.union((gr.name, src[0], "out", src[1]), (pg.name, parent.name, "out", int(pidx)))
                if s is None:
                    raise PassFailure(f"symbol table: cannot union {src[0]}_out_{src[1]} with {parent.name}", gr.name)
                cur = (gr.name, n.name, "in", k)
                m.s2a[s].append(cur)
                m.a2s.setdefault(cur, s)
        elif nested and is_subgraph_input(idx, gr, n):
            pg, parent, _ = idx.owner[gr.name]
            p = int(n.attr(PARENT_NODE_INDEX))
            src = parent.inputs[p] if p < len(parent.inputs) else None
            if src is not None:
                m.update((gr.name, n.name, "in", 0), (pg.name, src[0], "out", src[1]))
        elif n.type in ("Merge", "StreamMerge"):
            cur: list[Anchor] = []
            exist: list[Anchor] = []
            for k in range(n.num_inputs):
                src = n.inputs[k] if k < len(n.inputs) else None
                if src is None:
                    nxt = n.attr(NEXT_ITERATION)
                    if nxt:
                        x = gr.nodes.get(str(nxt))
                        if x is None:
                            raise PassFailure(f"symbol table: {n.name}: next iteration node {nxt} not found", gr.name)
                        cur += [(gr.name, n.name, "in", k), (gr.name, x.name, "out", 0)]
                else:
                    cur.append((gr.name, n.name, "in", k))
                    exist.append((gr.name, src[0], "out", src[1]))
            best, best_n = None, 0
            for e in exist:
                s = m.a2s.get(e)
                if s is not None and len(m.s2a.get(s, ())) > best_n:
                    best, best_n = e, len(m.s2a[s])
            sym = None
            for e in exist:
                sym = m.union(best, e) if best is not None else None
                if sym is None:
                    raise PassFailure(f"symbol table: cannot union the inputs of {n.name}", gr.name)
            if sym is not None:
                for a in cur:
                    m.s2a[sym].append(a)
                    m.a2s.setdefault(a, sym)
        else:
            for k in range(n.num_inputs):
                src = n.inputs[k] if k < len(n.inputs) else None
                a = (gr.name, n.name, "in", k)
                if src is None:
                    m.new(a)
                else:
                    m.update(a, (gr.name, src[0], "out", src[1]))
        # ---- out-anchors
        for i in range(out_anchor_count(gr, n)):
            a = (gr.name, n.name, "out", i)
            if a in m.a2s:
                continue
            refed = _ref_from_other(gr, n, i, idx)
            if refed is not None and refed in m.a2s:
                m.update(a, refed)
            r = ref_from_input(idx, gr, n, i)
            ref_in = (gr.name, n.name, "in", r) if r is not None else None
            if ref_in is not None and ref_in in m.a2s:
                if m.a2s.get(a) != m.a2s[ref_in]:
                    m.update(a, ref_in)
            else:
                m.new(a)
    # GE's phantom single-anchor entries (§3.2 step 4, §11 #20) are dropped: they name no memory.
    for s in [s for s, lst in m.s2a.items() if len(lst) == 1 and m.a2s.get(lst[0]) != s]:
        del m.s2a[s]
    return SymbolTable(m.a2s, m.s2a, g.name)


def _io_owner_ok(idx: _ModelIndex, gr: Graph) -> bool:
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


def is_subgraph_input(idx: _ModelIndex, gr: Graph, n: Node) -> bool:
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


def _ref_from_other(gr: Graph, n: Node, i: int, idx: _ModelIndex) -> Anchor | None:
    """GE ``CheckIsRefFromOther``: an output aliasing a RefData (``ref_var_src_var_name`` on the output desc,
    RefData in the same graph), or a subgraph RefData aliasing the inner Data that controls it."""
    if i < len(n.output_desc):
        v = n.output_desc[i].attr(REF_VAR_SRC_VAR_NAME)
        if v:
            tgt = gr.nodes.get(str(v))
            if tgt is not None and tgt.type == "RefData":
                return (gr.name, tgt.name, "out", 0)
    if n.type == "RefData" and gr.name in idx.owner:
        for c in n.ctrl_inputs:
            d = gr.nodes.get(c)
            if d is not None and d.type == "Data" and PARENT_NODE_INDEX in d.attrs:
                return (gr.name, d.name, "out", 0)
        raise PassFailure(f"symbol table: subgraph RefData {n.name} has no control edge from an inner Data", gr.name)
    return None


# ------------------------------------------------------------------------------------------------ Datalog path
def symbol_table_datalog(
    db: FactDB, graph: str | None = None, *, engine: str = "sqlite", model: Model | None = None
) -> SymbolTable:
    """The symbol table from ``queries/symbols.dl`` over a fact database (``graph``: the mapped graph, default
    the root; the table covers it and its nested subgraphs).

    The partition equals :func:`ref_mapping`'s. Names: the founding anchor of a class formed without unions;
    for classes joined by a subgraph output or a Merge the root of the largest member (GE keeps the longer
    list), ties to the earliest anchor. Anchors are listed in GetAllNodes order, in-anchors first."""
    from anchorlog.queries import Program

    order = node_order(model) if model is not None else node_order_from_db(db)
    extra: dict[str, list[tuple]] = {"node_order": order, "sym_top": [(graph,)] if graph is not None else []}
    prog = Program.from_file(SYMBOLS_DL)
    res = prog.run(db, engine=engine, extra=extra)
    rows = res.rows("anchor_symbol")  # (graph, node, io, idx, symbol, ord)
    st = SymbolTable(graph=graph or "")
    for g, n, io, i, s, _o in sorted(rows, key=lambda r: (r[5], 0 if r[2] == "in" else 1, r[3])):
        a = (g, n, io, int(i))
        st.anchor_to_symbol[a] = s
        st.symbol_to_anchors.setdefault(s, []).append(a)
    return st


def node_order(model: Model) -> list[tuple[str, str, int]]:
    """``(graph, node, ordinal)``: every node's position in GE's GetAllNodes order of the root."""
    return [(g.name, n.name, i) for i, (g, n) in enumerate(all_nodes(model))]


def node_order_from_db(db: FactDB) -> list[tuple[str, str, int]]:
    """:func:`node_order` for a fact database (graphs rebuilt from node/data_edge/ctrl_edge/subgraph rows;
    every root graph of the database in turn)."""
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
    out: list[tuple[str, str, int]] = []
    for r in roots:
        model = Model("facts", [graphs[r]] + [g for name, g in graphs.items() if name not in roots])
        for g, n in all_nodes(model):
            out.append((g.name, n.name, len(out)))
        for g in list(model.graphs):
            model.remove_graph(g.name)
    return out


def symbol_table(
    model_or_db: Model | FactDB | Any, graph: str | None = None, *, method: str = "auto", engine: str = "sqlite"
) -> tuple[dict[Anchor, str], dict[str, list[Anchor]]]:
    """``(anchor_to_symbol, symbol_to_anchors)`` for ``graph`` (root by default) and all its subgraphs.

    ``method``: ``"replay"`` (GE's procedure, exact names and order; needs a Model), ``"datalog"``
    (``symbols.dl``; a Model is turned into a FactDB first) or ``"auto"`` (replay for a Model, Datalog for a
    FactDB). Anchors are ``(graph, node, io, idx)``."""
    if isinstance(model_or_db, Model):
        if method in ("auto", "replay"):
            return ref_mapping(model_or_db, graph).as_pair()
        from anchorlog.facts.relations import FactDB

        db = FactDB.from_model(model_or_db)
        return symbol_table_datalog(db, graph, engine=engine, model=model_or_db).as_pair()
    if method == "replay":
        raise TypeError("symbol_table(method='replay') needs a Model")
    return symbol_table_datalog(model_or_db, graph, engine=engine).as_pair()

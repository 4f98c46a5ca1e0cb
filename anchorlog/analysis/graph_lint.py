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

import sqlite3
from pathlib import Path
from typing import Any

from anchorlog.analysis.registry import PassContext, register
from anchorlog.analysis.symbols import topo_nodes
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import INPUT_NAME_KEY, OUTPUT_NAME_KEY, io_names
from anchorlog.gcpause import paused_gc

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
        name = g.name
        rows += [(name, n.name, i) for i, n in enumerate(topo_nodes(g))]
    return rows


def lint_named_demand(model: Model, conn: sqlite3.Connection) -> set[tuple[str, str]]:
    """The named ops (an input or output name map among their attrs) whose input types the check can need: a
    demand set, as magic sets would compute, over-approximated cheaply — consumers of an output with two or
    more consumer edges, and consumers of a Data in a subgraph (their types become the wrapper's). Every other
    op has GE's default names, whose types the rules know without rows. The named ops are read from the fact
    database ``conn`` (``node_attr`` by its key index: no walk over every node)."""
    # one index search per key, merged here (a UNION in SQL sorts both lists to drop the repeats); the result is a
    # set, so the order the ops are looked at in does not matter
    named: dict[str, dict[str, None]] = {}
    for key in (INPUT_NAME_KEY, OUTPUT_NAME_KEY):
        for g, n in conn.execute('SELECT "graph", "node" FROM "node_attr" WHERE "key" = ?', (key,)):
            named.setdefault(g, {})[n] = None
    keep: set[tuple[str, str]] = set()
    if not named:
        return keep
    root = model.graphs[0]
    for g in model.graphs:
        names = named.get(g.name)
        if not names:
            continue
        in_subgraph = g is not root
        nodes = g.nodes
        consumers = g.consumers
        for name in names:
            n = nodes.get(name)
            for a in n.inputs if n is not None else ():
                if a is None:
                    continue
                if len(consumers(a[0], a[1])) >= 2 or (
                    in_subgraph and (src := nodes.get(a[0])) is not None and src.type == "Data"
                ):
                    keep.add((g.name, name))
                    break
    return keep


def lint_io_name_rows(model: Model, only: set[tuple[str, str]] | None = None) -> list[tuple[str, str, str, int, str]]:
    """Input/output names as GraphLint sees them: the op's name maps; an op without any gets GE's default
    names (``__input<i>`` / ``__output<i>``, what ``OpDesc::AddInputDesc`` assigns to unnamed tensors).
    ``only``: restrict to these (graph, node) pairs."""
    rows: list[tuple[str, str, str, int, str]] = []
    if only is not None:
        graphs = {g.name: g for g in model.graphs}
        pairs = [(graphs[gn], graphs[gn].nodes[nn]) for gn, nn in only if gn in graphs and nn in graphs[gn].nodes]
    else:
        pairs = [(g, n) for g in model.graphs for n in g.nodes.values()]
    # Most ops carry no name attrs (3 % of a generated transformer's do): their rows are GE's default names,
    # built from shared (idx, name) pairs instead of formatting each string per node.
    defaults = {"in": _default_names("__input"), "out": _default_names("__output")}
    name_key = {"in": INPUT_NAME_KEY, "out": OUTPUT_NAME_KEY}
    for g, n in pairs:
        gname, nname, attrs = g.name, n.name, n.attrs
        # the counts are Node.num_inputs / Node.num_outputs, spelled out (no property call per node)
        for io, count in (("in", max(len(n.inputs), len(n.input_desc))), ("out", len(n.output_desc))):
            names = io_names(n, io) if name_key[io] in attrs else None
            if names:
                rows.extend([(gname, nname, io, int(i), x) for x, i in names.items()])
            elif count:
                rows.extend([(gname, nname, io, i, x) for i, x in defaults[io](count)])
    return rows


def _default_names(prefix: str) -> Any:
    """``count -> [(i, f"{prefix}{i}") for i < count]``, the pairs made once and shared."""
    pairs: list[tuple[int, str]] = []

    def first(count: int) -> list[tuple[int, str]]:
        while len(pairs) < count:
            pairs.append((len(pairs), f"{prefix}{len(pairs)}"))
        return pairs[:count]

    return first


AUX_TABLES: dict[str, tuple[tuple[str, ...], tuple[tuple[str, ...], ...]]] = {
    "io_name": (
        ("graph", "node", "io", "idx", "name"),
        (("graph", "node", "io", "name"), ("graph", "node", "io", "idx")),
    ),
    "reach_pos": (("graph", "node", "pos"), (("graph", "node"),)),
}


def install_aux_table(db: Any, name: str, rows: list[tuple]) -> None:
    """(Re)create auxiliary fact table ``name`` (see :data:`AUX_TABLES`) in ``db`` with its indexes, so rules
    can join and negate it by index. Replaces an earlier copy (the model may have changed since)."""
    cols, indexes = AUX_TABLES[name]
    c = db.conn
    c.execute(f'DROP TABLE IF EXISTS "{name}"')
    c.execute(f'CREATE TABLE "{name}" ({", ".join(chr(34) + x + chr(34) for x in cols)})')
    c.executemany(f'INSERT INTO "{name}" VALUES ({", ".join("?" for _ in cols)})', rows)
    for i, ix in enumerate(indexes):
        c.execute(f'CREATE INDEX "idx_{name}_{i}" ON "{name}" ({", ".join(chr(34) + x + chr(34) for x in ix)})')
    c.commit()


LEAN_RELATIONS = ("graph", "node", "node_attr", "data_edge", "ctrl_edge", "subgraph")
LEAN_ATTRS = frozenset({"_parent_node_index", "original_type", INPUT_NAME_KEY, OUTPUT_NAME_KEY})


def matched_node_types(program: Any) -> set[str] | None:
    """The node types the rules can match when every ``node`` atom of ``program`` names its type as a
    constant (then the other node rows can never join); None when some atom reads any type."""
    from anchorlog.queries.analysis import all_atoms
    from anchorlog.queries.syntax import Const

    types: set[str] = set()
    for r in program.ast.rules:
        for atom, _ in all_atoms(r):
            if atom.rel != "node":
                continue
            t = atom.args[2] if len(atom.args) == 3 else None
            if not isinstance(t, Const):
                return None
            types.add(str(t.value))
    return types


def lean_fact_db(model: Model, node_types: set[str] | None = None) -> sqlite3.Connection:
    """A fact database holding only what ``graph_lint.dl`` reads: relations graph, node, data_edge, ctrl_edge,
    subgraph (schema and indexes as in :mod:`anchorlog.facts.relations`) and the node_attr rows of
    ``_parent_node_index`` / ``original_type`` and the two name-map keys (which ops are named, see
    :func:`lint_named_demand`). Building the full FactDB costs more than the whole check.
    ``node_types``: keep only the node rows of these types (see :func:`matched_node_types`)."""
    from anchorlog.facts.relations import INDEXES, SCHEMA, ModelIndex, attr_fact_value

    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    for rel in LEAN_RELATIONS:
        cols = ", ".join(f'"{c}" {dict(symbol="TEXT", number="INTEGER").get(t, "")}'.rstrip() for c, t in SCHEMA[rel])
        conn.execute(f'CREATE TABLE "{rel}" ({cols})')
    idx = ModelIndex(model)
    rows: dict[str, list[tuple]] = {rel: [] for rel in LEAN_RELATIONS}
    node_rows, attr_rows, edge_rows = rows["node"], rows["node_attr"], rows["data_edge"]
    ctrl_rows, sub_rows = rows["ctrl_edge"], rows["subgraph"]
    lean_attrs = tuple(LEAN_ATTRS)
    for gi, g in enumerate(model.graphs):
        own = idx.owner.get(g.name)
        gname = g.name
        rows["graph"].append(
            (gname, model.name or "model", own[0].name if own else "", own[1].name if own else "", 1 if gi == 0 else 0)
        )
        for n in g.nodes.values():
            name = n.name
            if node_types is None or n.type in node_types:
                node_rows.append((gname, name, n.type))
            attrs = n.attrs
            for key in lean_attrs:
                if key in attrs:
                    kind, value = attr_fact_value(attrs[key])
                    attr_rows.append((gname, name, key, kind, value))
            i = 0
            for a in n.inputs:
                if a is not None:
                    edge_rows.append((gname, a[0], a[1], name, i))
                i += 1
            if n.ctrl_inputs:
                ctrl_rows.extend([(gname, c, name) for c in n.ctrl_inputs])
            if n.subgraph_names:
                sub_rows.extend([(gname, name, k, x) for k, x in enumerate(n.subgraph_names) if x])
    for rel, rs in rows.items():
        conn.executemany(f'INSERT INTO "{rel}" VALUES ({", ".join("?" for _ in SCHEMA[rel])})', rs)
        for k, cols in enumerate(INDEXES.get(rel, ())):
            conn.execute(f'CREATE INDEX "lean_{rel}_{k}" ON "{rel}" ({", ".join(chr(34) + c + chr(34) for c in cols)})')
    conn.commit()
    return conn


_PAIR_OUTPUTS = ["lint_writer", "lint_reader", "lint_untyped", "lint_pair"]


class _LazyPositions(dict):
    """``(graph, node) -> position`` in a topological order of its graph (what bounds reachability and orders
    GE's walk), each graph sorted on first use: only the graphs holding a pair or a finding are sorted."""

    def __init__(self, model: Model) -> None:
        super().__init__()
        self.model = model
        self.done: dict[str, list[str]] = {}

    def _sort(self, g: str) -> list[str]:
        if g not in self.done and self.model.has_graph(g):
            self.done[g] = [n.name for n in topo_nodes(self.model.graph(g))]
            self.update(((g, n), i) for i, n in enumerate(self.done[g]))
        return self.done.get(g, [])

    def get(self, key: tuple[str, str], default: Any = None) -> Any:
        self._sort(key[0])
        return dict.get(self, key, default)

    def rows(self, graphs: set[str]) -> list[tuple[str, str, int]]:
        """Relation ``reach_pos(graph, node, pos)`` restricted to ``graphs`` (in the model's graph order)."""
        out: list[tuple[str, str, int]] = []
        for g in self.model.graphs:
            if g.name in graphs:
                name = g.name
                out += [(name, n, i) for i, n in enumerate(self._sort(name))]
        return out


def _program() -> Any:
    from anchorlog.queries import Program

    return Program.cached(GRAPH_LINT_DL)


class _Conn:
    """Adapter giving a bare connection the ``.conn`` attribute the aux-table helper expects."""

    def __init__(self, conn: sqlite3.Connection) -> None:
        self.conn = conn


def verify(model: Model, *, engine: str = "sqlite", db: Any = None) -> dict[str, Any]:
    """Run GraphLint on ``model``; returns ``{"first": entry|None, "unordered": [...], "aborted": str|None}``.

    ``db``: a fact database to query (a lean one holding just the relations the rules read is built when
    omitted); it is only read (``io_name`` and ``reach_pos`` are handed to the rules as ``extra=`` rows)."""
    prog = _program()
    holder = _Conn(lean_fact_db(model, matched_node_types(prog))) if db is None else db
    extra: dict[str, list[tuple]] = {
        "io_name": lint_io_name_rows(model, lint_named_demand(model, holder.conn)),
        "reach_pos": [],
    }
    # the pairs first; topological positions (what bounds reachability) only for the graphs holding pairs, and
    # only when there are any (reachability never leaves a graph).
    # (The rules' join orders are forced by the engine, so no ANALYZE statistics are needed.)
    res = prog.run(holder.conn, engine=engine, outputs=_PAIR_OUTPUTS, extra=extra)
    pos = _LazyPositions(model)
    if res.count("lint_pair"):
        extra["reach_pos"] = pos.rows({g for g, *_ in res.rows("lint_pair", sort=False)})
        res = prog.run(holder.conn, engine=engine, outputs=_PAIR_OUTPUTS + ["lint_ordered"], extra=extra)
    gidx = {g.name: i for i, g in enumerate(model.graphs)}
    writers: dict[tuple, set[str]] = {}
    readers: dict[tuple, set[str]] = {}
    untyped: dict[tuple, list[tuple[str, int]]] = {}
    for g, s, o, w in res.rows("lint_writer", sort=False):
        writers.setdefault((g, s, o), set()).add(w)
    for g, s, o, r in res.rows("lint_reader", sort=False):
        readers.setdefault((g, s, o), set()).add(r)
    for g, s, o, c, k in res.rows("lint_untyped"):
        untyped.setdefault((g, s, o), []).append((c, k))
    # (membership through the relation names: ``"x" in res`` is Mapping.__contains__, which builds a DataFrame
    # and so imports pandas, ~0.5 s CPU of a process's first run)
    ordered = {(g, a, b) for g, a, b in res.rows("lint_ordered", sort=False)} if "lint_ordered" in set(res) else set()
    keys = sorted(set(writers) | set(untyped), key=lambda k: (gidx.get(k[0], 0), pos.get((k[0], k[1]), 0), k[2]))
    unordered: list[dict[str, Any]] = []
    first: dict[str, Any] | None = None
    aborted: str | None = None
    for key in keys:
        gname, src, out = key
        graph = model.graph(gname)
        cons = graph.consumers(src, out)
        if key in untyped and aborted is None and first is None:
            c, k = untyped[key][0]
            aborted = f"{c} input {k} has no read/write type (GE's Verify stops without W18888)"
        ws = _in_order([c for c, _ in cons], writers.get(key, set()))
        rs = _in_order([c for c, _ in cons], readers.get(key, set()))
        for w in ws:
            others = [(x, "write") for x in ws if x != w] + [(x, "read") for x in rs if x != w]
            for x, kind in others:
                if (gname, w, x) in ordered:
                    continue
                entry = {
                    "code": "W18888",
                    "nodes": [w, x],
                    "graph": gname,
                    "kind": f"write-{kind}",
                    "anchor": f"{src}:{out}",
                    "message": (MSG_WRITE if kind == "write" else MSG_READ).format(a=w, b=x),
                }
                reported = first is None and aborted is None
                unordered.append({**entry, "reported_by_ge": reported})
                if reported:
                    first = entry
    return {"first": first, "unordered": unordered, "aborted": aborted}


def _in_order(names: list[str], keep: set[str]) -> list[str]:
    out: list[str] = []
    for n in names:
        if n in keep and n not in out:
            out.append(n)
    return out


@register("graph-lint")
def run(model: Model, ctx: PassContext) -> dict:
    """GraphLint: W18888 when a writer of a shared output is unordered with another writer or a reader."""
    from anchorlog.analysis.fact_cache import current_facts

    with paused_gc():
        # in a pipeline that already keeps a fact database, read it (refreshed where passes edited) instead of
        # building the lean one
        result = verify(model, engine=ctx.engine, db=current_facts(model, ctx))
    if result["first"] is not None:
        ctx.report.setdefault("lint", []).append(result["first"])
    section: dict[str, Any] = {
        "warnings": 1 if result["first"] is not None else 0,
        "unordered": result["unordered"],
    }
    if result["aborted"]:
        section["aborted"] = result["aborted"]
    return section

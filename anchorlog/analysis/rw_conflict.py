"""Semantic read/write conflicts — GE ``HandleMemoryRWConflict`` (``mem_rw_conflict_optimize.cc``, reference §2).

Every input anchor has an input RW type (kReadOnly / kWriteable / kScopeWriteable) and every output anchor an
output RW type (kReadOnlyConst / kReadOnly / kSoftRead / kWriteable); for each producer -> consumer edge the
decision matrix (§2.7) says whether an Identity must separate them. ALL of these facts come from the rules of
``queries/rw_types.dl`` (relations ``rwc_*`` / ``rwd_*``: the types of the anchors that matter, the conflict
candidates with their matrix cell, the last-scope-write chains, the subgraph NetOutputs needing an Identity,
what keeps or removes an existing Identity), evaluated over the pipeline's shared fact database
(:func:`anchorlog.analysis.fact_cache.shared_facts`). This module only applies them in GE's order (subgraph
marking inner -> outer, then the ``GetAllNodes`` walk: Identity split, Identity removal, Identity insertion) and
re-evaluates the rules when an edit landed where the next decision's facts come from. The exact Python replay
of GE's type functions lives in ``tests/oracles/rw_replay.py`` as the oracle the rules are tested against.

API for other passes::

    rw = RWTypes.init_rw_conflict_check(model)          # GE InitRWConflictCheck (marks refs, subgraphs)
    rw.would_delete_cause_rw_conflict(src, j, succ, k)  # GE WouldDeleteTensorMoveCauseRWConflict
    rw.is_node_input_writable(node, k)
    would_delete_cause_rw_conflict(model_or_rw, src, j, succ, k)   # module-level convenience
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.registry import PassContext, register
from anchorlog.analysis.symbols import all_nodes, out_anchor_count
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.facts.relations import INPUT_NAME_KEY, OUTPUT_NAME_KEY, io_names
from anchorlog.gcpause import paused_gc

RW_TYPES_DL = Path(__file__).resolve().parent.parent / "queries" / "rw_types.dl"

# Input RW types (GE InputRWType) and output RW types (GE OutputRWType), by GE's enum names.
IN_RO, IN_W, IN_SW, IN_INVALID = "kReadOnly", "kWriteable", "kScopeWriteable", "kInvalidRWType"
OUT_CONST, OUT_RO, OUT_SOFT, OUT_W, OUT_INVALID = (
    "kReadOnlyConst",
    "kReadOnly",
    "kSoftRead",
    "kWriteable",
    "kInvalidRWType",
)
DO_NOTHING, WRONG_GRAPH, INSERT_IDENTITY = "DO_NOTHING", "WRONG_GRAPH", "INSERT_IDENTITY"

# GE GetConflictResultBetweenNode (§2.7): output type -> input type -> result. The pass reads the matrix from the
# rules (relation rw_matrix); this table is the same matrix for callers holding two types (and tests).
MATRIX: dict[str, dict[str, str]] = {
    OUT_CONST: {IN_RO: DO_NOTHING, IN_W: INSERT_IDENTITY, IN_SW: INSERT_IDENTITY},
    OUT_RO: {IN_RO: DO_NOTHING, IN_W: DO_NOTHING, IN_SW: INSERT_IDENTITY},
    OUT_SOFT: {IN_RO: DO_NOTHING, IN_W: DO_NOTHING, IN_SW: DO_NOTHING},
    OUT_W: {IN_RO: DO_NOTHING, IN_W: DO_NOTHING, IN_SW: INSERT_IDENTITY},
}

# Tensor attrs an Identity's descs keep: GE rebuilds the descs through the public TensorDesc, which keeps
# dtype/shape/format and the origin ones, not the source tensor's other attrs (e.g. ref_var_src_var_name).
_KEPT_TENSOR_ATTRS = ("origin_format", "origin_shape")


def conflict_result(out_t: str, in_t: str) -> str:
    """GE ``GetConflictResultBetweenNode``: the decision for an output type feeding an input type."""
    if out_t == OUT_INVALID or in_t == IN_INVALID:
        return WRONG_GRAPH
    return MATRIX[out_t][in_t]


def merge_input_types(types: set[str]) -> str:
    """GE ``GetInputRwTypeInConflict``: the input type of a wrapper seen through its subgraph Data nodes (the pass
    takes it from rule ``rwd_wtype``; this is the same merge for API callers and tests)."""
    if IN_INVALID in types or (IN_W in types and IN_SW in types):
        return IN_INVALID
    if IN_SW in types:
        return IN_SW
    if IN_W in types:
        return IN_W
    return IN_RO


def identity_desc(src: Node, out_idx: int) -> TensorDesc:
    """The desc GE gives an RW Identity: the source output desc without reuse flags or foreign attrs."""
    base = src.output_desc[out_idx] if out_idx < len(src.output_desc) else TensorDesc()
    td = TensorDesc(dtype=base.dtype, shape=None if base.shape is None else list(base.shape), layout=base.layout)
    for k in _KEPT_TENSOR_ATTRS:
        if k in base.attrs:
            td.attrs[k] = base.attrs[k]
    return td


@dataclass
class Decision:
    """One edge decision for the report / explain."""

    action: str  # "insert_identity", "skip_last_scope_write", "split_identity", "remove_identity", ...
    graph: str
    src: str
    src_out: int
    dst: str
    dst_in: int
    out_type: str = ""
    in_type: str = ""
    result: str = ""
    rule: str = ""
    identity: str | None = None

    def as_dict(self) -> dict[str, Any]:
        """The report entry; the keys ``anchor``/``pair``/``pair_attrs``/``before`` follow the layout-conflict
        report (GE anchor names; the "attributes" of an RW pair are its two RW types)."""
        d = {k: v for k, v in self.__dict__.items() if v not in (None, "")}
        if self.dst_in >= 0:
            out_a, in_a = f"{self.src}_out_{self.src_out}", f"{self.dst}_in_{self.dst_in}"
            d["pair"] = [out_a, in_a]
            d["pair_attrs"] = [[self.out_type] if self.out_type else [], [self.in_type] if self.in_type else []]
            if self.identity:
                d["anchor"] = in_a
                d["before"] = in_a
        return d


# ---------------------------------------------------------------------------------------------------- the rules
# relations of rw_types.dl the pass reads (everything it decides on)
PASS_OUTPUTS = (
    "rw_ref",
    "marked_sg",
    "rwc_sub_identity",
    "rwc_data_error",
    "rwc_netout_error",
    "rwd_out_t",
    "rwd_in_t",
    "rwc_edge",
    "rwc_chain",
    "rwc_skip_ok",
    "rwc_skip_consumer",
    "rwc_skip_node",
    "rwc_ident",
    "rwc_ident_keep",
    "rwc_remove",
    "rwc_remove_via",
    "rwd_cur_t0",
    "rwd_cur_win",
    "rw_matrix",
)

# what an Identity's removal after its split is decided on (RWFacts.removal_only)
REMOVAL_OUTPUTS = ("rwc_remove", "rwc_remove_via")
# what InitRWConflictCheck alone reads (RWFacts.init_only): ref marks, subgraph marks, the primed caches
INIT_OUTPUTS = (
    "rw_ref",
    "marked_sg",
    "rwc_sub_identity",
    "rwc_data_error",
    "rwc_netout_error",
    "rwd_cur_t0",
    "rwd_cur_win",
)


def _program() -> Any:
    from anchorlog.queries import Program

    return Program.cached(RW_TYPES_DL)


class RWFacts:
    """One evaluation of ``rw_types.dl``'s pass relations, indexed for GE's walk."""

    def __init__(self, res: Any) -> None:
        self._read_init(res)
        self.out_t = {(g, n, o): (t, why) for g, n, o, t, why in res.rows("rwd_out_t", sort=False)}
        self.in_t = {(g, n, i): (t, why) for g, n, i, t, why in res.rows("rwd_in_t", sort=False)}
        self.edges: dict[tuple[str, str], dict[int, dict[tuple[str, int], tuple[str, str, str]]]] = {}
        for g, s, o, d, i, ot, it, r in res.rows("rwc_edge", sort=False):
            self.edges.setdefault((g, s), {}).setdefault(o, {})[(d, i)] = (ot, it, r)
        self.chain: dict[tuple[str, str, int], set[str]] = {}
        for g, s, o, c, _co in res.rows("rwc_chain", sort=False):
            self.chain.setdefault((g, s, o), set()).add(c)
        self.skip_ok = set(res.rows("rwc_skip_ok", sort=False))
        self.skip_consumer = set(res.rows("rwc_skip_consumer", sort=False))
        self.skip_node: dict[tuple[str, str], str] = {}
        for g, n, why in sorted(res.rows("rwc_skip_node")):
            self.skip_node.setdefault((g, n), why)
        self.ident = set(res.rows("rwc_ident", sort=False))
        self.ident_keep: dict[tuple[str, str], str] = {}
        for g, x, why in sorted(res.rows("rwc_ident_keep")):
            self.ident_keep.setdefault((g, x), why)
        self._read_removal(res)
        # outputs where InsertIdentityAsNeeded has something to do or report: a cell other than DO_NOTHING, or a
        # consumer carrying _skip_rw_conflict (an output whose cells all say DO_NOTHING changes and reports nothing)
        self.acting: set[tuple[str, str, int]] = {
            (g, s, o)
            for (g, s), per_out in self.edges.items()
            for o, cells in per_out.items()
            if any(r != DO_NOTHING or (g, d) in self.skip_consumer for (d, _i), (_ot, _it, r) in cells.items())
        }
        self.active: set[tuple[str, str]] = {(g, s) for g, s, _o in self.acting} | self.ident
        self.matrix = {(o, i): r for o, i, r in res.rows("rw_matrix", sort=False)}

    @classmethod
    def init_only(cls, res: Any) -> RWFacts:
        """The facts of :data:`INIT_OUTPUTS` only (what ``InitRWConflictCheck`` reads: :meth:`RWTypes.init`), from a
        run that asked for no more (the walk's types, edges and chains are not derived)."""
        facts = cls.__new__(cls)
        facts._read_init(res)
        return facts

    def _read_init(self, res: Any) -> None:
        self.refs = res.rows("rw_ref", sort=False)
        self.marked = {sg for sg, _pg, _pn in res.rows("marked_sg", sort=False)}
        self.sub_identity = {
            (sg, no, k): (s, j, why) for sg, no, k, s, j, why in res.rows("rwc_sub_identity", sort=False)
        }
        self.data_error = {(sg, d): why for sg, d, why in res.rows("rwc_data_error", sort=False)}
        self.netout_error: dict[tuple[str, str, int], str] = {}
        for sg, no, k, why in sorted(res.rows("rwc_netout_error"), key=lambda r: r[3] != "has no _parent_node_index"):
            self.netout_error.setdefault((sg, no, k), why)
        self.cache_t0 = res.rows("rwd_cur_t0", sort=False)
        self.cache_in = res.rows("rwd_cur_win", sort=False)

    @classmethod
    def removal_only(cls, res: Any) -> RWFacts:
        """The facts of :data:`REMOVAL_OUTPUTS` only (what ``RemoveNoUseIdentity`` reads), from a run that asked for
        no more: the engine then evaluates only the strata those relations depend on."""
        facts = cls.__new__(cls)
        facts._read_removal(res)
        return facts

    def _read_removal(self, res: Any) -> None:
        """``remove`` / ``remove_via`` from the rows of :data:`REMOVAL_OUTPUTS`."""
        self.remove = {(g, x): (s, j, ot) for g, x, s, j, ot in res.rows("rwc_remove", sort=False)}
        self.remove_via = {(g, x): (c, k, it, r) for g, x, c, k, it, r in res.rows("rwc_remove_via", sort=False)}

    def result(self, out_t: str, in_t: str) -> str:
        """The matrix cell of rule ``rw_matrix`` (WRONG_GRAPH for a type the matrix does not know)."""
        return self.matrix.get((out_t, in_t), WRONG_GRAPH)

    def out_type(self, g: str, n: str, o: int) -> tuple[str, str]:
        return self.out_t.get((g, n, o), (OUT_INVALID, "no type derived (no such output)"))

    def in_type(self, g: str, n: str, i: int) -> tuple[str, str]:
        return self.in_t.get((g, n, i), (IN_INVALID, "no type derived (no such input)"))


def _neighbourhood(graph: Graph, names: Iterable[str]) -> set[str]:
    """The nodes an edit around ``names`` can change: themselves and their data/control neighbours."""
    out: set[str] = set()
    for name in names:
        n = graph.nodes.get(name)
        if n is None:
            continue
        out.add(name)
        out.update(a[0] for a in n.inputs if a is not None)
        out.update(n.ctrl_inputs)
        out.update(graph.ctrl_successors(name))
        for o in range(out_anchor_count(graph, n)):
            out.update(c for c, _k in graph.consumers(name, o))
    return out


def _in_side(graph: Graph, name: str) -> tuple | None:
    n = graph.nodes.get(name)
    return None if n is None else (tuple(n.inputs), tuple(n.ctrl_inputs))


def _out_side(graph: Graph, name: str) -> tuple | None:
    n = graph.nodes.get(name)
    if n is None:
        return None
    cons = tuple(tuple(graph.consumers(name, o)) for o in range(out_anchor_count(graph, n)))
    return cons, tuple(graph.ctrl_successors(name))


class RWTypes:
    """GE's RW-conflict state over one model, every fact from ``rw_types.dl`` (one evaluation per round over the
    shared fact database; re-evaluated where edits landed). Keeps GE's order-dependent bookkeeping: the subgraph
    caches frozen at marking time, the decisions, the warnings."""

    def __init__(self, model: Model, ctx: PassContext | None = None) -> None:
        self.model = model
        # with a pipeline context the rules read its shared fact database (kept current through Graph.touched);
        # without one a private database is used, rebuilt after this object's own edits, and Graph.touched is left
        # alone for whoever shares facts later (e.g. the TensorMove pass after its InitRWConflictCheck)
        self.shared = ctx is not None
        self.ctx = ctx if ctx is not None else PassContext()
        self._private_db: Any = None
        self._edited = False
        self.decisions: list[Decision] = []
        self.warnings: list[str] = []
        self.evaluations = 0
        self.slice_evaluations = 0
        self._io_rows: list[tuple[str, str, str, int, str]] | None = None
        self._cache: tuple[list[tuple], list[tuple]] | None = None
        self._facts: RWFacts | None = None
        # nodes whose inputs / consumers (data or control) changed since the last evaluation, per graph
        self.in_changed: set[tuple[str, str]] = set()
        self.out_changed: set[tuple[str, str]] = set()

    @property
    def io_rows(self) -> list[tuple[str, str, str, int, str]] | None:
        """The ``io_name`` rows (op input/output names) the evaluations read; None before the first one."""
        return self._io_rows

    # ---------------------------------------------------------------------------------------------- evaluation
    def evaluate(
        self, ask_out: Iterable[tuple] = (), ask_in: Iterable[tuple] = (), *, init_only: bool = False
    ) -> RWFacts:
        """Run the pass relations of ``rw_types.dl`` on the current graph (the shared fact database, refreshed
        where edits landed). ``ask_out``/``ask_in``: further (graph, node, idx) anchors to type. ``init_only``:
        only what ``InitRWConflictCheck`` reads (:data:`INIT_OUTPUTS`); those facts are not kept for later
        questions (the next one evaluates again)."""

        db = self._fact_db()
        if self._io_rows is None:
            # op input/output names only feed the ref relations; the nodes this pass adds (Identity x -> y) have
            # none, so the rows stay valid for the whole run. The named ops are found through the fact database's
            # node_attr key index when it is the shared one (current with the model): no visit of every node.
            named = named_ops_from_facts(self.model, db) if self.shared else None
            self._io_rows = io_name_rows(self.model) if named is None else io_rows_of(named)
        extra: dict[str, list[tuple]] = {
            "io_name": self._io_rows,
            "rwc_ask_out": list(ask_out),
            "rwc_ask_in": list(ask_in),
        }
        if self._cache is not None:
            extra["rwc_cached"] = [(1,)]
            extra["rwc_cache_t0"], extra["rwc_cache_in"] = self._cache
        # SQLite always, as the TensorMove pass does with the same rules: the shared fact database is an in-memory
        # SQLite one (DuckDB would copy every table per evaluation for joins over ~1 % of the anchors), and DuckDB
        # rejects rw_types.dl's `V > 0` over the mixed-type attribute value column (special_size)
        if init_only:
            res = _program().run(db, engine="sqlite", extra=extra, outputs=list(INIT_OUTPUTS))
            self.evaluations += 1
            return RWFacts.init_only(res)
        res = _program().run(db, engine="sqlite", extra=extra, outputs=list(PASS_OUTPUTS))
        self.evaluations += 1
        self._facts = RWFacts(res)
        self.in_changed.clear()
        self.out_changed.clear()
        return self._facts

    def _refs_only(self) -> RWFacts:
        """Rule ``rw_ref`` alone, over the op names (an empty fact database stands in for the rest)."""
        from anchorlog.facts.relations import FactDB

        if self._io_rows is None:
            self._io_rows = io_name_rows(self.model)
        db = FactDB.from_model(self.model, relations=["graph"])
        try:
            res = _program().run(db, engine="sqlite", extra={"io_name": self._io_rows}, outputs=["rw_ref"])
            refs = res.rows("rw_ref")
        finally:
            db.close()
        facts = RWFacts.__new__(RWFacts)
        facts.refs = refs
        return facts

    def _fact_db(self) -> Any:
        """The fact database the rules read, current with every edit so far."""
        from anchorlog.analysis.fact_cache import shared_facts

        if self.shared:
            return shared_facts(self.model, self.ctx)
        from anchorlog.facts.relations import FactDB

        if self._private_db is None or self._edited:
            if self._private_db is not None:
                self._private_db.close()
            self._private_db = FactDB.from_model(self.model)
            self._edited = False
        return self._private_db

    def evaluate_around(self, graph: Graph, names: set[str]) -> RWFacts:
        """The pass relations on a slice of the fact database: every row of the nodes ``names`` (with all their
        data/control edges) and the whole subgraph structure. Exact for facts that read only those nodes (an
        Identity's removal after its split: its producers, consumers, their fan-out, its control successors), and
        it costs a few small tables instead of a walk over the whole graph. The walk's facts stay marked stale."""
        import sqlite3

        from anchorlog.facts.relations import INDEXES, SCHEMA

        db = self._fact_db()
        src = getattr(db, "conn", db)
        keys = sorted((graph.name, n) for n in names)
        src.execute("CREATE TEMP TABLE IF NOT EXISTS rwc_slice (graph TEXT, node TEXT)")
        src.execute("DELETE FROM temp.rwc_slice")
        src.executemany("INSERT INTO temp.rwc_slice VALUES (?, ?)", keys)
        sl = sqlite3.connect(":memory:")
        try:
            for rel, cols in SCHEMA.items():
                names_ = [c for c, _ in cols]
                sl.execute(f'CREATE TABLE "{rel}" (' + ", ".join(f'"{c}"' for c in names_) + ")")
                sel = ", ".join(f'r."{c}"' for c in names_)
                if rel in ("data_edge", "ctrl_edge"):
                    q = (
                        f'SELECT {sel} FROM temp.rwc_slice d CROSS JOIN main."{rel}" r ON r.graph = d.graph AND '
                        f'r.src = d.node UNION SELECT {sel} FROM temp.rwc_slice d CROSS JOIN main."{rel}" r ON '
                        "r.graph = d.graph AND r.dst = d.node"
                    )
                elif "graph" in names_ and ("node" in names_ or "name" in names_) and rel != "subgraph":
                    col = "name" if rel == "node" else "node"
                    q = f'SELECT {sel} FROM temp.rwc_slice d CROSS JOIN main."{rel}" r ON r.graph = d.graph AND r."{col}" = d.node'
                else:  # graph, subgraph, parent_in, parent_out, op_class: the structure, whole
                    q = f'SELECT {sel} FROM main."{rel}" r'
                rows = src.execute(q).fetchall()
                if rows:
                    sl.executemany(f'INSERT INTO "{rel}" VALUES (' + ", ".join("?" * len(names_)) + ")", rows)
                for i, idx in enumerate(INDEXES.get(rel, ())):
                    sl.execute(f'CREATE INDEX "ix_{rel}_{i}" ON "{rel}" (' + ", ".join(f'"{c}"' for c in idx) + ")")
            src.execute("DELETE FROM temp.rwc_slice")
            wanted = set(keys)
            extra: dict[str, list[tuple]] = {
                "io_name": [r for r in (self._io_rows or []) if (r[0], r[1]) in wanted],
            }
            if self._cache is not None:
                extra["rwc_cached"] = [(1,)]
                extra["rwc_cache_t0"], extra["rwc_cache_in"] = self._cache
            # only the removal's relations: the engine skips every stratum they do not depend on (most of the
            # program: the walk's types, skip chains, subgraph marking), which was most of each slice's cost
            res = _program().run(sl, engine="sqlite", extra=extra, outputs=list(REMOVAL_OUTPUTS))
        finally:
            sl.close()
        self.evaluations += 1
        self.slice_evaluations += 1
        return RWFacts.removal_only(res)

    @property
    def facts(self) -> RWFacts:
        return self._facts if self._facts is not None else self.evaluate()

    @contextmanager
    def editing(self, graph: Graph, centers: Iterable[str]) -> Iterator[None]:
        """Record which nodes an edit around ``centers`` changed (inputs or consumers, data or control), so the
        walk re-evaluates the rules exactly when a later decision reads facts about one of them."""
        centers = list(centers)
        self._edited = True
        around = _neighbourhood(graph, centers)
        before = {n: (_in_side(graph, n), _out_side(graph, n)) for n in around}
        try:
            yield
        finally:
            for n in around | _neighbourhood(graph, [c for c in centers if c in graph.nodes]):
                was = before.get(n)
                if was is None:
                    continue  # added by this edit: not in GE's node snapshot
                if _in_side(graph, n) != was[0]:
                    self.in_changed.add((graph.name, n))
                if _out_side(graph, n) != was[1]:
                    self.out_changed.add((graph.name, n))

    def _stale_for(self, graph: Graph, node: Node) -> bool:
        """Do the facts about ``node``'s decisions predate an edit they depend on?"""
        if not self.in_changed and not self.out_changed:
            return False
        g, x = graph.name, node.name
        if (g, x) in self.out_changed:  # its consumers (fan-out, which are hot, ctrl successors)
            return True
        facts = self.facts
        if (g, x) in facts.ident:
            if (g, x) in self.in_changed:
                return True
            if any(a is not None and (g, a[0]) in self.out_changed for a in node.inputs):
                return True
        for o in facts.edges.get((g, x), ()):
            chain = facts.chain.get((g, x, o), set())
            if len(chain) > 1 and any((g, c) in self.in_changed or (g, c) in self.out_changed for c in chain):
                return True
        return False

    def current_for(self, graph: Graph, node: Node) -> RWFacts:
        """The facts for deciding on ``node``: re-evaluated first when an earlier edit made them stale."""
        if self._facts is None or self._stale_for(graph, node):
            return self.evaluate()
        return self._facts

    # ---------------------------------------------------------------------------------------------- GE's init
    def mark_ref_relations(self, facts: RWFacts) -> None:
        """GE ``MarkRefRelations``: ops with a ref pair (rule ``rw_ref``) get attr ``reference``."""
        graphs = {g.name: g for g in self.model.graphs}
        for g, n in sorted({(g, n) for g, n, _o, _i in facts.refs}):
            graph = graphs.get(g)
            node = graph.nodes.get(n) if graph is not None else None
            if node is not None and not node.attr("reference", False):
                node.set_attr("reference", True)

    def mark_all_subgraphs(self, facts: RWFacts) -> None:
        """GE ``MarkRWTypeForAllSubgraph``: subgraphs in reverse registration order (inner before outer), those
        owned by a While skipped (rule ``marked_sg``); the failures and the Identities before NetOutput inputs are
        the rules' (``rwc_data_error``/``rwc_netout_error``/``rwc_sub_identity``), applied in GE's node order."""
        for sg in reversed(self.model.graphs[1:]):
            if sg.name not in facts.marked:
                continue
            for n in list(sg.nodes.values()):
                if n.type == "Data":
                    why = facts.data_error.get((sg.name, n.name))
                    if why is not None:
                        raise PassFailure(f"subgraph {sg.name}: Data {n.name} {why}", sg.name)
                elif n.type == "NetOutput":
                    for k in range(len(n.inputs)):
                        why = facts.netout_error.get((sg.name, n.name, k))
                        if why is not None:
                            raise PassFailure(f"subgraph NetOutput {n.name} input {k} {why}", sg.name)
                        hit = facts.sub_identity.get((sg.name, n.name, k))
                        if hit is None:
                            continue
                        src, j, out_why = hit
                        owner = self.model.parent_of(sg.name)
                        ident = self.insert_after(sg, sg.nodes[src], j, n, k)
                        self.decisions.append(
                            Decision(
                                "insert_identity",
                                sg.name,
                                src,
                                j,
                                n.name,
                                k,
                                OUT_W,
                                "",
                                INSERT_IDENTITY,
                                f"writeable subgraph output ({out_why}) the parent "
                                f"{owner.name if owner is not None else ''} cannot pass through "
                                "(JudgeOptimizableByParentNode false)",
                                ident,
                            )
                        )

    def init(self, *, mark_subgraphs: bool | None = None, init_only: bool = False) -> None:
        """GE ``InitRWConflictCheck``: mark refs, then subgraphs (when there are any, or always with
        ``mark_subgraphs=True`` as ``HandleMemoryRWConflict`` does). Freezes GE's subgraph caches.
        ``init_only``: derive only what this step reads (a caller that asks its types elsewhere, as the
        TensorMove pass does through its own rules), not the walk's facts."""
        if not mark_subgraphs and len(self.model.graphs) == 1:
            # nothing to mark but the refs, which need only the op names: no fact database is built for them
            self.mark_ref_relations(self._refs_only())
            return
        facts = self.evaluate(init_only=init_only)
        self._cache = (facts.cache_t0, facts.cache_in)
        self.mark_ref_relations(facts)
        if mark_subgraphs or (mark_subgraphs is None and len(self.model.graphs) > 1):
            self.mark_all_subgraphs(facts)

    @classmethod
    def init_rw_conflict_check(
        cls, model: Model, ctx: PassContext | None = None, *, init_only: bool = False
    ) -> RWTypes:
        """GE ``InitRWConflictCheck`` on ``model`` (its graph edits included). ``ctx``: the pipeline's pass context,
        so the rules run over its shared fact database. ``init_only``: see :meth:`init` (later type questions to
        the returned object evaluate the rules again)."""
        rw = cls(model, ctx)
        rw.init(init_only=init_only)
        return rw

    # ---------------------------------------------------------------------------------------------- edits
    def new_identity_name(self, src: str) -> str:
        return f"{src}_Identity"

    _IDENTITY_NAMES = {
        "_input_name_key": ["x"],
        "_input_name_value": [0],
        "_output_name_key": ["y"],
        "_output_name_value": [0],
    }

    def _finish_identity(self, graph: Graph, name: str, src: Node) -> str:
        label = src.attr("_batch_label")
        if label:
            graph.nodes[name].set_attr("_batch_label", label)
        return name

    def insert_before(self, graph: Graph, dst: Node, k: int, src: Node, j: int) -> str:
        """Identity in front of ``dst:k`` (GE InsertNodeBefore: ``dst``'s in-control edges move to it), desc from
        ``src:j``."""
        from anchorlog.runtime.rewrite import insert_identity_before

        with self.editing(graph, [dst.name]):
            name = insert_identity_before(
                graph,
                (dst.name, k),
                name=self.new_identity_name(src.name),
                desc=identity_desc(src, j),
                attrs=self._IDENTITY_NAMES,
            )
        return self._finish_identity(graph, name, src)

    def insert_after(self, graph: Graph, src: Node, j: int, dst: Node, k: int) -> str:
        """Identity after ``src:j`` feeding only ``dst:k`` (GE InsertNodeAfter: ``src``'s out-control edges move)."""
        from anchorlog.runtime.rewrite import insert_identity_after

        with self.editing(graph, [src.name, dst.name]):
            name = insert_identity_after(
                graph,
                (src.name, j),
                [(dst.name, k)],
                name=self.new_identity_name(src.name),
                desc=identity_desc(src, j),
                attrs=self._IDENTITY_NAMES,
            )
        return self._finish_identity(graph, name, src)

    # ---------------------------------------------------------------------------------------------- external API
    def locate(self, name: str) -> tuple[Graph, Node] | None:
        for g in self.model.graphs:
            n = g.nodes.get(name)
            if n is not None:
                return g, n
        return None

    def output_type(self, graph: Graph, node: Node, i: int) -> tuple[str, str]:
        """GE ``GetOutputRWTypeByIndex`` of ``node:i`` -> (type, reason), from the rules."""
        key = (graph.name, node.name, i)
        facts = self._facts
        if facts is None or key not in facts.out_t or self.in_changed or self.out_changed:
            facts = self.evaluate(ask_out=[key])
        return facts.out_type(*key)

    def input_type(self, graph: Graph, node: Node, i: int) -> tuple[str, str]:
        """GE ``GetInputRWTypeByIndex`` of ``node:i`` -> (type, reason), from the rules."""
        key = (graph.name, node.name, i)
        facts = self._facts
        if facts is None or key not in facts.in_t or self.in_changed or self.out_changed:
            facts = self.evaluate(ask_in=[key])
        return facts.in_type(*key)

    def input_type_of(self, name: str, i: int) -> str:
        hit = self.locate(name)
        return IN_INVALID if hit is None else self.input_type(hit[0], hit[1], i)[0]

    def output_type_of(self, name: str, i: int) -> str:
        hit = self.locate(name)
        return OUT_INVALID if hit is None else self.output_type(hit[0], hit[1], i)[0]

    def would_delete_cause_rw_conflict(self, src: str, src_out: int, succ: str, succ_in: int) -> bool:
        """GE ``WouldDeleteTensorMoveCauseRWConflict``: would ``src:src_out`` feeding ``succ:succ_in`` directly
        (the TensorMove between them deleted) need an Identity? Unknown nodes -> True (conservative). The output
        type is evaluated on the current graph, where ``src`` still feeds the TensorMove."""
        a, b = self.locate(src), self.locate(succ)
        if a is None or b is None:
            return True
        ko, ki = (a[0].name, src, src_out), (b[0].name, succ, succ_in)
        facts = self.evaluate(ask_out=[ko], ask_in=[ki])
        return facts.result(facts.out_type(*ko)[0], facts.in_type(*ki)[0]) != DO_NOTHING

    def is_node_input_writable(self, node: str, i: int) -> bool:
        """GE ``IsNodeInputWritable``: input type kWriteable or kScopeWriteable (unknown node -> False)."""
        hit = self.locate(node)
        if hit is None:
            return False
        return self.input_type(hit[0], hit[1], i)[0] in (IN_W, IN_SW)


def would_delete_cause_rw_conflict(
    model_or_rw: Model | RWTypes, src: str, src_out: int, succ: str, succ_in: int
) -> bool:
    """Would deleting a TensorMove between ``src:src_out`` and ``succ:succ_in`` create an RW conflict?

    ``model_or_rw``: an :class:`RWTypes` after :meth:`RWTypes.init_rw_conflict_check` (what the TensorMove pass
    keeps for its whole run, as GE does), or a Model (a fresh check is built — note that GE's init marks
    ``reference`` attrs and may insert Identities before subgraph NetOutputs). Returns True when the decision
    matrix does not say DO_NOTHING (§2.9)."""
    rw = model_or_rw if isinstance(model_or_rw, RWTypes) else RWTypes.init_rw_conflict_check(model_or_rw)
    return rw.would_delete_cause_rw_conflict(src, src_out, succ, succ_in)


# ---------------------------------------------------------------------------------------------------- the pass
def split_identity(rw: RWTypes, graph: Graph, ident: Node, facts: RWFacts) -> None:
    """GE ``SplitIdentity``: a multi-consumer Identity keeps (as a new Identity each) only its writing consumers;
    readers are fed by the Identity's producer directly (control edges copied). Input types: rule ``rwd_in_t``."""
    from anchorlog.runtime.rewrite import bypass_for_consumer

    cons = graph.consumers(ident.name, 0)
    if len(cons) <= 1 or not ident.inputs or ident.inputs[0] is None:
        return
    src, j = ident.inputs[0]
    pre = graph.nodes[src]
    for c, k in cons:
        cn = graph.nodes[c]
        t, why = facts.in_type(graph.name, c, k)
        if t in (IN_W, IN_SW):
            new = rw.insert_before(graph, cn, k, pre, j)
            rw.decisions.append(
                Decision(
                    "split_identity_keep_copy",
                    graph.name,
                    ident.name,
                    0,
                    c,
                    k,
                    "",
                    t,
                    INSERT_IDENTITY,
                    f"Identity {ident.name} split: consumer input writes ({why}), gets its own copy",
                    new,
                )
            )
        else:
            with rw.editing(graph, [c, ident.name, src]):
                bypass_for_consumer(graph, ident.name, (c, k), (src, j))
            rw.decisions.append(
                Decision(
                    "split_identity_bypass",
                    graph.name,
                    src,
                    j,
                    c,
                    k,
                    "",
                    t,
                    DO_NOTHING,
                    f"Identity {ident.name} split: consumer only reads ({why}), fed by {src}:{j} directly",
                )
            )
    if not graph.consumers(ident.name, 0):
        from anchorlog.runtime.rewrite import isolate_and_delete

        with rw.editing(graph, [ident.name]):
            isolate_and_delete(graph, ident.name, {})
        rw.decisions.append(Decision("remove_identity", graph.name, src, j, ident.name, 0, rule="split left it unused"))


def remove_no_use_identity(rw: RWTypes, graph: Graph, ident: Node, facts: RWFacts) -> None:
    """GE ``RemoveNoUseIdentity``: drop an Identity that separates nothing the matrix cares about (rules
    ``rwc_ident_keep``, ``rwc_remove``)."""
    from anchorlog.runtime.rewrite import isolate_and_delete

    hit = facts.remove.get((graph.name, ident.name))
    if hit is None:
        return
    src, j, out_t = hit
    c, k, in_t, result = facts.remove_via.get((graph.name, ident.name), ("", -1, "", DO_NOTHING))
    with rw.editing(graph, [ident.name]):
        isolate_and_delete(graph, ident.name, {0: 0})
    rw.decisions.append(
        Decision(
            "remove_identity",
            graph.name,
            src,
            j,
            c,
            k,
            out_t,
            in_t,
            result,
            f"Identity {ident.name} separates nothing: {out_t} -> {in_t or 'no consumer'} is {result}",
        )
    )


def insert_identity_as_needed(rw: RWTypes, graph: Graph, node: Node, facts: RWFacts) -> None:
    """GE ``InsertIdentityAsNeeded``: per output, per consumer edge, the matrix cell of rule ``rwc_edge`` decides;
    when every edge of an output goes to scope-writable inputs of one node the last one keeps the original buffer
    (rule ``rwc_skip_ok`` says whether that may apply). Outputs without a row read only through read-only inputs
    (every matrix cell with a kReadOnly input is DO_NOTHING)."""
    per_out = facts.edges.get((graph.name, node.name))
    if not per_out:
        return
    for o in sorted(per_out):
        if (graph.name, node.name, o) not in facts.acting:
            continue  # every cell DO_NOTHING, no consumer to skip: GE's loop changes and reports nothing here
        cells = per_out[o]
        peers = graph.consumers(node.name, o)
        out_t, out_why = facts.out_type(graph.name, node.name, o)
        skip = (graph.name, node.name, o) in facts.skip_ok
        linked: str | None = None
        for pos, (c, k) in enumerate(peers):
            cn = graph.nodes.get(c)
            if cn is None:
                continue
            if (graph.name, c) in facts.skip_consumer:
                rw.decisions.append(
                    Decision("skip", graph.name, node.name, o, c, k, out_t, "", "", "_skip_rw_conflict on consumer")
                )
                continue
            cell = cells.get((c, k))
            if cell is None:
                raise PassFailure(f"rw_types.dl derived no matrix cell for {node.name}:{o} -> {c}:{k}", graph.name)
            _ot, in_t, result = cell
            in_why = facts.in_type(graph.name, c, k)[1]
            if skip:
                if linked is None:
                    linked = c
                skip = linked == c and in_t == IN_SW
            if result in (DO_NOTHING, WRONG_GRAPH):
                skip = False
                if result == WRONG_GRAPH:
                    rw.warnings.append(f"{node.name}:{o} -> {c}:{k}: {out_t} -> {in_t} is a wrong graph")
                continue
            rule = f"matrix({out_t}, {in_t}) = INSERT_IDENTITY; output: {out_why}; input: {in_why}"
            if pos == len(peers) - 1 and skip:
                rw.decisions.append(
                    Decision(
                        "skip_last_scope_write",
                        graph.name,
                        node.name,
                        o,
                        c,
                        k,
                        out_t,
                        in_t,
                        result,
                        rule + "; last scope-write edge of a single consumer keeps the buffer",
                    )
                )
                continue
            ident = rw.insert_before(graph, cn, k, node, o)
            rw.decisions.append(
                Decision("insert_identity", graph.name, node.name, o, c, k, out_t, in_t, result, rule, ident)
            )


def handle_memory_rw_conflict(model: Model, ctx: PassContext | None = None) -> RWTypes:
    """GE ``GraphOptimize::HandleMemoryRWConflict`` on ``model`` (mutates it); returns the state with every
    decision in ``.decisions``. Raises :class:`PassFailure` where GE's pass returns an error. ``ctx``: the
    pipeline's pass context (its shared fact database is used and kept current)."""
    from anchorlog.runtime.rewrite import deferred_placement

    # the Identities go to their places in the op lists once, at the end (one by one it was a move of the list's
    # tail per insertion: quadratic for conflict-heavy graphs); the walk reads no op-list order after its snapshot
    with deferred_placement(model.graphs):
        return _handle(model, RWTypes(model, ctx))


def _handle(model: Model, rw: RWTypes) -> RWTypes:
    rw.init(mark_subgraphs=True)
    if not rw.facts.active and not rw.out_changed and not rw.in_changed:
        return rw  # no node has a cell to act on or an Identity to judge, and nothing was edited: the walk is idle
    for graph, node in all_nodes(model, sort=False):
        key = (graph.name, node.name)
        # a node the rules give nothing to do (no output with a matrix cell to look at, no Identity) needs no
        # step unless an edit since the last evaluation changed its consumers (or inputs)
        if key not in rw.facts.active and key not in rw.out_changed and key not in rw.in_changed:
            continue
        if graph.nodes.get(node.name) is not node:
            continue  # removed by an earlier Identity split/removal
        facts = rw.current_for(graph, node)
        if (graph.name, node.name) in facts.skip_node:
            continue
        if (graph.name, node.name) in facts.ident:
            split_identity(rw, graph, node, facts)
            if graph.nodes.get(node.name) is not node:
                continue
            if rw._stale_for(graph, node):
                # the split changed this Identity's consumers and its producer's fan-out: its removal reads only
                # the Identity's neighbourhood, so the rules run on that slice instead of the whole graph
                around = _neighbourhood(graph, [node.name])
                for a in node.inputs:
                    if a is not None:
                        around |= _neighbourhood(graph, [a[0]])
                facts = rw.evaluate_around(graph, around)
            remove_no_use_identity(rw, graph, node, facts)
            if graph.nodes.get(node.name) is not node:
                continue
            facts = rw.current_for(graph, node)
        insert_identity_as_needed(rw, graph, node, facts)
    return rw


@register("rw-conflict")
def run(model: Model, ctx: PassContext) -> dict:
    """Semantic read/write conflicts (GE HandleMemoryRWConflict): Identity where the RW matrix says so."""
    try:
        with paused_gc():
            rw = handle_memory_rw_conflict(model, ctx)
    except PassFailure as err:
        # MemConflictProc only logs a warning when the RW pass fails (reference §0 step 10, §11 #23).
        return {"status": "warning", "warning": str(err), "inserted": []}
    inserted = [d.as_dict() for d in rw.decisions if d.identity]
    return {
        "status": "ok",
        "inserted": inserted,
        "decisions": [d.as_dict() for d in rw.decisions],
        "warnings": rw.warnings,
        "copies": len(inserted),
        "rule_evaluations": rw.evaluations,
    }


# ---------------------------------------------------------------------------------------------------- Datalog
def io_name_rows(model: Model, graph_names: dict[str, str] | None = None) -> list[tuple[str, str, str, int, str]]:
    """Relation ``io_name(graph, node, io, idx, name)`` for ``rw_types.dl``: the op's input/output names.

    Only ops that carry both name maps (``_input_name_key`` and ``_output_name_key``) are listed: the relation
    feeds the ref pairs (``rw_ref``: an output named like an input) and nothing else, and checking two dict keys
    is far cheaper than decoding every op's name lists."""
    q = graph_names or {}
    named = [
        (q.get(g.name, g.name), n)
        for g in model.graphs
        for n in g.nodes.values()
        if INPUT_NAME_KEY in n.attrs and OUTPUT_NAME_KEY in n.attrs
    ]
    return io_rows_of(named)


def io_rows_of(named: Iterable[tuple[str, Node]]) -> list[tuple[str, str, str, int, str]]:
    """The ``io_name`` rows of the named ops ``named`` ((graph name, node) pairs, in the order given)."""
    rows: list[tuple[str, str, str, int, str]] = []
    for gq, n in named:
        for io in ("in", "out"):
            for name, i in io_names(n, io).items():
                rows.append((gq, n.name, io, int(i), name))
    return rows


def named_ops_from_facts(model: Model, db: Any) -> list[tuple[str, Node]] | None:
    """The ops carrying both name maps (what :func:`io_name_rows` lists), found through the ``node_attr`` key
    index of ``db`` (a fact database current with ``model``, graphs under their own names) and put in the
    model's order (graph by graph, then ``node_prop`` position): the same list as :func:`io_name_rows` visits,
    without a visit of every node. None when the database does not answer for this model (a graph or node it
    names is not the model's, positions missing or repeated): the caller then visits the nodes."""
    conn = getattr(db, "conn", db)
    try:
        found = conn.execute(
            'SELECT a."graph", a."node", p."pos" FROM "node_attr" AS a '
            'LEFT JOIN "node_prop" AS p ON p."graph" = a."graph" AND p."node" = a."node" WHERE a."key" = ?',
            (INPUT_NAME_KEY,),
        ).fetchall()
    except Exception:  # noqa: BLE001 - not a fact database with these tables: visit the nodes instead
        return None
    by_graph: dict[str, list[tuple[int, str]]] = {}
    for g, n, pos in found:
        if pos is None:
            return None
        by_graph.setdefault(g, []).append((pos, n))
    graphs = {g.name: g for g in model.graphs}
    if any(g not in graphs for g in by_graph):
        return None
    named: list[tuple[str, Node]] = []
    for g in model.graphs:
        entries = by_graph.get(g.name)
        if not entries:
            continue
        entries.sort()
        nodes = g.nodes
        last = -1
        for pos, name in entries:
            n = nodes.get(name)
            if n is None or pos == last or INPUT_NAME_KEY not in n.attrs:
                return None
            last = pos
            if OUTPUT_NAME_KEY in n.attrs:  # (checked here: a second key look-up in SQL costs more)
                named.append((g.name, n))
    return named


def rw_types_datalog(model: Model, db: Any = None, *, engine: str = "sqlite") -> Any:
    """Run ``queries/rw_types.dl`` on ``model`` (facts from ``db`` when given); returns the engine result
    (the full relations ``out_rw``, ``in_rw``, ``rw_edge``, ``rw_sub_identity`` over every anchor)."""
    from anchorlog.facts.relations import FactDB

    if db is None:
        db = FactDB.from_model(model)
    return _program().run(db, engine=engine, extra={"io_name": io_name_rows(model)})


# ---------------------------------------------------------------------------------------------------- explain
def _explain_output(rw: RWTypes, graph: Graph, node: Node, out: int) -> list[str]:
    lines: list[str] = []
    cons = graph.consumers(node.name, out)
    ko = (graph.name, node.name, out)
    facts = rw.evaluate(ask_out=[ko], ask_in=[(graph.name, c, k) for c, k in cons])
    out_t, why = facts.out_type(*ko)
    lines.append(f"{node.name}:{out} ({node.type}) output type {out_t}: {why}; {len(cons)} consumer edge(s)")
    if ko in facts.skip_ok:
        lines.append("  the last edge may keep the buffer if every edge is a scope-write input of one node")
    for c, k in cons:
        cn = graph.nodes[c]
        if (graph.name, c) in facts.skip_consumer:
            lines.append(f"  -> {c}:{k}: skipped (_skip_rw_conflict, handled by hccl-memcpy)")
            continue
        in_t, in_why = facts.in_type(graph.name, c, k)
        lines.append(f"  -> {c}:{k} ({cn.type}) input type {in_t}: {in_why}; matrix -> {facts.result(out_t, in_t)}")
    return lines


@register_explainer("rw-conflict", node_types=("Identity", "ReadVariableOp"), anchors=True)
def explain(model: Model, name: str, *, options: dict[str, str], anchor: tuple[str, int] | None = None) -> str:
    """Why rw-conflict inserts (or not) an Identity after ``NODE:OUT``, or what it does to an Identity."""
    import copy

    work = copy.deepcopy(model)  # GE's init edits the graph (ref marks, subgraph Identities); explain reads only
    rw = RWTypes(work)
    lines: list[str] = []
    try:
        rw.init(mark_subgraphs=True)
    except PassFailure as err:
        lines.append(f"subgraph marking failed (GE only warns and stops the RW pass): {err}")
    hit = rw.locate(anchor[0] if anchor else name)
    if hit is None:
        raise PassFailure(f"no node {anchor[0] if anchor else name!r}")
    graph, node = hit
    if anchor is not None:
        lines += _explain_output(rw, graph, node, anchor[1])
    else:
        src = node.inputs[0] if node.inputs and node.inputs[0] is not None else None
        lines.append(
            f"{node.name} ({node.type}) in graph {graph.name}, fed by {src[0]}:{src[1]}"
            if src
            else f"{node.name} has no producer"
        )
        lines += _explain_output(rw, graph, node, 0)
        cons = graph.consumers(node.name, 0)
        if src is not None and src[0] in graph.nodes:
            facts = rw.evaluate(ask_out=[(graph.name, src[0], src[1])])
            p_t, p_why = facts.out_type(graph.name, src[0], src[1])
            lines.append(f"producer {src[0]}:{src[1]} output type {p_t}: {p_why}")
            keep = facts.ident_keep.get((graph.name, node.name))
            if len(cons) > 1:
                lines.append("several consumers: SplitIdentity keeps a copy only for writing inputs")
            elif keep is not None:
                lines.append(f"RemoveNoUseIdentity keeps it: {keep}")
            elif cons:
                c, k = cons[0]
                c_t = facts.in_type(graph.name, c, k)[0] if (graph.name, c, k) in facts.in_t else rw.input_type_of(c, k)
                lines.append(
                    f"RemoveNoUseIdentity: matrix({p_t}, {c_t}) = {facts.result(p_t, c_t)} "
                    "(removed when DO_NOTHING unless next to a subgraph, before a StreamMerge or guarding an Assign)"
                )
    run_on = copy.deepcopy(model)
    before = {n.name for n in run_on.all_nodes()}
    try:
        handle_memory_rw_conflict(run_on)
    except PassFailure as err:
        lines.append(f"pass stopped with a warning: {err}")
        return "\n".join(lines)
    after = run_on.find_node(node.name)
    if anchor is None:
        lines.append("result: " + ("kept" if after is not None else "removed (split/removal, see above)"))
    new = sorted({n.name for n in run_on.all_nodes()} - before)
    subject = anchor[0] if anchor else node.name
    mine = [n for n in new if any(a is not None and a[0] == subject for a in run_on.find_node(n).inputs)]
    lines.append("Identities inserted after it: " + (", ".join(mine) if mine else "none"))
    return "\n".join(lines)

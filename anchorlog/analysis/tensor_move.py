"""``tensor-move-delete``: GE's TensorMoveDeletePass (seeds 000/003, reference §5), faithful and explained.

How it works
------------
1. **Facts from the rules.** ``anchorlog/queries/tensor_move.dl`` derives, per TensorMove, everything a decision
   rests on: the traceback path (``tm_trace.dl``), the source's class (multi-branch / special / graph input),
   why successors of a special source are unsafe, the graph input's index against the reuse options (given as
   relations), the path entries' fan-out, shared ref outputs, siblings with their RW types and flags, the
   pending ordering edges (their cycle check over the whole graph is ``tm_cycle.dl`` on ``reach.dl``) and
   Rule 4's RW matrix per successor (``rw_types.dl``). :class:`TMRules` runs it over the pipeline's shared
   fact database (:func:`anchorlog.analysis.fact_cache.shared_facts`): for a re-derivation the traceback over
   the whole database, the rest over the slice of it the TensorMoves' neighbourhood needs; the first derivation
   (many TensorMoves) runs ``tensor_move.dl`` over the whole database, without the traceback run or a slice.
2. **Decide one TensorMove at a time, in GE's order.** GE runs the pass as a node pass (``GEPass``): nodes are
   visited from the inputs forward, a subgraph when its owner is visited, and the neighbours of a deleted node
   are visited again. :func:`run_gepass` reproduces that walk; each TensorMove visit applies the five rules in
   GE's order over the rule relations (:class:`TensorMoveDecider`). After a deletion the TensorMoves whose
   facts it can change are marked stale: after a plain bypass (no control edge moved) those mentioning the
   deleted TensorMove or passing its producer (:meth:`TMFacts.stale_after_bypass`), otherwise those mentioning
   any touched node (and, when ordering edges were added, those with pending edges); before the next decision
   about one of them the shared facts are refreshed for the edited nodes only and the rules re-run for the
   stale TensorMoves only (relation ``tm_seed``), over a slice of their neighbourhood. Rule 5 uses the symbol table built once (after the
   first derivation, asked only for the TensorMoves that can reach Rule 5: :meth:`TensorMoveDecider._symbol_asks`)
   and merged per deletion (:class:`TMSymbols`, the shared symbols module) and the layout checkers.
3. **Rewrite.** Pending control edges land first (rollback on failure), then
   :func:`anchorlog.runtime.rewrite.isolate_and_delete` relinks like ``IsolateAndDeleteNode(tm, {0})``, then the
   symbol table is merged like ``MergeTensorMoveSymbolAfterDelete``.
4. **Report.** Every TensorMove with deleted/kept, the first rule that kept it, the facts behind it, the control
   edges added. ``anchorlog explain IN TM`` prints the same derivation in words (:func:`explain`).

Options: ``ge.exec.outputReuseInputMemIndexes`` / ``ge.exec.inputReuseMemIndexes`` (Rule 2),
``ge.oo.level`` (the pass is an O3 pass: it does nothing at O0–O2), and ``anchorlog.tensor_move.init`` --
which of ``OptimizeTensorMove``'s preparations ran before the pass: ``full`` (default: ``InitRWConflictCheck``
and ``TensorMoveDeletePass::Init``, as a real compile does), ``rw`` (RW types primed, no symbol table: the
layout rule is skipped), ``symbols`` (symbol table only), ``none`` (the bare ``GEPass`` run of most GE unit
tests: empty RW caches, no symbol table).
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.registry import PassContext, register
from anchorlog.analysis.rw_conflict import RWTypes
from anchorlog.errors import AnchorlogError, OptionError, PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex
from anchorlog.gcpause import paused_gc
from anchorlog.runtime.rewrite import CtrlEdgeBatch, in_nodes, isolate_and_delete, out_indices, out_nodes

OPT_OUTPUT_REUSE = "ge.exec.outputReuseInputMemIndexes"
OPT_INPUT_REUSE = "ge.exec.inputReuseMemIndexes"
OPT_OO_LEVEL = "ge.oo.level"
OPT_INIT = "anchorlog.tensor_move.init"
INIT_MODES = ("full", "rw", "symbols", "none")

TM_DL = Path(__file__).resolve().parent.parent / "queries" / "tensor_move.dl"
TM_TRACE_DL = TM_DL.with_name("tm_trace.dl")  # the traceback part alone (run over the whole fact database)

RULES = (
    "reserved",
    "trace",
    "rule1-path",
    "rule2-reuse",
    "rule3-single-path",
    "rule4-rw-conflict",
    "rule5-layout",
    "rewrite",
)


# --------------------------------------------------------------------------------------------------------------
# Options (Rule 2)
# --------------------------------------------------------------------------------------------------------------
def _stoul_prefix(text: str) -> int | None:
    """``std::stoul``: optional leading whitespace, optional sign, digits; trailing junk ignored; None = throws."""
    m = re.match(r"\s*([+-]?)(\d+)", text)
    if not m:
        return None
    value = int(m.group(2))
    if m.group(1) == "-":  # stoul wraps negatives; GE skips pairs containing '-' before parsing anyway
        return None
    if value >= 2**64:
        return None
    return value


def parse_output_reuse_pairs(value: str) -> list[tuple[int, int]]:
    """``ParseOutputReuseInputMemIndexes``: ``"in,out|in,out"``; malformed pieces are skipped as GE skips them."""
    pairs: list[tuple[int, int]] = []
    for piece in value.split("|"):
        if not piece:
            continue
        if "," not in piece:
            continue
        first, rest = piece.split(",", 1)
        if "-" in first or "-" in rest:
            continue
        a, b = _stoul_prefix(first), _stoul_prefix(rest)
        if a is None or b is None:
            continue
        pairs.append((a, b))
    return pairs


def parse_input_reuse_indexes(value: str) -> list[int] | None:
    """``SplitStringByComma`` + ``ConvertToInt32`` per token; None when a token does not parse completely
    (GE then refuses reuse for every input)."""
    tokens: list[str] = []
    for tok in value.split(","):
        if tok and tok not in tokens:
            tokens.append(tok)
    out: list[int] = []
    for tok in tokens:
        m = re.fullmatch(r"\s*([+-]?\d+)", tok)
        if not m:
            return None
        v = int(m.group(1))
        if not -(2**31) <= v < 2**31:
            return None
        out.append(v)
    return out


@dataclass
class ReuseConfig:
    """The two zero-copy options as GE reads them (``IsMemoryReuseAllowed``)."""

    output_reuse: str | None = None
    input_reuse: str | None = None

    def rows(self) -> dict[str, list[tuple]]:
        """The options as the rule program's input relations ``opt_reuse_pair(in, out)`` and
        ``opt_reuse_index(idx)`` (the latter empty when the value is empty or a token does not parse)."""
        pairs = parse_output_reuse_pairs(self.output_reuse) if self.output_reuse is not None else []
        idx = parse_input_reuse_indexes(self.input_reuse) if self.input_reuse else None
        return {"opt_reuse_pair": sorted(set(pairs)), "opt_reuse_index": [(i,) for i in sorted(set(idx or []))]}

    def explain(self, data_index: int, reuse_rows: list[tuple]) -> tuple[bool, str]:
        """The answer the rules gave (``tm_reuse`` rows: via, other index), in words."""
        for via, other in sorted(reuse_rows, key=lambda r: (r[0] != "output_pair", int(r[1]))):
            if via == "output_pair":
                return True, f"{OPT_OUTPUT_REUSE}={self.output_reuse!r} pairs input {data_index} with output {other}"
        if any(r[0] == "input_list" for r in reuse_rows):
            return True, f"{OPT_INPUT_REUSE}={self.input_reuse!r} lists input {data_index}"
        return self._refusal(data_index)

    def _refusal(self, data_index: int) -> tuple[bool, str]:
        if self.input_reuse is not None and self.input_reuse == "":
            return False, f"{OPT_INPUT_REUSE} is empty"
        if self.input_reuse and parse_input_reuse_indexes(self.input_reuse) is None:
            return False, f"{OPT_INPUT_REUSE}={self.input_reuse!r} has a token that is not an int32 (GE stops there)"
        given = [
            k for k, v in ((OPT_OUTPUT_REUSE, self.output_reuse), (OPT_INPUT_REUSE, self.input_reuse)) if v is not None
        ]
        if not given:
            return False, "no reuse option is set"
        return False, f"input {data_index} is not declared reusable by {' / '.join(given)}"


# --------------------------------------------------------------------------------------------------------------
# Traceback (TraceRealSourceNode)
# --------------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class PathStep:
    """One entry of GE's ``path_to_source_node``: a node and the output anchor the path leaves through
    (``out`` is None for the wrapper marker added when jumping out of a subgraph)."""

    graph: str
    node: str
    out: int | None

    def text(self) -> str:
        return f"{self.node}" if self.out is None else f"{self.node}(out:{self.out})"


# --------------------------------------------------------------------------------------------------------------
# Symbol table kept up to date across deletions (TensorMoveDeletePass::Init / MergeTensorMoveSymbolAfterDelete)
# --------------------------------------------------------------------------------------------------------------
class TMSymbols:
    """GE's ``anchor_to_symbol`` / ``symbol_to_anchors`` of the root graph as far as the pass reads them, built
    once and merged after each deletion.

    With a pass context only the symbols of the TensorMoves' input 0 / output 0 anchors are derived
    (``tm_symtab.dl`` over symbols.dl's demand-driven part, assembled by
    :func:`anchorlog.analysis.symbols.asked_symbol_table`): a merge joins only such symbols, so every symbol the
    pass ever looks up is one of them, with the whole table's name and anchors. Otherwise, or when a part could
    differ from the whole (symbol names colliding across graphs), the whole table
    (:func:`anchorlog.analysis.symbols.symbol_table`)."""

    def __init__(
        self, model: Model, ctx: PassContext | None = None, ask: Iterable[tuple[str, str]] | None = None
    ) -> None:
        """``ask``: the TensorMoves whose anchors the pass may look up (default every TensorMove); the table then
        holds their classes (and those of every union, Merge and late link), the whole table's for them. Looking
        up another TensorMove is an internal error (:meth:`symbol`)."""
        from anchorlog.analysis.symbols import asked_symbol_table, symbol_table

        self.asked: frozenset[tuple[str, str]] | None = frozenset(ask) if ask is not None else None
        table = None
        if ctx is not None:  # over the pipeline's shared fact database (no private fact build)
            only = None if self.asked is None else {"tm_sym_only": [(1,)], "tm_sym_ask": sorted(self.asked)}
            table = asked_symbol_table(model, ctx, _program(TM_SYMTAB_DL), "tm_sym_tree", extra=only)
        a2s, s2a = table.as_pair() if table is not None else symbol_table(model, ctx=ctx)
        self.a2s: dict[tuple, str] = dict(a2s)
        self.s2a: dict[str, list[tuple]] = {s: list(v) for s, v in s2a.items()}

    def covers(self, graph: str, tm: str) -> bool:
        """Was the table asked about TensorMove ``tm``'s anchors?"""
        return self.asked is None or (graph, tm) in self.asked

    def symbol(self, graph: str, node: str, io: str, idx: int) -> str | None:
        return self.a2s.get((graph, node, io, idx))

    def merged_anchors(self, si: str, so: str) -> list[tuple]:
        """``ConstructSingleNodeSymbolTable``: one symbol holding the anchors of ``si`` then those of ``so``."""
        return list(self.s2a.get(si, [])) + list(self.s2a.get(so, []))

    def merge_after_delete(self, graph: str, tm: str) -> None:
        kin, kout = (graph, tm, "in", 0), (graph, tm, "out", 0)
        si, so = self.a2s.get(kin), self.a2s.get(kout)
        if si is not None and so is not None and si != so:
            moved = self.s2a.pop(so, [])
            for a in moved:
                self.a2s[a] = si
            self.s2a.setdefault(si, []).extend(moved)
        if si is not None:
            lst = self.s2a.get(si, [])
            self.s2a[si] = [a for a in lst if a != kin and a != kout]
        self.a2s.pop(kin, None)
        self.a2s.pop(kout, None)


# --------------------------------------------------------------------------------------------------------------
# The rule program (tensor_move.dl) over a slice of the shared fact database
# --------------------------------------------------------------------------------------------------------------
TM_CYCLE_DL = TM_DL.with_name("tm_cycle.dl")
TM_SYMBOLS_DL = TM_DL.with_name("tm_symbols.dl")
TM_SYMTAB_DL = TM_DL.with_name("tm_symtab.dl")  # the symbol table the pass reads (TMSymbols)

# Relations of tensor_move.dl the decisions read (row prefix: graph, tm)
DECISION_OUTPUTS = (
    "tm",
    "tm_path",
    "tm_trace_bad",
    "tm_source",
    "tm_reserved",
    "tm_path_consumers",
    "tm_sibling",
    "tm_succ",
    "tm_src_class",
    "tm_succ_unsafe",
    "tm_data_index",
    "tm_reuse",
    "tm_p_mbcf",
    "tm_p_shared",
    "tm_direct",
    "tm_sib_bad",
    "tm_sib_rw",
    "tm_succ_rw",
    "tm_succ_ctrl_sib",
    "tm_pending",
    "tm_rw_check",
    "tm_may_delete",
)
REPORT_OUTPUTS = ("tm_rw",)
SYMBOL_OUTPUTS = ("tm_symbol", "tm_merged")
ALL_OUTPUTS = DECISION_OUTPUTS + REPORT_OUTPUTS + ("tm_pending_cycle",) + SYMBOL_OUTPUTS

# Relations copied whole into the slice (small), and those copied for the demanded nodes (column naming the node)
_SLICE_WHOLE = ("graph", "graph_attr", "subgraph", "parent_in", "parent_out", "op_class")
_SLICE_BY_NODE = {
    "node": "name",
    "node_prop": "node",
    "node_attr": "node",
    "in_anchor": "node",
    "out_anchor": "node",
    "ref_io": "node",
    "tensor_attr": "node",
}
_SLICE_TENSOR_KEYS = ("_parent_node_index", "_special_input_size")  # the tensor attrs rw_types.dl reads


def _program(path: Path) -> Any:
    from anchorlog.queries import Program

    return Program.cached(path)


@dataclass(frozen=True)
class Bypass:
    """A TensorMove as a plain bypass would delete it: its input-0 producer anchor and its output-0 consumers
    (``(node, input index)`` in graph order), as they were when the look-through facts were derived."""

    graph: str
    tm: str
    producer: tuple[str, int]
    consumers: tuple[tuple[str, int], ...]

    @staticmethod
    def of(graph: Graph, tm: Node) -> Bypass | None:
        """The bypass of ``tm`` in ``graph`` now, or None when deleting it would not be a plain bypass (another
        input, a control edge, a consumer of another output): those deletions keep the broad re-derivation."""
        if len(tm.inputs) != 1 or tm.inputs[0] is None or tm.ctrl_inputs or graph.ctrl_successors(tm.name):
            return None
        if any(graph.consumers(tm.name, o) for o in out_indices(graph, tm.name) if o != 0):
            return None
        src = tm.inputs[0]
        return Bypass(graph.name, tm.name, (src[0], int(src[1])), tuple(graph.consumers(tm.name, 0)))

    def touched(self) -> set[tuple[str, str]]:
        """The nodes the deletion edits (the TensorMove, its producer, its consumers)."""
        return {(self.graph, self.tm), (self.graph, self.producer[0])} | {(self.graph, d) for d, _k in self.consumers}


class TMRules:
    """Runs ``tensor_move.dl`` for a set of TensorMoves (relation ``tm_seed``) over the shared fact database.

    The traceback can follow edges anywhere, so ``tm_trace.dl`` runs over the whole database first; everything
    else the rules read lies in the neighbourhood of the traced paths (RW types of producers, siblings and
    successors; a wrapper's types read its subgraphs), so the full program then runs over a slice holding the
    path nodes, their consumers and the wrappers among or above them with their subgraphs and neighbours
    (:meth:`_closure`): demand restriction, as magic sets would do it, so a re-derivation costs what the
    stale TensorMoves' neighbourhood holds, not what the graph holds. The cycle check of pending ordering edges (``tm_cycle.dl``) needs the whole graph and
    runs over the whole database, only when there are pending edges. A derivation of many TensorMoves (the first one,
    see ``whole_db_seed``) skips the traceback run and the slice and runs ``tensor_move.dl`` over the whole database:
    the slice is a demand restriction, so the rows are the same."""

    def __init__(
        self,
        model: Model,
        db: Any,
        *,
        engine: str,
        primed: bool,
        reuse: ReuseConfig,
        io_rows: list[tuple] | None = None,
    ) -> None:
        """``io_rows``: :func:`~anchorlog.analysis.rw_conflict.io_name_rows` of ``model`` when the caller has them."""

        self.model = model
        self.db = db
        self.engine = engine
        self.primed = primed
        self.prog = _program(TM_DL)
        self.options_rows = reuse.rows()
        self.graphs = {g.name: g for g in model.graphs}
        self.index = ModelIndex(model)  # subgraph owners: TensorMove deletions leave them as they are
        self._owner = {sg: (pg.name, pn.name) for sg, (pg, pn, _i) in self.index.owner.items()}
        self._io_rows: dict[tuple[str, str], list[tuple]] | None = None
        self._io_given = io_rows
        self._reach_pos: list[tuple] | None = None
        self.runs = 0

    # parsed when first used (a cold process pays for parsing each): the traceback alone chooses a slice, the cycle
    # check runs only for pending ordering edges
    @property
    def trace_prog(self) -> Any:
        return _program(TM_TRACE_DL)

    @property
    def cycle_prog(self) -> Any:
        return _program(TM_CYCLE_DL)

    def invalidate_order(self) -> None:
        """Control edges were added: the topological positions reach.dl bounds its search with are stale."""
        self._reach_pos = None

    def _conn(self):
        return getattr(self.db, "conn", self.db)

    # derive() runs the rules over the whole database instead of a slice for at least this many seeded TensorMoves
    # that are also at least 4 % of the nodes (the first derivation on generated decoders, 6 % TensorMoves: 100 k,
    # 6 034 TensorMoves: traceback 0.35 s + slice copy 0.6 s vs rules ~0.4 s more over the whole database; rules
    # phase 30 k 0.61 -> 0.36 s, 10 k 0.22 -> 0.155 s); a re-derivation of a few TensorMoves keeps its slice
    whole_db_seed = 200

    def io_rows(self, nodes: set[tuple[str, str]] | None = None) -> list[tuple]:
        """``io_name`` rows (rw_types.dl's input) of ``nodes`` (None: of every node): computed once, looked up
        per node."""
        if self._io_rows is None:
            from anchorlog.analysis.rw_conflict import io_name_rows

            # unprimed RW caches hold no ref relations: no names to match
            by_node: dict[tuple[str, str], list[tuple]] = {}
            if not self.primed:
                rows: list[tuple] = []
            else:
                rows = self._io_given if self._io_given is not None else io_name_rows(self.model)
            for r in rows:
                by_node.setdefault((r[0], r[1]), []).append(r)
            self._io_rows = by_node
        if nodes is None:
            return [r for rows_ in self._io_rows.values() for r in rows_]
        return [r for k in sorted(nodes) for r in self._io_rows.get(k, ())]

    def derive(
        self,
        seed: list[tuple[str, str]],
        outputs: tuple[str, ...] = DECISION_OUTPUTS,
        bypass: list[Bypass] | None = None,
    ) -> dict[str, list[tuple]]:
        """The relations ``outputs`` (default: those the decisions read; add :data:`REPORT_OUTPUTS` for
        reports and tests) of the TensorMoves ``seed`` on the current facts, plus ``tm_pending_cycle``.

        ``bypass``: derive them as if these TensorMoves were already deleted by a plain bypass (their producer
        anchor feeding their consumers; :meth:`_bypass_in_slice`), the look-through facts of
        :meth:`TensorMoveDecider._derive_look_through`. The traceback then runs over the slice too: the paths
        through a bypassed TensorMove continue along its own path, whose nodes the slice holds."""
        self.runs += 1
        wanted = list(dict.fromkeys(("tm_pending", *outputs)))
        extra = {"tm_seed": seed, "rw_unprimed": [] if self.primed else [(1,)], **self.options_rows}
        if not bypass and len(seed) >= self.whole_db_seed and len(seed) * 25 >= self.model.num_nodes():
            # many TensorMoves (the first derivation): copying their slice costs more than the rules save on it, and
            # the traceback that chooses the slice is not needed either (tensor_move.dl derives it again); the slice
            # is a demand restriction, so the whole database gives the same rows
            res = self.prog.run(self.db, engine="sqlite", outputs=wanted, extra={**extra, "io_name": self.io_rows()})
            out = {r: res.rows(r) for r in wanted}
        else:
            out = self._derive_in_slice(seed, bypass, wanted, extra)
        out["tm_pending_cycle"] = self.cycles(out["tm_pending"]) if out["tm_pending"] else []
        return out

    def _derive_in_slice(
        self, seed: list[tuple[str, str]], bypass: list[Bypass] | None, wanted: list[str], extra: dict[str, Any]
    ) -> dict[str, list[tuple]]:
        """:meth:`derive` over the slice its traceback chooses (the demand restriction described on the class)."""
        traced = list(seed) + [(b.graph, b.tm) for b in bypass or ()]
        res = self.trace_prog.run(
            self.db,
            engine=self.engine,
            outputs=["tm_path", "tm_sib_ask"],
            extra={"tm_seed": traced, **self.options_rows},
        )
        trace = res.rows("tm_path")
        tms = {(g, tm) for g, tm in traced}
        demand = tms | {(pg, pn) for _g, _tm, _i, pg, pn, _o in trace}
        # whose readers the slice needs: the TensorMoves' (successors) and the path entries' of those Rules 1-2 may
        # let through (siblings, tm_sib_ask) -- and, for look-through facts, of the bypassed TensorMoves' paths
        # (a dependent's path continues along them)
        ask = {(g, tm) for g, tm in res.rows("tm_sib_ask")} | {(b.graph, b.tm) for b in bypass or ()}
        readers_of = tms | {(pg, pn) for g, tm, _i, pg, pn, _o in trace if (g, tm) in ask}
        sl = self._slice(demand, readers_of)
        try:
            if bypass:
                self._bypass_in_slice(sl, bypass)
            io = self.io_rows(self._sliced - {(b.graph, b.tm) for b in bypass or ()})
            res = self.prog.run(sl, engine="sqlite", outputs=wanted, extra={**extra, "io_name": io})
            return {r: res.rows(r) for r in wanted}
        finally:
            sl.close()

    @staticmethod
    def _bypass_in_slice(sl: Any, bypass: list[Bypass]) -> None:
        """Edit the slice as ``isolate_and_delete(graph, tm, {0: 0})`` edits the graph for a plain bypass (one
        data input, no control edges, consumers on output 0 only): the producer anchor feeds every consumer,
        the TensorMove's rows are gone. The rule program then sees the graph after those deletions."""
        for b in bypass:
            sl.execute("DELETE FROM data_edge WHERE graph = ? AND (src = ? OR dst = ?)", (b.graph, b.tm, b.tm))
            sl.executemany(
                "INSERT INTO data_edge VALUES (?, ?, ?, ?, ?)",
                [(b.graph, b.producer[0], b.producer[1], d, k) for d, k in b.consumers],
            )
            sl.execute("DELETE FROM ctrl_edge WHERE graph = ? AND (src = ? OR dst = ?)", (b.graph, b.tm, b.tm))
            for rel, col in _SLICE_BY_NODE.items():
                sl.execute(f'DELETE FROM "{rel}" WHERE graph = ? AND "{col}" = ?', (b.graph, b.tm))

    def cycles(self, pending: list[tuple]) -> list[tuple]:
        """``tm_cycle.dl`` over the whole database: pending edges that would close a cycle."""
        if self._reach_pos is None:
            from anchorlog.analysis.graph_lint import topo_positions

            self._reach_pos = topo_positions(self.model)
        res = self.cycle_prog.run(
            self.db,
            engine=self.engine,
            outputs=["tm_pending_cycle"],
            extra={"tm_pending_in": pending, "reach_pos": self._reach_pos},
        )
        return res.rows("tm_pending_cycle")

    def _closure(
        self, core: set[tuple[str, str]], readers_of: set[tuple[str, str]] | None = None
    ) -> set[tuple[str, str]]:
        """The nodes whose fact rows the rules read for the ``core`` nodes (TensorMoves and their path entries):
        the core, the data consumers of those in ``readers_of`` (default all; successor and sibling types and
        flags -- the fan-out counts need only the edges, which the slice copies from either end), and for every
        wrapper among them,
        above them (owner of a subgraph they sit in) or next to such a wrapper: the wrapper, its producers and
        consumers and every node of its subgraphs, transitively (what RW types of wrappers and subgraph Data
        read). Computed on the IR, which is current; its cost follows the neighbourhood, not the graph."""
        graphs = self.graphs
        owner = self._owner
        out: set[tuple[str, str]] = set()
        wrappers: list[tuple[str, str]] = []
        seen_w: set[tuple[str, str]] = set()

        def add_wrapper(g: str, n: str) -> None:
            if (g, n) not in seen_w:
                seen_w.add((g, n))
                wrappers.append((g, n))

        def note(g: str, n: str) -> None:
            if (g, n) in out:
                return
            out.add((g, n))
            gr = graphs.get(g)
            node = gr.nodes.get(n) if gr is not None else None
            if node is not None and any(node.subgraph_names):
                add_wrapper(g, n)
            up = owner.get(g)
            if up is not None:
                add_wrapper(*up)

        for g, n in sorted(core):
            note(g, n)
            gr = graphs.get(g)
            if gr is None or n not in gr.nodes or (readers_of is not None and (g, n) not in readers_of):
                continue
            for o in out_indices(gr, n):
                for d, _k in gr.consumers(n, o):
                    note(g, d)
        while wrappers:
            g, n = wrappers.pop()
            gr = graphs.get(g)
            node = gr.nodes.get(n) if gr is not None else None
            if node is None:
                continue
            note(g, n)
            for a in node.inputs:
                if a is not None:
                    note(g, a[0])
            for o in out_indices(gr, n):
                for d, _k in gr.consumers(n, o):
                    note(g, d)
            for sub in node.subgraph_names:
                sg = graphs.get(sub)
                if sg is not None:
                    for m in sg.nodes:
                        note(sub, m)
        return out

    def _slice(self, demand: set[tuple[str, str]], readers_of: set[tuple[str, str]] | None = None):
        """A SQLite database with the fact rows of :meth:`_closure` of the demanded nodes (schema and indexes of
        the fact database), copied from the shared fact database by index look-ups."""
        import sqlite3

        from anchorlog.facts.relations import INDEXES, SCHEMA

        sliced = self._closure(demand, readers_of)
        self._sliced = sliced
        src = self._conn()
        src.execute("CREATE TEMP TABLE IF NOT EXISTS tm_demand (graph TEXT, node TEXT)")
        src.execute("CREATE INDEX IF NOT EXISTS temp.ix_tm_demand ON tm_demand (graph, node)")
        src.execute("DELETE FROM temp.tm_demand")
        src.executemany("INSERT INTO temp.tm_demand VALUES (?, ?)", sorted(sliced))
        # The slice is filled inside SQLite (INSERT ... SELECT into a database attached to the shared connection,
        # then handed over as one serialized image): the rows never become Python objects.
        if src.in_transaction:
            src.commit()
        src.execute("ATTACH DATABASE ':memory:' AS tm_slice")
        try:
            for rel, cols in SCHEMA.items():
                if rel not in _SLICE_WHOLE and rel not in _SLICE_BY_NODE and rel not in ("data_edge", "ctrl_edge"):
                    continue
                names = [c for c, _ in cols]
                src.execute(f'CREATE TABLE tm_slice."{rel}" (' + ", ".join(f'"{c}"' for c in names) + ")")
                sel = ", ".join(f'r."{c}"' for c in names)
                if rel in _SLICE_WHOLE:
                    q = f'SELECT {sel} FROM main."{rel}" r'
                elif rel in _SLICE_BY_NODE:
                    col = _SLICE_BY_NODE[rel]
                    q = (
                        f'SELECT {sel} FROM temp.tm_demand d CROSS JOIN main."{rel}" r '
                        f'ON r.graph = d.graph AND r."{col}" = d.node'
                    )
                    if rel == "tensor_attr":
                        q += " WHERE r.key IN (" + ", ".join(f"'{k}'" for k in _SLICE_TENSOR_KEYS) + ")"
                else:  # edges touching a demanded node, found from either end by index
                    q = (
                        f'SELECT {sel} FROM temp.tm_demand d CROSS JOIN main."{rel}" r '
                        f"ON r.graph = d.graph AND r.src = d.node "
                        f'UNION SELECT {sel} FROM temp.tm_demand d CROSS JOIN main."{rel}" r '
                        f"ON r.graph = d.graph AND r.dst = d.node"
                    )
                src.execute(f'INSERT INTO tm_slice."{rel}" {q}')
                for i, idx in enumerate(INDEXES.get(rel, ())):
                    src.execute(
                        f'CREATE INDEX tm_slice."ix_{rel}_{i}" ON "{rel}" (' + ", ".join(f'"{c}"' for c in idx) + ")"
                    )
            src.execute("DELETE FROM temp.tm_demand")
            src.commit()
            image = src.serialize(name="tm_slice")
        finally:
            if src.in_transaction:
                src.rollback()
            src.execute("DETACH DATABASE tm_slice")
        sl = sqlite3.connect(":memory:")
        sl.deserialize(image)
        sl.execute("PRAGMA journal_mode=OFF")
        sl.execute("PRAGMA synchronous=OFF")
        sl.execute("ANALYZE")
        return sl


class TMFacts:
    """The rows of the decision relations, per TensorMove (key ``(graph, tm)``; row = the columns after them),
    and which nodes each TensorMove's facts mention (to know whose facts an edit makes stale)."""

    def __init__(self) -> None:
        self.rows: dict[tuple[str, str], dict[str, list[tuple]]] = {}
        self.mentions: dict[tuple[str, str], set[tuple[str, str]]] = {}
        self.on_path: dict[tuple[str, str], set[tuple[str, str]]] = {}  # node -> TensorMoves whose path has it
        self.derived_at: dict[tuple[str, str], int] = {}

    def load(self, seed: list[tuple[str, str]], derived: dict[str, list[tuple]], version: int) -> None:
        for key in seed:
            self.rows[key] = {}
            self.derived_at[key] = version
        for rel, rows in derived.items():
            for r in rows:
                key = (r[0], r[1])
                if key in self.derived_at and self.derived_at[key] == version:
                    self.rows.setdefault(key, {}).setdefault(rel, []).append(tuple(r[2:]))
        for key in seed:
            self._index(key)

    @staticmethod
    def path_nodes(key: tuple[str, str], f: dict[str, list[tuple]]) -> set[tuple[str, str]]:
        """The TensorMove and the nodes of its traced path."""
        return {key} | {(pg, pn) for _i, pg, pn, _o in f.get("tm_path", [])}

    @classmethod
    def mentioned(cls, key: tuple[str, str], f: dict[str, list[tuple]]) -> set[tuple[str, str]]:
        """The nodes facts ``f`` of TensorMove ``key`` mention: itself, its path, siblings and successors."""
        g = key[0]
        nodes = cls.path_nodes(key, f)
        path_graph = {int(i): pg for i, pg, _pn, _o in f.get("tm_path", [])}
        nodes.update((path_graph.get(int(i), g), b) for i, b, _k in f.get("tm_sibling", []))
        nodes.update((g, s) for s, *_ in f.get("tm_succ", []))
        return nodes

    def _index(self, key: tuple[str, str]) -> None:
        f = self.rows[key]
        for n in self.path_nodes(key, f):
            self.on_path.setdefault(n, set()).add(key)
        for n in self.mentioned(key, f):
            self.mentions.setdefault(n, set()).add(key)

    def install(self, key: tuple[str, str], rows: dict[str, list[tuple]], derived_at: int) -> None:
        """Replace ``key``'s facts by ``rows`` derived on the graph of version ``derived_at`` (look-through
        facts; the index keeps the nodes the old facts mentioned too, which only widens later staleness)."""
        self.rows[key] = {rel: list(r) for rel, r in rows.items()}
        self.derived_at[key] = derived_at
        self._index(key)

    def get(self, key: tuple[str, str], rel: str) -> list[tuple]:
        return self.rows.get(key, {}).get(rel, [])

    def stale_after(self, touched: set[tuple[str, str]]) -> set[tuple[str, str]]:
        """TensorMoves whose facts mention any of the ``touched`` nodes."""
        out: set[tuple[str, str]] = set()
        for n in touched:
            out |= self.mentions.get(n, set())
        return out

    def stale_after_bypass(self, tm: tuple[str, str], producer: tuple[str, str]) -> set[tuple[str, str]]:
        """TensorMoves whose facts can change when ``tm`` is bypassed (its producer's output feeds its consumers
        instead) and no control edge moves: those mentioning ``tm`` itself and those whose path passes the
        producer (its consumer set -- fan-out, siblings, whether another output is read -- and with it the
        producer's output RW type changed). Nothing else a fact of tensor_move.dl reads changes: the consumers
        keep their rows (an input RW type does not depend on the producer), reachability between the remaining
        nodes is the same, and a path that reached a consumer through ``tm`` already mentions ``tm``."""
        return set(self.mentions.get(tm, set())) | self.on_path.get(producer, set())


# --------------------------------------------------------------------------------------------------------------
# The decision (one TensorMove)
# --------------------------------------------------------------------------------------------------------------
@dataclass
class Verdict:
    """Why one TensorMove was deleted or kept; ``facts`` are what the rules looked at."""

    tm: str
    graph: str
    deleted: bool = False
    rule: str = ""  # first rule that kept it ("" when deleted)
    reason: str = ""
    path: list[PathStep] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)
    ctrl_edges_added: list[tuple[str, str]] = field(default_factory=list)
    relink_ctrl_edges: list[tuple[str, str]] = field(default_factory=list)
    visits: int = 0

    def to_json(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "tensor_move": self.tm,
            "graph": self.graph,
            "decision": "deleted" if self.deleted else "kept",
            "path": [s.text() for s in self.path],
        }
        if not self.deleted:
            d["kept_by"] = self.rule
        d["reason"] = self.reason
        if self.facts:
            d["facts"] = self.facts
        if self.ctrl_edges_added:
            d["ctrl_edges_added"] = [list(e) for e in self.ctrl_edges_added]
        if self.relink_ctrl_edges:
            d["relink_ctrl_edges"] = [list(e) for e in self.relink_ctrl_edges]
        if self.visits > 1:
            d["visits"] = self.visits
        return d


_WRITES = ("kWriteable", "kScopeWriteable")
_STRUCTURAL_UNSAFE = {
    "netoutput": "is a NetOutput",
    "ref_out": "passes input {m} on as an output (ref op)",
    "wrapper": "owns subgraphs",
}


class TensorMoveDecider:
    """Applies GE's rule chain to one TensorMove at a time, in GE's order, over the relations of
    ``tensor_move.dl`` (:class:`TMRules`); after a deletion the facts it changed are re-derived by the rules."""

    def __init__(
        self,
        model: Model,
        options: dict[str, str],
        *,
        mode: str = "full",
        ctx: PassContext | None = None,
        engine: str = "sqlite",
    ) -> None:
        from anchorlog.analysis.fact_cache import shared_facts

        self.model = model
        self.options = options
        self.ctx = ctx if ctx is not None else PassContext(options=dict(options), engine=engine)
        self.reuse = ReuseConfig(options.get(OPT_OUTPUT_REUSE), options.get(OPT_INPUT_REUSE))
        self.graphs = {g.name: g for g in model.graphs}
        # GE InitRWConflictCheck: its graph edits (ref marks, Identities before subgraph NetOutputs) come from the
        # shared RW module; the types themselves are read from the rules (tensor_move.dl over rw_types.dl).
        # A failed initialisation leaves GE's pass un-initialised (empty caches); the report says so.
        self.rw_state = "not run"
        self.timings: dict[str, float] = {}  # CPU seconds per phase (the machine is shared: wall time misleads)
        t0 = time.process_time()
        n_before = model.num_nodes()
        primed = False
        io_rows: list[tuple] | None = None
        if mode in ("full", "rw"):
            try:
                # rules over the run's shared fact database; only what the initialisation reads (the pass asks its
                # own types through tensor_move.dl)
                rw = RWTypes.init_rw_conflict_check(model, self.ctx, init_only=True)
                io_rows = rw.io_rows  # the op names the initialisation read (see below)
                self.rw_state = "primed"
                primed = True
            except AnchorlogError as err:
                self.rw_state = f"failed ({err}); caches left empty"
        self.rw_inserted = model.num_nodes() - n_before
        if self.rw_inserted:
            self.graphs = {g.name: g for g in model.graphs}
        t1 = time.process_time()
        self.timings["rw_init_s"] = round(t1 - t0, 3)
        facts_db = shared_facts(model, self.ctx)
        self._structure = model.structure_version
        self._owed: dict[str, set[str]] = {}
        t2 = time.process_time()
        self.timings["facts_s"] = round(t2 - t1, 3)  # shared per pipeline run: built once, then refreshed
        # the io_name rows of the initialisation are the graph's unless it inserted Identities (which carry names)
        self.rules = TMRules(
            model,
            facts_db,
            engine=self.ctx.engine,
            primed=primed,
            reuse=self.reuse,
            io_rows=io_rows if not self.rw_inserted else None,
        )
        self.facts = TMFacts()
        self.version = 0  # bumped by every rewrite; facts derived before the last ctrl edge addition re-check
        self.ctrl_version = 0
        seed = [(g.name, n.name) for g in model.graphs for n in g.nodes.values() if n.type == "TensorMove"]
        self.facts.load(seed, self.rules.derive(seed), self.version)
        t3 = time.process_time()
        self.timings["rules_s"] = round(t3 - t2, 3)
        # the symbol table (GE builds it in Init, before any deletion, on the same graph as these facts): asked
        # only for the TensorMoves that can reach Rule 5 (:meth:`_symbol_asks`)
        self.symbols: TMSymbols | None = None
        self._layout_ask: frozenset[tuple[str, str]] | None = None  # the nodes rule 5 asks layout.dl about
        self.symbol_state = "not built"
        if mode in ("full", "symbols"):
            try:
                self.symbols = TMSymbols(model, self.ctx, ask=self._symbol_asks(seed))
                self.symbol_state = "built"
            except AnchorlogError as err:
                self.symbol_state = f"failed ({err}); layout rule skipped"
        t4 = time.process_time()
        self.timings["symbol_table_s"] = round(t4 - t3, 3)
        self.stale: set[tuple[str, str]] = set()
        self.deleted: set[tuple[str, str]] = set()
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        self.rederived = 0
        # look-through facts: per TensorMove that may be deleted, the facts of the TensorMoves its deletion makes
        # stale, derived as if it were already bypassed (one rule run for all of them)
        self.look_through: dict[tuple[str, str], tuple[Bypass, dict[tuple[str, str], tuple[dict, set, set]]]] = {}
        # what the rewrites so far changed, in the terms of TMFacts.stale_after / stale_after_bypass: facts that
        # mention a node of `edited` (a bypassed TensorMove, or any node a rewrite with control edges touched)
        # or whose path passes a node of `bypassed_producers` may differ from those derived before
        self.edited: set[tuple[str, str]] = set()
        self.bypassed_producers: set[tuple[str, str]] = set()
        self.looked_through = 0
        self._derive_look_through(seed)
        self.timings["look_through_s"] = round(time.process_time() - t4, 3)

    def _symbol_asks(self, seed: list[tuple[str, str]]) -> list[tuple[str, str]]:
        """The TensorMoves whose symbols Rule 5 may look up: all but those the first derivation keeps for good
        before Rule 5, whatever is deleted later -- a reserved attribute (the TensorMove's own), a multi-branch
        source, or a special source (Rule 1) with a successor that is a NetOutput, passes the input on (ref) or
        owns subgraphs and is no TensorMove. Why for good: a deletion removes one TensorMove and re-feeds its
        consumers from its producer, so a path entry that is no TensorMove stays on the path (the source with
        it), and an edge from the kept TensorMove into a successor that is no TensorMove stays; those
        successors' types, references and subgraphs are their own. Such a TensorMove is never deleted either,
        so no merge touches its anchors through it: leaving its classes out of the table changes nothing Rule 5
        reads (the classes of the rest are the whole table's)."""
        asks = []
        for key in seed:
            f = self.facts.rows.get(key, {})
            if f.get("tm_reserved"):
                continue
            classes = {r[0] for r in f.get("tm_src_class", ())}
            if "multi_branch" in classes:
                continue
            if "special" in classes:
                graph = self.graphs.get(key[0])
                nodes = graph.nodes if graph is not None else {}
                if any(
                    why in _STRUCTURAL_UNSAFE and s in nodes and nodes[s].type != "TensorMove"
                    for s, _m, why in f.get("tm_succ_unsafe", ())
                ):
                    continue
            asks.append(key)
        return asks

    # -- look-through facts (chained TensorMoves without re-derivation) ----------------------------------------
    def _derive_look_through(self, seed: list[tuple[str, str]]) -> None:
        """For every TensorMove A that may be deleted by a plain bypass and whose deletion makes other
        TensorMoves' facts stale (:meth:`TMFacts.stale_after_bypass`: those whose path ends at A or passes A's
        producer, or that read A as sibling or successor), derive those dependents' facts on the graph with A
        bypassed, in one rule run for all chosen A (``TMRules.derive(bypass=...)``). When the walk deletes A
        exactly so, the dependents take these facts instead of a re-derivation (:meth:`_look_through`).

        A bypassed TensorMove is not seeded, so the chosen set holds no dependent of another chosen one, and two
        chosen ones share no dependent (a chain A1 -> A2 -> X looks through A1 only; X falls back). Dependents are derived with all chosen
        TensorMoves bypassed at once; a dependent whose look-through facts mention a node another chosen
        deletion edits is dropped, so each kept set equals the facts after A's deletion alone (an edit changes
        only facts that mention a node it edits -- the staleness rule the re-derivations rest on)."""
        chosen: list[tuple[Bypass, set[tuple[str, str]]]] = []
        chosen_keys: set[tuple[str, str]] = set()
        blocked: set[tuple[str, str]] = set()
        for key in seed:
            f = self.facts.rows.get(key, {})
            # only a TensorMove the first derivation does not already keep (tm_may_delete) can be deleted;
            # a miss would only cost a re-derivation
            if key in blocked or not f.get("tm_may_delete"):
                continue
            graph = self.graphs.get(key[0])
            node = graph.nodes.get(key[1]) if graph is not None else None
            bp = Bypass.of(graph, node) if node is not None else None
            if bp is None:
                continue
            deps = self.facts.stale_after_bypass(key, (key[0], bp.producer[0])) - {key}
            if not deps or deps & chosen_keys or deps & blocked:  # no shared dependents: each keeps its facts
                continue
            chosen.append((bp, deps))
            chosen_keys.add(key)
            blocked |= deps
        if not chosen:
            return
        dependents = sorted(set().union(*(deps for _b, deps in chosen)))
        derived = self.rules.derive(dependents, bypass=[b for b, _d in chosen])
        rows: dict[tuple[str, str], dict[str, list[tuple]]] = {k: {} for k in dependents}
        for rel, rs in derived.items():
            for r in rs:
                got = rows.get((r[0], r[1]))
                if got is not None:
                    got.setdefault(rel, []).append(tuple(r[2:]))
        producer_of: dict[tuple[str, str], set[tuple[str, str]]] = {}
        for bp, _deps in chosen:
            producer_of.setdefault((bp.graph, bp.producer[0]), set()).add((bp.graph, bp.tm))
        for bp, deps in chosen:
            a = (bp.graph, bp.tm)
            kept: dict[tuple[str, str], tuple[dict, set, set]] = {}
            for x in deps:
                on_path = TMFacts.path_nodes(x, rows[x])
                # another chosen bypass changes these facts only through its producer on their path (the
                # bypassed TensorMoves themselves are not in the derived graph, so no fact mentions them)
                if any(producer_of.get(n, set()) - {a} for n in on_path):
                    continue
                kept[x] = (rows[x], TMFacts.mentioned(x, rows[x]), on_path)
            if kept:
                self.look_through[a] = (bp, kept)

    def _look_through(
        self, key: tuple[str, str], bp: Bypass | None, stale: set[tuple[str, str]]
    ) -> set[tuple[str, str]]:
        """After ``key`` was deleted by the plain bypass ``bp``: install the look-through facts of the stale
        TensorMoves that have valid ones; returns those that still need a re-derivation. Valid = the deletion
        is the one they were derived for (same producer anchor and consumers), the dependent's facts were
        current (not stale, from the first derivation) and no earlier rewrite edited a node they mention."""
        entry = self.look_through.pop(key, None)
        if entry is None or bp is None or entry[0] != bp:
            return stale
        facts = entry[1]
        rest: set[tuple[str, str]] = set()
        for x in sorted(stale):
            got = facts.get(x)
            if (
                got is None
                or x in self.stale
                or x in self.deleted
                or self.facts.derived_at.get(x) != 0
                or not got[1].isdisjoint(self.edited)
                or not got[2].isdisjoint(self.bypassed_producers)
            ):
                rest.add(x)
                continue
            self.facts.install(x, got[0], 0)
            self.looked_through += 1
            if self.verify_look_through:
                self._check_look_through(x)
        return rest

    verify_look_through = False  # tests: re-derive every installed look-through fact set and compare

    def _check_look_through(self, key: tuple[str, str]) -> None:
        """Re-derive ``key`` on the current graph and fail unless its installed facts are the same rows."""
        self._refresh()
        fresh = self.rules.derive([key])
        installed = self.facts.rows[key]
        for rel, rs in fresh.items():
            want = sorted(tuple(r[2:]) for r in rs if (r[0], r[1]) == key)
            have = sorted(installed.get(rel, []))
            if want != have:
                raise AssertionError(f"look-through facts of {key[1]} differ in {rel}: {have} != {want}")

    # -- keeping the facts current ------------------------------------------------------------------------------
    def _current(self, key: tuple[str, str]) -> None:
        """Re-derive (one rule run for every stale TensorMove) when ``key``'s facts predate an edit they depend
        on: a deletion touching a node they mention, or control edges added since, when ordering edges are
        pending (the cycle check reads the whole graph)."""
        if key not in self.stale:
            if not self.facts.get(key, "tm_pending") or self.facts.derived_at.get(key, 0) >= self.ctrl_version:
                return
            self.stale.add(key)
        self._refresh()
        seed = sorted(k for k in self.stale if k not in self.deleted)
        self.rederived += len(seed)
        self.facts.load(seed, self.rules.derive(seed), self.version)
        self.stale.clear()

    def _refresh(self) -> None:
        """Bring the shared fact database up to date with the deletions so far, at a cost proportional to the
        edited nodes: ``node_prop`` positions (which no rule of this pass reads and which shift by one for every
        later node on each deletion) are left for :meth:`hand_back`."""
        from anchorlog.analysis.fact_cache import shared_facts

        if self.model.structure_version != self._structure:  # subgraphs came or went: rebuild, as shared_facts does
            self.rules.db = shared_facts(self.model, self.ctx)
            return
        for g in self.model.graphs:
            if g.touched:
                touched = sorted(g.touched)
                self.rules.db.refresh_nodes(g, touched, self.model, positions=False, index=self.rules.index)
                self._owed.setdefault(g.name, set()).update(touched)
                g.touched.clear()

    def hand_back(self) -> None:
        """The nodes refreshed without positions go back into ``Graph.touched``: the next
        :func:`~anchorlog.analysis.fact_cache.shared_facts` call re-derives them (and every position) once."""
        for g in self.model.graphs:
            owed = self._owed.pop(g.name, None)
            if owed:
                g.touched.update(owed)

    # -- the pass on one node ---------------------------------------------------------------------------------
    def visit(self, graph: Graph, tm: Node) -> Verdict:
        key = (graph.name, tm.name)
        v = Verdict(tm.name, graph.name)
        v.visits = self.verdicts[key].visits + 1 if key in self.verdicts else 1
        self.verdicts[key] = v
        self._current(key)
        f = self.facts
        reserved = {r[0] for r in f.get(key, "tm_reserved")}
        if "_cannot_be_deleted" in reserved:
            v.rule, v.reason = "reserved", "attr _cannot_be_deleted is true: inserted deliberately by another pass"
            return v
        if "no_need_constant_folding" in reserved:
            v.rule = "reserved"
            v.reason = (
                f"attr no_need_constant_folding is present (value {tm.attr('no_need_constant_folding')!r}); "
                "GE reserves the node on the attribute's mere presence"
            )
            return v
        if f.get(key, "tm_trace_bad"):
            raise PassFailure(
                f"source trace of {tm.name} fails (a subgraph Data without parent input, a PartitionedCall whose "
                "NetOutput does not map the output, or an input anchor that does not exist)",
                f"{graph.name}/{tm.name}",
            )
        path = [
            PathStep(pg, pn, None if int(o) < 0 else int(o))
            for _i, pg, pn, o in sorted(f.get(key, "tm_path"), key=lambda r: int(r[0]))
        ]
        v.path = path
        if not path:
            raise PassFailure(
                f"TensorMove {tm.name} has no producer on input 0: source trace is empty", f"{graph.name}/{tm.name}"
            )
        if path[-1].out is None:
            raise PassFailure(
                f"source trace of {tm.name} jumps out of a subgraph to a parent input that does not exist",
                f"{path[-1].graph}/{path[-1].node}",
            )
        pending: list[tuple[str, str]] = []
        for rule in (self._rule1, self._rule2, self._rule3, self._rule4, self._rule5):
            if not rule(graph, tm, key, path, v, pending):
                return v
        self._apply(graph, tm, v, pending)
        return v

    # Rule 1: CheckPathToSourceNodeValid
    def _rule1(self, graph: Graph, tm: Node, key: tuple, path: list[PathStep], v: Verdict, pending: list) -> bool:
        src = path[-1]
        sg, sname, stype, _o = self.facts.get(key, "tm_source")[0]
        classes = {r[0] for r in self.facts.get(key, "tm_src_class")}
        special = "special" in classes
        v.facts["source"] = {"node": sname, "graph": sg, "type": stype, "out": src.out, "special": special}
        if "multi_branch" in classes:
            v.rule = "rule1-path"
            v.reason = f"the trace stops at {sname} ({stype}), a multi-branch control-flow op: data flow is decided at run time"
            return False
        if not special:
            return True
        unsafe = sorted(self.facts.get(key, "tm_succ_unsafe"), key=lambda r: (r[0], int(r[1])))
        for s, m, why in unsafe:
            if why in _STRUCTURAL_UNSAFE:
                v.rule = "rule1-path"
                v.reason = f"source {sname} is a {stype} (special source) and successor {s} " + _STRUCTURAL_UNSAFE[
                    why
                ].format(m=m)
                return False
        for s, m, why in unsafe:
            v.facts["overwriting_successor"] = {"node": s, "in": int(m), "rw_in": why}
            v.rule = "rule1-path"
            v.reason = f"source {sname} is a {stype} (special source) and successor {s} input {m} is {why}: it would overwrite the source"
            return False
        return True

    # Rule 2: CheckSourceNodeReuse
    def _rule2(self, graph: Graph, tm: Node, key: tuple, path: list[PathStep], v: Verdict, pending: list) -> bool:
        if "data" not in {r[0] for r in self.facts.get(key, "tm_src_class")}:
            return True
        _sg, sname, stype, _o = self.facts.get(key, "tm_source")[0]
        index = self.facts.get(key, "tm_data_index")
        if not index:
            v.rule = "rule2-reuse"
            v.reason = f"source {sname} is a graph input ({stype}) without an int attr 'index'"
            return False
        idx = int(index[0][0])
        ok, why = self.reuse.explain(idx, [r[1:] for r in self.facts.get(key, "tm_reuse") if int(r[0]) == idx])
        v.facts["reuse"] = {"index": idx, "allowed": ok, "why": why}
        if not ok:
            v.rule = "rule2-reuse"
            v.reason = f"source {sname} is graph input {idx} (user memory): {why}"
        return ok

    # Rule 3: CheckSinglePath (IsSourceNodeWithSinglePath + TryHandleBasicMultiRefBranch)
    def _rule3(self, graph: Graph, tm: Node, key: tuple, path: list[PathStep], v: Verdict, pending: list) -> bool:
        f = self.facts
        mbcf = {int(r[0]) for r in f.get(key, "tm_p_mbcf")}
        shared: dict[int, tuple[int, int]] = {}
        for i, o2, k in sorted(f.get(key, "tm_p_shared"), key=lambda r: (int(r[0]), int(r[1]))):
            shared.setdefault(int(i), (int(o2), int(k)))
        consumers = {int(i): int(n) for i, n in f.get(key, "tm_path_consumers")}
        for i, step in enumerate(path):
            if i in mbcf:
                v.rule = "rule3-single-path"
                v.reason = f"the path crosses {step.node} ({self.graphs[step.graph].nodes[step.node].type}), a multi-branch control-flow op"
                return False
            if step.out is None:
                continue
            if i in shared:
                other, k = shared[i]
                v.rule = "rule3-single-path"
                v.reason = (
                    f"{step.node} outputs {step.out} and {other} both reuse input {k} "
                    "and both are consumed: the source memory branches implicitly"
                )
                return False
            if consumers.get(i, 0) > 1 and not self._multi_ref(key, i, step, consumers[i], v, pending):
                return False
        return True

    def _multi_ref(self, key: tuple, i: int, step: PathStep, n_consumers: int, v: Verdict, pending: list) -> bool:
        f = self.facts
        tm = key[1]
        anchor = f"{step.node}:{step.out}"
        direct = any(int(r[0]) == i for r in f.get(key, "tm_direct"))
        siblings = sorted((b, int(k)) for j, b, k in f.get(key, "tm_sibling") if int(j) == i)
        v.facts.setdefault("siblings", {})[anchor] = [f"{d}:{k}" for d, k in siblings]
        if not direct or not siblings:
            v.rule = "rule3-single-path"
            v.reason = (
                f"{anchor} has {n_consumers} consumers but {tm} is not one of them (it hangs behind a ref op "
                "or subgraph): only the direct multi-reference form is handled"
            )
            return False
        bad = {(b, int(k)): why for j, b, k, why in sorted(f.get(key, "tm_sib_bad")) if int(j) == i}
        sib_rw = {(b, int(k)): t for j, b, k, t in f.get(key, "tm_sib_rw") if int(j) == i}
        succs = sorted((s, int(m)) for s, m, *_ in f.get(key, "tm_succ"))
        succ_ref = {(s, int(m)) for s, m, _t, ref, _w in f.get(key, "tm_succ") if int(ref)}
        succ_rw = {(s, int(m)): t for s, m, t in f.get(key, "tm_succ_rw")}
        ctrl = {(s, b) for s, b in f.get(key, "tm_succ_ctrl_sib")}
        cycles = {(b, s) for b, s in f.get(key, "tm_pending_cycle")}
        for b, k in siblings:
            why = bad.get((b, k))
            if why == "netoutput" or why == "wrapper":
                v.rule = "rule3-single-path"
                v.reason = f"sibling {b} of {anchor} is a {'NetOutput' if why == 'netoutput' else 'wrapper'}"
                return False
            if why == "ref_out":
                v.rule = "rule3-single-path"
                v.reason = f"sibling {b} passes input {k} on as an output: the source lifetime reaches its consumers"
                return False
            b_type = sib_rw.get((b, k), "kInvalidRWType")
            b_writes = b_type in _WRITES
            for s, m in succs:
                s_type = succ_rw.get((s, m), "kInvalidRWType")
                s_writes = s_type in _WRITES
                pair = {"sibling": f"{b}:{k}", "sibling_rw": b_type, "successor": f"{s}:{m}", "successor_rw": s_type}
                v.facts.setdefault("sibling_checks", []).append(pair)
                if b_writes:
                    if (s, m) in succ_ref:
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} overwrites the source ({b_type}) and successor {s} passes input {m} on as an output"
                        return False
                    if s_writes:
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} ({b_type}) and successor {s} ({s_type}) both overwrite the source"
                        return False
                    if (s, b) not in ctrl:
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} overwrites the source ({b_type}) and no control edge {s} -> {b} orders the read first"
                        return False
                    continue
                if not s_writes:
                    continue
                if (b, s) in cycles:
                    v.rule = "rule3-single-path"
                    v.reason = f"a control edge {b} -> {s} is needed (reader before writer) but {s} already reaches {b}: it would close a cycle"
                    return False
                if (b, s) not in pending:
                    pending.append((b, s))
        v.facts["pending_ctrl_edges"] = [list(e) for e in pending]
        return True

    # Rule 4: CheckRWConflictOnDelete
    def _rule4(self, graph: Graph, tm: Node, key: tuple, path: list[PathStep], v: Verdict, pending: list) -> bool:
        p, o = path[0].node, path[0].out
        checks = []
        for s, m, out_t, in_t, res in sorted(self.facts.get(key, "tm_rw_check"), key=lambda r: (r[0], int(r[1]))):
            checks.append(
                {"producer": f"{p}:{o}", "rw_out": out_t, "successor": f"{s}:{m}", "rw_in": in_t, "result": res}
            )
            if res != "DO_NOTHING":
                v.facts["rw"] = checks
                v.rule = "rule4-rw-conflict"
                v.reason = f"after deletion {p}:{o} ({out_t}) would feed {s}:{m} ({in_t}): the RW matrix says {res}"
                return False
        v.facts["rw"] = checks
        return True

    # Rule 5: CheckMemLayoutConflictOnDelete
    def _rule5(self, graph: Graph, tm: Node, key: tuple, path: list[PathStep], v: Verdict, pending: list) -> bool:
        if self.symbols is None:
            v.facts["layout"] = "skipped: no symbol table (TensorMoveDeletePass::Init did not run)"
            return True
        if not self.symbols.covers(graph.name, tm.name):  # _symbol_asks rules this out
            raise AnchorlogError(
                f"internal error: Rule 5 reached TensorMove {tm.name}, whose symbols were not asked for",
                f"{graph.name}/{tm.name}",
            )
        si = self.symbols.symbol(graph.name, tm.name, "in", 0)
        so = self.symbols.symbol(graph.name, tm.name, "out", 0)
        v.facts["symbols"] = {"in": si, "out": so}
        if si is None or so is None:
            v.rule, v.reason = "rule5-layout", "the TensorMove's anchors have no symbol: kept conservatively"
            return False
        if si == so:
            return True
        # ConstructSingleNodeSymbolTable (one symbol holding both sides' anchors), then the layout-conflict
        # package's IsGraphExistMemConflictSymbol on it (attributes from layout.dl, cached in the pass context)
        from anchorlog.analysis.layout_conflict import graph_has_mem_conflict_symbol

        anchors = self.symbols.merged_anchors(si, so)
        merged = ({a: si for a in anchors}, {si: anchors})
        if self._layout_ask is None:
            # the nodes of every symbol the table holds (those of the TensorMoves' anchors: a merge joins only
            # them, so every merged symbol is a union of them): their attributes are derived once, no other node's
            self._layout_ask = frozenset((a[0], a[1]) for lst in self.symbols.s2a.values() for a in lst)
        if graph_has_mem_conflict_symbol(
            self.model, merged, (si,), self.ctx, graph=graph, asked_nodes=self._layout_ask
        ):
            v.rule = "rule5-layout"
            v.reason = f"merging symbols {si} and {so} would put anchors with conflicting memory-layout attributes into one buffer"
            return False
        return True

    # Phase 3: ApplyPendingControlEdges, IsolateAndDeleteNode, MergeTensorMoveSymbolAfterDelete
    def _apply(self, graph: Graph, tm: Node, v: Verdict, pending: list) -> None:
        batch = CtrlEdgeBatch(graph, check_cycle=False)  # cycles were ruled out when the edges were registered
        try:
            batch.add_all(pending)
        except PassFailure as err:
            v.rule, v.reason = "rewrite", f"adding the pending control edges failed ({err.message}); rolled back"
            return
        touched = {(graph.name, n) for n in (tm.name, *in_nodes(graph, tm.name), *out_nodes(graph, tm.name))}
        src = tm.inputs[0] if tm.inputs else None
        plain_bypass = (
            src is not None and len(tm.inputs) == 1 and not tm.ctrl_inputs and not graph.ctrl_successors(tm.name)
        )
        bp = Bypass.of(graph, tm) if plain_bypass else None
        try:
            res = isolate_and_delete(graph, tm.name, {0: 0})
        except PassFailure:
            batch.rollback()
            raise
        # the facts this rewrite changes: TensorMoves mentioning a touched node are re-derived before their next
        # decision; added ordering edges re-open the cycle checks of pending edges
        self.version += 1
        if batch.added:
            self.ctrl_version = self.version
            self.rules.invalidate_order()
            touched.update((graph.name, n) for e in batch.added for n in e)
        if plain_bypass and not batch.added and not res.ctrl_edges and res.noop is None:
            stale = self.facts.stale_after_bypass((graph.name, tm.name), (graph.name, src[0]))
            self.stale |= self._look_through((graph.name, tm.name), bp, stale)
            self.edited.add((graph.name, tm.name))
            self.bypassed_producers.add((graph.name, src[0]))
        else:
            self.look_through.pop((graph.name, tm.name), None)
            self.stale |= self.facts.stale_after(touched)
            self.edited |= touched
        v.deleted = True
        v.rule = ""
        v.ctrl_edges_added = list(batch.added)
        v.relink_ctrl_edges = list(res.ctrl_edges)
        v.reason = "no rule objects: the copy is redundant"
        if batch.added:
            v.reason += "; reader-before-writer order kept by " + ", ".join(f"{a} -> {b}" for a, b in batch.added)
        self.deleted.add((graph.name, tm.name))
        if self.symbols is not None:
            self.symbols.merge_after_delete(graph.name, tm.name)


# --------------------------------------------------------------------------------------------------------------
# GE's node-pass walk (GEPass)
# --------------------------------------------------------------------------------------------------------------
_MAX_ONE_IN_NODES = 1000
_NEXT_ITERATION = ("NextIteration", "RefNextIteration")
_MAX_PASS_MULTIPLE = 10


def run_gepass(
    model: Model,
    graph: Graph,
    visit: Callable[[Graph, Node], list[str] | None],
    depth: int = 0,
    *,
    only: frozenset[str] | None = None,
) -> None:
    """Walk ``graph`` as ``GEPass::Run`` does, calling ``visit(graph, node) -> list[str] | None`` (names of nodes
    to re-pass when the visit deleted the node). Subgraphs are walked when their owner is visited. ``only``: the
    node types ``visit`` acts on (for any other node it is not called and the walk goes on as if it returned
    None); None = every node."""
    if depth > 25:
        raise PassFailure(f"subgraphs nested deeper than 25 levels at {graph.name}", graph.name)
    seen: set[str] = set()
    deleted: set[str] = set()
    queue: deque[str] = deque()
    queued: set[str] = set()
    last: list[str] = []
    nodes = graph.nodes

    # GE's start: nodes without in-nodes (data producers and control predecessors, Node::GetInNodes) are queued,
    # those with more than _MAX_ONE_IN_NODES go last
    for n, node in list(nodes.items()):
        ctrl = node.ctrl_inputs
        if not ctrl and not any(node.inputs):  # inputs hold (src, out) tuples or None
            if n not in queued:
                queue.append(n)
                queued.add(n)
        elif len(node.inputs) + len(ctrl) > _MAX_ONE_IN_NODES and len(in_nodes(graph, n)) > _MAX_ONE_IN_NODES:
            last.append(n)

    last_set = set(last)

    def successors(n: str) -> list[str]:
        # GE Node::GetOutNodes (data consumers per output, then control successors), read straight from the
        # graph's consumer index: this runs for every visited node
        if graph._consumers is None:  # noqa: SLF001 - the index Graph keeps up to date through its edit methods
            graph._ensure_index()  # noqa: SLF001
        cons, csucc = graph._consumers, graph._ctrl_succ  # noqa: SLF001
        out: list[str] = []
        o = 0
        k = len(nodes[n].output_desc)  # Node.num_outputs
        while True:
            users = cons.get((n, o))  # type: ignore[union-attr]
            if users:
                out += [d for d, _ in users]
            elif o >= k:
                break
            o += 1
        c = csucc.get(n)  # type: ignore[union-attr]
        if c:
            out += c
        return out

    # ready_from[n] = j: data inputs 0..j-1 of n were seen (or NextIteration) when n was last checked. `seen` only
    # grows, and the walk's only edits (a TensorMove deletion: its consumers re-fed by its producer, which was seen
    # before the TensorMove was visited; control edges into its successors) touch the nodes the visit returns,
    # whose entries are dropped. Without it a node with k inputs costs k^2 checks (the root NetOutput of a
    # generated 100 k-node decoder has ~2 800 inputs).
    ready_from: dict[str, int] = {}

    def ready(n: str) -> bool:
        # GE IsNodeReadyToQueue: every data and control predecessor seen (NextIteration exempt)
        node = nodes.get(n)
        if node is None or n in deleted or n in last_set:
            return False
        ins = node.inputs
        j = ready_from.get(n, 0)
        k = len(ins)
        while j < k:
            a = ins[j]
            if a is not None and a[0] not in seen and nodes[a[0]].type not in _NEXT_ITERATION:
                ready_from[n] = j
                return False
            j += 1
        ready_from[n] = j
        for p in node.ctrl_inputs:
            if p not in seen and nodes[p].type not in _NEXT_ITERATION:
                return False
        return True

    max_pass = max(1, len(graph.nodes)) * _MAX_PASS_MULTIPLE
    passed = 0
    repass: dict[str, None] = {}  # ordered set: neighbours of deleted nodes to visit again
    popleft = queue.popleft
    while True:
        while queue and passed < max_pass:
            n = popleft()
            queued.discard(n)
            if n in deleted:
                continue
            node = nodes.get(n)
            if node is None:
                continue
            if repass:
                repass.pop(n, None)
            seen.add(n)
            if only is None or node.type in only:
                # only a TensorMove visit edits this graph: other nodes' out-nodes are the same after the visit
                before = sorted(set(successors(n))) if node.type == "TensorMove" else []
                again = visit(graph, node)
            else:
                before, again = [], None
            if again is not None:
                deleted.add(n)
                for r in again:
                    ready_from.pop(r, None)
                    if (
                        r in graph.nodes
                        and (r in seen or all(p in seen for p in in_nodes(graph, r)))
                        and r not in repass
                    ):
                        repass[r] = None
            elif node.subgraph_names:
                for sub in model.subgraphs_of(node):
                    run_gepass(model, sub, visit, depth + 1, only=only)
            passed += 1
            if n in nodes:
                for o in successors(n):
                    if o not in seen and o not in queued and ready(o):
                        queue.append(o)
                        queued.add(o)
            for o in before:
                if o not in seen and o not in queued and ready(o):
                    queue.append(o)
                    queued.add(o)
        if last:
            for n in list(last):
                if all(p in seen for p in in_nodes(graph, n)):
                    last.remove(n)
                    last_set.discard(n)
                    if n not in seen and n not in queued:
                        queue.append(n)
                        queued.add(n)
        if repass:
            for r in repass:
                if r not in queued:
                    queue.append(r)
                    queued.add(r)
            repass = {}
            continue
        if not queue or passed >= max_pass:
            break


# --------------------------------------------------------------------------------------------------------------
# The rule program's relations for every TensorMove (reports, tests, notebooks)
# --------------------------------------------------------------------------------------------------------------
def derive_facts(
    model: Model,
    *,
    engine: str = "sqlite",
    db: Any = None,
    outputs: tuple[str, ...] = ALL_OUTPUTS,
    options: dict[str, str] | None = None,
    primed: bool = True,
) -> dict[str, list[tuple]]:
    """Run ``queries/tensor_move.dl`` (as the pass does: traceback over the whole database, the rest over the
    slice, the cycle check when edges are pending) for every TensorMove of ``model``; with ``tm_symbol`` /
    ``tm_merged`` wanted also ``tm_symbols.dl``. Returns the relations as row lists (rows start graph, tm).

    ``db``: the fact database (a :class:`~anchorlog.facts.relations.FactDB` or sqlite connection), default one
    built from ``model``. Nothing here edits the model (the RW priming's Identities are not inserted)."""
    from anchorlog.facts.relations import FactDB

    opts = dict(options or {})
    source = db if db is not None else FactDB.from_model(model)
    reuse = ReuseConfig(opts.get(OPT_OUTPUT_REUSE), opts.get(OPT_INPUT_REUSE))
    rules = TMRules(model, source, engine=engine, primed=primed, reuse=reuse)
    seed = [(g.name, n.name) for g in model.graphs for n in g.nodes.values() if n.type == "TensorMove"]
    out = rules.derive(seed, DECISION_OUTPUTS + REPORT_OUTPUTS)
    if set(SYMBOL_OUTPUTS) & set(outputs):
        from anchorlog.analysis.graph_lint import topo_positions
        from anchorlog.analysis.rw_conflict import io_name_rows
        from anchorlog.analysis.symbols import node_order, symbol_inputs

        extra = {
            "tm_seed": seed,
            "io_name": io_name_rows(model),
            "rw_unprimed": [],
            **symbol_inputs(
                node_order(model), whole=True
            ),  # the whole table (tm_symbol / tm_merged read anchor_symbol)
            "reach_pos": topo_positions(model),
            **reuse.rows(),
        }
        res = _program(TM_SYMBOLS_DL).run(source, engine=engine, outputs=list(SYMBOL_OUTPUTS), extra=extra)
        out.update({r: res.rows(r) for r in SYMBOL_OUTPUTS})
    return {r: out.get(r, []) for r in outputs}


def paths_from_facts(facts: dict[str, list[tuple]]) -> dict[tuple[str, str], list[PathStep]]:
    """``tm_path(g, tm, step, pg, pnode, pout)`` rows (pout = -1 for a wrapper marker) as :class:`PathStep` lists."""
    by_tm: dict[tuple[str, str], list[tuple[int, PathStep]]] = {}
    for g, tm, step, pg, pnode, pout in facts.get("tm_path", []):
        by_tm.setdefault((g, tm), []).append((int(step), PathStep(pg, pnode, None if int(pout) < 0 else int(pout))))
    for g, tm in ((r[0], r[1]) for r in facts.get("tm", [])):
        by_tm.setdefault((g, tm), [])
    return {k: [s for _, s in sorted(v)] for k, v in by_tm.items()}


# --------------------------------------------------------------------------------------------------------------
# The pass
# --------------------------------------------------------------------------------------------------------------
def _mode(options: dict[str, str]) -> str:
    mode = options.get(OPT_INIT, "full")
    if mode not in INIT_MODES:
        raise OptionError(f"{OPT_INIT} must be one of {', '.join(INIT_MODES)}, not {mode!r}", "--option")
    return mode


def check_output_reuse_option(value: str) -> list[tuple[int, int]]:
    """Validator of ``ge.exec.outputReuseInputMemIndexes`` (run before any pass): GE's partial-parse rules apply
    to the pieces, but a non-blank value with no ``in,out`` pair at all cannot be what the user meant."""
    pairs = parse_output_reuse_pairs(value)
    if value.strip() and not pairs:
        raise ValueError("holds no 'input,output' pair (format: \"0,0|1,1\")")
    return pairs


def check_input_reuse_option(value: str) -> str:
    """Validator of ``ge.exec.inputReuseMemIndexes``: GE reads the comma-split tokens as int32 and answers "no"
    from the first bad token on (``"12abc"`` is GE-valid and simply reuses nothing); a value in which no token
    even starts with a number is a typo and is refused."""
    tokens = [t for t in value.split(",") if t.strip()]
    if tokens and not any(re.match(r"\s*[+-]?\d", t) for t in tokens):
        raise ValueError('no comma-separated token is an input index (format: "0,2")')
    return value


def check_oo_level_option(value: str) -> str:
    """Validator of ``ge.oo.level``: one of GE's optimisation levels O0..O3."""
    level = value.strip().upper()
    if level not in ("O0", "O1", "O2", "O3"):
        raise ValueError("must be one of O0, O1, O2, O3")
    return level


def check_init_option(value: str) -> str:
    """Validator of ``anchorlog.tensor_move.init``."""
    if value not in INIT_MODES:
        raise ValueError(f"must be one of {', '.join(INIT_MODES)}")
    return value


def _validate_reuse_options(options: dict[str, str]) -> None:
    """Reject reuse option values GE would silently ignore entirely: a value with no parsable pair at all is
    almost certainly a typo (GE's own partial-parse rules still apply to the rest)."""
    val = options.get(OPT_OUTPUT_REUSE)
    if val is not None and val.strip() and not parse_output_reuse_pairs(val):
        raise OptionError(f"{OPT_OUTPUT_REUSE}={val!r} holds no 'input,output' pair (format: \"0,0|1,1\")", "--option")


def run_tensor_move_delete(
    model: Model, options: dict[str, str], *, engine: str = "sqlite", ctx: PassContext | None = None
) -> dict[str, Any]:
    """Run the pass; returns the report section (also used by the notebook, the benchmark and ``explain``).

    The cyclic garbage collector is paused meanwhile: a large model is millions of small objects that would be
    rescanned again and again while the pass allocates its short-lived look-ups (nothing here makes cycles)."""
    with paused_gc():
        return _run_tensor_move_delete(model, options, engine=engine, ctx=ctx)


def _run_tensor_move_delete(
    model: Model, options: dict[str, str], *, engine: str = "sqlite", ctx: PassContext | None = None
) -> dict[str, Any]:
    """Run the pass; returns the report section (also used by the notebook, the benchmark and ``explain``)."""
    level = options.get(OPT_OO_LEVEL)
    if level is not None and level.strip().upper() in ("O0", "O1", "O2"):
        return {
            "enabled": False,
            "reason": f"TensorMoveDeletePass is an O3 pass; {OPT_OO_LEVEL}={level}",
            "tensor_moves": [],
        }
    _validate_reuse_options(options)
    mode = _mode(options)
    decider = TensorMoveDecider(model, options, mode=mode, ctx=ctx, engine=engine)
    order: list[tuple[str, str]] = []

    def visit(graph: Graph, node: Node) -> list[str] | None:
        if node.type != "TensorMove":
            return None
        if (graph.name, node.name) not in decider.verdicts:
            order.append((graph.name, node.name))
        ins, outs = in_nodes(graph, node.name), out_nodes(graph, node.name)
        verdict = decider.visit(graph, node)
        if verdict.deleted:
            return ins + outs
        return None

    t_walk = time.process_time()
    try:
        if model.graphs:
            run_gepass(model, model.graphs[0], visit, only=frozenset(("TensorMove",)))
    finally:
        decider.hand_back()
    decider.timings["walk_and_decide_s"] = round(time.process_time() - t_walk, 3)
    # TensorMoves the walk never reached (e.g. in a subgraph no node owns) are reported as not visited.
    tms = []
    for g in model.graphs:
        for n in g.nodes.values():
            if n.type == "TensorMove" and (g.name, n.name) not in decider.verdicts:
                tms.append(
                    {
                        "tensor_move": n.name,
                        "graph": g.name,
                        "decision": "kept",
                        "kept_by": "not-visited",
                        "reason": "GE's node pass never reaches this graph",
                    }
                )
    report_tms = [decider.verdicts[k].to_json() for k in order] + tms
    deleted = [t for t in report_tms if t["decision"] == "deleted"]
    ctrl = [e for t in report_tms for e in t.get("ctrl_edges_added", [])]
    by_rule: dict[str, int] = {}
    for t in report_tms:
        if t["decision"] == "kept":
            by_rule[t["kept_by"]] = by_rule.get(t["kept_by"], 0) + 1
    return {
        "init": mode,
        "rw_types": decider.rw_state,
        "symbol_table": decider.symbol_state,
        "tensor_moves_total": len(report_tms),
        "deleted": len(deleted),
        "kept": len(report_tms) - len(deleted),
        "kept_by_rule": by_rule,
        "ctrl_edges_added": ctrl,
        "identities_inserted_by_rw_init": decider.rw_inserted,
        "rederived": decider.rederived,
        "looked_through": decider.looked_through,
        "rule_runs": decider.rules.runs,
        "timings": decider.timings,
        "tensor_moves": report_tms,
    }


@register(
    "tensor-move-delete",
    options={
        OPT_OUTPUT_REUSE: check_output_reuse_option,
        OPT_INPUT_REUSE: check_input_reuse_option,
        OPT_OO_LEVEL: check_oo_level_option,
        OPT_INIT: check_init_option,
    },
)
def run(model: Model, ctx: PassContext) -> dict:
    """Delete redundant TensorMoves (GE TensorMoveDeletePass): traceback, five rules, GE's order."""
    return run_tensor_move_delete(model, ctx.options, engine=ctx.engine, ctx=ctx)


# --------------------------------------------------------------------------------------------------------------
# Explanation
# --------------------------------------------------------------------------------------------------------------
_RULE_TITLES = {
    "reserved": "reserved attribute (HasReservedAttr)",
    "rule1-path": "Rule 1, path validity (CheckPathToSourceNodeValid)",
    "rule2-reuse": "Rule 2, graph-input memory reuse (CheckSourceNodeReuse)",
    "rule3-single-path": "Rule 3, single path / siblings (CheckSinglePath)",
    "rule4-rw-conflict": "Rule 4, read/write conflict (CheckRWConflictOnDelete)",
    "rule5-layout": "Rule 5, memory-layout conflict (CheckMemLayoutConflictOnDelete)",
    "rewrite": "rewrite (ApplyPendingControlEdges)",
    "not-visited": "not visited",
}


def explain_verdict(t: dict[str, Any]) -> str:
    """Words for one report entry of this pass."""
    lines = [f"TensorMove {t['tensor_move']} (graph {t['graph']}): {t['decision'].upper()}"]
    if t.get("path"):
        lines.append("  source trace (TM side first): " + " <- ".join(t["path"]))
    facts = t.get("facts", {})
    src = facts.get("source")
    if src:
        kind = (
            "special source (Variable/Const/RefData or ref_var_src_var_name)"
            if src.get("special")
            else "ordinary source"
        )
        lines.append(f"  real source: {src['node']} ({src['type']}) in graph {src['graph']}, {kind}")
    if "reuse" in facts:
        r = facts["reuse"]
        lines.append(f"  graph input {r['index']}: {'reusable' if r['allowed'] else 'not reusable'} -- {r['why']}")
    for anchor, sibs in facts.get("siblings", {}).items():
        lines.append(f"  {anchor} is also read by: {', '.join(sibs) or '(nobody else)'}")
    for c in facts.get("sibling_checks", []):
        lines.append(
            f"    sibling {c['sibling']} is {c['sibling_rw']}, successor {c['successor']} is {c['successor_rw']}"
        )
    if facts.get("pending_ctrl_edges"):
        lines.append("  ordering edges needed: " + ", ".join(f"{a} -> {b}" for a, b in facts["pending_ctrl_edges"]))
    for c in facts.get("rw", []):
        lines.append(f"  RW check: {c['producer']} ({c['rw_out']}) -> {c['successor']} ({c['rw_in']}): {c['result']}")
    if "symbols" in facts:
        s = facts["symbols"]
        lines.append(f"  symbols: input side {s['in']}, output side {s['out']}")
    elif "layout" in facts:
        lines.append(f"  layout rule {facts['layout']}")
    if t["decision"] == "kept":
        lines.append(f"  kept by {_RULE_TITLES.get(t.get('kept_by', ''), t.get('kept_by', ''))}: {t.get('reason', '')}")
    else:
        lines.append(f"  deleted: {t.get('reason', '')}")
        if t.get("relink_ctrl_edges"):
            lines.append(
                "  control edges re-linked around it: " + ", ".join(f"{a} -> {b}" for a, b in t["relink_ctrl_edges"])
            )
    return "\n".join(lines)


@register_explainer("tensor-move-delete", node_types=("TensorMove",))
def explain(model: Model, name: str, *, options: dict[str, str] | None = None, **_: Any) -> str:
    """``anchorlog explain IN TM``: run the pass on ``model`` and describe what happened to TensorMove ``name``."""
    section = run_tensor_move_delete(model, dict(options or {}))
    hits = [t for t in section.get("tensor_moves", []) if t["tensor_move"] == name]
    if not hits:
        if not section.get("enabled", True):
            return section["reason"]
        raise OptionError(f"no TensorMove named {name!r} in the model", name)
    return "\n".join(explain_verdict(t) for t in hits)

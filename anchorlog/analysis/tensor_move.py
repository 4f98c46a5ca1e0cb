"""``tensor-move-delete``: GE's TensorMoveDeletePass (seeds 000/003, reference §5), faithful and explained.

How it works
------------
1. **Derive once.** ``anchorlog/queries/tensor_move.dl`` derives, for every TensorMove of the input graph, the
   source traceback path (jump out of a subgraph through its Data, drill into a PartitionedCall through its
   NetOutput parent indexes, pass through ref outputs, stop at GE's multi-branch control-flow ops), the
   consumers of every path anchor (siblings), the successors with their ref/wrapper/NetOutput facts, and the
   reserved attributes. :func:`derive_facts` runs it once over the fact database.
2. **Decide one TensorMove at a time, in GE's order.** GE runs the pass as a node pass (``GEPass``): nodes are
   visited from the inputs forward, a subgraph when its owner is visited, and the neighbours of a deleted node
   are visited again. :func:`run_gepass` reproduces that walk; each TensorMove visit applies the five rules
   (:class:`TensorMoveDecider`). Later decisions see earlier deletions: the decider reads fan-out, siblings,
   control edges and reachability from the *live* graph (cheap, local look-ups) and re-derives a traceback only
   when the cached one is stale -- a deletion can only invalidate paths that *end* at the deleted TensorMove
   (a trace never passes through a TensorMove), so the cache is keyed by path end.
3. **Rewrite.** Pending control edges land first (cycle check, rollback on failure), then
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

import gc
import re
import time
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.registry import PassContext, register
from anchorlog.analysis.rw_conflict import RWTypes, conflict_result
from anchorlog.errors import AnchorlogError, OptionError, PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import OP_CLASSES, _ModelIndex, ref_from_input
from anchorlog.runtime.rewrite import CtrlEdgeBatch, in_nodes, isolate_and_delete, out_indices, out_nodes, reaches

OPT_OUTPUT_REUSE = "ge.exec.outputReuseInputMemIndexes"
OPT_INPUT_REUSE = "ge.exec.inputReuseMemIndexes"
OPT_OO_LEVEL = "ge.oo.level"
OPT_INIT = "anchorlog.tensor_move.init"
INIT_MODES = ("full", "rw", "symbols", "none")

TM_DL = Path(__file__).resolve().parent.parent / "queries" / "tensor_move.dl"
TM_TRACE_DL = TM_DL.with_name("tm_trace.dl")  # the traceback part alone (what the pass consumes)

MULTI_BRANCH = frozenset(OP_CLASSES["multi_branch_control_flow"])
DATA_TYPES = frozenset(OP_CLASSES["data"])
SPECIAL_TYPES = (
    frozenset(OP_CLASSES["variable"]) | frozenset(OP_CLASSES["var_like"]) | frozenset(OP_CLASSES["const_like"])
)

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

    def allows(self, data_index: int) -> tuple[bool, str]:
        """Is graph input ``data_index`` declared reusable? Returns (answer, why)."""
        if self.output_reuse is not None:
            pairs = parse_output_reuse_pairs(self.output_reuse)
            for a, b in pairs:
                if a == data_index:
                    return True, f"{OPT_OUTPUT_REUSE}={self.output_reuse!r} pairs input {a} with output {b}"
        if self.input_reuse is not None:
            if self.input_reuse == "":
                return False, f"{OPT_INPUT_REUSE} is empty"
            idx = parse_input_reuse_indexes(self.input_reuse)
            if idx is None:
                return (
                    False,
                    f"{OPT_INPUT_REUSE}={self.input_reuse!r} has a token that is not an int32 (GE stops there)",
                )
            if data_index in idx:
                return True, f"{OPT_INPUT_REUSE}={self.input_reuse!r} lists input {data_index}"
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


class ModelView:
    """Look-ups the pass needs, computed once per model: subgraph owners, subgraph NetOutputs, root."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.index = _ModelIndex(model)
        self.root = model.graphs[0].name if model.graphs else ""
        self.graphs = {g.name: g for g in model.graphs}

    def parent(self, graph_name: str) -> tuple[Graph, Node] | None:
        own = self.index.owner.get(graph_name)
        return None if own is None else (own[0], own[1])

    def netoutput(self, graph_name: str) -> Node | None:
        g = self.graphs.get(graph_name)
        if g is None:
            return None
        return next((n for n in g.nodes.values() if n.type == "NetOutput"), None)

    def ref_in(self, graph: Graph, node: Node, out: int) -> int | None:
        return ref_from_input(self.index, graph, node, out)

    def is_wrapper(self, node: Node) -> bool:
        return bool(node.subgraph_names)


def trace_source(view: ModelView, graph: Graph, tm: Node) -> list[PathStep]:
    """GE ``TraceRealSourceNode(tm, 0)``; raises :class:`PassFailure` where GE's trace fails the pass."""
    path: list[PathStep] = []
    cur_g, cur_node, cur_in = graph, tm, 0
    guard = 0
    while True:
        guard += 1
        if guard > 100000:
            raise PassFailure(f"source trace of {tm.name} does not terminate", f"{graph.name}/{tm.name}")
        if cur_in >= cur_node.num_inputs:
            # the input anchor does not exist: GE's loop ends with a failure
            raise PassFailure(
                f"source trace of {tm.name} reached {cur_node.name} input {cur_in}, which does not exist",
                f"{cur_g.name}/{cur_node.name}",
            )
        src = cur_node.inputs[cur_in] if cur_in < len(cur_node.inputs) else None
        if src is None:
            return path
        node = cur_g.nodes[src[0]]
        out = src[1]
        path.append(PathStep(cur_g.name, node.name, out))
        if node.type in MULTI_BRANCH:
            return path
        if node.type == "Data" and cur_g.name != view.root:
            par = view.parent(cur_g.name)
            pidx = node.attr("_parent_node_index")
            if (
                par is None
                or not isinstance(pidx, int)
                or isinstance(pidx, bool)
                or pidx >= par[1].num_inputs
                or pidx < 0
            ):
                raise PassFailure(
                    f"subgraph Data {node.name} has no parent input to jump out to", f"{cur_g.name}/{node.name}"
                )
            pg, pnode = par
            path.append(PathStep(pg.name, pnode.name, None))
            cur_g, cur_node, cur_in = pg, pnode, pidx
            continue
        if node.type == "PartitionedCall":
            sub_name = node.subgraph_names[0] if node.subgraph_names else ""
            if sub_name not in view.graphs:
                raise PassFailure(f"PartitionedCall {node.name} has no subgraph 0", f"{cur_g.name}/{node.name}")
            net = view.netoutput(sub_name)
            if net is None:
                raise PassFailure(f"subgraph {sub_name} of {node.name} has no NetOutput", sub_name)
            sub = view.graphs[sub_name]
            hit = None
            for k in range(net.num_inputs):
                desc = net.input_desc[k] if k < len(net.input_desc) else None
                pidx = desc.attr("_parent_node_index") if desc is not None else None
                if not isinstance(pidx, int) or isinstance(pidx, bool):
                    raise PassFailure(
                        f"NetOutput {net.name} input {k} has no _parent_node_index", f"{sub_name}/{net.name}"
                    )
                if pidx == out:
                    hit = k
                    break
            if hit is None:
                raise PassFailure(
                    f"no NetOutput input of {sub_name} maps output {out} of {node.name}", f"{sub_name}/{net.name}"
                )
            peer = net.inputs[hit] if hit < len(net.inputs) else None
            path.append(PathStep(sub_name, net.name, None if peer is None else peer[1]))
            cur_g, cur_node, cur_in = sub, net, hit
            continue
        k = view.ref_in(cur_g, node, out)
        if k is not None:
            cur_node, cur_in = node, k
            continue
        return path


# --------------------------------------------------------------------------------------------------------------
# Symbol table kept up to date across deletions (TensorMoveDeletePass::Init / MergeTensorMoveSymbolAfterDelete)
# --------------------------------------------------------------------------------------------------------------
class TMSymbols:
    """GE's ``anchor_to_symbol`` / ``symbol_to_anchors`` of the root graph, built once by
    :func:`anchorlog.analysis.symbols.symbol_table` and merged after each deletion."""

    def __init__(self, model: Model) -> None:
        from anchorlog.analysis.symbols import symbol_table  # the shared GetRefMapping (memory-conflict issue)

        a2s, s2a = symbol_table(model)
        self.a2s: dict[tuple, str] = dict(a2s)
        self.s2a: dict[str, list[tuple]] = {s: list(v) for s, v in s2a.items()}

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


class LayoutCheck:
    """``IsGraphExistMemConflictSymbol(tm.owner_graph, merged table)`` for Rule 5, on the layout-conflict
    checker framework (attribute marks + pair checkers). Look-ups that do not change while TensorMoves are
    deleted (subgraph owners, options, per-graph info) are computed once, so one check costs only the anchors
    of the merged symbol."""

    def __init__(self, model: Model, options: dict[str, str]) -> None:
        from anchorlog.analysis.layout_conflict.attributes import LayoutOptions

        self.model = model
        self.index = _ModelIndex(model)
        self.opts = LayoutOptions.parse({k: v for k, v in options.items()})
        self.graphs = {g.name: g for g in model.graphs}
        self._info: dict[str, Any] = {}

    def conflict(self, graph: Graph, symbol: str, anchors: list[tuple]) -> bool:
        from anchorlog.analysis.layout_conflict.attributes import Marks, graph_info, mark_node
        from anchorlog.analysis.layout_conflict.checkers import find_conflict_nodes
        from anchorlog.analysis.layout_conflict.refmap import AnchorRef, SymbolTable

        refs = []
        for g, n, io, idx in anchors:
            node = self.graphs[g].nodes.get(n) if g in self.graphs else None
            if node is not None:
                refs.append(AnchorRef(node, io, idx))
        table = SymbolTable({r.name: symbol for r in refs}, {symbol: refs})
        info = self._info.get(graph.name)
        if info is None:
            info = self._info[graph.name] = graph_info(graph, self.opts)
        marks = Marks()
        done: set[int] = set()
        for r in refs:
            if id(r.node) not in done:
                done.add(id(r.node))
                mark_node(r.node, graph, self.opts, table, self.index, marks)
        return bool(find_conflict_nodes(refs, marks, info, self.index))


class _RW:
    """The RW types the rules ask for (cached, as GE's pass reads them), by node object."""

    def __init__(self, rw: RWTypes) -> None:
        self.rw = rw

    def input_type(self, node: Node, i: int) -> str:
        return self.rw.input_type(node.graph or self.rw.graph_of(node), node, i, use_cache=True)[0]

    def output_type(self, node: Node, i: int) -> str:
        return self.rw.output_type(node.graph or self.rw.graph_of(node), node, i, use_cache=True)[0]


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


class TensorMoveDecider:
    """Applies GE's rule chain to one TensorMove at a time against the live graph."""

    def __init__(
        self, model: Model, options: dict[str, str], *, mode: str = "full", cached_paths: dict | None = None
    ) -> None:
        self.model = model
        self.options = options
        self.view = ModelView(model)
        self.reuse = ReuseConfig(options.get(OPT_OUTPUT_REUSE), options.get(OPT_INPUT_REUSE))
        # GE InitRWConflictCheck (shared RW machinery of the rw-conflict pass); unprimed = empty caches
        # An initialisation that fails leaves GE's pass in its un-initialised state (has_symbol_table_ stays
        # false; the RW caches stay empty); the report says so.
        self.rw_state = "not run"
        self.timings: dict[str, float] = {}
        t0 = time.perf_counter()
        n_before = model.num_nodes()
        rw: RWTypes | None = None
        if mode in ("full", "rw"):
            try:
                rw = RWTypes.init_rw_conflict_check(model)
                self.rw_state = "primed"
            except AnchorlogError as err:
                self.rw_state = f"failed ({err}); caches left empty"
        self.rw = _RW(rw if rw is not None else RWTypes(model))
        self.rw_inserted = model.num_nodes() - n_before
        if self.rw_inserted:  # priming inserted identities before subgraph NetOutputs
            self.view = ModelView(model)
        t1 = time.perf_counter()
        self.timings["rw_init_s"] = round(t1 - t0, 3)
        self.symbols: TMSymbols | None = None
        self.symbol_state = "not built"
        if mode in ("full", "symbols"):
            try:
                self.symbols = TMSymbols(model)
                self.symbol_state = "built"
            except AnchorlogError as err:
                self.symbol_state = f"failed ({err}); layout rule skipped"
        self.layout = LayoutCheck(model, options) if self.symbols is not None else None
        self.timings["symbol_table_s"] = round(time.perf_counter() - t1, 3)
        self.cached_paths: dict[tuple[str, str], list[PathStep]] = dict(cached_paths or {})
        self.deleted: set[tuple[str, str]] = set()
        self.verdicts: dict[tuple[str, str], Verdict] = {}
        self.retraced = 0

    # -- helpers ----------------------------------------------------------------------------------------------
    def _node(self, graph: str, name: str) -> Node:
        return self.view.graphs[graph].nodes[name]

    def _path(self, graph: Graph, tm: Node) -> list[PathStep]:
        key = (graph.name, tm.name)
        cached = self.cached_paths.get(key)
        if cached is not None and cached and (cached[-1].graph, cached[-1].node) not in self.deleted:
            return cached
        self.retraced += 1 if cached is not None else 0
        path = trace_source(self.view, graph, tm)
        self.cached_paths[key] = path
        return path

    def _has_ref_output_from_input(self, graph: Graph, node: Node, in_idx: int) -> bool:
        return any(self.view.ref_in(graph, node, o) == in_idx for o in out_indices(graph, node.name))

    def _multi_outputs_share_input(self, graph: Graph, node: Node, out: int) -> int | None:
        k = self.view.ref_in(graph, node, out)
        if k is None:
            return None
        for o in out_indices(graph, node.name):
            if o != out and self.view.ref_in(graph, node, o) == k and graph.consumers(node.name, o):
                return o
        return None

    # -- the pass on one node ---------------------------------------------------------------------------------
    def visit(self, graph: Graph, tm: Node) -> Verdict:
        key = (graph.name, tm.name)
        v = Verdict(tm.name, graph.name)
        v.visits = self.verdicts[key].visits + 1 if key in self.verdicts else 1
        self.verdicts[key] = v
        if tm.attr("_cannot_be_deleted") is True and tm.attrs["_cannot_be_deleted"].kind == "b":
            v.rule, v.reason = "reserved", "attr _cannot_be_deleted is true: inserted deliberately by another pass"
            return v
        if "no_need_constant_folding" in tm.attrs:
            v.rule = "reserved"
            v.reason = (
                f"attr no_need_constant_folding is present (value {tm.attr('no_need_constant_folding')!r}); "
                "GE reserves the node on the attribute's mere presence"
            )
            return v
        path = self._path(graph, tm)
        v.path = path
        if not path:
            raise PassFailure(
                f"TensorMove {tm.name} has no producer on input 0: source trace is empty", f"{graph.name}/{tm.name}"
            )
        pending: list[tuple[str, str]] = []
        for rule in (self._rule1, self._rule2, self._rule3, self._rule4, self._rule5):
            ok = rule(graph, tm, path, v, pending)
            if not ok:
                return v
        self._apply(graph, tm, v, pending)
        return v

    # Rule 1: CheckPathToSourceNodeValid
    def _rule1(self, graph: Graph, tm: Node, path: list[PathStep], v: Verdict, pending: list) -> bool:
        src = path[-1]
        snode = self._node(src.graph, src.node)
        v.facts["source"] = {"node": src.node, "graph": src.graph, "type": snode.type, "out": src.out}
        if snode.type in MULTI_BRANCH:
            v.rule = "rule1-path"
            v.reason = f"the trace stops at {src.node} ({snode.type}), a multi-branch control-flow op: data flow is decided at run time"
            return False
        ref_src = snode.attr("ref_var_src_var_name")
        special = snode.type in SPECIAL_TYPES or (isinstance(ref_src, str) and ref_src != "")
        v.facts["source"]["special"] = special
        if not special:
            return True
        succs = graph.consumers(tm.name, 0)
        for s, m in succs:
            sn = graph.nodes[s]
            if sn.type == "NetOutput":  # (GE tests the ref relation first; a NetOutput passes every input on)
                v.rule = "rule1-path"
                v.reason = f"source {src.node} is a {snode.type} (special source) and successor {s} is a NetOutput"
                return False
            if self._has_ref_output_from_input(graph, sn, m):
                v.rule = "rule1-path"
                v.reason = f"source {src.node} is a {snode.type} (special source) and successor {s} passes input {m} on as an output (ref op)"
                return False
            if sn.type == "NetOutput":
                v.rule = "rule1-path"
                v.reason = f"source {src.node} is a {snode.type} (special source) and successor {s} is a NetOutput"
                return False
            if sn.subgraph_names:
                v.rule = "rule1-path"
                v.reason = (
                    f"source {src.node} is a {snode.type} (special source) and successor {s} ({sn.type}) owns subgraphs"
                )
                return False
        for s, m in succs:
            sn = graph.nodes[s]
            t = self.rw.input_type(sn, m)
            if t in ("kWriteable", "kScopeWriteable"):
                v.facts["overwriting_successor"] = {"node": s, "in": m, "rw_in": t}
                v.rule = "rule1-path"
                v.reason = f"source {src.node} is a {snode.type} (special source) and successor {s} input {m} is {t}: it would overwrite the source"
                return False
        return True

    # Rule 2: CheckSourceNodeReuse
    def _rule2(self, graph: Graph, tm: Node, path: list[PathStep], v: Verdict, pending: list) -> bool:
        src = path[-1]
        snode = self._node(src.graph, src.node)
        if snode.type not in DATA_TYPES:
            return True
        idx_attr = snode.attrs.get("index")
        if idx_attr is None or idx_attr.kind not in ("i", "dt") or isinstance(idx_attr.value, bool):
            v.rule = "rule2-reuse"
            v.reason = f"source {src.node} is a graph input ({snode.type}) without an int attr 'index'"
            return False
        idx = int(idx_attr.value)
        ok, why = self.reuse.allows(idx)
        v.facts["reuse"] = {"index": idx, "allowed": ok, "why": why}
        if not ok:
            v.rule = "rule2-reuse"
            v.reason = f"source {src.node} is graph input {idx} (user memory): {why}"
        return ok

    # Rule 3: CheckSinglePath (IsSourceNodeWithSinglePath + TryHandleBasicMultiRefBranch)
    def _rule3(self, graph: Graph, tm: Node, path: list[PathStep], v: Verdict, pending: list) -> bool:
        for step in path:
            node = self._node(step.graph, step.node)
            if node.type in MULTI_BRANCH:
                v.rule = "rule3-single-path"
                v.reason = f"the path crosses {step.node} ({node.type}), a multi-branch control-flow op"
                return False
            if step.out is None:
                continue
            g = self.view.graphs[step.graph]
            other = self._multi_outputs_share_input(g, node, step.out)
            if other is not None:
                v.rule = "rule3-single-path"
                v.reason = (
                    f"{step.node} outputs {step.out} and {other} both reuse input {self.view.ref_in(g, node, step.out)} "
                    "and both are consumed: the source memory branches implicitly"
                )
                return False
            consumers = g.consumers(step.node, step.out)
            if len(consumers) > 1 and not self._multi_ref(graph, tm, g, step, consumers, v, pending):
                return False
        return True

    def _multi_ref(
        self, graph: Graph, tm: Node, g: Graph, step: PathStep, consumers: list, v: Verdict, pending: list
    ) -> bool:
        anchor = f"{step.node}:{step.out}"
        direct = any(d == tm.name for d, _ in consumers) and g is graph
        siblings = [(d, i) for d, i in consumers if not (g is graph and d == tm.name)]
        v.facts.setdefault("siblings", {})[anchor] = [f"{d}:{i}" for d, i in siblings]
        if not direct or not siblings:
            v.rule = "rule3-single-path"
            v.reason = (
                f"{anchor} has {len(consumers)} consumers but {tm.name} is not one of them (it hangs behind a ref op "
                "or subgraph): only the direct multi-reference form is handled"
            )
            return False
        succs = graph.consumers(tm.name, 0)
        for b, k in siblings:
            bn = g.nodes[b]
            if bn.type == "NetOutput" or bn.subgraph_names:
                v.rule = "rule3-single-path"
                v.reason = f"sibling {b} of {anchor} is a {'NetOutput' if bn.type == 'NetOutput' else 'wrapper (' + bn.type + ')'}"
                return False
            if self._has_ref_output_from_input(g, bn, k):
                v.rule = "rule3-single-path"
                v.reason = f"sibling {b} passes input {k} on as an output: the source lifetime reaches its consumers"
                return False
            b_type = self.rw.input_type(bn, k)
            b_writes = b_type in ("kWriteable", "kScopeWriteable")
            for s, m in succs:
                sn = graph.nodes[s]
                s_type = self.rw.input_type(sn, m)
                s_writes = s_type in ("kWriteable", "kScopeWriteable")
                pair = {"sibling": f"{b}:{k}", "sibling_rw": b_type, "successor": f"{s}:{m}", "successor_rw": s_type}
                v.facts.setdefault("sibling_checks", []).append(pair)
                if b_writes:
                    if self._has_ref_output_from_input(graph, sn, m):
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} overwrites the source ({b_type}) and successor {s} passes input {m} on as an output"
                        return False
                    if s_writes:
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} ({b_type}) and successor {s} ({s_type}) both overwrite the source"
                        return False
                    if s not in bn.ctrl_inputs:
                        v.rule = "rule3-single-path"
                        v.reason = f"sibling {b} overwrites the source ({b_type}) and no control edge {s} -> {b} orders the read first"
                        return False
                    continue
                if not s_writes:
                    continue
                if reaches(graph, s, b):
                    v.rule = "rule3-single-path"
                    v.reason = f"a control edge {b} -> {s} is needed (reader before writer) but {s} already reaches {b}: it would close a cycle"
                    return False
                if (b, s) not in pending:
                    pending.append((b, s))
        v.facts["pending_ctrl_edges"] = [list(e) for e in pending]
        return True

    # Rule 4: CheckRWConflictOnDelete
    def _rule4(self, graph: Graph, tm: Node, path: list[PathStep], v: Verdict, pending: list) -> bool:
        src = tm.inputs[0] if tm.inputs else None
        if src is None:
            v.rule, v.reason = "rule4-rw-conflict", "TensorMove input 0 has no producer"
            return False
        snode = graph.nodes[src[0]]
        out_t = self.rw.output_type(snode, src[1])
        checks = []
        for s, m in graph.consumers(tm.name, 0):
            sn = graph.nodes[s]
            in_t = self.rw.input_type(sn, m)
            res = conflict_result(out_t, in_t)
            checks.append(
                {
                    "producer": f"{src[0]}:{src[1]}",
                    "rw_out": out_t,
                    "successor": f"{s}:{m}",
                    "rw_in": in_t,
                    "result": res,
                }
            )
            if res != "DO_NOTHING":
                v.facts["rw"] = checks
                v.rule = "rule4-rw-conflict"
                v.reason = (
                    f"after deletion {src[0]}:{src[1]} ({out_t}) would feed {s}:{m} ({in_t}): the RW matrix says {res}"
                )
                return False
        v.facts["rw"] = checks
        return True

    # Rule 5: CheckMemLayoutConflictOnDelete
    def _rule5(self, graph: Graph, tm: Node, path: list[PathStep], v: Verdict, pending: list) -> bool:
        if self.symbols is None:
            v.facts["layout"] = "skipped: no symbol table (TensorMoveDeletePass::Init did not run)"
            return True
        si = self.symbols.symbol(graph.name, tm.name, "in", 0)
        so = self.symbols.symbol(graph.name, tm.name, "out", 0)
        v.facts["symbols"] = {"in": si, "out": so}
        if si is None or so is None:
            v.rule, v.reason = "rule5-layout", "the TensorMove's anchors have no symbol: kept conservatively"
            return False
        if si == so:
            return True
        anchors = self.symbols.merged_anchors(si, so)
        if self.layout is not None and self.layout.conflict(graph, si, anchors):
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
        try:
            res = isolate_and_delete(graph, tm.name, {0: 0})
        except PassFailure:
            batch.rollback()
            raise
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


def run_gepass(model: Model, graph: Graph, visit, depth: int = 0) -> None:
    """Walk ``graph`` as ``GEPass::Run`` does, calling ``visit(graph, node) -> list[str] | None`` (names of nodes
    to re-pass when the visit deleted the node). Subgraphs are walked when their owner is visited."""
    if depth > 25:
        raise PassFailure(f"subgraphs nested deeper than 25 levels at {graph.name}", graph.name)
    seen: set[str] = set()
    deleted: set[str] = set()
    queue: deque[str] = deque()
    queued: set[str] = set()
    last: list[str] = []

    def push(n: str) -> None:
        if n not in queued:
            queue.append(n)
            queued.add(n)

    for n in list(graph.nodes):
        ins = in_nodes(graph, n)
        if not ins:
            push(n)
        elif len(ins) > _MAX_ONE_IN_NODES:
            last.append(n)

    last_set = set(last)
    nodes = graph.nodes

    def successors(n: str) -> list[str]:
        # GE Node::GetOutNodes (data consumers per output, then control successors), read straight from the
        # graph's consumer index: this runs for every visited node
        if graph._consumers is None:  # noqa: SLF001 - the index Graph keeps up to date through its edit methods
            graph._ensure_index()  # noqa: SLF001
        cons, csucc = graph._consumers, graph._ctrl_succ  # noqa: SLF001
        out: list[str] = []
        o = 0
        k = nodes[n].num_outputs
        while True:
            users = cons.get((n, o))  # type: ignore[union-attr]
            if users:
                out.extend(d for d, _ in users)
            elif o >= k:
                break
            o += 1
        out.extend(csucc.get(n, ()))  # type: ignore[union-attr]
        return out

    def ready(n: str) -> bool:
        # GE IsNodeReadyToQueue: every data and control predecessor seen (NextIteration exempt)
        node = nodes.get(n)
        if node is None or n in deleted or n in last_set:
            return False
        for a in node.inputs:
            if a is not None and a[0] not in seen and nodes[a[0]].type not in _NEXT_ITERATION:
                return False
        for p in node.ctrl_inputs:
            if p not in seen and nodes[p].type not in _NEXT_ITERATION:
                return False
        return True

    max_pass = max(1, len(graph.nodes)) * _MAX_PASS_MULTIPLE
    passed = 0
    repass: dict[str, None] = {}  # ordered set: neighbours of deleted nodes to visit again
    while True:
        while queue and passed < max_pass:
            n = queue.popleft()
            queued.discard(n)
            if n in deleted or n not in graph.nodes:
                continue
            repass.pop(n, None)
            seen.add(n)
            node = graph.nodes[n]
            # only a TensorMove visit edits this graph: other nodes' out-nodes are the same after the visit
            before = sorted(set(successors(n))) if node.type == "TensorMove" else []
            again = visit(graph, node)
            if again is not None:
                deleted.add(n)
                for r in again:
                    if (
                        r in graph.nodes
                        and (r in seen or all(p in seen for p in in_nodes(graph, r)))
                        and r not in repass
                    ):
                        repass[r] = None
            elif node.subgraph_names:
                for sub in model.subgraphs_of(node):
                    run_gepass(model, sub, visit, depth + 1)
            passed += 1
            current = successors(n) if n in nodes else []
            for o in current:
                if o not in seen and ready(o):
                    push(o)
            for o in before:
                if o not in seen and ready(o):
                    push(o)
        if last:
            for n in list(last):
                if all(p in seen for p in in_nodes(graph, n)):
                    last.remove(n)
                    last_set.discard(n)
                    if n not in seen:
                        push(n)
        if repass:
            for r in repass:
                push(r)
            repass = {}
            continue
        if not queue or passed >= max_pass:
            break


# --------------------------------------------------------------------------------------------------------------
# Facts derived once by the rule program
# --------------------------------------------------------------------------------------------------------------
# Relations of the fact schema that tensor_move.dl reads (node_attr only for the two reserved keys, in_anchor
# only for subgraph NetOutputs): the pass builds just these instead of the whole fact database.
TM_RELATIONS = (
    "graph",
    "node",
    "data_edge",
    "subgraph",
    "parent_in",
    "parent_out",
    "ref_io",
    "op_class",
    "in_anchor",
    "node_attr",
)
_RESERVED_KEYS = ("_cannot_be_deleted", "no_need_constant_folding")


def tm_fact_tables(model: Model) -> dict[str, list[tuple]]:
    """The fact-schema rows ``tensor_move.dl`` needs, derived straight from the IR (same columns and
    conventions as :func:`anchorlog.facts.relations.tables_from_model`, restricted as :data:`TM_RELATIONS`)."""
    from anchorlog.facts.relations import OP_CLASS_ROWS, attr_fact_value

    index = _ModelIndex(model)
    t: dict[str, list[tuple]] = {r: [] for r in TM_RELATIONS}
    mname = model.name or "model"
    for gi, g in enumerate(model.graphs):
        own = index.owner.get(g.name)
        t["graph"].append((g.name, mname, own[0].name if own else "", own[1].name if own else "", 1 if gi == 0 else 0))
        for n in g.nodes.values():
            name = n.name
            t["node"].append((g.name, name, n.type))
            for i, src in enumerate(n.inputs):
                if src is not None:
                    t["data_edge"].append((g.name, src[0], src[1], name, i))
            for i, sub in enumerate(n.subgraph_names):
                if sub:
                    t["subgraph"].append((g.name, name, i, sub))
            for o in range(n.num_outputs):
                r = ref_from_input(index, g, n, o)
                if r is not None:
                    t["ref_io"].append((g.name, name, o, r))
            if n.type == "TensorMove":
                for key in _RESERVED_KEYS:
                    a = n.attrs.get(key)
                    if a is not None:
                        kind, value = attr_fact_value(a)
                        t["node_attr"].append((g.name, name, key, kind, value))
            if own is None:
                continue
            pg, pn, _ = own
            pidx = n.attrs.get("_parent_node_index")
            if pidx is not None and pidx.kind in ("i", "dt") and not isinstance(pidx.value, bool):
                t["parent_in"].append((g.name, name, pg.name, pn.name, int(pidx.value)))
            if n.type == "NetOutput":
                for k in range(n.num_inputs):
                    connected = 1 if k < len(n.inputs) and n.inputs[k] is not None else 0
                    t["in_anchor"].append((g.name, name, k, connected, "", "", "null", "", "null", 0, ""))
                    if k < len(n.input_desc):
                        a = n.input_desc[k].attrs.get("_parent_node_index")
                        if a is not None and a.kind in ("i", "dt") and not isinstance(a.value, bool):
                            t["parent_out"].append((g.name, name, k, pg.name, pn.name, int(a.value)))
    t["op_class"] = list(OP_CLASS_ROWS)
    return t


def tm_fact_db(model: Model):
    """An in-memory SQLite database with the :data:`TM_RELATIONS` of ``model`` (fact-schema tables, indexed)."""
    import sqlite3

    from anchorlog.facts.relations import INDEXES, SCHEMA

    conn = sqlite3.connect(":memory:")
    conn.execute("PRAGMA journal_mode=OFF")
    conn.execute("PRAGMA synchronous=OFF")
    for rel, rows in tm_fact_tables(model).items():
        cols = SCHEMA[rel]
        conn.execute(f'CREATE TABLE "{rel}" (' + ", ".join(f'"{c}"' for c, _ in cols) + ")")
        if rows:
            conn.executemany(f'INSERT INTO "{rel}" VALUES (' + ", ".join("?" * len(cols)) + ")", rows)
        for i, idx in enumerate(INDEXES.get(rel, ())):
            conn.execute(f'CREATE INDEX "ix_{rel}_{i}" ON "{rel}" (' + ", ".join(f'"{c}"' for c in idx) + ")")
    conn.execute("ANALYZE")
    conn.commit()
    return conn


ALL_OUTPUTS = (
    "tm",
    "tm_path",
    "tm_source",
    "tm_reserved",
    "tm_succ",
    "tm_sibling",
    "tm_path_consumers",
    "tm_trace_bad",
    "tm_rw",
    "tm_rw_check",
    "tm_pending",
    "tm_pending_cycle",
    "tm_symbol",
    "tm_merged",
)
PASS_OUTPUTS = ("tm", "tm_path", "tm_trace_bad")  # what the pass itself consumes


def derive_facts(
    model: Model, *, engine: str = "sqlite", db: Any = None, outputs: tuple[str, ...] = ALL_OUTPUTS
) -> dict[str, list[tuple]]:
    """Run ``queries/tensor_move.dl`` once over the model's facts; returns the derived relations as row lists.

    ``db``: a fact database to use (a :class:`~anchorlog.facts.relations.FactDB` or sqlite connection);
    default a slim one holding only :data:`TM_RELATIONS`. ``outputs``: the relations wanted."""
    from anchorlog.queries import Program

    only_trace = set(outputs) <= set(PASS_OUTPUTS)
    prog = Program.from_file(TM_TRACE_DL if only_trace else TM_DL)
    extra = None
    if only_trace:
        source = db if db is not None else tm_fact_db(model)
    else:  # the report relations read RW facts: the whole fact database plus the op's tensor names
        from anchorlog.analysis.rw_conflict import io_name_rows
        from anchorlog.facts.relations import FactDB

        source = db if db is not None else FactDB.from_model(model)
        from anchorlog.analysis.graph_lint import topo_positions
        from anchorlog.analysis.symbols import node_order

        extra = {
            "io_name": io_name_rows(model),
            "reach_pos": topo_positions(model),
            "node_order": node_order(model),
            "sym_top": [],
        }
    res = prog.run(source, engine=engine, outputs=list(outputs), extra=extra)
    return {r: res.rows(r) for r in outputs}


def paths_from_facts(facts: dict[str, list[tuple]]) -> dict[tuple[str, str], list[PathStep]]:
    """``tm_path(g, tm, step, pg, pnode, pout)`` rows (pout = -1 for a wrapper marker) as :class:`PathStep` lists."""
    by_tm: dict[tuple[str, str], list[tuple[int, PathStep]]] = {}
    for g, tm, step, pg, pnode, pout in facts.get("tm_path", []):
        by_tm.setdefault((g, tm), []).append((int(step), PathStep(pg, pnode, None if int(pout) < 0 else int(pout))))
    for g, tm in ((r[0], r[1]) for r in facts.get("tm", [])):
        by_tm.setdefault((g, tm), [])
    # a trace GE fails on is not cached: the Python tracer re-derives it and reports the failure
    for g, tm in facts.get("tm_trace_bad", []):
        by_tm.pop((g, tm), None)
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
    model: Model, options: dict[str, str], *, use_rules: bool = True, engine: str = "sqlite"
) -> dict[str, Any]:
    """Run the pass; returns the report section (also used by the notebook, the benchmark and ``explain``).

    The cyclic garbage collector is paused meanwhile: a large model is millions of small objects that would be
    rescanned again and again while the pass allocates its short-lived look-ups (nothing here makes cycles)."""
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _run_tensor_move_delete(model, options, use_rules=use_rules, engine=engine)
    finally:
        if was_enabled:
            gc.enable()


def _run_tensor_move_delete(
    model: Model, options: dict[str, str], *, use_rules: bool = True, engine: str = "sqlite"
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
    t_rules = time.perf_counter()
    cached = paths_from_facts(derive_facts(model, engine=engine, outputs=PASS_OUTPUTS)) if use_rules else {}
    rules_s = round(time.perf_counter() - t_rules, 3)
    decider = TensorMoveDecider(model, options, mode=mode, cached_paths=cached)
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

    t_walk = time.perf_counter()
    if model.graphs:
        run_gepass(model, model.graphs[0], visit)
    decider.timings["walk_and_decide_s"] = round(time.perf_counter() - t_walk, 3)
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
        "retraced": decider.retraced,
        "timings": {"rules_s": rules_s, **decider.timings},
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
    return run_tensor_move_delete(model, ctx.options, engine=ctx.engine)


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

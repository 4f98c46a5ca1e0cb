"""``concat-notask``: GE's ConcatNotaskPass — mark ConcatD/ConcatV2D nodes whose inputs can simply be laid
end to end in memory as no-task virtual ops (reference §6; seed 001).

How it works:

* Python derives the facts that need arithmetic or GE's format tables (:mod:`anchorlog.analysis.formats`):
  graph-level skips, each input's origin rank and data bytes, the per-input concat-axis check, the items of
  list attributes;
* ``queries/concat_notask.dl`` derives every failing check of every pending concat (``cn_fail``), reading
  the pipeline's shared fact database plus the marks this run has made so far (``cn_marked``), and which
  pending concats must wait for an earlier one's verdict (``cn_blocked``);
* the decision walks the concats in GE's order (root graph, then every subgraph; direct nodes in order) in
  rounds: each round evaluates the rules once and decides every concat that is not blocked, taking the first
  failing check in GE's check order and marking the ones without any
  (:func:`anchorlog.runtime.notask.mark_notask`); the blocked ones are decided in the next round, whose rules
  see the new marks. Python keeps only this bookkeeping: no check is evaluated outside the rules.

Context flags (GE reads them from the graph; an anchorlog option can force them for a whole run):

* ``anchorlog.singleOpScene`` (or GE's attribute name ``_single_op_scene``) = true: the compile is a single-op
  compile (GE graph attr ``_single_op_scene``); the pass skips every graph.
* ``anchorlog.memoryDiscontiguousAllocation`` (or ``_memory_discontiguous_allocation``) = true: as that graph
  attr on every graph. Values: true/false, 1/0, yes/no, on/off; anything else is refused before any pass runs.
* ``anchorlog.dtypeMKN``: the platform's per-dtype fractal sizes, ``Default:16,16,16;DT_INT8:16,32,16``
  (default: 16 for every dtype, what GE uses without platform info).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorlog.analysis import formats
from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import AnchorlogError, OptionError
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.gcpause import paused_gc
from anchorlog.runtime import memory_layout
from anchorlog.runtime.notask import CONCAT_LOCK_ATTR, mark_notask

RULES = Path(__file__).resolve().parent.parent / "queries" / "concat_notask.dl"
PASS_NAME = "concat-notask"
TARGET_TYPES = ("ConcatD", "ConcatV2D")

OPT_SINGLE_OP = "anchorlog.singleOpScene"
OPT_DISCONTIGUOUS = "anchorlog.memoryDiscontiguousAllocation"
OPT_DTYPE_MKN = "anchorlog.dtypeMKN"
# GE has no session option for these two scenarios: its passes read graph attributes. Their names are accepted
# as option keys too (the value is applied to every graph, as the anchorlog.* spellings are).
OPT_GE_SINGLE_OP = "_single_op_scene"
OPT_GE_DISCONTIGUOUS = "_memory_discontiguous_allocation"

ATTR_SINGLE_OP_SCENE = "_single_op_scene"
ATTR_MEMORY_DISCONTIGUOUS = "_memory_discontiguous_allocation"
ATTR_DYNAMIC_SHAPE_PARTITIONED = "_dynamic_shape_partitioned"
ATTR_GRAPH_UNKNOWN = "_graph_unknown_flag"
LIST_KEYS = ("_input_memory_type", "_output_memory_type", "atomic_output_index")
# Python-side relations keyed by (graph, concat): each round passes the rows of the pending concats only
_PER_CONCAT = ("cn_in_tensor", "cn_in_dim", "cn_unknown_shape", "cn_lxslice_name")


def _program() -> Any:
    from anchorlog.queries import Program

    return Program.cached(RULES)


STAGES = {
    0: "unknown_shape",
    1: "owner_graph_unknown",
    2: "input_check",
    4: "check_dim",
    5: "output_check",
    6: "lx_fusion",
}
INPUT_STEPS = {
    0: "IsScalarInput",
    1: "CheckTensorAlign",
    2: "HasSameSourceAnchor",
    3: "IsPreNodeTypeValid",
    4: "IsPreNodeWithSubgraph",
    5: "IsPreOutAnchorCanReuse",
    6: "IsPreOutAnchorValidMultiRef",
    7: "IsPreNodeAttrValid",
    8: "IsSameInputMemType",
}


_TRUE = ("1", "true", "yes", "on")
_FALSE = ("0", "false", "no", "off")


def parse_flag(value: str) -> bool:
    """An on/off option value; anything but true/false (1/0, yes/no, on/off) raises ValueError."""
    v = str(value).strip().lower()
    if v in _TRUE:
        return True
    if v in _FALSE:
        return False
    raise ValueError("expected true or false")


def _flag(options: dict[str, str], *keys: str) -> bool:
    """An on/off context flag given under any of its spellings (anchorlog's, GE's graph attribute name)."""
    return any(parse_flag(options[k]) for k in keys if k in options)


def _get_bool(holder: Any, key: str) -> bool | None:
    """``AttrUtils::GetBool``: the value of a ``b`` attribute, None when absent or of another kind."""
    a = holder.attrs.get(key)
    if a is None or a.kind != "b":
        return None
    return bool(a.value)


def _get_int(holder: Any, key: str) -> int | None:
    a = holder.attrs.get(key)
    if a is None or a.kind not in ("i", "dt") or isinstance(a.value, bool):
        return None
    return int(a.value)


def _origin_shape(desc: TensorDesc | None) -> list[int]:
    """GE's ``GetOriginShape``: the ``origin_shape`` attr; a descriptor without it has an empty origin shape."""
    if desc is None:
        return []
    v = desc.attr("origin_shape")
    return [int(x) for x in v] if isinstance(v, list) else []


def _origin_format(desc: TensorDesc) -> str:
    v = desc.attr("origin_format")
    return str(v) if v else "ND"


@dataclass
class Verdict:
    """What the pass concluded for one concat."""

    graph: str
    node: str
    marked: bool
    check: str | None = None  # the first failing check (GE's function name)
    reason: str | None = None  # which condition of it failed
    input: int | None = None  # the input it failed on, if an input check
    facts: dict[str, Any] = field(default_factory=dict)
    already: bool = False  # it was marked before this run

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"graph": self.graph, "node": self.node, "marked": self.marked}
        if self.already:
            d["already_marked"] = True
        if not self.marked:
            d.update({"check": self.check, "reason": self.reason})
            if self.input is not None:
                d["input"] = self.input
        if self.facts:
            d["facts"] = self.facts
        return d


class ConcatNotaskAnalysis:
    """The pass over one model: facts, rules, decisions (optionally applied)."""

    def __init__(
        self,
        model: Model,
        options: dict[str, str] | None = None,
        engine: str = "sqlite",
        ctx: PassContext | None = None,
    ) -> None:
        """``ctx``: the pipeline's context, whose shared fact database the rules read (without one the
        analysis builds a private database and closes it)."""
        self.model = model
        self.ctx = ctx
        self.options = dict(options or {})
        self.engine = engine
        try:
            self.cube = (
                formats.CubeSizes.parse(self.options[OPT_DTYPE_MKN])
                if OPT_DTYPE_MKN in self.options
                else formats.DEFAULT_CUBE
            )
        except ValueError as e:
            raise OptionError(str(e), OPT_DTYPE_MKN) from e
        self.dim_details: dict[tuple[str, str, int], formats.DimCheck] = {}
        self._dim_memo: dict[tuple, formats.DimCheck] = {}
        self.skips: dict[str, str] = {}
        self.unknown: dict[str, str] = {}
        self.rounds = 0  # evaluations of the rules (one, plus one per wave of order-dependent verdicts)
        self.timings: dict[str, float] = {}  # seconds: python facts, fact database, rules, decisions

    # -- python-side facts -------------------------------------------------------------------------------
    def _single_op_scene(self, graph: Graph) -> bool:
        """GraphUtils::IsSingleOpScene: the graph attr, else the first node (GetAllNodes order) carrying it."""
        v = _get_bool(graph, ATTR_SINGLE_OP_SCENE)
        if graph.has_attr(ATTR_SINGLE_OP_SCENE):
            return bool(v)
        seen: set[str] = set()

        def walk(g: Graph) -> bool | None:
            if g.name in seen:
                return None
            seen.add(g.name)
            for n in g.nodes.values():
                if n.has_attr(ATTR_SINGLE_OP_SCENE):
                    return bool(_get_bool(n, ATTR_SINGLE_OP_SCENE))
                for sg in self.model.subgraphs_of(n):
                    r = walk(sg)
                    if r is not None:
                        return r
            return None

        return bool(walk(graph))

    def graph_facts(self) -> tuple[list[tuple], list[tuple]]:
        skip, unknown = [], []
        try:
            force_single = _flag(self.options, OPT_SINGLE_OP, OPT_GE_SINGLE_OP)
            force_discontiguous = _flag(self.options, OPT_DISCONTIGUOUS, OPT_GE_DISCONTIGUOUS)
        except ValueError as e:
            raise OptionError(f"{e} for {OPT_SINGLE_OP}/{OPT_DISCONTIGUOUS}", "--option") from None
        for g in self.model.graphs:
            if force_single or self._single_op_scene(g):
                skip.append((g.name, "single_op_scene"))
            elif force_discontiguous or _get_bool(g, ATTR_MEMORY_DISCONTIGUOUS):
                skip.append((g.name, "memory_discontiguous_allocation"))
            if _get_bool(g, ATTR_DYNAMIC_SHAPE_PARTITIONED):
                unknown.append((g.name, "dynamic_shape_partitioned"))
            elif _get_bool(g, ATTR_GRAPH_UNKNOWN):
                unknown.append((g.name, "graph_unknown_shape"))
        self.skips = dict(skip)
        self.unknown = dict(unknown)
        return skip, unknown

    def concat_input_facts(self, graph: Graph, node: Node) -> tuple[list[tuple], list[tuple]]:
        """Rows of ``cn_in_tensor`` and ``cn_in_dim`` for one concat."""
        tensor_rows, dim_rows = [], []
        n_in = node.num_inputs
        descs = [node.input_desc[i] if i < len(node.input_desc) else None for i in range(n_in)]
        for i, d in enumerate(descs):
            if d is None:
                tensor_rows.append((graph.name, node.name, i, 0, 0))
                continue
            size = formats.shape_size(d.shape)
            nbytes = formats.bytes_of(size, d.dtype) if size >= 0 and formats.dtype_bits(d.dtype) >= 0 else -1
            tensor_rows.append((graph.name, node.name, i, len(_origin_shape(d)), nbytes))
        # CheckDim: concat_dim normalised once, then every input (connected or not) in order.
        dim = _get_int(node, "concat_dim")
        dim = 0 if dim is None else dim
        for i, d in enumerate(descs):
            ori = _origin_shape(d)
            if dim < 0:
                dim = len(ori) + dim
            if not 0 <= dim < len(ori):
                chk = formats.DimCheck(False, "concat_dim_out_of_range", {"dim": dim, "origin_shape": ori})
            else:
                assert d is not None
                mask = _get_int(d, "_reshape_type_mask") or 0
                # the check is a pure function of the descriptor: concats of one model repeat a few shapes
                memo = (_origin_format(d), d.layout, tuple(ori), tuple(d.shape or ()), d.dtype, dim, mask)
                chk = self._dim_memo.get(memo)
                if chk is None:
                    chk = self._dim_memo[memo] = formats.check_concat_dim(
                        memo[0], d.layout, ori, list(d.shape or []), d.dtype, dim, mask, self.cube
                    )
            self.dim_details[(graph.name, node.name, i)] = chk
            dim_rows.append((graph.name, node.name, i, 1 if chk.ok else 0, chk.reason))
            if not chk.ok:
                break
        return tensor_rows, dim_rows

    @staticmethod
    def _list_items(graph: Graph, node: Node, rows: list[tuple]) -> None:
        for key in LIST_KEYS:
            if key not in node.attrs:
                continue
            v = node.attr(key)
            if not isinstance(v, list):
                continue
            for pos, x in enumerate(v):
                if isinstance(x, (int, float)) and not isinstance(x, bool):
                    rows.append((graph.name, node.name, key, pos, int(x)))

    def extra_facts(self, concats: list[tuple[Graph, Node]]) -> dict[str, list[tuple]]:
        """The Python-side input relations for ``concats`` (list attributes: of the concats and their direct
        producers, the only nodes the rules read them from)."""
        skip, unknown = self.graph_facts()
        tensor_rows: list[tuple] = []
        dim_rows: list[tuple] = []
        items: list[tuple] = []
        unknown_shape: list[tuple] = []
        lxslice: list[tuple] = []
        unnamed: list[tuple] = []
        seen: set[tuple[str, str]] = set()
        for g, n in concats:
            t, d = self.concat_input_facts(g, n)
            tensor_rows += t
            dim_rows += d
            # IsUnknownShapeOp: GeShape::IsUnknownShape, any negative dim (-1 unknown, -2 unknown rank)
            for io, descs in (("in", n.input_desc), ("out", n.output_desc)):
                if any(d.shape and any(x < 0 for x in d.shape) for d in descs):
                    unknown_shape.append((g.name, n.name, io))
            if "lxslice" in n.name:
                lxslice.append((g.name, n.name))
            for name in [n.name] + [src[0] for src in n.inputs if src is not None]:
                if (g.name, name) not in seen and name in g.nodes:
                    seen.add((g.name, name))
                    self._list_items(g, g.nodes[name], items)
        for g in self.model.graphs:
            for n in g.nodes.values():
                if n.subgraph_names and not any(n.subgraph_names):
                    unnamed.append((g.name, n.name))
        return {
            "cn_graph_skip": skip,
            "cn_graph_unknown": unknown,
            "cn_in_tensor": tensor_rows,
            "cn_in_dim": dim_rows,
            "cn_list_item": items,
            "cn_unknown_shape": unknown_shape,
            "cn_lxslice_name": lxslice,
            "cn_unnamed_subgraph": unnamed,
        }

    # -- rules -------------------------------------------------------------------------------------------
    def _evaluate(self, db: Any, extra: dict[str, list[tuple]]) -> dict[str, Any]:
        res = _program().run(db, engine=self.engine, extra=extra)
        fails: dict[tuple[str, str], tuple] = {}
        # (unsorted: the decision takes minima and looks rows up)
        for g, c, stage, inp, step, check in res.set("cn_fail"):
            key = (g, c)
            cand = (int(stage), int(inp), int(step), str(check))
            if key not in fails or cand < fails[key]:
                fails[key] = cand
        srcs: dict[tuple[str, str, int], tuple[str, int]] = {}
        for g, c, i, p, j in res.set("cn_rejected_src"):
            srcs[(g, c, int(i))] = (p, int(j))
        skipped = {(g, c): str(r) for g, c, r in res.set("cn_skipped")}
        blocked = {(g, c) for g, c in res.set("cn_blocked")}
        return {"fails": fails, "srcs": srcs, "skipped": skipped, "blocked": blocked}

    def run(self, apply: bool = True) -> list[Verdict]:
        """Decide every concat in GE's order; mark the accepted ones when ``apply``."""
        # Big graphs are millions of small objects: the cyclic collector would rescan them over and over.
        with paused_gc():
            return self._run(apply)

    def _run(self, apply: bool) -> list[Verdict]:
        from anchorlog.analysis.fact_cache import shared_facts

        t0 = time.perf_counter()
        # GE's visiting order: the root graph, then every subgraph; each graph's direct nodes in order
        concats = [(g, n) for g in self.model.graphs for n in g.nodes.values() if n.type in TARGET_TYPES]
        if not concats:
            return []  # nothing to decide: no facts to derive
        extra = self.extra_facts(concats)
        t1 = time.perf_counter()
        ctx = self.ctx if self.ctx is not None else PassContext(options=self.options, engine=self.engine)
        db = shared_facts(self.model, ctx)
        t2 = time.perf_counter()
        try:
            names = db.models[next(iter(db.models))]  # IR graph name -> fact graph name
            extra = self._qualify(extra, names)
            key_of = {id(n): (names.get(g.name, g.name), n.name) for g, n in concats}
            pending = {key_of[id(n)]: (g, n) for g, n in concats}
            marked: list[tuple[str, str]] = []  # marks of this run, read by the rules as cn_marked
            verdicts: dict[tuple[str, str], Verdict] = {}
            rules_s = 0.0
            while pending:
                # One evaluation decides every pending concat no earlier pending concat can influence; the
                # others wait for the next round, which sees this round's marks.
                tr = time.perf_counter()
                rows = {
                    rel: [r for r in rs if (r[0], r[1]) in pending] for rel, rs in extra.items() if rel in _PER_CONCAT
                }
                state = self._evaluate(
                    db,
                    {**extra, **rows, "cn_pending": list(pending), "cn_marked": list(marked)},
                )
                rules_s += time.perf_counter() - tr
                self.rounds += 1
                decided = []
                for key, (g, n) in pending.items():
                    if key in state["blocked"]:
                        continue
                    decided.append(key)
                    verdicts[key] = v = self._decide(g, n, key, state, apply)
                    if v.marked and apply:
                        marked.append(key)
                if not decided:  # cannot happen: the first pending concat of a graph is never blocked
                    raise AnchorlogError("concat-notask: no concat could be decided", PASS_NAME)
                for key in decided:
                    del pending[key]
            self.timings = {"python_facts": t1 - t0, "fact_db": t2 - t1, "rules": rules_s}
            self.timings["decisions"] = time.perf_counter() - t2 - rules_s
            return [verdicts[key_of[id(n)]] for _, n in concats]
        finally:
            if self.ctx is None:
                db.close()

    def _decide(self, g: Graph, n: Node, key: tuple[str, str], state: dict[str, Any], apply: bool) -> Verdict:
        already = bool(_get_bool(n, "_no_task"))
        if key in state["skipped"]:
            return Verdict(g.name, n.name, False, "ShouldSkipGraph", state["skipped"][key], already=already)
        fail = state["fails"].get(key)
        if fail is not None:
            v = self._rejection(g, n, fail, state["srcs"], key[0])
            v.already = already
            return v
        v = Verdict(g.name, n.name, True, already=already)
        if apply:
            mark_notask(g, n)
            blk = memory_layout.nopadding_input_block(g, n)
            if blk is not None:
                v.facts = {"block": blk.as_dict()}
                v.facts["block"]["output_bytes"] = sum(max(memory_layout.tensor_size(d), 0) for d in n.output_desc)
        return v

    @staticmethod
    def _qualify(extra: dict[str, list[tuple]], names: dict[str, str]) -> dict[str, list[tuple]]:
        if all(k == v for k, v in names.items()):
            return extra
        return {rel: [(names.get(r[0], r[0]),) + tuple(r[1:]) for r in rows] for rel, rows in extra.items()}

    # -- explanations ------------------------------------------------------------------------------------
    def _rejection(self, g: Graph, n: Node, fail: tuple, srcs: dict, gq: str) -> Verdict:
        stage, inp, step, reason = fail
        if stage == 2:
            check = INPUT_STEPS.get(step, "InputCheck")
        else:
            check = {
                0: "IsUnknownShapeOp",
                1: "IsOwnerGraphUnknown",
                4: "CheckDim",
                5: "OutputCheck",
                6: "LxFusionCheck",
            }.get(stage, STAGES.get(stage, "?"))
        v = Verdict(g.name, n.name, False, check, reason, inp if inp >= 0 else None)
        v.facts = self._facts_for(g, n, stage, inp, step, srcs, gq)
        return v

    def _producer_facts(self, g: Graph, n: Node, i: int, srcs: dict, gq: str) -> dict[str, Any]:
        src = n.inputs[i] if i < len(n.inputs) else None
        if src is None:
            return {}
        p = g.nodes.get(src[0])
        f: dict[str, Any] = {"producer": f"{src[0]}:{src[1]}", "producer_type": p.type if p else None}
        real = srcs.get((gq, n.name, i))
        f["real_source"] = f"{real[0]}:{real[1]}" if real else None
        if real and real[0] in g.nodes:
            f["real_source_type"] = g.nodes[real[0]].type
        return f

    def _facts_for(self, g: Graph, n: Node, stage: int, inp: int, step: int, srcs: dict, gq: str) -> dict[str, Any]:
        f: dict[str, Any] = {}
        if stage == 0:
            f["input_shapes"] = [d.shape for d in n.input_desc]
            f["output_shapes"] = [d.shape for d in n.output_desc]
        elif stage == 1:
            f["graph_reason"] = self.unknown.get(g.name)
        elif stage == 2:
            f.update(self._producer_facts(g, n, inp, srcs, gq))
            d = n.input_desc[inp] if inp < len(n.input_desc) else None
            src = n.inputs[inp]
            p = g.nodes.get(src[0]) if src else None
            if step in (0, 1) and d is not None:
                f.update(origin_shape=_origin_shape(d), shape=d.shape, dtype=d.dtype)
                size = formats.shape_size(d.shape)
                f["bytes"] = formats.bytes_of(size, d.dtype) if size >= 0 else -1
            elif step == 2:
                key = srcs.get((gq, n.name, inp))
                f["same_as_input"] = [
                    j for j in range(inp) if srcs.get((gq, n.name, j)) == key and n.inputs[j] is not None
                ]
            elif step == 4 and f.get("real_source"):
                rs = g.nodes.get(f["real_source"].rsplit(":", 1)[0])
                f["subgraphs"] = list(rs.subgraph_names) if rs else []
            elif step == 5 and p is not None and src is not None and src[1] < len(p.output_desc):
                f[CONCAT_LOCK_ATTR] = p.output_desc[src[1]].attr(CONCAT_LOCK_ATTR)
                f["taken_by"] = [
                    c for c, _ in g.consumers(src[0], src[1]) if c != n.name and _get_bool(g.nodes[c], "_no_task")
                ]
            elif step == 6 and src is not None:
                f["consumers"] = [f"{c}:{k}" for c, k in g.consumers(src[0], src[1])]
            elif step == 7 and p is not None:
                keys = (
                    "continuous_input", "continuous_output", "reference", "_no_task", "_output_reuse_input",
                    "_no_padding_continuous_input",
                )  # fmt: skip
                f["producer_attrs"] = {k: True for k in keys if _get_bool(p, k)}
                if p.attr("atomic_output_index"):
                    f["producer_attrs"]["atomic_output_index"] = p.attr("atomic_output_index")
            elif step == 8:
                f["memory_types"] = {
                    j: self._mem_type(g, n.inputs[j]) for j in range(inp + 1) if n.inputs[j] is not None
                }
        elif stage == 4:
            chk = self.dim_details.get((g.name, n.name, inp))
            if chk is not None:
                f.update(chk.detail)
        elif stage == 5:
            f["virtual_consumers"] = [
                c
                for c in self._output_targets(g, n)
                if any(
                    _get_bool(g.nodes[c], k)
                    for k in ("_no_task", "_output_reuse_input", "_no_padding_continuous_input")
                )
            ]
        elif stage == 6:
            f["_input_memory_type"] = n.attr("_input_memory_type")
            f["_output_memory_type"] = n.attr("_output_memory_type")
        return f

    @staticmethod
    def _mem_type(g: Graph, src: tuple[str, int] | None) -> int:
        if src is None:
            return -1
        p = g.nodes[src[0]]
        types = p.attr("_output_memory_type")
        if isinstance(types, list) and src[1] < len(types) and int(types[src[1]]) not in (0, 2, 4):
            return int(types[src[1]])
        return 2

    @staticmethod
    def _output_targets(g: Graph, n: Node) -> list[str]:
        out = []
        for k in range(n.num_outputs):
            for c, _ in g.consumers(n.name, k):
                node = g.nodes[c]
                if node.type == "Reshape":
                    firsts = [x for o in range(max(node.num_outputs, 1)) for x, _ in g.consumers(c, o)]
                    if firsts:
                        c = firsts[0]
                out.append(c)
        return out


# ------------------------------------------------------------------------------------------------ pass


@register(
    PASS_NAME,
    options={
        OPT_SINGLE_OP: parse_flag,
        OPT_GE_SINGLE_OP: parse_flag,
        OPT_DISCONTIGUOUS: parse_flag,
        OPT_GE_DISCONTIGUOUS: parse_flag,
        OPT_DTYPE_MKN: formats.CubeSizes.parse,
    },
)
def run(model: Model, ctx: PassContext) -> dict:
    """Mark ConcatD/ConcatV2D whose inputs can share one no-padding block as no-task (GE ConcatNotaskPass)."""
    analysis = ConcatNotaskAnalysis(model, ctx.options, engine=ctx.engine, ctx=ctx)
    verdicts = analysis.run(apply=True)
    marked = [v for v in verdicts if v.marked]
    # The output buffers GE no longer allocates: a no-task concat's output is its inputs' block.
    saved = sum(v.facts.get("block", {}).get("output_bytes", 0) for v in marked)
    # Later stages (memory simulator, sanitizer) read the no-padding blocks from here or from
    # anchorlog.runtime.memory_layout.layout_facts(model).
    ctx.state["concat_notask"] = {"marked": [(v.graph, v.node) for v in marked]}
    return {
        "marked": len(marked),
        "rejected": len(verdicts) - len(marked),
        "concats": [v.as_dict() for v in verdicts],
        "output_bytes_saved": saved,
        "rule_rounds": analysis.rounds,
    }


def _unmark(model: Model, name: str) -> None:
    """Undo a previous run's marks on concat ``name`` (its attrs, and the locks on producer outputs no other
    no-task concat holds) so that an explanation re-checks it from scratch."""
    from anchorlog.runtime.notask import NOTASK_NODE_ATTRS

    for g in model.graphs:
        n = g.nodes.get(name)
        if n is None:
            continue
        for key, _ in NOTASK_NODE_ATTRS:
            n.del_attr(key)
        for src in n.inputs:
            if src is None or src[0] not in g.nodes:
                continue
            others = [c for c, _ in g.consumers(*src) if c != name and _get_bool(g.nodes[c], "_no_task")]
            p = g.nodes[src[0]]
            if not others and src[1] < len(p.output_desc):
                p.output_desc[src[1]].del_attr(CONCAT_LOCK_ATTR)
        return


def _explain_anchor(model: Model, anchor: tuple[str, int], options: dict[str, str] | None) -> str:
    """Which no-task concat (if any) takes over the buffer of output ``anchor`` and where it lands in the
    no-padding block; why the other concats reading it do not."""
    import copy

    node, out = anchor
    g = next((x for x in model.graphs if node in x.nodes), None)
    if g is None:
        raise AnchorlogError(f"no node {node!r} in the model", node)
    readers = [c for c, _ in g.consumers(node, out) if g.nodes[c].type in TARGET_TYPES]
    if not readers:
        return f"{node}:{out}: no ConcatD/ConcatV2D reads this output; concat-notask leaves its buffer alone"
    work = copy.deepcopy(model)
    verdicts = {v.node: v for v in ConcatNotaskAnalysis(work, options).run(apply=True) if v.graph == g.name}
    lines = [f"{node}:{out} in graph {g.name} is read by {', '.join(readers)} (GE's visiting order):"]
    for c in sorted(readers, key=lambda c: list(g.nodes).index(c)):
        v = verdicts[c]
        if v.marked:
            piece = next(
                (p for p in v.facts.get("block", {}).get("pieces", []) if (p["src"], p["src_out"]) == (node, out)),
                None,
            )
            where = f" at offset {piece['offset']} ({piece['nopadding_size']} bytes)" if piece else ""
            lines.append(
                f"  {c}: no-task; takes this buffer over{where} of its no-padding block and locks it "
                f"({CONCAT_LOCK_ATTR} = false)"
            )
        else:
            at = f" on input {v.input}" if v.input is not None else ""
            lines.append(f"  {c}: rejected by {v.check}{at}: {v.reason}")
    return "\n".join(lines)


@register_explainer(PASS_NAME, node_types=TARGET_TYPES, anchors=True)
def explain(
    model: Model, name: str, *, options: dict[str, str] | None = None, anchor: tuple[str, int] | None = None
) -> str:
    """Why concat ``name`` is (or would be) marked no-task or rejected: the verdict, the first failing check in
    GE's order and the facts that decided it. With ``anchor`` (NODE, OUT): which concat takes that producer
    output over (and where in its block), and why the others reading it do not. The model is not changed (the
    pass runs on a copy)."""
    import copy

    if anchor is not None:
        return _explain_anchor(model, anchor, options)
    target = model.find_node(name)
    if target is None:
        raise AnchorlogError(f"no node {name!r} in the model", name)
    if target.type not in TARGET_TYPES:
        raise AnchorlogError(f"node {name!r} is a {target.type}, not a ConcatD/ConcatV2D", name)
    work = copy.deepcopy(model)
    already = bool(_get_bool(target, "_no_task"))
    if already:
        _unmark(work, name)
    verdicts = ConcatNotaskAnalysis(work, options).run(apply=True)
    v = next(x for x in verdicts if x.node == name)
    v.already = already
    lines = [f"{name} ({target.type}) in graph {v.graph}:"]
    if v.marked:
        lines.append(
            "  already no-task (_no_task=true) and every check still passes"
            if v.already
            else "  marked no-task: every check passes"
        )
        lines.append(
            "  sets _no_task, _no_padding_continuous_input, _output_reuse_input = true, _reuse_input_on_dim_index = 0;"
        )
        lines.append(f"  locks each producer output with {CONCAT_LOCK_ATTR} = false")
        blk = v.facts.get("block")
        if blk:
            lines.append(
                f"  no-padding block: {blk['nopadding_total']} data bytes, {blk['block_size']} reserved; output = input 0's buffer"
            )
            for p in blk["pieces"]:
                lines.append(
                    f"    input {p['index']} <- {p['src']}:{p['src_out']} at offset {p['offset']} "
                    f"({p['nopadding_size']} bytes, tensor size {p['tensor_size']})"
                )
    else:
        where = f" on input {v.input}" if v.input is not None else ""
        lines.append(f"  rejected by {v.check}{where}: {v.reason}")
        if v.already:
            lines.append("  (it carries _no_task from an earlier run; a fresh run would not mark it)")
        for k, val in v.facts.items():
            lines.append(f"    {k} = {val}")
    return "\n".join(lines)

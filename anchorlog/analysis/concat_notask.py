"""``concat-notask``: GE's ConcatNotaskPass — mark ConcatD/ConcatV2D nodes whose inputs can simply be laid
end to end in memory as no-task virtual ops (reference §6; seed 001).

How it works:

* Python derives the facts that need arithmetic or GE's format tables (:mod:`anchorlog.analysis.formats`):
  graph-level skips, each input's origin rank and data bytes, the per-input concat-axis check, the items of
  list attributes;
* ``queries/concat_notask.dl`` derives every failing check of every concat (``cn_fail``), the real source
  of each input through ref nodes (``cn_src``) and what each verdict depends on (``cn_dep``);
* the decision walks the concats in GE's order (root graph, then every subgraph; direct nodes in order),
  takes the first failing check in GE's check order, and marks the ones without any
  (:func:`anchorlog.runtime.notask.mark_notask`). A mark changes later verdicts (locks, virtual consumers,
  new ref nodes): when a concat depends on a node marked since the facts were derived, the facts of its graph
  are re-derived first, so every verdict sees exactly the graph GE's sequential pass would see.

Context flags (GE reads them from the graph; an anchorlog option can force them for a whole run):

* ``anchorlog.singleOpScene`` = true: the compile is a single-op compile (GE graph attr ``_single_op_scene``);
  the pass skips every graph.
* ``anchorlog.memoryDiscontiguousAllocation`` = true: as graph attr ``_memory_discontiguous_allocation``.
* ``anchorlog.dtypeMKN``: the platform's per-dtype fractal sizes, ``Default:16,16,16;DT_INT8:16,32,16``
  (default: 16 for every dtype, what GE uses without platform info).
"""

from __future__ import annotations

import gc
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from anchorlog.analysis import formats
from anchorlog.analysis.explainers import register_explainer
from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import AnchorlogError, OptionError
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.runtime import memory_layout
from anchorlog.runtime.notask import CONCAT_LOCK_ATTR, mark_notask

RULES = Path(__file__).resolve().parent.parent / "queries" / "concat_notask.dl"
PASS_NAME = "concat-notask"
TARGET_TYPES = ("ConcatD", "ConcatV2D")

OPT_SINGLE_OP = "anchorlog.singleOpScene"
OPT_DISCONTIGUOUS = "anchorlog.memoryDiscontiguousAllocation"
OPT_DTYPE_MKN = "anchorlog.dtypeMKN"

ATTR_SINGLE_OP_SCENE = "_single_op_scene"
ATTR_MEMORY_DISCONTIGUOUS = "_memory_discontiguous_allocation"
ATTR_DYNAMIC_SHAPE_PARTITIONED = "_dynamic_shape_partitioned"
ATTR_GRAPH_UNKNOWN = "_graph_unknown_flag"
LIST_KEYS = ("_input_memory_type", "_output_memory_type", "atomic_output_index")

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


def _truthy(v: str | None) -> bool:
    return str(v).strip().lower() in ("1", "true", "yes", "on")


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

    def __init__(self, model: Model, options: dict[str, str] | None = None, engine: str = "sqlite") -> None:
        self.model = model
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
        self.skips: dict[str, str] = {}
        self.unknown: dict[str, str] = {}
        self.refreshes = 0
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
        force_single = _truthy(self.options.get(OPT_SINGLE_OP))
        force_discontiguous = _truthy(self.options.get(OPT_DISCONTIGUOUS))
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
                chk = formats.check_concat_dim(
                    _origin_format(d), d.layout, ori, list(d.shape or []), d.dtype, dim, mask, self.cube
                )
            self.dim_details[(graph.name, node.name, i)] = chk
            dim_rows.append((graph.name, node.name, i, 1 if chk.ok else 0, chk.reason))
            if not chk.ok:
                break
        return tensor_rows, dim_rows

    def list_item_facts(self, graph: Graph) -> list[tuple]:
        rows = []
        for n in graph.nodes.values():
            for key in LIST_KEYS:
                v = n.attr(key)
                if isinstance(v, list):
                    for pos, x in enumerate(v):
                        if isinstance(x, (int, float)) and not isinstance(x, bool):
                            rows.append((graph.name, n.name, key, pos, int(x)))
        return rows

    def extra_facts(self) -> dict[str, list[tuple]]:
        skip, unknown = self.graph_facts()
        tensor_rows: list[tuple] = []
        dim_rows: list[tuple] = []
        items: list[tuple] = []
        unknown_shape: list[tuple] = []
        lxslice: list[tuple] = []
        unnamed: list[tuple] = []
        for g in self.model.graphs:
            for n in g.nodes.values():
                if n.subgraph_names and not any(n.subgraph_names):
                    unnamed.append((g.name, n.name))
                if n.type in TARGET_TYPES:
                    t, d = self.concat_input_facts(g, n)
                    tensor_rows += t
                    dim_rows += d
                    # IsUnknownShapeOp: GeShape::IsUnknownShape, any negative dim (-1 unknown, -2 unknown rank)
                    for io, descs in (("in", n.input_desc), ("out", n.output_desc)):
                        if any(d.shape and any(x < 0 for x in d.shape) for d in descs):
                            unknown_shape.append((g.name, n.name, io))
                    if "lxslice" in n.name:
                        lxslice.append((g.name, n.name))
            items += self.list_item_facts(g)
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
        from anchorlog.queries import Program

        prog = Program.from_file(RULES)
        res = prog.run(db, engine=self.engine, extra=extra)
        fails: dict[tuple[str, str], tuple] = {}
        for g, c, stage, inp, step, check in res.rows("cn_fail"):
            key = (g, c)
            cand = (int(stage), int(inp), int(step), str(check))
            if key not in fails or cand < fails[key]:
                fails[key] = cand
        ins: dict[tuple[str, str], list[tuple[int, str, int]]] = {}
        for g, c, i, p, j in res.rows("cn_in"):
            ins.setdefault((g, c), []).append((int(i), p, int(j)))
        trace: dict[tuple[str, str], set[str]] = {}
        for g, c, n in res.rows("cn_trace"):
            trace.setdefault((g, c), set()).add(n)
        out_targets: dict[tuple[str, str], set[str]] = {}
        for g, c, d in res.rows("cn_out_target"):
            out_targets.setdefault((g, c), set()).add(d)
        srcs: dict[tuple[str, str, int], tuple[str, int]] = {}
        for g, c, i, p, j in res.rows("cn_src"):
            srcs[(g, c, int(i))] = (p, int(j))
        return {"fails": fails, "ins": ins, "trace": trace, "out_targets": out_targets, "srcs": srcs}

    @staticmethod
    def _overlay(
        state: dict[str, Any], key: tuple[str, str], fresh: set[str], locked: set[tuple[str, int]]
    ) -> tuple | None:
        """The first failing check once the marks made since the facts were derived are taken into account:
        marks only add failures (a lock: check f; a virtual producer: h; a virtual consumer: OutputCheck)."""
        best = state["fails"].get(key)
        cands = [best] if best is not None else []
        for i, p, j in state["ins"].get(key, ()):
            if (p, j) in locked:
                cands.append((2, i, 5, "producer_output_taken"))
            if p in fresh:
                cands.append((2, i, 7, "producer_attr"))
        if any(d in fresh for d in state["out_targets"].get(key, ())):
            cands.append((5, -1, 0, "consumer_is_virtual"))
        return min(cands) if cands else None

    def run(self, apply: bool = True) -> list[Verdict]:
        """Decide every concat in GE's order; mark the accepted ones when ``apply``."""
        # Big graphs are millions of small objects: the cyclic collector would rescan them over and over.
        was_enabled = gc.isenabled()
        gc.disable()
        try:
            return self._run(apply)
        finally:
            if was_enabled:
                gc.enable()

    def _run(self, apply: bool) -> list[Verdict]:
        from anchorlog.facts.relations import FactDB

        t0 = time.perf_counter()
        if not any(n.type in TARGET_TYPES for n in self.model.all_nodes()):
            return []  # nothing to decide: no facts to derive
        extra = self.extra_facts()
        t1 = time.perf_counter()
        db = FactDB.from_model(self.model)
        t2 = time.perf_counter()
        try:
            names = db.models[next(iter(db.models))]  # IR graph name -> fact graph name
            state = self._evaluate(db, self._qualify(extra, names))
            t3 = time.perf_counter()
            self.timings = {"python_facts": t1 - t0, "fact_db": t2 - t1, "rules": t3 - t2}
            verdicts: list[Verdict] = []
            for g in self.model.graphs:
                gq = names.get(g.name, g.name)
                fresh: set[str] = set()  # concats of g marked since the facts were derived
                locked: set[tuple[str, int]] = set()  # producer outputs they locked
                for n in list(g.nodes.values()):
                    if n.type not in TARGET_TYPES:
                        continue
                    if g.name in self.skips:
                        verdicts.append(Verdict(g.name, n.name, False, "ShouldSkipGraph", self.skips[g.name]))
                        continue
                    key = (gq, n.name)
                    if fresh and not fresh.isdisjoint(state["trace"].get(key, ())):
                        # a ref trace runs into a node that has just become a ref node: re-derive this graph
                        db.refresh_graph(g, self.model)
                        state = self._evaluate(db, self._qualify(extra, names))
                        fresh.clear()
                        locked.clear()
                        self.refreshes += 1
                    fail = self._overlay(state, key, fresh, locked)
                    already = bool(_get_bool(n, "_no_task"))
                    if fail is None:
                        v = Verdict(g.name, n.name, True, already=already)
                        if apply:
                            locked.update(mark_notask(g, n))
                            fresh.add(n.name)
                            blk = memory_layout.nopadding_input_block(g, n)
                            if blk is not None:
                                v.facts = {"block": blk.as_dict()}
                                v.facts["block"]["output_bytes"] = sum(
                                    max(memory_layout.tensor_size(d), 0) for d in n.output_desc
                                )
                    else:
                        v = self._rejection(g, n, fail, state["srcs"], gq)
                        v.already = already
                    verdicts.append(v)
            self.timings["decisions"] = time.perf_counter() - t3
            return verdicts
        finally:
            db.close()

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


@register(PASS_NAME, options=(OPT_SINGLE_OP, OPT_DISCONTIGUOUS, OPT_DTYPE_MKN))
def run(model: Model, ctx: PassContext) -> dict:
    """Mark ConcatD/ConcatV2D whose inputs can share one no-padding block as no-task (GE ConcatNotaskPass)."""
    analysis = ConcatNotaskAnalysis(model, ctx.options, engine=ctx.engine)
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
        "fact_refreshes": analysis.refreshes,
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


@register_explainer(PASS_NAME, node_types=TARGET_TYPES)
def explain(
    model: Model, name: str, *, options: dict[str, str] | None = None, anchor: tuple[str, int] | None = None
) -> str:
    """Why concat ``name`` is (or would be) marked no-task or rejected: the verdict, the first failing check in
    GE's order and the facts that decided it. The model is not changed (the pass runs on a copy)."""
    import copy

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

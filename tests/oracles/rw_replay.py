"""ORACLE — the exact Python replay of GE ``HandleMemoryRWConflict`` (``mem_rw_conflict_optimize.cc``, reference §2).

This is the former pipeline implementation of ``rw-conflict`` (until session 2 it derived every RW type in Python).
The pipeline now takes its types, conflict candidates and Identity facts from ``anchorlog/queries/rw_types.dl``
(:mod:`anchorlog.analysis.rw_conflict`); this replay stays here, outside the package, as the independent oracle
the rules and the rule-driven pass are tested against (tests/test_rw_rules_oracle.py). Do not import it from
``anchorlog``.

Original description:

Every input anchor gets an input RW type (kReadOnly / kWriteable / kScopeWriteable) and every output anchor
an output RW type (kReadOnlyConst / kReadOnly / kSoftRead / kWriteable); for each producer -> consumer edge
the decision matrix (§2.7) says whether an Identity must separate them. ``queries/rw_types.dl`` states the
types and the matrix as rules over the fact database; this module runs GE's procedure on the graph (the
order-dependent parts: subgraph marking inner -> outer with its Identity insertions, Identity split/removal,
the "last scope-write consumer may keep the buffer" skip) and reports every decision with its reason.

API for other passes::

    rw = RWTypes.init_rw_conflict_check(model)          # GE InitRWConflictCheck (marks refs, subgraphs)
    rw.would_delete_cause_rw_conflict(src, j, succ, k)  # GE WouldDeleteTensorMoveCauseRWConflict
    rw.is_node_input_writable(node, k)
    would_delete_cause_rw_conflict(model_or_rw, src, j, succ, k)   # module-level convenience
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

# The names, the matrix, the Identity's desc and the report entry are shared with the package: the oracle is
# independent where it matters, in how it derives the types and walks the graph.
from anchorlog.analysis.rw_conflict import (
    DO_NOTHING,
    IN_INVALID,
    IN_RO,
    IN_SW,
    IN_W,
    INSERT_IDENTITY,
    OUT_CONST,
    OUT_INVALID,
    OUT_RO,
    OUT_SOFT,
    OUT_W,
    WRONG_GRAPH,
    Decision,
    conflict_result,
    identity_desc,
)
from anchorlog.analysis.symbols import all_nodes, out_anchor_count
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex, io_names

WHILE_TYPES = frozenset({"While", "_While", "StatelessWhile"})
VAR_LIKE = frozenset({"Variable", "VariableV2", "RefData"})
DATA_TYPES = frozenset({"Data", "RefData", "AippData", "AnnData"})
CONST_TYPES = frozenset({"Const", "Constant", "ConstPlaceHolder"})
IDENTITY_LIKE = frozenset({"Identity", "ReadVariableOp"})
ASSIGN_LIKE = frozenset(
    {"AssignAdd", "Assign", "AssignSub", "AssignAddVariableOp", "AssignSubVariableOp", "AssignVariableOp"}
)
PARENT_NODE_INDEX = "_parent_node_index"


def merge_input_types(types: set[str]) -> str:
    """GE ``GetInputRwTypeInConflict``: the input type of a wrapper seen through its subgraph Data nodes."""
    if IN_INVALID in types or (IN_W in types and IN_SW in types):
        return IN_INVALID
    if IN_SW in types:
        return IN_SW
    if IN_W in types:
        return IN_W
    return IN_RO


def _bool(holder: Any, key: str) -> bool:
    a = holder.attrs.get(key)
    return a is not None and a.kind == "b" and bool(a.value)


def _int_attr(holder: Any, key: str) -> int | None:
    a = holder.attrs.get(key)
    if a is None or a.kind not in ("i", "dt") or isinstance(a.value, bool):
        return None
    return int(a.value)


@dataclass
class RWTypes:
    """GE's RW-type machinery over one model: ref tables, subgraph caches, the type functions (§2.1–2.6)."""

    model: Model
    refs_out2in: dict[str, dict[int, int]] = field(default_factory=dict)
    refs_in2out: dict[str, dict[int, int]] = field(default_factory=dict)
    node_in_types: dict[str, dict[int, str]] = field(default_factory=dict)  # subgraph Data: {0: type}
    node_out_types: dict[str, dict[int, str]] = field(default_factory=dict)  # subgraph NetOutput: {k: type}
    subgraph_inputs: dict[str, dict[int, Node]] = field(default_factory=dict)
    subgraph_netoutput: dict[str, Node] = field(default_factory=dict)
    decisions: list[Decision] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        self.refresh_index()

    # ---------------------------------------------------------------------------------------------- plumbing
    def refresh_index(self) -> None:
        """Re-read graph ownership (after subgraphs were added or nodes renamed)."""
        self.idx = ModelIndex(self.model)
        self._where: dict[str, tuple[Graph, Node]] = {}
        for g in self.model.graphs:
            for n in g.nodes.values():
                self._where.setdefault(n.name, (g, n))

    def locate(self, name: str) -> tuple[Graph, Node] | None:
        hit = self._where.get(name)
        if hit is not None and hit[0].nodes.get(name) is hit[1]:
            return hit
        for g in self.model.graphs:  # inserted since the index was built
            n = g.nodes.get(name)
            if n is not None:
                self._where[name] = (g, n)
                return g, n
        return None

    def graph_of(self, node: Node) -> Graph:
        if node.graph is not None:
            return node.graph
        hit = self.locate(node.name)
        if hit is None:
            raise PassFailure(f"node {node.name} is in no graph")
        return hit[0]

    def parent_of(self, graph: Graph) -> Node | None:
        own = self.idx.owner.get(graph.name)
        return own[1] if own is not None else None

    def parent_graph_of(self, graph: Graph) -> Graph | None:
        own = self.idx.owner.get(graph.name)
        return own[0] if own is not None else None

    def subgraphs(self, node: Node) -> list[Graph]:
        return [self.idx.graph_by_name[s] for s in node.subgraph_names if s and s in self.idx.graph_by_name]

    @staticmethod
    def consumer_edges(graph: Graph, node: Node, out: int) -> list[tuple[str, int]]:
        return graph.consumers(node.name, out)

    # ---------------------------------------------------------------------------------------------- refs
    def reinit(self) -> None:
        self.refs_out2in.clear()
        self.refs_in2out.clear()
        self.node_in_types.clear()
        self.node_out_types.clear()
        self.subgraph_inputs.clear()
        self.subgraph_netoutput.clear()

    def mark_ref_relations(self) -> None:
        """GE ``MarkRefRelations``: same-named input/output pairs are refs; such ops get attr ``reference``."""
        for _g, n in all_nodes(self.model, sort=False):
            ins = io_names(n, "in")
            outs = io_names(n, "out")
            found = False
            for name, i in ins.items():
                o = outs.get(name)
                if o is None:
                    continue
                self.refs_out2in.setdefault(n.name, {})[o] = i
                self.refs_in2out.setdefault(n.name, {})[i] = o
                found = True
            if found:
                n.set_attr("reference", True)

    # ---------------------------------------------------------------------------------------------- outputs
    def parent_input_anchor(self, graph: Graph, data: Node) -> tuple[Graph, Node, int] | None:
        """GE ``GetParentInputAndAnchor``: the producer (graph, node, out) of the parent's input feeding ``data``."""
        parent = self.parent_of(graph)
        pg = self.parent_graph_of(graph)
        p = _int_attr(data, PARENT_NODE_INDEX)
        if parent is None or pg is None or p is None or p >= len(parent.inputs) or parent.inputs[p] is None:
            return None
        src, j = parent.inputs[p]  # type: ignore[misc]
        pn = pg.nodes.get(src)
        return (pg, pn, j) if pn is not None else None

    def single_output_type(self, graph: Graph, node: Node, i: int, _depth: int = 0) -> tuple[str, str]:
        """GE ``GetSingleNodeOutputRWTypeByIndex`` -> (type, rule that decided it)."""
        t = node.type
        if t in VAR_LIKE:
            return OUT_W, "var-like output"
        if t in DATA_TYPES and PARENT_NODE_INDEX not in node.attrs:
            return OUT_W, "root Data output (writeable until torchair uses RefData)"
        if t in DATA_TYPES:
            up = self.parent_input_anchor(graph, node)
            if up is None or _depth > 64:
                return OUT_INVALID, "subgraph Data without parent input"
            pt, why = self.single_output_type(up[0], up[1], up[2], _depth + 1)
            return pt, f"subgraph Data: as {up[1].name}:{up[2]} ({why})"
        if i in self.refs_out2in.get(node.name, {}):
            return OUT_W, f"ref output (output {i} named like input {self.refs_out2in[node.name][i]})"
        if t == "FrameworkOp" and node.attr("original_type") == "RefSwitch":
            return OUT_W, "FrameworkOp RefSwitch"
        if t in CONST_TYPES:
            return OUT_CONST, "constant"
        if i >= out_anchor_count(graph, node):
            return OUT_INVALID, "no such output"
        if len(graph.consumers(node.name, i)) > 1:
            return OUT_RO, "more than one consumer"
        return OUT_SOFT, "at most one consumer"

    def output_type(self, graph: Graph, node: Node, i: int, use_cache: bool = True) -> tuple[str, str]:
        """GE ``GetOutputRWTypeByIndex`` -> (type, reason)."""
        if node.type in WHILE_TYPES:
            return OUT_SOFT, "While output"
        names = [s for s in node.subgraph_names if s]
        if not names:
            return self.single_output_type(graph, node, i)
        if use_cache:
            outs = [self.subgraph_netoutput.get(s) for s in names]
        else:
            outs = []
            for sg in self.subgraphs(node):
                outs.extend(sg.nodes_of_type("NetOutput"))
        t, why = OUT_SOFT, "wrapper with several subgraphs: by fan-out"
        if len(outs) == 1 and outs[0] is not None:
            entry = self.node_out_types.get(outs[0].name)
            if entry is None or i not in entry:
                return OUT_INVALID, f"subgraph NetOutput {outs[0].name} not marked"
            t, why = entry[i], f"subgraph NetOutput {outs[0].name} input {i}"
        if t == OUT_W:
            return OUT_W, why
        if i >= out_anchor_count(graph, node):
            return OUT_INVALID, "no such output"
        if len(graph.consumers(node.name, i)) > 1:
            return OUT_RO, "more than one consumer"
        return t, why

    # ---------------------------------------------------------------------------------------------- inputs
    def single_input_type(self, graph: Graph, node: Node, i: int) -> tuple[str, str]:
        """GE ``GetSingleNodeInputRWTypeByIndex`` -> (type, reason)."""
        if _bool(node, "_input_mutable"):
            return IN_SW, "_input_mutable"
        if node.type in ("PhonyConcat", "PhonySplit"):
            return IN_RO, node.type
        if i in self.refs_in2out.get(node.name, {}):
            return IN_W, f"ref input (input {i} named like output {self.refs_in2out[node.name][i]})"
        if i == 0 and node.type == "FrameworkOp" and node.attr("original_type") == "RefSwitch":
            return IN_W, "FrameworkOp RefSwitch input 0"
        return IN_RO, "reads only"

    def input_type(self, graph: Graph, node: Node, i: int, use_cache: bool = True) -> tuple[str, str]:
        """GE ``GetInputRWTypeByIndex`` -> (type, reason)."""
        if node.type in WHILE_TYPES:
            return IN_SW, "While input"
        if i < len(node.input_desc):
            s = _int_attr(node.input_desc[i], "_special_input_size")
            if s is not None and s > 0:
                return IN_SW, "_special_input_size > 0"
        names = [s for s in node.subgraph_names if s]
        if not names:
            return self.single_input_type(graph, node, i)
        datas: list[Node] = []
        if use_cache:
            for s in names:
                d = self.subgraph_inputs.get(s, {}).get(i)
                if d is not None:
                    datas.append(d)
        else:
            for sg in self.subgraphs(node):
                d = next(
                    (n for n in sg.nodes.values() if n.type == "Data" and _int_attr(n, PARENT_NODE_INDEX) == i), None
                )
                if d is not None:
                    datas.append(d)
        types: set[str] = set()
        for d in datas:
            entry = self.node_in_types.get(d.name)
            if entry is None or 0 not in entry:
                return IN_INVALID, f"subgraph Data {d.name} not marked"
            types.add(entry[0])
        t = merge_input_types(types)
        return t, "subgraph Data " + ",".join(d.name for d in datas) if datas else "no subgraph Data"

    def input_type_of(self, name: str, i: int, use_cache: bool = True) -> str:
        hit = self.locate(name)
        return IN_INVALID if hit is None else self.input_type(hit[0], hit[1], i, use_cache)[0]

    def output_type_of(self, name: str, i: int, use_cache: bool = True) -> str:
        hit = self.locate(name)
        return OUT_INVALID if hit is None else self.output_type(hit[0], hit[1], i, use_cache)[0]

    # ---------------------------------------------------------------------------------------------- subgraphs
    def mark_all_subgraphs(self) -> None:
        """GE ``MarkRWTypeForAllSubgraph``: subgraphs in reverse registration order (inner before outer),
        skipping those owned by a While; may insert Identities in front of subgraph NetOutputs."""
        for sg in reversed(self.model.graphs[1:]):
            parent = self.parent_of(sg)
            if parent is None or parent.type in WHILE_TYPES:
                continue
            self.mark_subgraph(sg, parent)

    def mark_subgraph(self, sg: Graph, parent: Node) -> None:
        if sg.name in self.subgraph_inputs or sg.name in self.subgraph_netoutput:
            raise PassFailure(f"subgraph {sg.name} marked twice", sg.name)
        self.subgraph_inputs[sg.name] = {}
        for n in list(sg.nodes.values()):
            if n.type == "Data":
                types = {
                    self.input_type(sg, *self._consumer(sg, c), use_cache=False)[0] for c in sg.consumers(n.name, 0)
                }
                self.node_in_types[n.name] = {0: merge_input_types(types)}
                p = _int_attr(n, PARENT_NODE_INDEX)
                if p is None:
                    raise PassFailure(f"subgraph Data {n.name} has no {PARENT_NODE_INDEX}", sg.name)
                if p in self.subgraph_inputs[sg.name]:
                    raise PassFailure(f"subgraph {sg.name}: two Data nodes for parent input {p}", sg.name)
                self.subgraph_inputs[sg.name][p] = n
            elif n.type == "NetOutput":
                self.mark_subgraph_output(sg, n, parent)
                self.subgraph_netoutput[sg.name] = n

    @staticmethod
    def _consumer(sg: Graph, c: tuple[str, int]) -> tuple[Node, int]:
        return sg.nodes[c[0]], c[1]

    def mark_subgraph_output(self, sg: Graph, net: Node, parent: Node) -> None:
        entry = self.node_out_types.setdefault(net.name, {})
        for k, src in enumerate(list(net.inputs)):
            pidx = _int_attr(net.input_desc[k], PARENT_NODE_INDEX) if k < len(net.input_desc) else None
            if pidx is None:
                raise PassFailure(f"subgraph NetOutput {net.name} input {k} has no {PARENT_NODE_INDEX}", sg.name)
            if src is None:
                raise PassFailure(f"subgraph NetOutput {net.name} input {k} is unconnected", sg.name)
            p = sg.nodes[src[0]]
            t, why = self.output_type(sg, p, src[1], use_cache=False)
            if t == OUT_W and not self.judge_optimizable_by_parent(parent, pidx):
                ident = self.insert_after(sg, p, src[1], net, k)
                self.decisions.append(
                    Decision(
                        "insert_identity",
                        sg.name,
                        p.name,
                        src[1],
                        net.name,
                        k,
                        t,
                        "",
                        INSERT_IDENTITY,
                        f"writeable subgraph output ({why}) the parent {parent.name} cannot pass through "
                        f"(JudgeOptimizableByParentNode false for output {pidx})",
                        ident,
                    )
                )
                t = OUT_SOFT
            entry[k] = t

    def judge_optimizable_by_parent(self, parent: Node, pidx: int) -> bool:
        """GE ``JudgeOptimizableByParentNode`` (NetOutput inputs looked up positionally, as GE does)."""
        pg = self.graph_of(parent)
        if parent.type == "PartitionedCall" or pidx >= out_anchor_count(pg, parent):
            return True
        sgs = self.subgraphs(parent)
        if len([s for s in parent.subgraph_names if s]) > 1:
            for sg in sgs:
                nets = sg.nodes_of_type("NetOutput")
                if not nets or pidx >= len(nets[0].inputs) or nets[0].inputs[pidx] is None:
                    break  # GE: a null along the lookup ends the helper; the consumer loop still runs
                q, m = nets[0].inputs[pidx]  # type: ignore[misc]
                if self.output_type(sg, sg.nodes[q], m, use_cache=False)[0] == OUT_RO:
                    return False
        for c, k in pg.consumers(parent.name, pidx):
            cn = pg.nodes[c]
            if any(cn.subgraph_names):
                return False
            if self.single_input_type(pg, cn, k)[0] != IN_RO:
                return False
        return True

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
        ident = graph.nodes[name]
        label = src.attr("_batch_label")
        if label:
            ident.set_attr("_batch_label", label)
        self._where[name] = (graph, ident)
        return name

    def insert_before(self, graph: Graph, dst: Node, k: int, src: Node, j: int) -> str:
        """Identity in front of ``dst:k`` (GE InsertNodeBefore: ``dst``'s in-control edges move to it), desc from
        ``src:j``."""
        from anchorlog.runtime.rewrite import insert_identity_before

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

        name = insert_identity_after(
            graph,
            (src.name, j),
            [(dst.name, k)],
            name=self.new_identity_name(src.name),
            desc=identity_desc(src, j),
            attrs=self._IDENTITY_NAMES,
        )
        return self._finish_identity(graph, name, src)

    def init(self) -> None:
        """GE ``InitRWConflictCheck``: reset, mark refs, mark subgraphs when there are any."""
        self.reinit()
        self.mark_ref_relations()
        if len(self.model.graphs) > 1:
            self.mark_all_subgraphs()

    @classmethod
    def init_rw_conflict_check(cls, model: Model) -> RWTypes:
        rw = cls(model)
        rw.init()
        return rw

    # ---------------------------------------------------------------------------------------------- external API
    def would_delete_cause_rw_conflict(self, src: str, src_out: int, succ: str, succ_in: int) -> bool:
        """GE ``WouldDeleteTensorMoveCauseRWConflict``: would ``src:src_out`` feeding ``succ:succ_in`` directly
        (the TensorMove between them deleted) need an Identity? Unknown nodes -> True (conservative). The output
        type is evaluated on the current graph, where ``src`` still feeds the TensorMove."""
        a, b = self.locate(src), self.locate(succ)
        if a is None or b is None:
            return True
        out_t = self.output_type(a[0], a[1], src_out, use_cache=True)[0]
        in_t = self.input_type(b[0], b[1], succ_in, use_cache=True)[0]
        return conflict_result(out_t, in_t) != DO_NOTHING

    def is_node_input_writable(self, node: str, i: int) -> bool:
        """GE ``IsNodeInputWritable``: input type kWriteable or kScopeWriteable (unknown node -> False)."""
        hit = self.locate(node)
        if hit is None:
            return False
        return self.input_type(hit[0], hit[1], i, use_cache=True)[0] in (IN_W, IN_SW)


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
def _is_subgraph_io_node(rw: RWTypes, graph: Graph, node: Node) -> bool:
    """GE's local IsSubgraphInputNode / IsSubgraphOutputNode: a Data / NetOutput of a graph with a parent."""
    return node.type in ("Data", "NetOutput") and rw.parent_of(graph) is not None


def _identity_near_subgraph(rw: RWTypes, graph: Graph, ident: Node) -> bool:
    """GE ``CheckIdentityIsNearSubgraph``."""
    for a in ident.inputs:
        if a is None or a[0] not in graph.nodes:
            continue
        p = graph.nodes[a[0]]
        if _is_subgraph_io_node(rw, graph, p) and p.type == "Data" or any(p.subgraph_names):
            return True
    for o in range(out_anchor_count(graph, ident)):
        for c, _k in graph.consumers(ident.name, o):
            cn = graph.nodes[c]
            if _is_subgraph_io_node(rw, graph, cn) and cn.type == "NetOutput" or any(cn.subgraph_names):
                return True
    return False


def _identity_useful_for_rw_control(graph: Graph, ident: Node) -> bool:
    """GE ``NodeUtils::IsIdentityUsefulForRWControl``: an Identity that orders a read of a variable before an
    Assign to it (its control successor also consumes the variable directly)."""
    if ident.type not in IDENTITY_LIKE:
        return False
    ctrl_out = graph.ctrl_successors(ident.name)
    producers = [a for a in ident.inputs if a is not None]
    consumers = [c for o in range(out_anchor_count(graph, ident)) for c in graph.consumers(ident.name, o)]
    if not ctrl_out or len(producers) != 1 or not consumers:
        return False
    src, j = producers[0]
    if graph.nodes[src].type not in VAR_LIKE:
        return False
    direct = {c for c, _k in graph.consumers(src, j)}
    return any(c in direct and graph.nodes[c].type in ASSIGN_LIKE for c in ctrl_out)


def split_identity(rw: RWTypes, graph: Graph, ident: Node) -> None:
    """GE ``SplitIdentity``: a multi-consumer Identity keeps (as a new Identity each) only its writing consumers;
    readers are fed by the Identity's producer directly (control edges copied)."""
    from anchorlog.runtime.rewrite import bypass_for_consumer, isolate_and_delete

    cons = graph.consumers(ident.name, 0)
    if len(cons) <= 1 or not ident.inputs or ident.inputs[0] is None:
        return
    src, j = ident.inputs[0]
    pre = graph.nodes[src]
    for c, k in cons:
        cn = graph.nodes[c]
        t, why = rw.input_type(graph, cn, k, use_cache=True)
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
        isolate_and_delete(graph, ident.name, {})
        rw.decisions.append(Decision("remove_identity", graph.name, src, j, ident.name, 0, rule="split left it unused"))


def remove_no_use_identity(rw: RWTypes, graph: Graph, ident: Node) -> None:
    """GE ``RemoveNoUseIdentity``: drop an Identity that separates nothing the matrix cares about."""
    from anchorlog.runtime.rewrite import isolate_and_delete

    producers = [a for a in ident.inputs if a is not None]
    cons = [c for o in range(out_anchor_count(graph, ident)) for c in graph.consumers(ident.name, o)]
    if not producers or len(cons) > 1:
        return
    if len(cons) == 1 and graph.nodes[cons[0][0]].type == "StreamMerge":
        return
    if _identity_near_subgraph(rw, graph, ident) or _identity_useful_for_rw_control(graph, ident):
        return
    if not ident.inputs or ident.inputs[0] is None:
        return
    src, j = ident.inputs[0]
    pre = graph.nodes[src]
    out_t, _ = rw.output_type(graph, pre, j, use_cache=True)
    in_t, result = "", DO_NOTHING
    if cons:
        c, k = graph.consumers(ident.name, 0)[0] if graph.consumers(ident.name, 0) else cons[0]
        in_t, _ = rw.input_type(graph, graph.nodes[c], k, use_cache=True)
        result = conflict_result(out_t, in_t)
    if result != DO_NOTHING:
        return
    dst = cons[0] if cons else ("", -1)
    isolate_and_delete(graph, ident.name, {0: 0})
    rw.decisions.append(
        Decision(
            "remove_identity",
            graph.name,
            src,
            j,
            dst[0],
            dst[1],
            out_t,
            in_t,
            result,
            f"Identity {ident.name} separates nothing: {out_t} -> {in_t or 'no consumer'} is {result}",
        )
    )


def need_check_skip_identity(rw: RWTypes, graph: Graph, node: Node, out: int, out_t: str) -> bool:
    """GE ``NeedCheckSkipIdentiy``: may the last scope-write edge of this output keep the original buffer?"""
    if out_t == OUT_RO:
        return True
    if out_t != OUT_W:
        return False
    cur, cur_out = node, out
    for _ in range(10_000):
        if len(graph.consumers(cur.name, cur_out)) > 1:
            return False
        if cur.type in DATA_TYPES:
            return PARENT_NODE_INDEX not in cur.attrs
        refs = rw.refs_out2in.get(cur.name)
        if refs is None or cur_out not in refs:
            return True
        k = refs[cur_out]
        up = cur.inputs[k] if k < len(cur.inputs) else None
        if up is None or up[0] not in graph.nodes:
            return False
        cur, cur_out = graph.nodes[up[0]], up[1]
    return False


def _plain_reader(rw: RWTypes, graph: Graph, c: str, k: int) -> bool:
    """Cheap sufficient test that ``c:k`` is a kReadOnly input (no subgraphs, not While, no special size,
    not input-mutable, not a ref input, not RefSwitch input 0) without building a reason string."""
    n = graph.nodes.get(c)
    if n is None or n.subgraph_names or n.type in WHILE_TYPES or n.type == "FrameworkOp":
        return False
    if "_input_mutable" in n.attrs or k in rw.refs_in2out.get(c, ()):
        return False
    return not (k < len(n.input_desc) and "_special_input_size" in n.input_desc[k].attrs)


def insert_identity_as_needed(rw: RWTypes, graph: Graph, node: Node) -> None:
    """GE ``InsertIdentityAsNeeded``: per output, per consumer edge, the matrix decides; when every edge of an
    output goes to scope-writable inputs of one node the last one keeps the original buffer."""
    outs = range(out_anchor_count(graph, node))
    if not any(graph.consumers(node.name, o) for o in outs):
        return
    for o in outs:
        peers = graph.consumers(node.name, o)
        if not peers:
            continue
        # fast path: an output read only through read-only inputs needs nothing (every matrix cell with a
        # kReadOnly input is DO_NOTHING), so its output type need not be derived
        if all(_plain_reader(rw, graph, c, k) for c, k in peers):
            continue
        out_t, out_why = rw.output_type(graph, node, o, use_cache=True)
        skip = need_check_skip_identity(rw, graph, node, o, out_t)
        linked: str | None = None
        for pos, (c, k) in enumerate(peers):
            cn = graph.nodes.get(c)
            if cn is None:
                continue
            if _bool(cn, "_skip_rw_conflict"):
                rw.decisions.append(
                    Decision("skip", graph.name, node.name, o, c, k, out_t, "", "", "_skip_rw_conflict on consumer")
                )
                continue
            in_t, in_why = rw.input_type(graph, cn, k, use_cache=True)
            result = conflict_result(out_t, in_t)
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


def handle_memory_rw_conflict(model: Model) -> RWTypes:
    """GE ``GraphOptimize::HandleMemoryRWConflict`` on ``model`` (mutates it); returns the state with every
    decision in ``.decisions``. Raises :class:`PassFailure` where GE's pass returns an error."""
    rw = RWTypes(model)
    rw.reinit()
    rw.mark_ref_relations()
    rw.mark_all_subgraphs()
    for graph, node in all_nodes(model, sort=False):
        if graph.nodes.get(node.name) is not node:
            continue  # removed by an earlier Identity split/removal
        parent = rw.parent_of(graph)
        if parent is not None and parent.type in WHILE_TYPES:
            continue
        if _is_subgraph_io_node(rw, graph, node):
            continue
        if _bool(node, "_cannot_be_deleted"):
            continue
        if node.type in ("Identity", "ReadVariableOp"):
            split_identity(rw, graph, node)
            if graph.nodes.get(node.name) is node:
                remove_no_use_identity(rw, graph, node)
        if graph.nodes.get(node.name) is node:
            insert_identity_as_needed(rw, graph, node)
    return rw

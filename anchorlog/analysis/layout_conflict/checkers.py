"""Pair checking (reference §4.3) and GE's registered checkers (§4.4).

The registry maps an unordered attribute pair to one small function; registering a pair fills both orders,
so a new attribute family means one new :func:`register` line and one function. A checker marks anchors
that need an Identity in ``ctx.result``; it resolves the roles of the two anchors by attribute membership
(as GE does), never by position unless GE does so too (``CONT_IN x CONT_OUT`` marks ``node_a``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Node
from anchorlog.facts.relations import ModelIndex, ref_from_input

from ._ge import ASSIGN_LIKE_TYPES, DATA_TYPES, PHYSICAL_ADDR_TYPES, VAR_LIKE_TYPES, memory_type_special, n_in, n_out
from .attributes import (
    CONT_IN,
    CONT_OUT,
    IMMUT_OUT,
    NOPAD_IN,
    NOPAD_OUT,
    NORMAL_IN,
    NORMAL_OUT,
    REF_OUT,
    RTS_IN,
    RTS_OUT,
    UNSUP_IN,
    UNSUP_OUT,
    USER_IN,
    USER_OUT,
    AnchorAttribute,
    GraphInfo,
    Marks,
    anchor_mem_type,
    is_continuous_input,
    is_continuous_output,
    is_nopadding_continuous_input,
    is_nopadding_continuous_output,
)
from .refmap import AnchorRef
from .tables import ABSOLUTE_CONFLICT, ABSOLUTE_NO_CONFLICT


@dataclass
class Finding:
    """Why an anchor was marked: the rule (checker or table row) and the anchor pair that triggered it."""

    rule: str
    pair: tuple[str, str]
    attrs: tuple[list[str], list[str]]

    def as_dict(self) -> dict[str, Any]:
        return {"rule": self.rule, "pair": list(self.pair), "pair_attrs": [list(x) for x in self.attrs]}


@dataclass
class CheckContext:
    """GE's ``CheckFuncContext`` for one anchor pair of one symbol."""

    a: AnchorRef
    b: AnchorRef
    ta: list[AnchorAttribute]
    tb: list[AnchorAttribute]
    anchors: list[AnchorRef]
    info: GraphInfo
    index: ModelIndex
    result: dict[AnchorRef, Finding]
    rule: str = ""

    def mark(self, anchor: AnchorRef) -> None:
        if anchor not in self.result:
            self.result[anchor] = Finding(
                self.rule, (self.a.name, self.b.name), ([str(t) for t in self.ta], [str(t) for t in self.tb])
            )

    def side(self, attr: AnchorAttribute) -> tuple[AnchorRef, AnchorRef]:
        """(the anchor carrying ``attr``, the other one): ``b`` when ``b`` has it, else ``a`` (GE's rule)."""
        return (self.b, self.a) if attr in self.tb else (self.a, self.b)

    def has(self, anchor: AnchorRef, *attrs: AnchorAttribute) -> bool:
        types = self.ta if anchor is self.a else self.tb
        return any(t in types for t in attrs)

    @property
    def phys(self) -> bool:
        """``HasNotSupportPhysicalMemoryRefreshNode``."""
        return self.info.is_physical_memory_refreshable and (
            self.a.node.type in PHYSICAL_ADDR_TYPES or self.b.node.type in PHYSICAL_ADDR_TYPES
        )


CheckerFn = Callable[[CheckContext], None]


@dataclass
class Checker:
    name: str
    fn: CheckerFn
    as_symbol: bool = False  # GE's CallAsSymbol(): called once per symbol for this attribute pair
    pairs: list[tuple[AnchorAttribute, AnchorAttribute]] = field(default_factory=list)
    # A graph-level condition without which the checker marks nothing (None: it may mark on any graph): the pass
    # does not walk the pairs only such a checker could act on (rules.run_layout_rules, layout_dead_checker).
    can_mark: Callable[[GraphInfo], bool] | None = None


REGISTRY: dict[tuple[int, int], Checker] = {}
CHECKERS: dict[str, list[Checker]] = {}  # GE source file -> its registrations


def register(
    x: AnchorAttribute,
    y: AnchorAttribute,
    fn: CheckerFn,
    name: str,
    as_symbol: bool = False,
    can_mark: Callable[[GraphInfo], bool] | None = None,
) -> None:
    """``REGISTER_FUNC(x, y, fn)`` (symmetric). ``name`` is GE's checker source file; one file may register
    several pairs, with one function or several. ``can_mark``: see :attr:`Checker.can_mark`."""
    if (x, y) in REGISTRY or (x, y) in ABSOLUTE_CONFLICT or (x, y) in ABSOLUTE_NO_CONFLICT:
        raise ValueError(f"pair {x.name} x {y.name} registered twice")
    chk = Checker(name, fn, as_symbol, [(x, y)], can_mark)
    CHECKERS.setdefault(name, []).append(chk)
    REGISTRY[(x, y)] = REGISTRY[(y, x)] = chk


def dead_checkers(info: GraphInfo) -> set[str]:
    """The names of the registered checkers that cannot mark anything on a graph with ``info`` (their
    ``can_mark`` fails)."""
    return {c.name for chks in CHECKERS.values() for c in chks if c.can_mark is not None and not c.can_mark(info)}


# ---------------------------------------------------------------------------------------------------------
# Helpers shared by checkers
# ---------------------------------------------------------------------------------------------------------
def producer(node: Node, k: int) -> AnchorRef | None:
    src = node.inputs[k] if k < len(node.inputs) else None
    if src is None or node.graph is None or src[0] not in node.graph.nodes:
        return None
    return AnchorRef(node.graph.nodes[src[0]], "out", src[1])


def consumers(a: AnchorRef) -> list[AnchorRef]:
    g = a.node.graph
    if g is None:
        return []
    return [AnchorRef(g.nodes[d], "in", k) for d, k in g.consumers(a.node.name, a.idx)]


def all_in_peers(node: Node) -> list[AnchorRef]:
    """``GetAllInAnchorsPeer``: producers of the connected inputs, in input order."""
    return [p for k in range(n_in(node)) if (p := producer(node, k)) is not None]


def real_out(a: AnchorRef, index: ModelIndex) -> AnchorRef:
    """``GetRealOutAnchor``: follow output-reuses-input links back to the real producer."""
    seen = {a}
    while a.node.graph is not None:
        k = ref_from_input(index, a.node.graph, a.node, a.idx)
        p = producer(a.node, k) if k is not None else None
        if p is None or p in seen:
            break
        seen.add(p)
        a = p
    return a


def all_real_in_peers(node: Node, index: ModelIndex) -> list[AnchorRef]:
    """``GetAllRealInPeer``."""
    return [real_out(p, index) for p in all_in_peers(node)]


def all_real_inputs_same_out_anchor(node: Node, index: ModelIndex) -> bool:
    """``AllRealInputsAreTheSameOutAnchor``."""
    peers = all_real_in_peers(node, index)
    return bool(peers) and all(p == peers[0] for p in peers)


def is_node_out_ref_from_input(x: AnchorRef, anchors: list[AnchorRef]) -> bool:
    """``IsNodeOutRefFromInput``: an out-anchor of ``x``'s node shares the symbol."""
    return any(not y.is_in and y.node is x.node for y in anchors)


def get_ref_input(out_x: AnchorRef, anchors: list[AnchorRef]) -> AnchorRef | None:
    """``GetRefInput``: the first in-anchor of ``out_x``'s node in the symbol."""
    return next((y for y in anchors if y.is_in and y.node is out_x.node), None)


def topo_id(x: AnchorRef) -> int:
    return x.node.id if x.node.id is not None else -1


def first_same_index(lh: list[AnchorRef], rh: list[AnchorRef]) -> tuple[int | None, int | None]:
    for i, x in enumerate(lh):
        for j, y in enumerate(rh):
            if x == y:
                return i, j
    return None, None


def is_sub_vector(vec: list[AnchorRef], sub: list[AnchorRef]) -> bool:
    """``IsSubVector``: ``sub`` appears contiguously in ``vec`` from the first element of ``vec`` in ``sub``."""
    j = first_same_index(vec, sub)[0]
    if j is None:
        return len(sub) == 0
    i = 0
    while i < len(sub) and j < len(vec):
        if sub[i] != vec[j]:
            return False
        i += 1
        j += 1
    return i == len(sub)


def is_same_or_partial_same(lh: list[AnchorRef], rh: list[AnchorRef]) -> bool:
    """``IsSameOrPartialSame`` (no common element counts as a conflict, reference §11.19)."""
    i, j = first_same_index(lh, rh)
    if i is None or j is None:
        return False
    if i != 0 and j != 0:
        return False
    while j < len(rh) and i < len(lh):
        if rh[j] != lh[i]:
            return False
        i += 1
        j += 1
    if i != len(lh) and j != len(rh):
        return False
    if any(x in rh for x in lh[i:]):
        return False
    return not any(y in lh for y in rh[j:])


def nopadding_nodes_conflict(a: Node, b: Node) -> bool:
    """``IsNoPaddingContinuousNodeConflict`` over the plain producer lists of the two nodes."""
    pa, pb = all_in_peers(a), all_in_peers(b)
    if first_same_index(pa, pb)[0] is None:
        return False
    return not (is_sub_vector(pa, pb) or is_sub_vector(pb, pa))


def assign_var_insert_identity(ctx: CheckContext, var_type: AnchorAttribute) -> bool:
    """``AssignVarInsertIdentity``: var/RefData -> Assign -> ref node: put the Identity between the Assign and
    the ref node (on the ref node's inputs in the symbol fed by an assign-like op). True when it marked."""
    ref_node = ctx.a if var_type in ctx.tb else ctx.b
    done = False
    for y in ctx.anchors:
        if y.is_in and y.node is ref_node.node:
            p = producer(y.node, y.idx)
            if p is not None and p.node.type in ASSIGN_LIKE_TYPES:
                ctx.mark(y)
                done = True
    return done


def absolute_conflict(ctx: CheckContext) -> None:
    """``AbsoluteConflict``: the in-anchor side gets the Identity."""
    a, b = ctx.a, ctx.b
    if a.is_in and b.is_in:
        pick = a if topo_id(a) < topo_id(b) and not is_node_out_ref_from_input(a, ctx.anchors) else b
        ctx.mark(pick)
    elif a.is_in:
        ctx.mark(a)
    elif b.is_in:
        ctx.mark(b)
    else:
        raise PassFailure(f"absolute conflict between two outputs {a.name} and {b.name}", a.node.name)


# ---------------------------------------------------------------------------------------------------------
# The 22 checkers (one function per GE source file)
# ---------------------------------------------------------------------------------------------------------
def _mark_multi_continuous_consumers(ctx: CheckContext, is_cont: Callable[[Node], bool]) -> None:
    # Every out-anchor of the symbol: from its 2nd continuous-input consumer on, mark every consumer
    # (continuous or not, reference §11.17).
    for out in [y for y in ctx.anchors if not y.is_in]:
        count = 0
        for c in consumers(out):
            if is_cont(c.node):
                count += 1
            if count > 1:
                ctx.mark(c)


def _any_continuous_input(n: Node) -> bool:
    return is_continuous_input(n) or is_nopadding_continuous_input(n)


def continuous_input_and_continuous_input(ctx: CheckContext) -> None:
    _mark_multi_continuous_consumers(ctx, _any_continuous_input)
    # Cascaded continuous-input nodes of the symbol: the downstream one's input gets the Identity.
    nodes = {id(y.node): y.node for y in ctx.anchors if _any_continuous_input(y.node)}
    for n in nodes.values():
        for i in range(n_out(n)):
            for c in consumers(AnchorRef(n, "out", i)):
                if id(c.node) in nodes:
                    ctx.mark(c)


def continuous_output_and_continuous_input(ctx: CheckContext) -> None:
    cont_out, cont_in = (ctx.b, ctx.a) if CONT_IN in ctx.ta else (ctx.a, ctx.b)
    outs = [AnchorRef(cont_out.node, "out", i) for i in range(n_out(cont_out.node))]
    if not is_same_or_partial_same(outs, all_real_in_peers(cont_in.node, ctx.index)):
        ctx.mark(ctx.a)


def _cascaded_continuous_outputs(ctx: CheckContext, is_cont: Callable[[Node], bool]) -> None:
    nodes = {id(y.node): y.node for y in ctx.anchors if is_cont(y.node)}
    for n in nodes.values():
        for k in range(n_in(n)):
            p = producer(n, k)
            if p is None:
                raise PassFailure(f"continuous-output node {n.name} input {k} is not connected", n.name)
            if id(p.node) in nodes:
                ctx.mark(p)


def continuous_out_and_continuous_out(ctx: CheckContext) -> None:
    _cascaded_continuous_outputs(ctx, lambda n: is_continuous_output(n) or is_nopadding_continuous_output(n))


def nopadding_continuous_out_and_nopadding_continuous_out(ctx: CheckContext) -> None:
    _cascaded_continuous_outputs(ctx, is_nopadding_continuous_output)


def nopadding_continuous_input_and_nopadding_continuous_input(ctx: CheckContext) -> None:
    if nopadding_nodes_conflict(ctx.a.node, ctx.b.node):
        _mark_multi_continuous_consumers(ctx, is_nopadding_continuous_input)


def nopadding_continuous_input_and_nopadding_continuous_out(ctx: CheckContext) -> None:
    cont_in, cont_out = ctx.side(NOPAD_IN)
    # PhonyConcat -> PhonySplit: the split's input 0 is the concat's output 0, nothing to do.
    if n_in(cont_out.node) > 0 and producer(cont_out.node, 0) == AnchorRef(cont_in.node, "out", 0):
        return
    ctx.mark(cont_in)


def immutable_out_and_continuous_out(ctx: CheckContext) -> None:
    if assign_var_insert_identity(ctx, IMMUT_OUT):
        return
    ref_out = ctx.b if IMMUT_OUT in ctx.ta else ctx.a
    ref_in = get_ref_input(ref_out, ctx.anchors)
    if ref_in is None:
        raise PassFailure(
            f"{ref_out.name} shares the memory of an immutable output but references no input", ref_out.node.name
        )
    ctx.mark(ref_in)


def immutable_out_and_nopadding_continuous_in(ctx: CheckContext) -> None:
    cont, _ = ctx.side(NOPAD_IN)
    if all_real_inputs_same_out_anchor(cont.node, ctx.index):
        return
    ctx.mark(cont)


def immutable_out_and_rts_special_out(ctx: CheckContext) -> None:
    if assign_var_insert_identity(ctx, IMMUT_OUT):
        return
    immut, _ = ctx.side(IMMUT_OUT)
    ctx.mark(AnchorRef(immut.node, "out", immut.idx))


def continuous_in_out_and_rts_special_mem_in_out(ctx: CheckContext) -> None:
    if RTS_IN in ctx.ta or RTS_OUT in ctx.ta:
        cont, special = ctx.b, ctx.a
    else:
        cont, special = ctx.a, ctx.b
    if memory_type_special(anchor_mem_type(cont)):
        return
    if cont.is_in and is_node_out_ref_from_input(cont, ctx.anchors):
        ctx.mark(special)
    else:
        ctx.mark(cont)


def rts_special_in_and_rts_special_in(ctx: CheckContext) -> None:
    if anchor_mem_type(ctx.a) == anchor_mem_type(ctx.b):
        return
    a, b = ctx.a, ctx.b
    ctx.mark(a if topo_id(a) < topo_id(b) and not is_node_out_ref_from_input(a, ctx.anchors) else b)


def rts_special_in_and_rts_special_out(ctx: CheckContext) -> None:
    if anchor_mem_type(ctx.a) == anchor_mem_type(ctx.b):
        return
    ctx.mark(ctx.b if ctx.a.is_in else ctx.a)


def rts_special_out_and_rts_special_out(ctx: CheckContext) -> None:
    if anchor_mem_type(ctx.a) == anchor_mem_type(ctx.b):
        return
    ctx.mark(ctx.a if topo_id(ctx.a) < topo_id(ctx.b) else ctx.b)


def refresh_possible(info: GraphInfo) -> bool:
    """What the unrefresh checkers need before anything else: a refreshable feature map, or refreshable physical
    memory (``CheckContext.phys`` is false without it, whatever the nodes)."""
    return info.is_feature_map_refreshable or info.is_physical_memory_refreshable


def unrefresh_in(ctx: CheckContext) -> None:
    if not ctx.info.is_feature_map_refreshable and not ctx.phys:
        return
    ctx.mark(ctx.side(UNSUP_IN)[0])


def unrefresh_out(ctx: CheckContext) -> None:
    if not ctx.info.is_feature_map_refreshable and not ctx.phys:
        return
    ctx.mark(ctx.side(UNSUP_OUT)[0])


def _user_in_side(ctx: CheckContext) -> AnchorRef:
    return ctx.b if ctx.b.node.type in DATA_TYPES else ctx.a


def user_in_and_continuous_in_out(ctx: CheckContext) -> None:
    if assign_var_insert_identity(ctx, USER_IN):
        return
    data = _user_in_side(ctx)
    ctx.mark(AnchorRef(data.node, "out", data.idx))


def user_in_and_nopadding_continuous_out(ctx: CheckContext) -> None:
    if ctx.info.is_support_user_input_nopadding_continuous_output:
        return
    user_in_and_continuous_in_out(ctx)


def user_in_and_nopadding_continuous_in(ctx: CheckContext) -> None:
    pc, _ = ctx.side(NOPAD_IN)
    if all_real_inputs_same_out_anchor(pc.node, ctx.index):
        return
    user_in_and_continuous_in_out(ctx)


def user_in_and_rts_special_out(ctx: CheckContext) -> None:
    if assign_var_insert_identity(ctx, USER_IN):
        return
    data, _ = ctx.side(USER_IN)
    ctx.mark(AnchorRef(data.node, "out", data.idx))


def user_in_and_unrefresh_out(ctx: CheckContext) -> None:
    if assign_var_insert_identity(ctx, USER_IN):
        return
    unsup, data = ctx.side(UNSUP_OUT)
    if ctx.info.is_feature_map_refreshable or ctx.phys:
        ctx.mark(AnchorRef(unsup.node, "out", unsup.idx))
    else:
        ctx.mark(AnchorRef(data.node, "out", data.idx))


def user_out_and_continuous_input(ctx: CheckContext) -> None:
    net, cont = ctx.side(USER_OUT)
    p = producer(net.node, net.idx) if net.is_in else None
    if p is not None and p.node is cont.node:
        return
    ctx.mark(net)


def user_out_and_immutable_out(ctx: CheckContext) -> None:
    if not ctx.info.is_root_graph_static:
        return
    out = ctx.a if not ctx.a.is_in else ctx.b
    if out.node.type in VAR_LIKE_TYPES:
        return
    ctx.mark(ctx.a if ctx.a.is_in else ctx.b)


def user_out_and_unrefresh_in(ctx: CheckContext) -> None:
    unsup, net = ctx.side(UNSUP_IN)
    ctx.mark(unsup if ctx.info.is_feature_map_refreshable or ctx.phys else net)


def user_out_and_unrefresh_out(ctx: CheckContext) -> None:
    unsup, net = ctx.side(UNSUP_OUT)
    ctx.mark(unsup if ctx.info.is_feature_map_refreshable or ctx.phys else net)


# Registrations: (pair, function, GE file name, as-symbol). 22 files, 55 unordered pairs.
for _x, _y in ((CONT_IN, CONT_IN), (CONT_IN, NOPAD_IN)):
    register(_x, _y, continuous_input_and_continuous_input, "continuous_input_and_continuous_input", True)
register(CONT_IN, CONT_OUT, continuous_output_and_continuous_input, "continuous_output_and_continuous_input")
for _x, _y in ((CONT_OUT, CONT_OUT), (CONT_OUT, NOPAD_OUT)):
    register(_x, _y, continuous_out_and_continuous_out, "continuous_out_and_continuous_out", True)
register(
    NOPAD_OUT,
    NOPAD_OUT,
    nopadding_continuous_out_and_nopadding_continuous_out,
    "nopadding_continuous_out_and_nopadding_continuous_out",
    True,
)
register(
    NOPAD_IN,
    NOPAD_IN,
    nopadding_continuous_input_and_nopadding_continuous_input,
    "nopadding_continuous_input_and_nopadding_continuous_input",
    True,
)
register(
    NOPAD_IN,
    NOPAD_OUT,
    nopadding_continuous_input_and_nopadding_continuous_out,
    "nopadding_continuous_input_and_nopadding_continuous_out",
)
for _y in (CONT_OUT, NOPAD_OUT):
    register(IMMUT_OUT, _y, immutable_out_and_continuous_out, "immutable_out_and_continuous_out_checker")
register(
    IMMUT_OUT, NOPAD_IN, immutable_out_and_nopadding_continuous_in, "immutable_out_and_nopadding_continuous_in_checker"
)
register(IMMUT_OUT, RTS_OUT, immutable_out_and_rts_special_out, "immutable_out_and_rts_specail_out_checker")
for _x in (CONT_IN, CONT_OUT, NOPAD_IN, NOPAD_OUT):
    for _y in (RTS_IN, RTS_OUT):
        register(_x, _y, continuous_in_out_and_rts_special_mem_in_out, "continuous_in_out_and_rts_special_mem_in_out")
register(RTS_IN, RTS_IN, rts_special_in_and_rts_special_in, "rts_special_in_and_rts_special_in_checker")
register(RTS_IN, RTS_OUT, rts_special_in_and_rts_special_out, "rts_special_in_and_rts_special_out_checker")
register(RTS_OUT, RTS_OUT, rts_special_out_and_rts_special_out, "rts_special_out_and_rts_special_out_checker")
for _y in (
    IMMUT_OUT,
    UNSUP_IN,
    UNSUP_OUT,
    CONT_IN,
    CONT_OUT,
    NOPAD_IN,
    NOPAD_OUT,
    RTS_IN,
    RTS_OUT,
    NORMAL_IN,
    NORMAL_OUT,
):
    register(UNSUP_IN, _y, unrefresh_in, "unrefresh_in_checker", can_mark=refresh_possible)
for _y in (IMMUT_OUT, UNSUP_OUT, CONT_IN, CONT_OUT, NOPAD_IN, NOPAD_OUT, RTS_OUT, RTS_IN, NORMAL_IN, NORMAL_OUT):
    register(UNSUP_OUT, _y, unrefresh_out, "unrefresh_out_checker", can_mark=refresh_possible)
register(USER_IN, CONT_OUT, user_in_and_continuous_in_out, "user_in_and_continuous_in_out_checker")
register(USER_IN, CONT_IN, user_in_and_continuous_in_out, "user_in_and_continuous_in_out_checker")
register(USER_IN, NOPAD_OUT, user_in_and_nopadding_continuous_out, "user_in_and_continuous_in_out_checker")
register(USER_IN, NOPAD_IN, user_in_and_nopadding_continuous_in, "user_in_and_continuous_in_out_checker")
register(USER_IN, RTS_OUT, user_in_and_rts_special_out, "user_in_and_rts_special_out_checker")
register(USER_IN, UNSUP_OUT, user_in_and_unrefresh_out, "user_in_and_unrefresh_out_checker")
for _y in (CONT_IN, NOPAD_IN):
    register(USER_OUT, _y, user_out_and_continuous_input, "user_out_and_continuous_input")
register(USER_OUT, IMMUT_OUT, user_out_and_immutable_out, "user_out_and_immutable_out_checker")
register(USER_OUT, UNSUP_IN, user_out_and_unrefresh_in, "user_out_and_unrefresh_in_checker")
register(USER_OUT, UNSUP_OUT, user_out_and_unrefresh_out, "user_out_and_unrefresh_out_checker")

# Attribute pairs that can ever mark something (absolute conflicts + registered): the pre-filter that lets a
# symbol made only of, say, NORMAL anchors skip the quadratic pair walk.
ACTIVE_PAIRS: frozenset[tuple[int, int]] = frozenset(REGISTRY) | frozenset(ABSOLUTE_CONFLICT)


def is_skip(a: AnchorRef, b: AnchorRef, marks: Marks) -> bool:
    """``IsSkip``: same node; or two outputs (no CONTINUOUS_OUTPUT) where one refers to the other's var."""
    if a.node is b.node:
        return True
    if not a.is_in and not b.is_in and CONT_OUT not in marks.of(a) and CONT_OUT not in marks.of(b):
        ra, rb = marks.ref_map.get(a), marks.ref_map.get(b)
        if (ra is not None and ra is b.node) or (rb is not None and rb is a.node):
            return True
    return False


def symbol_may_conflict(anchors: list[AnchorRef], marks: Marks) -> bool:
    """Cheap necessary condition: some pair of attributes present in the symbol is active."""
    seen: dict[int, int] = {}
    for y in anchors:
        for t in marks.of(y):
            seen[t] = seen.get(t, 0) + 1
    present = list(seen)
    for i, x in enumerate(present):
        for y in present[i:]:
            if (x, y) in ACTIVE_PAIRS and (x != y or seen[x] > 1):
                return True
    return False


def find_conflict_nodes(
    anchors: list[AnchorRef],
    marks: Marks,
    info: GraphInfo,
    index: ModelIndex,
    candidates: set[frozenset[tuple[str, str, str, int]]] | None = None,
) -> dict[AnchorRef, Finding]:
    """``FindConflictNodes``: every pair ``i < j`` of the symbol's anchors, attribute pairs in list order.

    ``candidates`` (the pass: ``layout.dl``'s ``layout_candidate_pair`` of this symbol, anchors as
    ``(graph, node, io, idx)``) restricts the walk to the pairs the rules found an active attribute pair on;
    the others cannot mark anything, so GE's order and the as-symbol "once" bookkeeping are unchanged."""
    result: dict[AnchorRef, Finding] = {}
    if len(anchors) < 2:
        return result
    if candidates is None and not symbol_may_conflict(anchors, marks):
        return result
    keys = [(a.node.graph.name if a.node.graph else "", a.node.name, a.io, a.idx) for a in anchors]
    visited: set[tuple[int, int]] = set()
    for i, a in enumerate(anchors):
        ta = marks.of(a)
        for j in range(i + 1, len(anchors)):
            b = anchors[j]
            if candidates is not None and frozenset((keys[i], keys[j])) not in candidates:
                continue
            if is_skip(a, b, marks):
                continue
            tb = marks.of(b)
            ctx: CheckContext | None = None
            for x in ta:
                for y in tb:
                    if x == REF_OUT or y == REF_OUT or (x, y) in ABSOLUTE_NO_CONFLICT:
                        continue
                    if ctx is None:
                        ctx = CheckContext(a, b, ta, tb, anchors, info, index, result)
                    row = ABSOLUTE_CONFLICT.get((x, y))
                    if row is not None:
                        ctx.rule = f"absolute conflict: {row}"
                        absolute_conflict(ctx)
                        continue
                    chk = REGISTRY.get((x, y))
                    if chk is None:
                        continue
                    if chk.as_symbol:
                        if (x, y) in visited:
                            continue
                        visited.add((x, y))
                        visited.add((y, x))
                    ctx.rule = f"checker {chk.name} ({x.name} x {y.name})"
                    chk.fn(ctx)
    return result

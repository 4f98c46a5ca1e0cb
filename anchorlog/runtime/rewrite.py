"""Shared graph-edit primitives: the few edits GE's memory passes make, with GE's exact side effects.

Every analysis concludes in Datalog/Python and then asks this module to change the graph. The API is small:

* :func:`reaches` / :func:`would_create_cycle` -- BFS over data ∪ control successors (GE's
  ``IsReachableThroughDataOrControlEdges`` / ``WouldCreateControlCycle``).
* :class:`CtrlEdgeBatch` -- add a round of control edges, skipping existing ones, refusing self-loops and
  (optionally) edges that would close a cycle; :meth:`CtrlEdgeBatch.rollback` removes exactly the edges this
  round added (GE's ``ApplyPendingControlEdges`` + ``RollbackAddedControlEdges``).
* :func:`isolate_and_delete` -- GE ``BaseNodePass::IsolateAndDeleteNode`` / ``GraphUtils::IsolateNode``:
  relink data per ``io_map``, re-link every (in-node, out-node) pair not already joined by a relinked data edge
  or a control edge with a control edge (a ``NoOp`` hub above GE's threshold), then drop the node.
* :func:`insert_identity_after` / :func:`insert_identity_before` -- GE ``GraphUtils::InsertNodeAfter`` /
  ``InsertNodeBefore`` with a new ``Identity`` (attributes given by the caller), including the control-edge
  moves those helpers do (reference §3.6).
* :func:`insert_node_before_anchors` -- GE ``InsertNodeBefore`` repeated for several anchors with one
  caller-built multi-input node (input/output ``i`` in front of anchor ``i``).

All functions work on one :class:`~anchorlog.facts.graph.Graph` (GE never edits across a subgraph boundary
here) and keep its consumer index valid. Failures raise :class:`~anchorlog.errors.PassFailure`.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Node, TensorDesc

# GE graph_utils kNoOpOptimizeThreshold: above this many (in-node x out-node) pairs IsolateNode uses a NoOp hub.
NOOP_OPTIMIZE_THRESHOLD = 1000
# InsertNodeBefore keeps control edges coming from these producers on the original node (reference §3.6).
_KEEP_CTRL_FROM = frozenset({"AtomicAddrClean", "MemSet"})
# InsertNodeAfter does not move out-control edges away from these sources.
_NO_CTRL_MOVE_SRC = frozenset({"Switch", "RefSwitch", "SwitchN"})
# Attributes InsertNodeAfter/Before copy from the neighbour onto the new node when present (strings).
_WHITELIST_ATTRS = (
    "_user_stream_label",
    "_op_aicore_num",
    "_op_vectorcore_num",
    "_super_kernel_scope",
    "_super_kernel_options",
)


# --------------------------------------------------------------------------------------------------------------
# Adjacency helpers
# --------------------------------------------------------------------------------------------------------------
def out_nodes(graph: Graph, name: str) -> list[str]:
    """GE ``Node::GetOutNodes``: data consumers (per output, in link order) then control successors."""
    result: list[str] = []
    for o in out_indices(graph, name):
        result.extend(dst for dst, _ in graph.consumers(name, o))
    result.extend(graph.ctrl_successors(name))
    return result


def in_nodes(graph: Graph, name: str) -> list[str]:
    """GE ``Node::GetInNodes``: data producers (per input) then control predecessors."""
    node = graph.nodes[name]
    return [a[0] for a in node.inputs if a is not None] + list(node.ctrl_inputs)


def out_indices(graph: Graph, name: str) -> list[int]:
    """Output indices of ``name``: its declared outputs plus any further index that has consumers (graphs built
    without output descriptors)."""
    n = graph.nodes[name].num_outputs
    idx = list(range(n))
    o = n
    while graph.consumers(name, o):
        idx.append(o)
        o += 1
    return idx


def _successors(graph: Graph, name: str) -> Iterable[str]:
    for o in out_indices(graph, name):
        for dst, _ in graph.consumers(name, o):
            yield dst
    yield from graph.ctrl_successors(name)


def reaches(graph: Graph, src: str, dst: str) -> bool:
    """True when ``dst`` is reachable from ``src`` along data ∪ control edges (``src == dst`` counts)."""
    if src == dst:
        return True
    seen = {src}
    todo = deque([src])
    while todo:
        cur = todo.popleft()
        for nxt in _successors(graph, cur):
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


def would_create_cycle(graph: Graph, src: str, dst: str) -> bool:
    """Would a new control edge ``src -> dst`` close a cycle? (``dst`` already reaches ``src``.)"""
    return reaches(graph, dst, src)


# --------------------------------------------------------------------------------------------------------------
# Control edges with rollback
# --------------------------------------------------------------------------------------------------------------
@dataclass
class CtrlEdgeBatch:
    """One round of control-edge additions on ``graph`` that can be undone as a whole.

    ``add`` skips edges that already exist (they are not recorded, so a rollback never removes a pre-existing
    edge) and raises :class:`PassFailure` for a self-loop, an unknown node, or -- with ``check_cycle`` -- an edge
    that would close a cycle. Callers catch the failure and call :meth:`rollback`.
    """

    graph: Graph
    check_cycle: bool = True
    added: list[tuple[str, str]] = field(default_factory=list)

    def add(self, src: str, dst: str) -> bool:
        """Add ``src -> dst``; True when it was new."""
        g = self.graph
        if src not in g.nodes or dst not in g.nodes:
            raise PassFailure(f"control edge {src} -> {dst}: node not in graph {g.name}", g.name)
        if src == dst:
            raise PassFailure(f"control edge {src} -> {dst} would be a self-loop", g.name)
        if src in g.nodes[dst].ctrl_inputs:
            return False
        if self.check_cycle and would_create_cycle(g, src, dst):
            raise PassFailure(f"control edge {src} -> {dst} would create a cycle", g.name)
        g.add_ctrl(src, dst)
        self.added.append((src, dst))
        return True

    def add_all(self, edges: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
        """Add every edge in order; on the first failure roll back this batch and re-raise."""
        try:
            for s, d in edges:
                self.add(s, d)
        except PassFailure:
            self.rollback()
            raise
        return list(self.added)

    def rollback(self) -> None:
        """Remove the edges this batch added (newest first)."""
        for s, d in reversed(self.added):
            if s in self.graph.nodes and d in self.graph.nodes:
                self.graph.remove_ctrl(s, d)
        self.added.clear()


# --------------------------------------------------------------------------------------------------------------
# Node deletion (IsolateAndDeleteNode)
# --------------------------------------------------------------------------------------------------------------
@dataclass
class IsolateResult:
    """What :func:`isolate_and_delete` changed."""

    node: str
    data_edges: list[tuple[str, int, str, int]] = field(default_factory=list)  # relinked (src, out, dst, in)
    ctrl_edges: list[tuple[str, str]] = field(default_factory=list)  # control edges added around the node
    noop: str | None = None  # NoOp hub created when GE would use one
    in_nodes: list[str] = field(default_factory=list)
    out_nodes: list[str] = field(default_factory=list)


def isolate_and_delete(graph: Graph, name: str, io_map: dict[int, int] | None = None) -> IsolateResult:
    """Delete node ``name`` like GE's ``IsolateAndDeleteNode(node, io_map)``.

    ``io_map[out] = in``: every consumer of output ``out`` is re-fed by the producer of input ``in``; outputs
    not in the map are simply unlinked (default ``{0: 0}``). Then each (in-node, out-node) pair over all data and
    control neighbours that is neither joined by a relinked data edge nor already control-linked gets a control
    edge (self pairs skipped); with more than ``NOOP_OPTIMIZE_THRESHOLD`` pairs a ``NoOp`` hub carries them.
    """
    if name not in graph.nodes:
        raise PassFailure(f"cannot delete {name}: not in graph {graph.name}", graph.name)
    io_map = {0: 0} if io_map is None else io_map
    node = graph.nodes[name]
    res = IsolateResult(name)
    ins = _unique(in_nodes(graph, name))
    outs = _unique(out_nodes(graph, name))
    res.in_nodes, res.out_nodes = ins, outs
    data_joined: set[tuple[str, str]] = set()

    for o in out_indices(graph, name):
        consumers = graph.consumers(name, o)
        in_idx = io_map.get(o)
        producer = node.inputs[in_idx] if in_idx is not None and in_idx < len(node.inputs) else None
        if in_idx is not None and in_idx >= max(len(node.inputs), len(node.input_desc)):
            raise PassFailure(f"cannot delete {name}: io_map names input {in_idx} it does not have", graph.name)
        for dst, di in consumers:
            graph.disconnect(dst, di)
            if producer is not None:
                graph.connect(producer[0], producer[1], dst, di)
                res.data_edges.append((producer[0], producer[1], dst, di))
                data_joined.add((producer[0], dst))

    pairs = [(i, o) for i in ins for o in outs]
    if len(pairs) > NOOP_OPTIMIZE_THRESHOLD and len(pairs) > len(ins) + len(outs):
        hub_in = [i for i in ins if not all((i, o) in data_joined for o in outs)]
        hub_out = [o for o in outs if not all((i, o) in data_joined for i in ins)]
        if hub_in and hub_out:
            hub = graph.unique_name(f"{name}_noop")
            graph.add_node(Node(hub, "NoOp"))
            res.noop = hub
            for i in hub_in:
                graph.add_ctrl(i, hub)
                res.ctrl_edges.append((i, hub))
            for o in hub_out:
                graph.add_ctrl(hub, o)
                res.ctrl_edges.append((hub, o))
    else:
        for i, o in pairs:
            if (i, o) in data_joined or i == o or i == name or o == name:
                continue
            if i in graph.nodes[o].ctrl_inputs:
                continue
            graph.add_ctrl(i, o)
            res.ctrl_edges.append((i, o))
    graph.remove_node(name)
    return res


def bypass_for_consumer(graph: Graph, name: str, dst: tuple[str, int], src: tuple[str, int]) -> None:
    """Feed consumer input ``dst`` of node ``name`` straight from ``src`` (the anchor ``name`` copies), keeping the
    order ``name`` imposed: the consumer inherits ``name``'s control inputs and ``src``'s node gains ``name``'s
    control successors (GE's RW Identity split, the read-only consumer's side). ``name`` itself stays."""
    c, k = dst
    graph.disconnect(c, k)
    for p in list(graph.nodes[name].ctrl_inputs):
        if p != c:
            graph.add_ctrl(p, c)
    for s in graph.ctrl_successors(name):
        if s != src[0]:
            graph.add_ctrl(src[0], s)
    graph.connect(src[0], src[1], c, k)


def _unique(names: Iterable[str]) -> list[str]:
    seen: set[str] = set()
    out: list[str] = []
    for n in names:
        if n not in seen:
            seen.add(n)
            out.append(n)
    return out


# --------------------------------------------------------------------------------------------------------------
# Where inserted nodes go in the op list: right after a neighbour, placed at once for a pass inserting many
# --------------------------------------------------------------------------------------------------------------
@dataclass
class _Placement:
    """Insertions recorded while :func:`deferred_placement` holds a graph: the op list when it began, and per
    anchor node (by object id) the nodes inserted right after it, oldest first. ``keep`` holds every node
    referenced so that no id is reused while the log lives."""

    base: list[Node]
    index: Any = None  # the graph's consumer index when the block began
    after: dict[int, list[Node]] = field(default_factory=dict)
    placed: set[int] = field(default_factory=set)
    keep: list[Node] = field(default_factory=list)
    anchors: dict[int, Node] = field(default_factory=dict)  # the anchor nodes of ``after``, by object id


class _WatchedTouched(set):
    """``Graph.touched`` during :func:`deferred_placement`: remembers whether anyone synced derived facts (which
    clears it) while inserted nodes sat at their provisional place."""

    synced = False

    def clear(self) -> None:
        self.synced = True
        super().clear()


# graphs held by deferred_placement -> their insertion log (made at the first insertion: a graph nothing is
# inserted into costs nothing)
_DEFERRED: weakref.WeakKeyDictionary[Graph, _Placement | None] = weakref.WeakKeyDictionary()


@contextmanager
def deferred_placement(graphs: Iterable[Graph]) -> Iterator[None]:
    """Within the block, a node the insertion helpers put right after a neighbour is appended to its graph's op
    list, and every such node is moved to its place once, when the block ends: the final op list is exactly
    the one the insertions made one by one would give (each new node right after its neighbour at that time,
    nodes removed meanwhile leaving their followers where they were). Moving the tail of the op list per
    insertion is linear in the graph, so a pass inserting thousands of Identities was quadratic.

    Only the op-list ORDER is deferred: nodes, edges and the consumer index are current throughout. Code inside
    the block must not depend on the order of the inserted nodes within the op list (the conflict passes' walks
    take their node snapshot before editing; GE's topological sorts run after the block). Nested use is a
    no-op for graphs already held."""
    started = [g for g in graphs if g not in _DEFERRED]
    for g in started:
        _DEFERRED[g] = None
    try:
        yield
    finally:
        for g in started:
            placement = _DEFERRED.pop(g, None)
            if placement is None:
                continue
            watched = g.touched
            g.touched = set(watched)
            if placement.after:
                _settle(g, placement, synced=getattr(watched, "synced", True))
            if g._consumers is not placement.index:
                # rebuilt inside the block (after Graph.invalidate) from the provisional order: build it again from
                # the final one
                g.invalidate()


def _add_after(graph: Graph, node: Node, after: str) -> None:
    """``graph.add_node(node, after=after)``, or its deferred form inside :func:`deferred_placement`."""
    if graph not in _DEFERRED:
        graph.add_node(node, after=after)
        return
    anchor = graph.nodes.get(after)
    if anchor is None:
        raise KeyError(f"graph {graph.name}: no node {after!r}")
    placement = _DEFERRED[graph]
    if placement is None:
        # the first insertion: the op list is still the real one. The consumer index is built now from it (built
        # later, at its first use after an insertion, it would list consumers in the provisional order; inside
        # the block it is kept up to date edge by edge), and fact syncs are watched from here on.
        graph._ensure_index()
        placement = _DEFERRED[graph] = _Placement(list(graph.nodes.values()), index=graph._consumers)
        graph.touched = _WatchedTouched(graph.touched)
    graph.add_node(node)
    placement.after.setdefault(id(anchor), []).append(node)
    placement.anchors[id(anchor)] = anchor
    placement.placed.add(id(node))
    placement.keep.extend((anchor, node))


def _settle(graph: Graph, placement: _Placement, *, synced: bool) -> None:
    """Put the nodes recorded in ``placement`` where the one-by-one insertions would have: the op list is the
    original list (plus nodes appended at the end meanwhile), each node followed by the nodes inserted after it,
    newest first, each of those followed by its own (a pre-order); removed nodes are skipped, their followers
    kept in place."""
    nodes = graph.nodes
    if len(placement.after) <= _FEW_ANCHORS and _settle_few(graph, placement, synced=synced):
        return
    known = {id(n) for n in placement.base}
    roots = placement.base + [n for n in nodes.values() if id(n) not in known and id(n) not in placement.placed]
    order: list[Node] = []
    for root in roots:
        _with_followers(root, nodes, placement.after, order)
    if len(order) != len(nodes) or len({id(n) for n in order}) != len(order):
        raise PassFailure(f"graph {graph.name}: deferred node placement lost track of the op list", graph.name)
    old = list(nodes.values())
    if old == order:
        return
    # Derived facts (positions) synced during the block saw the provisional order: the moved nodes are touched
    # so that their rows are derived again. Without a sync the inserted nodes are still unknown to the facts, and
    # their first refresh derives every position of the graph anyway.
    if synced:
        graph.touched.update(n.name for i, n in enumerate(order) if old[i] is not n)
    nodes.clear()
    for n in order:
        nodes[n.name] = n


# Up to this many anchors, _settle splices the inserted nodes into the op list around their anchors (located by a
# C-level scan each) instead of walking every node of the graph.
_FEW_ANCHORS = 16


def _with_followers(n: Node, nodes: dict[str, Node], after: dict[int, list[Node]], order: list[Node]) -> None:
    """Append to ``order`` ``n`` (unless removed), then the nodes inserted after it (``after``), newest first, each
    followed by its own (a pre-order; removed nodes are skipped, their followers kept)."""
    stack = [n]
    while stack:
        x = stack.pop()
        if nodes.get(x.name) is x:
            order.append(x)
        followers = after.get(id(x))
        if followers:
            stack.extend(followers)  # the newest is popped first: it sits right after x


def _settle_few(graph: Graph, placement: _Placement, *, synced: bool) -> bool:
    """:func:`_settle` for a block that removed no node present when it began and inserted after few anchors
    (the layout pass's case: one Identity in a 100 k-node graph): the op list is the original one with each
    anchor's followers spliced in right after it, so only the anchors are looked up and only the op list from
    the first insertion on is rebuilt. False (nothing done) when a node present at the start was removed or
    replaced."""
    nodes = graph.nodes
    base = placement.base
    now = list(nodes.values())
    # no node of the original op list removed or replaced: the provisional op list starts with it unchanged
    # (the nodes inserted meanwhile were appended behind it)
    if len(now) < len(base) or now[: len(base)] != base:
        return False
    after = placement.after
    placed = placement.placed
    appended = [n for n in now[len(base) :] if id(n) not in placed]  # added at the end, not by an insertion

    # anchors in the original op list, by position (an anchor that is itself inserted or appended is expanded
    # with its own anchor / in the appended tail)
    hits: list[int] = []
    for key, a in placement.anchors.items():
        if key not in placed:
            try:
                hits.append(base.index(a))  # Node compares by identity
            except ValueError:
                pass  # appended meanwhile: expanded with the appended tail
    hits.sort()
    order: list[Node] = []
    prev = 0
    for i in hits:
        order += base[prev:i]
        _with_followers(base[i], nodes, after, order)
        prev = i + 1
    order += base[prev:]
    for n in appended:
        _with_followers(n, nodes, after, order)
    if len(order) != len(nodes):
        raise PassFailure(f"graph {graph.name}: deferred node placement lost track of the op list", graph.name)
    # the op list from the first position that changes on is put in place again
    first = hits[0] if hits else len(base)
    while first < len(order) and order[first] is now[first]:
        first += 1
    if first == len(order):
        return True
    tail = order[first:]
    if synced:
        graph.touched.update(n.name for i, n in enumerate(tail, first) if now[i] is not n)
    for n in tail:
        del nodes[n.name]
    for n in tail:
        nodes[n.name] = n
    return True


# --------------------------------------------------------------------------------------------------------------
# Identity insertion (InsertNodeAfter / InsertNodeBefore)
# --------------------------------------------------------------------------------------------------------------
def _new_identity(name: str, desc: TensorDesc | None, attrs: dict | None) -> Node:
    td = desc.copy() if desc is not None else TensorDesc()
    td.reuse_input = False
    td.reuse_input_index = 0
    node = Node(name, "Identity", input_desc=[td.copy()], output_desc=[td.copy()])
    for k, v in (attrs or {}).items():
        node.set_attr(k, v)
    return node


def _copy_whitelist(src: Node, dst: Node) -> None:
    for key in _WHITELIST_ATTRS:
        if key in src.attrs and key not in dst.attrs:
            dst.attrs[key] = src.attrs[key]


def insert_identity_after(
    graph: Graph,
    src: tuple[str, int],
    dsts: list[tuple[str, int]],
    *,
    name: str,
    attrs: dict | None = None,
    desc: TensorDesc | None = None,
    move_ctrl: bool = True,
) -> str:
    """GE ``InsertNodeAfter(src_out, dsts, Identity)``: ``src -> Identity -> each dst`` (other consumers of
    ``src`` untouched). With ``move_ctrl`` every out-control edge of ``src``'s node moves to the Identity, as GE
    does (except for Switch-type sources). ``name`` is made unique. Returns the Identity's name."""
    sname, sout = src
    if sname not in graph.nodes:
        raise PassFailure(f"cannot insert after {sname}:{sout}: not in graph {graph.name}", graph.name)
    snode = graph.nodes[sname]
    ident_name = graph.unique_name(name)
    td = desc if desc is not None else (snode.output_desc[sout] if sout < len(snode.output_desc) else None)
    ident = _new_identity(ident_name, td, attrs)
    _add_after(graph, ident, sname)
    graph.connect(sname, sout, ident_name, 0)
    for dname, din in dsts:
        if graph.nodes[dname].inputs[din] != (sname, sout):
            raise PassFailure(f"{dname}:{din} is not fed by {sname}:{sout}", graph.name)
        graph.connect(ident_name, 0, dname, din)
    if move_ctrl and snode.type not in _NO_CTRL_MOVE_SRC:
        for succ in graph.ctrl_successors(sname):
            if succ == ident_name:
                continue
            graph.remove_ctrl(sname, succ)
            graph.add_ctrl(ident_name, succ)
    _copy_whitelist(snode, ident)
    return ident_name


def insert_identity_before(
    graph: Graph,
    dst: tuple[str, int],
    *,
    name: str,
    attrs: dict | None = None,
    desc: TensorDesc | None = None,
    move_ctrl: bool = True,
) -> str:
    """GE ``InsertNodeBefore(dst_in, Identity)``: ``producer -> Identity -> dst``. With ``move_ctrl`` every
    in-control edge of ``dst``'s node moves to the Identity, except those from AtomicAddrClean/MemSet nodes.
    Returns the Identity's name."""
    dname, din = dst
    dnode = graph.nodes[dname]
    producer = dnode.inputs[din] if din < len(dnode.inputs) else None
    if producer is None:
        raise PassFailure(f"cannot insert before {dname}:{din}: input not connected", graph.name)
    pnode = graph.nodes[producer[0]]
    ident_name = graph.unique_name(name)
    td = (
        desc if desc is not None else (pnode.output_desc[producer[1]] if producer[1] < len(pnode.output_desc) else None)
    )
    ident = _new_identity(ident_name, td, attrs)
    _add_after(graph, ident, producer[0])
    graph.connect(producer[0], producer[1], ident_name, 0)
    graph.connect(ident_name, 0, dname, din)
    if move_ctrl:
        for c in list(dnode.ctrl_inputs):
            if c in graph.nodes and graph.nodes[c].type in _KEEP_CTRL_FROM:
                continue
            graph.remove_ctrl(c, dname)
            graph.add_ctrl(c, ident_name)
    _copy_whitelist(dnode, ident)
    return ident_name


def insert_node_before_anchors(graph: Graph, node: Node, dsts: list[tuple[str, int]], *, move_ctrl: bool = True) -> str:
    """GE ``InsertNodeBefore`` called once per anchor with the same multi-input ``node`` (the layout pass's
    control-node step, ``SolveNodesConflict``): for each ``i``, ``producer(dsts[i]) -> node.in[i]`` and
    ``node.out[i] -> dsts[i]``. ``node`` (built by the caller, with one input/output per anchor) is added to
    ``graph`` at the end of its op list when not there yet. With ``move_ctrl`` the in-control edges of each
    ``dst`` node move to ``node`` (except those from AtomicAddrClean/MemSet), and every insertion copies the
    ``dst`` node's whitelisted string attributes onto ``node`` (a later anchor's value overwrites, as GE's
    repeated calls do). Returns the node's name."""
    if node.name not in graph.nodes:
        graph.add_node(node)
    for i, (dname, din) in enumerate(dsts):
        dnode = graph.nodes[dname]
        producer = dnode.inputs[din] if din < len(dnode.inputs) else None
        if producer is not None:
            graph.connect(producer[0], producer[1], node.name, i)
        graph.connect(node.name, i, dname, din)
        if move_ctrl:
            for c in list(dnode.ctrl_inputs):
                if c == node.name or c not in graph.nodes or graph.nodes[c].type in _KEEP_CTRL_FROM:
                    continue
                graph.remove_ctrl(c, dname)
                graph.add_ctrl(c, node.name)
        for key in _WHITELIST_ATTRS:
            if key in dnode.attrs and dnode.attrs[key].kind == "s":
                node.attrs[key] = dnode.attrs[key]
    return node.name

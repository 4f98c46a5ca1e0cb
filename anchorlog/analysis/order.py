"""GE's node order: ``ComputeGraph::TopologicalSorting`` (default DFS mode) and ``GetAllNodes``.

Shared by every pass that depends on GE's order (reference §10): the symbol table (symbol names and the anchor
order inside a symbol, which decides ``node_a`` in the layout checkers), topological ids used as tie-breaks,
and which pair first triggers an as-symbol checker. :func:`node_order_rows` hands the order to the rules as
the relation ``node_order(graph, node, ord)``.
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Callable, Iterable
from itertools import compress, islice, repeat
from operator import attrgetter

from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Anchor, EdgeLog, Graph, Model, Node

# OpTypeUtils::IsDataNode
DATA_TYPES = frozenset({"Data", "RefData", "AippData", "AnnData"})

# Source nodes GE keeps in original order at the bottom of the DFS stack (so they are popped first).
_INPUT_LIKE = DATA_TYPES | {"Input", "Recv", "Send"}
_NEXT_ITERATION = frozenset({"NextIteration", "RefNextIteration"})
_NAME = attrgetter("name")
_TYPE = attrgetter("type")
_SUBGRAPHS = attrgetter("subgraph_names")


def dfs_topo_order(g: Graph) -> list[Node]:
    """GE's DFS topological order of ``g``'s direct nodes (``DFSTopologicalSorting``, not reversed).

    Start stack: sources without any in-edge; data-like sources keep their order and are popped first,
    other sources follow in their order. A popped node's newly ready successors are pushed per out anchor
    (data consumers in link order), then its control successors; the last pushed is popped first.
    """
    return _dfs_sort(g, remember=False)[0]


class _SortState:
    """What a DFS sort of one graph started from and rested on, so that a later sort of the same graph can resume
    the walk (:func:`_resume_dfs`): the order it gave, the start stack (and its nodes' types), the declared
    inputs, the consumer index objects the walk read, the stack at a few checkpoints of the walk, and the edge
    journal installed on the graph right after the sort (``Graph._edge_log``)."""

    __slots__ = (
        "order",
        "names",
        "stored",
        "start",
        "start_types",
        "inputs",
        "consumers",
        "ctrl_succ",
        "marks",
        "log",
    )

    def __init__(
        self,
        g: Graph,
        order: list[Node],
        names: list[str],
        stored: list[Node],
        start: list[Node],
        start_types: list[str],
        marks: list[tuple[int, list[str]]],
    ) -> None:
        self.order = order
        self.names = names  # the names of ``order``'s nodes (the walk's own list: no node is read for them)
        self.stored = stored  # the op list at the sort
        self.start = start
        self.start_types = start_types  # (their types at the sort)
        self.inputs = list(g.input)
        self.consumers = g._consumers
        self.ctrl_succ = g._ctrl_succ
        self.marks = marks
        self.log = EdgeLog()
        g._edge_log = self.log


def _checkpoints(size: int) -> list[int]:
    """Walk positions at which a remembered sort keeps the stack: halfway, then halving the rest (edits late in
    a graph, where the layout pass inserts at the outputs, resume close to them)."""
    return sorted({size - (size >> k) for k in range(1, 9)} - {0, size}) if size >= 4 else []


class _Sources:
    """The nodes without in-edges of a graph in stored order, split as GE's start stack needs them: the
    data-like (:data:`_INPUT_LIKE`) ones and the others, each with their types (kept by the sort's state)."""

    __slots__ = ("inputs", "input_types", "others", "other_types")

    def __init__(self) -> None:
        self.inputs: list[Node] = []
        self.input_types: list[str] = []
        self.others: list[Node] = []
        self.other_types: list[str] = []

    def add(self, n: Node, node_type: str) -> None:
        if node_type in _INPUT_LIKE:
            self.inputs.append(n)
            self.input_types.append(node_type)
        else:
            self.others.append(n)
            self.other_types.append(node_type)


def _start_stack(g: Graph, sources: _Sources) -> tuple[list[Node], list[str]]:
    """The DFS start stack (bottom first) of ``g`` with ``sources`` and the types of its nodes."""
    # GE inserts each non-data source at the front and each data source right after them: popping from the
    # back then yields the data sources in order, then the others in order.
    stack = sources.others[::-1] + sources.inputs[::-1]
    types = sources.other_types[::-1] + sources.input_types[::-1]
    # The graph's declared input order wins among the sources it names (GE's swap loop leaves them in
    # descending declared position in the stack, so they pop in declared order).
    declared = {name.rsplit(":", 1)[0] if ":" in name else name: i for i, name in enumerate(g.input)}
    if declared:
        slots = [i for i, n in enumerate(stack) if n.name in declared]
        ranked = sorted((stack[i] for i in slots), key=lambda n: -declared[n.name])
        for i, n in zip(slots, ranked):
            stack[i] = n
        types = list(map(_TYPE, stack))
    return stack, types


def _dfs_sort(g: Graph, *, remember: bool = True) -> tuple[list[Node], _SortState | None]:
    """:func:`dfs_topo_order` and, with ``remember`` for a graph without NextIteration, the state a later resumed
    sort needs (which starts the graph's edge journal; a plain order query must not restart it)."""
    nodes = g.nodes
    # The op list, the waiting count of every node (its data and control in-edges), the sources, the
    # NextIterations and each producer's consumers in the order the walk visits them: taken in the same pass
    # that builds the consumer index when the graph has none yet (the common case for a first sort).
    if g._consumers is None:
        stored, pending, sources, nexts, users_of = _index_and_count(g)
    else:
        stored, pending, sources, nexts = _count(nodes)
        users_of = _users_of(g._consumers)
    ctrl_succ = g._ctrl_succ
    assert ctrl_succ is not None
    if nexts:
        # Edges from NextIteration do not count (GetInEdgeSize: they close a loop); such nodes are rare, so the
        # counts are taken again, excluding those edges, only when the graph has one. A NextIteration's
        # consumers were never waiting on it, so it has no consumer list.
        sources = _Sources()
        for name, n in nodes.items():
            k = len(n.ctrl_inputs) + sum(1 for a in n.inputs if a is not None and a[0] not in nexts)
            pending[name] = k
            if k == 0:
                sources.add(n, n.type)
        for name in nexts:
            users_of.pop(name, None)
    start, start_types = _start_stack(g, sources)
    keep = remember and not nexts
    walked: list[str] = []
    marks = _walk_stack(
        [n.name for n in start], pending, users_of, ctrl_succ, walked, _checkpoints(len(nodes)) if keep else []
    )
    if len(walked) != len(nodes):
        done = set(walked)
        left_over = [n for n in nodes if n not in done]
        raise PassFailure(f"topological sorting failed: graph {g.name} has a cycle through {left_over[:5]}", g.name)
    order = list(map(nodes.__getitem__, walked))
    return order, (_SortState(g, order, walked, stored, start, start_types, marks) if keep else None)


_Users = dict[str, list[tuple[str, int]]]


def _index_and_count(g: Graph) -> tuple[list[Node], dict[str, int], _Sources, set[str], _Users]:
    """:func:`_count` and :func:`_users_of` for a graph whose consumer index is not built, in one pass over its
    nodes that also builds the index exactly as ``Graph._ensure_index`` does (each out anchor's consumers and
    each node's control successors, in stored order) and installs it on the graph. (A node's fields are read
    once: on a large graph every pass over the nodes is mostly waiting for memory.)"""
    cons: dict[Anchor, list[tuple[str, int]]] = {}
    succ: dict[str, list[str]] = {}
    stored: list[Node] = []
    pending: dict[str, int] = {}
    sources = _Sources()
    nexts: set[str] = set()
    users_of: _Users = {}
    more_outs: dict[str, list[int]] = {}  # producers with several used out anchors: the anchors after the first
    cons_get = cons.get
    keep = stored.append
    for n in g.nodes.values():
        keep(n)
        name = n.name
        k = 0
        i = 0
        for a in n.inputs:
            if a is not None:
                k += 1
                users = cons_get(a)
                if users is None:
                    users = cons[a] = [(name, i)]
                    src = a[0]
                    if src in users_of:
                        more_outs.setdefault(src, []).append(a[1])
                    else:
                        users_of[src] = users  # the first used anchor's list, lent to the walk as is
                else:
                    users.append((name, i))
            i += 1
        ctrl = n.ctrl_inputs
        if ctrl:
            k += len(ctrl)
            for c in ctrl:
                later = succ.get(c)
                if later is None:
                    succ[c] = [name]
                else:
                    later.append(name)
        pending[name] = k
        node_type = n.type
        if k == 0:
            sources.add(n, node_type)
        if node_type in _NEXT_ITERATION:
            nexts.add(name)
    g._consumers, g._ctrl_succ = cons, succ
    nodes = g.nodes
    for src, outs in more_outs.items():
        # the first anchor read back from its list's first consumer (the input the list was made for)
        dst, slot = users_of[src][0]
        outs.append(nodes[dst].inputs[slot][1])  # type: ignore[index]
        users_of[src] = _joined(cons, src, outs)
    return stored, pending, sources, nexts, users_of


def _count(nodes: dict[str, Node]) -> tuple[list[Node], dict[str, int], _Sources, set[str]]:
    """The op list, each node's waiting count (data and control in-edges), the sources (count 0) and the
    names of the NextIterations."""
    pending: dict[str, int] = {}
    sources = _Sources()
    nexts: set[str] = set()
    for name, n in nodes.items():
        ins = n.inputs
        pending[name] = k = len(n.ctrl_inputs) + len(ins) - ins.count(None)
        if k == 0:
            sources.add(n, n.type)
        if n.type in _NEXT_ITERATION:
            nexts.add(name)
    return list(nodes.values()), pending, sources, nexts


def _users_of(consumers: dict[Anchor, list[tuple[str, int]]]) -> _Users:
    """Each producer's consumers in the order the walk visits them: by ascending out anchor, each anchor's in
    link order, as one list. A producer with one used out anchor (the common case) lends the index's list."""
    users_of: _Users = {}
    first_out: dict[str, int] = {}
    more_outs: dict[str, list[int]] = {}
    for key, users in consumers.items():
        src = key[0]
        if src in first_out:
            outs = more_outs.get(src)
            if outs is None:
                more_outs[src] = [first_out[src], key[1]]
            else:
                outs.append(key[1])
        else:
            first_out[src] = key[1]
            users_of[src] = users
    for src, outs in more_outs.items():
        users_of[src] = _joined(consumers, src, outs)
    return users_of


def _joined(consumers: dict[Anchor, list[tuple[str, int]]], src: str, outs: list[int]) -> list[tuple[str, int]]:
    """The consumers of ``src``'s out anchors ``outs`` as one new list, by ascending anchor (as GE walks them):
    visiting it is visiting each anchor's list in turn."""
    joined: list[tuple[str, int]] = []
    for out in sorted(outs):
        joined += consumers[(src, out)]
    return joined


def _walk_stack(
    stack: list[str],
    pending: dict[str, int],
    users_of: _Users,
    ctrl_succ: dict[str, list[str]],
    order: list[str],
    marks: Iterable[int] = (),
) -> list[tuple[int, list[str]]]:
    """GE's DFS from ``stack`` (node names, top last): pop a node, append its name to ``order``, push the
    successors it makes ready (``pending``: in-edges still waiting, per node) per out anchor in link order
    (``users_of``, which the walk may change), then per control edge (``ctrl_succ``). Returns the stack at
    each of the positions ``marks`` (ascending) the walk reaches, taken when ``order`` has that many names.
    Works on names only: the nodes themselves are not read on the way (each would be a memory access of its
    own)."""
    # a producer's control successors follow its data consumers in its list (as (name, -1)): visited in the
    # same order, one look-up per pop instead of two
    for src, succ in ctrl_succ.items():
        if succ:
            users_of[src] = [*users_of.get(src, ()), *zip(succ, repeat(-1))]
    # (no walk pops more than the nodes on the stack and those a count can bring to 0)
    most = len(stack) + len(pending) + 1
    snaps: list[tuple[int, list[str]]] = []
    for mark in marks:
        if mark > len(order):
            _pop(stack, pending, users_of, order, mark - len(order))
            if len(order) != mark:
                return snaps
        if mark == len(order):
            snaps.append((mark, stack[:]))
    _pop(stack, pending, users_of, order, most)
    return snaps


def _pop(stack: list[str], pending: dict[str, int], users_of: _Users, order: list[str], budget: int) -> None:
    """:func:`_walk_stack`'s loop: at most ``budget`` pops.

    A node is pushed when a decrement takes its count from 1 to 0. Counts only go down, so one already at 0
    (pushed, or a source) or below can never be pushed again: a decrement from 0 needs no guard."""
    push = stack.append
    pop = stack.pop
    visit = order.append
    users_get = users_of.get
    for _ in repeat(None, budget):
        if not stack:
            return
        name = pop()
        visit(name)
        users = users_get(name)
        if users is not None:
            # newly ready successors are pushed per out anchor in link order, then per control edge
            for dst, _ in users:
                left = pending[dst] - 1
                pending[dst] = left
                if not left:
                    push(dst)


_Resumed = tuple[list[Node], list[str], list[tuple[int, list[str]]], int]


def _resume_dfs(g: Graph, state: _SortState) -> _Resumed | None:
    """GE's DFS order of ``g`` now, its names, its checkpoints and how many of its first nodes are those of the
    old order, resumed from the ``state`` of the last sort (None: not derivable that way; sort in full).

    The walk is a deterministic function of the start stack, the in-edge counts and the producers' consumer
    lists. The graph's editing methods journal every edit since the sort (``Graph._edge_log``: producers whose
    out-edges changed, nodes whose in-edges changed, nodes added or removed); edits bypassing them call
    ``invalidate`` (which drops the journal). The op list is checked to hold the nodes of the sort in the same
    order (plus the nodes added); node types are set by importers, never changed in place after a sort (the
    start nodes' types are checked). Take a checkpoint ``c`` of the old walk such that every journalled node that
    existed at the sort sits at ``c`` or later, and every node whose in-edges changed keeps a producer (an edge
    it had before and has now, from a node not journalled) at ``c`` or later. Then the first ``c`` pops are the
    same now: those nodes' consumer lists are unchanged; a node whose in-edges changed waits past ``c`` in both
    walks, so neither pushed it, and every other node is pushed at the same moment; the start stack is the
    same (checked: no journalled node is or was a start node, the start nodes keep their types). The walk goes
    on from the stack kept at ``c``, each node left waiting on its in-edges from the nodes left."""
    nodes = g.nodes
    log = g._edge_log
    if (
        log is None
        or log is not state.log
        or g._consumers is not state.consumers
        or g._ctrl_succ is not state.ctrl_succ
        or g.input != state.inputs
        or list(map(_TYPE, state.start)) != state.start_types
    ):
        return None
    old = state.order
    producers, changed, added, removed = log.producers, log.consumers, log.added, log.removed
    if added & removed:
        return None  # a name removed and added again: keep it simple
    # the op list: the nodes present at the sort that are still there, in the same order (the start stack
    # follows it), besides the nodes added
    now = list(nodes.values())
    then = state.stored
    if removed or len(added) > 8:
        now = [n for n in now if n.name not in added]
        then = [n for n in then if n.name not in removed]
    else:
        for name in added:
            now.remove(nodes[name])
    if now != then:
        return None
    if not producers and not changed:
        if len(old) == len(nodes):
            return list(old), state.names, state.marks, len(old)
        return None
    start_set = set(state.start)  # (nodes compare by identity)
    kept_of: list[list[str]] = []
    new_nodes: list[Node] = []
    for name in changed:
        n = nodes.get(name)
        if n is None:
            if name not in removed:
                return None
            continue
        if n.type in _NEXT_ITERATION or n in start_set:
            return None
        ins = n.inputs
        if not n.ctrl_inputs and ins.count(None) == len(ins):
            return None  # a start node now
        if name in added:
            new_nodes.append(n)
            continue
        kept = [a[0] for a in ins if a is not None and a[0] not in producers]
        kept += [c for c in n.ctrl_inputs if c not in producers]
        if kept:
            kept_of.append(kept)
    existed = (producers | changed) - added
    rest_names = {n.name for n in new_nodes}
    lo = len(old)
    for c, snap in reversed(state.marks):
        rest_names.update([n.name for n in old[c:lo]])
        lo = c
        if not existed <= rest_names or any(rest_names.isdisjoint(k) for k in kept_of):
            continue
        # (a name still there is the same node: a node replaced under its name fails the checks above)
        stack = [name for name in snap if name in nodes]
        rest = [n for n in old[c:] if nodes.get(n.name) is n]
        if len(stack) != len(snap) or c + len(rest) + len(new_nodes) != len(nodes):
            return None
        return _resume_at(g, state, c, stack, rest + new_nodes, rest_names)
    return None


def _resume_at(
    g: Graph, state: _SortState, c: int, stack: list[str], rest: list[Node], rest_names: set[str]
) -> _Resumed | None:
    """The walk of :func:`_resume_dfs` from checkpoint ``c`` (``stack`` kept there, ``rest``: the nodes not
    popped before it, ``rest_names`` their names)."""
    nodes = g.nodes
    consumers = g._consumers
    ctrl_succ = g._ctrl_succ
    assert consumers is not None and ctrl_succ is not None
    # waiting counts: in-edges from the nodes left (or from a node not in the graph, which never comes, as in
    # a full sort); and the consumer lists of the producers left (their consumers are all left)
    pending: dict[str, int] = {}
    outs_of: dict[str, set[int]] = {}
    for n in rest:
        k = 0
        for a in n.inputs:
            if a is not None and (a[0] in rest_names or a[0] not in nodes):
                k += 1
                outs_of.setdefault(a[0], set()).add(a[1])
        for src in n.ctrl_inputs:
            if src in rest_names or src not in nodes:
                k += 1
        pending[n.name] = k
    users_of: _Users = {}
    for src, outs in outs_of.items():
        if len(outs) == 1:
            users_of[src] = consumers.get((src, next(iter(outs))), [])
        else:
            users_of[src] = [u for out in sorted(outs) for u in consumers.get((src, out), [])]
    walked: list[str] = []
    marks = [m for m in state.marks if m[0] <= c]
    try:
        snaps = _walk_stack(
            stack,
            pending,
            users_of,
            ctrl_succ,
            walked,
            [m - c for m in _checkpoints(len(nodes)) if m > c],
        )
        marks += [(c + m, snap) for m, snap in snaps]  # (the walk counted from c)
    except KeyError:
        return None  # a consumer index out of step with the inputs: the full sort decides
    if c + len(walked) != len(nodes):
        return None  # a cycle: the full sort reports it
    order = state.order[:c]
    order += map(nodes.__getitem__, walked)
    return order, state.names[:c] + walked, marks, c


# GE keeps its node list in topological order; our IR keeps the stored (file) order, which is also the
# consumer link order, so the sorted order is remembered beside the model instead of reordering its nodes.
_TOPO: weakref.WeakKeyDictionary[Model, dict[str, list[Node]]] = weakref.WeakKeyDictionary()
# per model, per graph: the state of the graph's last sort (graphs with NextIteration have none), from which
# topological_resort resumes the walk where the edits since begin to matter
_STATE: weakref.WeakKeyDictionary[Model, dict[str, _SortState]] = weakref.WeakKeyDictionary()


def topological_sorting(model: Model) -> None:
    """``root.TopologicalSorting()``: GE's DFS order for every graph (remembered for :func:`graph_nodes`) and
    ``id`` renumbered over ``GetAllNodes(root)``."""
    order: dict[str, list[Node]] = {}
    states: dict[str, _SortState] = {}
    for g in model.graphs:
        order[g.name], state = _dfs_sort(g)
        if state is not None:
            states[g.name] = state
    _TOPO[model] = order
    _STATE[model] = states
    _renumber(model, order, set(order))


def forget_topological_order(model: Model) -> None:
    """Drop the order remembered by the last :func:`topological_sorting` of ``model`` (if any): after an edit
    that re-links a graph's consumers without a sort, the remembered order describes the old links, so
    :func:`ge_graph_nodes` sorts afresh and :func:`topological_resort` makes a full sort."""
    _TOPO.pop(model, None)
    _STATE.pop(model, None)


def remembered_topological_order(model: Model) -> dict[str, list[Node]] | None:
    """The per-graph orders remembered by the last :func:`topological_sorting` of ``model`` (None: none). Its
    identity changes with every sort, so callers caching results derived from GE's order can key on it."""
    return _TOPO.get(model)


def topological_resort(model: Model, edited: Iterable[str]) -> None:
    """:func:`topological_sorting` after edits confined to the graphs named ``edited`` since the last sort of
    ``model``: a graph's DFS order depends on its own nodes and edges only, so only those graphs are sorted
    again (plus any graph whose node count changed), each resumed from a checkpoint of its last sort when its
    edge journal allows (:func:`_resume_dfs`; the same order as a full sort); ids are renumbered over
    ``GetAllNodes(root)`` as a full sort does. A full sort when the model was never sorted or its list of graphs
    changed."""
    cached = _TOPO.get(model)
    if cached is None or len(cached) != len(model.graphs) or any(g.name not in cached for g in model.graphs):
        topological_sorting(model)
        return
    names = set(edited)
    order = dict(cached)
    states = dict(_STATE.get(model, {}))
    fresh: set[str] = set()
    # per graph resumed: how many first nodes of its order are those of its last order, and that order
    kept: dict[str, tuple[int, list[Node]]] = {}
    for g in model.graphs:
        if g.name in names or len(order[g.name]) != len(g.nodes):
            # resumed from the last sort's state where the edits since allow it (the same order, see _resume_dfs)
            state = states.pop(g.name, None)
            resumed = _resume_dfs(g, state) if state is not None and state.order is order[g.name] else None
            if resumed is not None:
                order[g.name] = resumed[0]
                states[g.name] = _SortState(
                    g,
                    resumed[0],
                    resumed[1],
                    list(g.nodes.values()),
                    state.start,  # type: ignore[union-attr]
                    state.start_types,  # type: ignore[union-attr]  (checked unchanged by the resume)
                    resumed[2],
                )
                kept[g.name] = (resumed[3], state.order)  # type: ignore[union-attr]
            else:
                order[g.name], new_state = _dfs_sort(g)
                if new_state is not None:
                    states[g.name] = new_state
            fresh.add(g.name)
    _TOPO[model] = order
    _STATE[model] = states
    _renumber(model, order, fresh, kept)


def _renumber(
    model: Model, order: dict[str, list[Node]], fresh: set[str], kept: dict[str, tuple[int, list[Node]]] | None = None
) -> None:
    """``id`` = position in ``GetAllNodes(root)`` (:func:`all_nodes`). A graph sorted just now (named in
    ``fresh``) is walked in its new order as is: that order holds exactly the graph's current nodes, so the
    check :func:`graph_nodes` makes for nodes added or removed since a sort cannot change it. The runs walked
    are remembered for the order queries that follow (:func:`_sorted_runs`).

    After a resort (``kept``: per graph resumed, how many first nodes of its order are those of its last order,
    and that order), the
    walk and the ids start from the last renumbering of the model (:data:`_NUMBERED`): a graph whose node list
    is the one walked then keeps its subgraph owners' positions, a resumed graph keeps those in its kept part,
    and the leading runs equal to those numbered then keep their ids (ids are only ever set here once a model
    is sorted), so a resort after edits late in a large graph renumbers little."""

    def nodes_of(model: Model, g: Graph) -> list[Node]:
        return order[g.name] if g.name in fresh else graph_nodes(model, g)

    last = _NUMBERED.get(model)
    if last is not None and (last[0] != model.structure_version or kept is None):
        last = None
    owners_then = last[2] if last is not None else {}
    # per graph resumed whose last order is the list numbered last time: how many first nodes the two share
    shared: dict[str, int] = {}

    def owners_of(g: Graph, nodes: list[Node]) -> list[int]:
        then = owners_then.get(g.name)
        if then is not None:
            old_nodes, old_owners = then
            # (list equality compares identities first: the nodes themselves are not read)
            if old_nodes == nodes:
                return old_owners
            c, last_order = kept.get(g.name, (0, None)) if kept else (0, None)
            if c and (old_nodes is last_order or old_nodes == last_order):
                shared[g.name] = c
                return [p for p in old_owners if p < c] + _owner_positions(nodes, c)
        return _owner_positions(nodes)

    owners: dict[str, tuple[list[Node], list[int]]] = {}
    runs = _runs(model, model.root, nodes_of, owners_of, owners)
    same = 0
    if last is not None:
        # the leading runs numbered last time, unchanged: their nodes hold these ids already
        for then, now in zip(last[1], runs):
            if then[0] is not now[0] or then[1] != now[1]:
                break
            same += 1
    i = sum(len(run) for _graph, run, _lo in runs[:same])
    skip = 0
    if last is not None and same < min(len(runs), len(last[1])):
        # the first run that changed: when its graph was resumed, its nodes before the resume point are at
        # the same places as in the run numbered last time (the owners there, hence the run's start, are kept)
        graph, run, lo = runs[same]
        then = last[1][same]
        if then[0] is graph and then[2] == lo and shared.get(graph.name, 0) > lo:
            skip = min(shared[graph.name] - lo, len(run), len(then[1]))
    for _graph, run, _lo in runs[same:]:
        # n.id = i, i + 1, ... over the run, in C (a Python loop was most of the renumbering's cost)
        if skip:
            deque(map(setattr, islice(run, skip, None), repeat("id"), range(i + skip, i + len(run))), maxlen=0)
            skip = 0
        else:
            deque(map(setattr, run, repeat("id"), range(i, i + len(run))), maxlen=0)
        i += len(run)
    _NUMBERED[model] = (model.structure_version, runs, owners)
    if _as_sorted(model) is order:
        # (every graph's op list is its order just sorted or kept: the runs are those graph_nodes gives)
        _RUNS[model] = (order, model.structure_version, {model.root.name: runs})


def _owner_positions(nodes: list[Node], start: int = 0) -> list[int]:
    """The positions in ``nodes`` (from ``start``) of the nodes owning subgraphs."""
    return list(compress(range(start, len(nodes)), map(_SUBGRAPHS, islice(nodes, start, None))))


# per model: what its last renumbering walked: the subgraph structure version, the runs (their nodes hold
# the ids given then) and per graph walked, its node list and the positions of the subgraph owners in it
_NUMBERED: weakref.WeakKeyDictionary[
    Model, tuple[int, list[tuple[Graph, list[Node], int]], dict[str, tuple[list[Node], list[int]]]]
] = weakref.WeakKeyDictionary()


_Run = tuple[Graph, list[Node], int]
# per model: the runs of GetAllNodes from some top graphs (by name) while every graph's op list is its remembered
# order (see _sorted_runs), with the remembered orders and the subgraph structure they were walked under
_RUNS: weakref.WeakKeyDictionary[Model, tuple[dict[str, list[Node]], int, dict[str, list[_Run]]]] = (
    weakref.WeakKeyDictionary()
)


def _as_sorted(model: Model) -> dict[str, list[Node]] | None:
    """The remembered orders of ``model`` when :func:`graph_nodes` of every graph is exactly its remembered
    order (its fast case: no node added or removed since the sort, the edge journal running), else None."""
    order = _TOPO.get(model)
    states = _STATE.get(model)
    if order is None or states is None or len(order) != len(model.graphs):
        return None
    for g in model.graphs:
        state = states.get(g.name)
        if state is None or state.order is not order.get(g.name) or len(state.order) != len(g.nodes):
            return None
        log = g._edge_log
        if log is not state.log or log.added or log.removed:  # type: ignore[union-attr]
            return None
    return order


def _sorted_runs(model: Model, top: Graph) -> list[_Run] | None:
    """:func:`_runs` of ``top`` with :func:`graph_nodes` (which :func:`ge_graph_nodes` is too) when every
    graph's op list is its remembered order (:func:`_as_sorted`; else None), each run's nodes at ``lo`` in
    their graph's remembered order. Reused while that holds and the subgraph structure is the same
    (``Model.structure_version``: subgraphs are attached by importers and builders, which add their graphs),
    so a large model's order queries walk its nodes once per sort, not once per query."""
    order = _as_sorted(model)
    if order is None:
        return None
    cached = _RUNS.get(model)
    if cached is None or cached[0] is not order or cached[1] != model.structure_version:
        cached = _RUNS[model] = (order, model.structure_version, {})
    runs = cached[2].get(top.name)
    if runs is None:
        runs = cached[2][top.name] = _runs(model, top, graph_nodes)
    return runs


def graph_nodes(model: Model, g: Graph) -> list[Node]:
    """The direct nodes of ``g`` in GE's order: the last topological sort, then nodes added since (GE appends
    new nodes to the list); the stored order when the model was never sorted."""
    order = _TOPO.get(model, {}).get(g.name)
    if order is None:
        return list(g.nodes.values())
    if len(order) == len(g.nodes):
        # the common case without a look at every node: the graph's edge journal, running since this order was
        # sorted, saw no node added or removed (nodes enter and leave the op list through add_node/remove_node,
        # or the journal is dropped by invalidate)
        state = _STATE.get(model, {}).get(g.name)
        log = g._edge_log
        if state is not None and state.order is order and log is state.log and not log.added and not log.removed:
            return list(order)
    stored = g.nodes.get
    kept = [n for n in order if stored(n.name) is n]
    if len(kept) == len(g.nodes):
        return kept
    known = {id(n) for n in kept}
    return kept + [n for n in g.nodes.values() if id(n) not in known]


def all_nodes(model: Model, g: Graph) -> list[Node]:
    """``ComputeGraph::GetAllNodes``: pre-order; a node is followed by all nodes of its subgraphs (first
    subgraph first, recursively) before its next sibling."""
    out: list[Node] = []
    for _graph, run, _lo in _sorted_runs(model, g) or _runs(model, g, graph_nodes):
        out += run
    return out


def _runs(
    model: Model,
    top: Graph,
    nodes_of: Callable[[Model, Graph], list[Node]],
    owners_of: Callable[[Graph, list[Node]], list[int]] | None = None,
    owners: dict[str, tuple[list[Node], list[int]]] | None = None,
) -> list[_Run]:
    """``GetAllNodes`` from ``top`` as runs of consecutive nodes of one graph, each graph's direct nodes in the
    order ``nodes_of`` gives: a run ends at a node owning subgraphs, whose subgraphs' runs follow (first
    subgraph first, recursively; a graph is walked once). Each run as ``(graph, nodes, lo)``: ``lo`` is the
    position of its first node in ``nodes_of(graph)``. Runs instead of one ``(graph, node)`` pair per node:
    no container per node is built. Do not modify the lists. ``owners_of(graph, nodes)``: the positions of
    the nodes owning subgraphs (default: looked up); ``owners`` gets each graph walked: its nodes and those
    positions."""
    out: list[_Run] = []
    seen: set[str] = set()
    graphs = {x.name: x for x in model.graphs}

    def walk(graph: Graph) -> None:
        if graph.name in seen:
            return
        seen.add(graph.name)
        nodes = nodes_of(model, graph)
        at = owners_of(graph, nodes) if owners_of is not None else _owner_positions(nodes)
        if owners is not None:
            owners[graph.name] = (nodes, at)
        start = 0
        for i in at:  # the nodes owning subgraphs
            out.append((graph, nodes[start : i + 1], start))
            start = i + 1
            for s in nodes[i].subgraph_names:
                if s in graphs:
                    walk(graphs[s])
        if start < len(nodes):
            out.append((graph, nodes[start:] if start else nodes, start))

    walk(top)
    return out


def _walk_all(model: Model, top: Graph, nodes_of: Callable[[Model, Graph], list[Node]]) -> list[tuple[Graph, Node]]:
    """``GetAllNodes`` from ``top`` with each graph's direct nodes in the order ``nodes_of`` gives."""
    runs = _sorted_runs(model, top) if nodes_of is graph_nodes or nodes_of is ge_graph_nodes else None
    return [(graph, n) for graph, run, _lo in runs or _runs(model, top, nodes_of) for n in run]


def ge_graph_nodes(model: Model, g: Graph) -> list[Node]:
    """The direct nodes of ``g`` in the order GE walks them: the remembered order of the last
    :func:`topological_sorting` (plus nodes added since), else GE's DFS order computed now (without remembering
    it or renumbering ids). A graph with a cycle, which GE cannot sort, keeps its stored order."""
    if _TOPO.get(model, {}).get(g.name) is not None:
        return graph_nodes(model, g)
    try:
        return dfs_topo_order(g)
    except PassFailure:
        return list(g.nodes.values())


def ge_all_nodes(model: Model, g: Graph | None = None) -> list[tuple[Graph, Node]]:
    """``GetAllNodes`` of ``g`` (root by default) as ``(graph, node)`` pairs, every graph in GE's order
    (:func:`ge_graph_nodes`): a node is followed by the nodes of its subgraphs, first subgraph first."""
    return _walk_all(model, model.root if g is None else g, ge_graph_nodes)


def node_order_rows(model: Model, g: Graph | None = None) -> list[tuple[str, str, int]]:
    """The relation ``node_order(graph, node, ord)``: each node's position in :func:`ge_all_nodes` of ``g``."""
    top = model.root if g is None else g
    rows: list[tuple[str, str, int]] = []
    k = 0
    runs = _sorted_runs(model, top)
    if runs is not None:
        # the names straight from the sorts' walks (each run sits at lo in its graph's remembered order)
        states = _STATE[model]
        for graph, run, lo in runs:
            n = len(run)
            rows += zip(repeat(graph.name), states[graph.name].names[lo : lo + n], range(k, k + n))
            k += n
        return rows
    for graph, run, _lo in _runs(model, top, ge_graph_nodes):
        rows += zip(repeat(graph.name), [n.name for n in run], range(k, k + len(run)))
        k += len(run)
    return rows

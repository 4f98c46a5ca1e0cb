"""``topological_resort`` resumes GE's DFS where the edits since the last sort begin to matter
(``order._resume_dfs``, fed by the edge journal ``Graph._edge_log``): the resumed order must be exactly the
full DFS order (and the frozen oracle's) after any edit, journalled or not (direct type changes, declared
inputs, op-list reorders, direct input edits with ``invalidate``), and the resume must actually be taken for
the edits the layout pass makes (Identities late in a large graph)."""

from __future__ import annotations

import random

import pytest

from anchorlog.analysis import order
from anchorlog.errors import PassFailure
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.runtime.rewrite import deferred_placement, insert_identity_after, insert_identity_before
from tests.oracles import ge_order as oracle

_TYPES = ["Data", "Const", "Add", "Relu", "Input", "Send", "Recv", "Identity"]
_WEIGHTS = [3, 3, 8, 6, 1, 1, 1, 2]


def _random_graph(rng: random.Random, name: str, size: int) -> Graph:
    """A DAG (no NextIteration: those graphs are always sorted in full) with multi-output producers, repeated
    consumers, holes, control edges and declared inputs, nodes stored in shuffled order."""
    g = Graph(name)
    ranked = [Node(f"{name}_n{i}", rng.choices(_TYPES, _WEIGHTS)[0]) for i in range(size)]
    stored = ranked[:]
    rng.shuffle(stored)
    for n in stored:
        g.add_node(n)
    for pos, dst in enumerate(ranked):
        if pos == 0:
            continue
        for slot in range(rng.randint(0, 3)):
            if rng.random() < 0.2:
                continue
            src = ranked[rng.randrange(max(0, pos - 8), pos)]
            g.connect(src.name, rng.choice([0, 0, 0, 1, 2]), dst.name, slot)
        if rng.random() < 0.2:
            g.add_ctrl(ranked[rng.randrange(pos)].name, dst.name)
    if ranked and rng.random() < 0.5:
        # a sink gathering many outputs, like a NetOutput (its inputs are where the layout pass inserts)
        sink = g.add_node(Node(f"{name}_sink", "NetOutput"))
        for slot, src in enumerate(rng.sample(ranked, min(len(ranked), rng.randint(1, 12)))):
            g.connect(src.name, 0, sink.name, slot)
    if rng.random() < 0.4:
        g.input = [n.name for n in rng.sample(stored, min(3, len(stored)))]
    return g


def _edit(rng: random.Random, model: Model, g: Graph) -> None:
    """One edit, biased to the end of the graph's current order (where a resume keeps most of the walk)."""
    names = [n.name for n in order.graph_nodes(model, g)]
    if not names:
        return
    late = names[int(len(names) * rng.choice([0.5, 0.8, 0.95])) :] or names
    kind = rng.choice(["after", "before", "ctrl", "unctrl", "remove", "disconnect", "relink", "direct"])
    pick = g.nodes[rng.choice(late)]
    if kind == "after" and pick.name in g.nodes:
        users = g.consumers(pick.name, 0)
        if users:
            insert_identity_after(g, (pick.name, 0), users[: rng.randint(1, len(users))], name="ia")
    elif kind == "before":
        slots = [i for i, a in enumerate(pick.inputs) if a is not None]
        if slots:
            insert_identity_before(g, (pick.name, rng.choice(slots)), name="ib")
    elif kind == "ctrl":
        src = rng.choice(names[: names.index(pick.name) + 1])
        if src != pick.name:
            g.add_ctrl(src, pick.name)
    elif kind == "unctrl" and pick.ctrl_inputs:
        g.remove_ctrl(rng.choice(pick.ctrl_inputs), pick.name)
    elif kind == "remove":
        g.remove_node(pick.name)
    elif kind == "disconnect" and pick.inputs:
        g.disconnect(pick.name, rng.randrange(len(pick.inputs)))
    elif kind == "relink":
        # the same edge cut and made again: the inputs are unchanged, the producer's link order is not
        slots = [i for i, a in enumerate(pick.inputs) if a is not None]
        if slots:
            slot = rng.choice(slots)
            src, out = pick.inputs[slot]  # type: ignore[misc]
            g.disconnect(pick.name, slot)
            g.connect(src, out, pick.name, slot)
    elif kind == "direct":
        # edits the journal cannot see: each must make the resume give up or still come out right
        what = rng.choice(["type", "input", "reorder", "invalidate"])
        if what == "type":
            # (types are set by importers; the resume checks the start nodes' types, the ones the walk reads)
            starts = [n for n in g.nodes.values() if not n.ctrl_inputs and all(a is None for a in n.inputs)]
            if starts:
                rng.choice(starts).type = rng.choice(["Data", "Const", "Relu", "Input"])
        elif what == "input":
            g.input = list(reversed(g.input)) + [pick.name]
        elif what == "reorder":
            items = list(g.nodes.items())
            rng.shuffle(items)
            g.nodes.clear()
            g.nodes.update(items)
        else:
            if pick.inputs:
                pick.inputs[0] = None
            g.invalidate()


def _full(g: Graph) -> list[str] | str:
    try:
        return [n.name for n in order.dfs_topo_order(g)]
    except PassFailure as err:
        return f"failed: {err}"


def _oracle(g: Graph) -> list[str] | str:
    try:
        return [n.name for n in oracle.dfs_topo_order(g)]
    except PassFailure as err:
        return f"failed: {err}"


def _scenario(seed: int, monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """Random model, full sort, then rounds of random edits each followed by a resort checked against the full
    sort and the oracle; returns, per resort attempt, whether the resume was taken."""
    rng = random.Random(seed)
    model = Model("m", [_random_graph(rng, "root", rng.randint(5, 80))])
    model.add_graph(_random_graph(rng, "sub", rng.randint(0, 10)))
    resumed: list[bool] = []
    real = order._resume_dfs

    def spy(g: Graph, state: order._SortState) -> tuple[list[Node], list[tuple[int, list[Node]]]] | None:
        out = real(g, state)
        resumed.append(out is not None)
        return out

    monkeypatch.setattr(order, "_resume_dfs", spy)
    try:
        order.topological_sorting(model)
    except PassFailure:
        return resumed
    for _ in range(rng.randint(1, 6)):
        g = rng.choice(model.graphs)
        with deferred_placement([g]) if rng.random() < 0.5 else _nothing():
            for _ in range(rng.randint(1, 3)):
                _edit(rng, model, g)
        # (plain order queries in between must not disturb the remembered state)
        expected = {x.name: _full(x) for x in model.graphs}
        assert expected == {x.name: _oracle(x) for x in model.graphs}
        try:
            order.topological_resort(model, {g.name})
        except PassFailure as err:
            assert f"failed: {err}" == expected[g.name]
            return resumed
        assert [n.name for n in order.graph_nodes(model, g)] == expected[g.name]
        ids = [n.id for n in order.all_nodes(model, model.root)]
        assert ids == list(range(len(ids)))
    return resumed


@pytest.mark.parametrize("seed", range(150))
def test_resumed_sort_equals_full_sort_and_oracle(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _scenario(seed, monkeypatch)


def test_random_edits_take_the_resume_often(monkeypatch: pytest.MonkeyPatch) -> None:
    taken = [x for seed in range(1000, 1060) for x in _scenario(seed, monkeypatch)]
    assert sum(taken) >= len(taken) // 5, (sum(taken), len(taken))


class _nothing:
    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


def test_resume_is_taken_for_late_identities_in_a_generated_model(monkeypatch: pytest.MonkeyPatch) -> None:
    model = generate_transformer(layers=2, seed=3)
    order.topological_sorting(model)
    root = model.root
    names = [n.name for n in order.graph_nodes(model, root)]
    taken: list[bool] = []
    real = order._resume_dfs
    monkeypatch.setattr(order, "_resume_dfs", lambda g, s: taken.append(True) or real(g, s))
    with deferred_placement([root]):
        for name in names[-40::7]:
            node = root.nodes[name]
            slots = [i for i, a in enumerate(node.inputs) if a is not None]
            if slots:
                insert_identity_before(root, (name, slots[0]), name="late")
    expected = [n.name for n in oracle.dfs_topo_order(root)]
    resumed = real(root, order._STATE[model][root.name])
    assert resumed is not None, "the resume gave up on edits late in the graph"
    assert [n.name for n in resumed[0]] == expected
    order.topological_resort(model, {root.name})
    assert taken
    assert [n.name for n in order.graph_nodes(model, root)] == expected

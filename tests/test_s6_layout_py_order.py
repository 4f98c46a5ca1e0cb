"""Session 6 speed-ups of GE's order (:mod:`anchorlog.analysis.order`) against the frozen oracle
(``tests/oracles/ge_order.py``) and against the plain paths they replace:

* the first sort of a graph builds its consumer index, waiting counts, sources and consumer lists in one pass
  (``_index_and_count``): the index it installs is exactly ``Graph._ensure_index``'s, and the walk's inputs are
  those the already-indexed path derives (``_count`` + ``_users_of``);
* the walk runs on names (``_walk_stack``), its consumer lists flattened per producer; the names a sort keeps
  (``_SortState.names``) are those of its order;
* the ``GetAllNodes`` runs are remembered per sort (``_sorted_runs``) and reused by ``all_nodes``,
  ``ge_all_nodes`` and ``node_order_rows`` while every graph's op list is its remembered order: after any edit
  (journalled or not, nodes added or removed, subgraph structure changed) the queries must give what the
  oracle computes afresh.
"""

from __future__ import annotations

import copy
import random

import pytest

from anchorlog.analysis import order as new
from anchorlog.errors import PassFailure
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.runtime.rewrite import insert_identity_before
from tests.oracles import ge_order as oracle
from tests.test_order import _random_model


def _queries(mod, model: Model) -> tuple:  # type: ignore[no-untyped-def]
    """Every order query of ``mod`` on ``model`` (names only), for each graph as top."""
    out = []
    for top in model.graphs:
        out.append(
            (
                [n.name for n in mod.all_nodes(model, top)],
                [(g.name, n.name) for g, n in mod.ge_all_nodes(model, top)],
                mod.node_order_rows(model, top),
            )
        )
    out.append(mod.node_order_rows(model))
    out.append({g.name: [n.name for n in mod.graph_nodes(model, g)] for g in model.graphs})
    return tuple(out)


def _both_sorted(model: Model) -> bool:
    try:
        oracle.topological_sorting(model)
        new.topological_sorting(model)
    except PassFailure:
        return False
    return True


def _plain_index(g: Graph) -> tuple[dict, dict]:
    """The consumer index ``Graph._ensure_index`` builds, on a copy of ``g``."""
    twin = copy.deepcopy(g)
    twin.invalidate()
    twin._ensure_index()
    return twin._consumers, twin._ctrl_succ  # type: ignore[return-value]


@pytest.mark.parametrize("seed", range(120))
def test_one_pass_scan_builds_the_plain_index_and_walk_inputs(seed: int) -> None:
    model = _random_model(seed)
    for g in model.graphs:
        g.invalidate()
        cons, succ = _plain_index(g)
        stored, pending, sources, nexts, users_of = new._index_and_count(g)
        # the index installed is exactly the plain one (same keys in the same order, same lists)
        assert list(g._consumers.items()) == list(cons.items())  # type: ignore[union-attr]
        assert list(g._ctrl_succ.items()) == list(succ.items())  # type: ignore[union-attr]
        # and the walk's inputs are those the indexed path derives from it
        stored2, pending2, sources2, nexts2 = new._count(g.nodes)
        assert stored == stored2 == list(g.nodes.values())
        assert pending == pending2 and nexts == nexts2
        assert (sources.inputs, sources.input_types, sources.others, sources.other_types) == (
            sources2.inputs,
            sources2.input_types,
            sources2.others,
            sources2.other_types,
        )
        assert users_of == new._users_of(g._consumers)  # type: ignore[arg-type]
        # flattened per producer: ascending out anchor, each anchor's consumers in link order
        for src, users in users_of.items():
            outs = sorted(out for (s, out) in cons if s == src)
            assert users == [u for out in outs for u in cons[(src, out)]]


@pytest.mark.parametrize("seed", range(120))
def test_sorted_state_names_are_the_order_names(seed: int) -> None:
    model = _random_model(seed)
    try:
        new.topological_sorting(model)
    except PassFailure:
        return
    for g in model.graphs:
        state = new._STATE[model].get(g.name)
        if state is not None:
            assert state.names == [n.name for n in state.order]
            assert state.stored == list(g.nodes.values())
            assert state.start_types == [n.type for n in state.start]


def _edit(rng: random.Random, model: Model) -> None:
    """One edit of any kind the order queries must notice (or may ignore, when it cannot change them)."""
    g = rng.choice(model.graphs)
    names = list(g.nodes)
    kind = rng.choice(
        ["add", "identity", "remove", "swap", "ctrl", "disconnect", "invalidate", "dict", "graph", "owner"]
    )
    if kind == "add":
        g.add_node(Node(g.unique_name("added"), "Relu"), after=rng.choice([None, *names[:3]]))
    elif kind == "identity" and names:
        dst = g.nodes[rng.choice(names)]
        slots = [i for i, a in enumerate(dst.inputs) if a is not None]
        if slots:
            insert_identity_before(g, (dst.name, rng.choice(slots)), name="ib")
    elif kind == "remove" and names:
        g.remove_node(rng.choice(names))
    elif kind == "swap" and names:
        # one node removed, another added: the node count is unchanged
        g.remove_node(rng.choice(names))
        g.add_node(Node(g.unique_name("swapped"), "Data"))
    elif kind == "ctrl" and len(names) > 1:
        a, b = rng.sample(names, 2)
        g.add_ctrl(a, b)
    elif kind == "disconnect" and names:
        dst = g.nodes[rng.choice(names)]
        if dst.inputs:
            g.disconnect(dst.name, rng.randrange(len(dst.inputs)))
    elif kind == "invalidate":
        g.invalidate()
    elif kind == "dict" and names:
        # nodes added behind the journal's back (a direct edit of the op list)
        n = Node(g.unique_name("direct"), "Const")
        n.graph = g
        g.nodes[n.name] = n
    elif kind == "graph":
        sub = Graph(f"new_sub{len(model.graphs)}")
        sub.add_node(Node(sub.unique_name("inner"), "Data"))
        model.add_graph(sub)
        if names:
            g.nodes[rng.choice(names)].subgraph_names.append(sub.name)
    elif kind == "owner" and len(model.graphs) > 1:
        # a subgraph moved to another owner together with a graph added (a builder's way of attaching one)
        owners = [n for x in model.graphs for n in x.nodes.values() if n.subgraph_names]
        if owners and names:
            moved = rng.choice(owners).subgraph_names.pop()
            g.nodes[rng.choice(names)].subgraph_names.append(moved)
            # (the list of graphs ends up the same, its structure version does not)
            spare = model.add_graph(Graph(f"spare{len(model.graphs)}"))
            model.remove_graph(spare.name)


@pytest.mark.parametrize("seed", range(200))
def test_remembered_runs_answer_like_the_oracle_after_any_edit(seed: int) -> None:
    rng = random.Random(seed)
    model = _random_model(seed)
    if not _both_sorted(model):
        return
    assert _queries(new, model) == _queries(oracle, model)
    assert _queries(new, model) == _queries(oracle, model)  # (answered from the remembered runs)
    if not any(n.type in ("NextIteration", "RefNextIteration") for n in model.all_nodes()):
        assert new._sorted_runs(model, model.root) is not None  # the remembered runs are in use
    for _ in range(rng.randint(1, 5)):
        _edit(rng, model)
        assert _queries(new, model) == _queries(oracle, model)
        if rng.random() < 0.4:
            edited = {g.name for g in model.graphs}
            try:
                oracle.topological_resort(model, edited)
            except PassFailure:
                return
            new.topological_resort(model, edited)
            assert [n.id for n in new.all_nodes(model, model.root)] == list(
                range(len(new.all_nodes(model, model.root)))
            )
            assert _queries(new, model) == _queries(oracle, model)


def test_generated_model_with_layout_edits_orders_like_the_oracle() -> None:
    model = generate_transformer(layers=3, seed=5)
    assert _both_sorted(model)
    ids = [(n.name, n.id) for n in model.all_nodes()]
    assert _queries(new, model) == _queries(oracle, model)
    root = model.root
    rng = random.Random(7)
    names = [n.name for n in new.graph_nodes(model, root)]
    for name in rng.sample(names, 12):
        node = root.nodes[name]
        slots = [i for i, a in enumerate(node.inputs) if a is not None]
        if slots:
            insert_identity_before(root, (name, slots[0]), name="late")
    assert _queries(new, model) == _queries(oracle, model)
    oracle.topological_resort(model, {root.name})
    oracle_ids = [(n.name, n.id) for n in model.all_nodes()]
    new.topological_resort(model, {root.name})
    assert [(n.name, n.id) for n in model.all_nodes()] == oracle_ids != ids
    assert _queries(new, model) == _queries(oracle, model)


def _ids(model: Model) -> list[tuple[str, str, int | None]]:
    return [(g.name, n.name, n.id) for g in model.graphs for n in g.nodes.values()]


def _resort_new_first(model: Model, edited: set[str]) -> bool:
    """Resort with the package first, then with the oracle (which renumbers every node itself): the ids the
    package leaves (partly kept from its last renumbering) must be those the oracle gives."""
    try:
        new.topological_resort(model, edited)
    except PassFailure:
        return False
    ids = _ids(model)
    oracle.topological_resort(model, edited)
    assert ids == _ids(model)
    assert _queries(new, model) == _queries(oracle, model)
    return True


@pytest.mark.parametrize("seed", range(150))
def test_incremental_renumbering_gives_the_oracle_ids(seed: int) -> None:
    rng = random.Random(seed)
    model = _random_model(seed)
    if rng.random() < 0.5:
        from tests.test_s5_layout_py_resume import _random_graph as resumable

        # larger DAGs without NextIteration (resumed sorts), a NetOutput-like sink, declared inputs
        model = Model("m", [resumable(rng, "root", rng.randint(5, 80))])
        for k in range(rng.randint(0, 3)):
            model.add_graph(resumable(rng, f"sub{k}", rng.randint(0, 10)))
            owner = rng.choice(list(model.root.nodes.values()))
            owner.subgraph_names.append(f"sub{k}")
    if not _both_sorted(model):
        return
    for _ in range(rng.randint(1, 6)):
        for _ in range(rng.randint(1, 3)):
            _edit(rng, model)
        edited = {g.name for g in model.graphs if rng.random() < 0.7}
        if not _resort_new_first(model, edited):
            return


def test_resort_after_late_identities_keeps_the_leading_ids_and_owner_positions(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = generate_transformer(layers=3, seed=5)
    assert _both_sorted(model)
    root = model.root
    names = [n.name for n in new.graph_nodes(model, root)]
    for name in names[-30::6]:
        node = root.nodes[name]
        slots = [i for i, a in enumerate(node.inputs) if a is not None]
        if slots:
            insert_identity_before(root, (name, slots[0]), name="late")
    looked_up: list[int] = []
    real = new._owner_positions
    monkeypatch.setattr(new, "_owner_positions", lambda nodes, start=0: looked_up.append(start) or real(nodes, start))
    first = root.nodes[names[0]]
    assert first.id == 0
    first.id = -7  # (a marker: a node renumbered again would lose it)
    new.topological_resort(model, {root.name})
    assert first.id == -7, "the leading runs were renumbered"
    assert looked_up and all(start > len(names) // 2 for start in looked_up), looked_up  # only the late part
    first.id = 0
    ids = _ids(model)
    oracle.topological_resort(model, {root.name})
    assert ids == _ids(model)


@pytest.mark.parametrize("owner_at", [30, 46, 47, 48, 49, 60])
def test_resort_renumbers_right_around_the_resume_point(owner_at: int) -> None:
    # a chain of 64 nodes (its sort keeps checkpoints at 32, 48, 56, ...); an Identity before node 49 journals
    # nodes 48 and 49, so the walk resumes at 48; a subgraph owner sits before, at or after that point
    model = Model("m", [Graph("root")])
    root = model.root
    sub = model.add_graph(Graph("sub"))
    for k in range(3):
        sub.add_node(Node(f"s{k}", "Const"))
    names = [f"n{k}" for k in range(64)]
    root.add_node(Node(names[0], "Data"))
    for k in range(1, 64):
        root.add_node(Node(names[k], "Relu"))
        root.connect(names[k - 1], 0, names[k], 0)
    root.nodes[names[owner_at]].subgraph_names.append("sub")
    assert _both_sorted(model)
    assert [c for c, _ in new._STATE[model]["root"].marks][:2] == [32, 48]
    insert_identity_before(root, (names[49], 0), name="ident")
    taken: list[int] = []
    real = new._resume_dfs
    new_resume = lambda g, s: (lambda r: taken.append(r[3]) or r)(real(g, s))  # noqa: E731
    try:
        new._resume_dfs = new_resume  # type: ignore[assignment]
        assert _resort_new_first(model, {"root"})
    finally:
        new._resume_dfs = real  # type: ignore[assignment]
    assert taken == [48]

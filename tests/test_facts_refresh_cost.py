"""``FactDB.refresh_nodes`` after large edits: its work grows about linearly with the edit, and the refreshed
tables equal a fresh derivation.

The cost is not timed: it is counted -- SQLite virtual-machine steps (a progress handler called every
``_VM_STEPS`` instructions) plus Python function calls (C builtins included) made during the refresh. A
refresh of all n nodes must cost about 4x at 4n nodes; the quadratic refresh this guards against (a position
sweep re-scanning the listed positions per node, an ``UPDATE`` whose ``CASE`` had one branch per listed node)
cost 16x.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.facts.relations import RELATIONS, FactDB

try:  # tests/ is on sys.path in pytest's default import mode
    from test_facts_invariants import add_while_with_add_body
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.test_facts_invariants import add_while_with_add_body

_VM_STEPS = 100


def _model(n: int) -> Model:
    """A chain of ``n`` ops (Data, ReLU..., NetOutput) with a side branch every 7th op and a While owning a
    small body, so that subgraph rows and parent links are refreshed too."""
    b = GraphBuilder("root", model_name="chain")
    b.node("n0:Data")
    for i in range(1, n - 1):
        b.chain(f"n{i - 1}", f"n{i}:ReLU")
        if i % 7 == 0:
            b.node(f"side{i}:Add", inputs=2, outputs=1)
            b.edge(f"n{i - 1}", 0, f"side{i}", 0)
            b.edge(f"n{i}", 0, f"side{i}", 1)
            b.ctrl(f"n{i - 1}", f"side{i}")
    b.chain(f"n{n - 2}", "out:NetOutput")
    add_while_with_add_body(b)
    b.edge("n0", 0, "w", 0)
    b.edge("n1", 0, "w", 1)
    model = b.build()
    for g in model.graphs:
        g.touched.clear()
    return model


# -- the edits (each returns nothing; the graph records what it touched) ------------------------------------------
def _touch_all(g: Graph) -> None:
    g.invalidate()  # every node marked, nothing changed (what a relink that kept the order would record)


def _reverse_order(g: Graph) -> None:
    names = list(g.nodes)[::-1]
    reordered = {name: g.nodes[name] for name in names}
    g.nodes.clear()
    g.nodes.update(reordered)
    g.invalidate()


def _rotate_order(g: Graph) -> None:
    """The first third of the ops moved to the end (a relink that moved a block)."""
    names = list(g.nodes)
    k = len(names) // 3
    reordered = {name: g.nodes[name] for name in names[k:] + names[:k]}
    g.nodes.clear()
    g.nodes.update(reordered)
    g.invalidate()


def _edit_half(g: Graph) -> None:
    for i, node in enumerate(list(g.nodes.values())):
        if i % 2 == 0:
            node.set_attr("_edited", i)


def _insert_identities(g: Graph) -> None:
    """An Identity on every other data edge of the chain (about n/2 insertions spread over the graph)."""
    for i, (src, so, dst, di) in enumerate(list(g.data_edges())):
        if i % 2:
            continue
        ident = g.unique_name(f"{src}_id")
        g.add_node(
            Node(ident, "Identity", inputs=[(src, so)], input_desc=[TensorDesc()], output_desc=[TensorDesc()]),
            after=src,
        )
        g.connect(ident, 0, dst, di)


def _remove_side_branches(g: Graph) -> None:
    for name in [n for n in g.nodes if n.startswith("side")]:
        g.remove_node(name)


EDITS: dict[str, Callable[[Graph], None]] = {
    "touch_all": _touch_all,
    "reverse_order": _reverse_order,
    "rotate_order": _rotate_order,
    "edit_half": _edit_half,
    "insert_identities": _insert_identities,
    "remove_side_branches": _remove_side_branches,
}


def _sorted_contents(db: FactDB) -> dict[str, list[tuple]]:
    return {rel: sorted(db.rows(rel), key=repr) for rel in RELATIONS}


def _refresh_work(n: int, edit: Callable[[Graph], None]) -> int:
    """Counted work of ``refresh_nodes`` after ``edit`` on the root of an ``n``-op model; also checks that the
    refreshed tables equal a fresh derivation."""
    model = _model(n)
    db = FactDB.from_model(model)
    g = model.root
    edit(g)
    touched = sorted(g.touched)
    g.touched.clear()
    steps = [0]
    calls = [0]

    def on_vm_steps() -> int:
        steps[0] += 1
        return 0

    def on_call(frame: object, event: str, arg: object) -> None:
        if event in ("call", "c_call"):
            calls[0] += 1

    db.conn.set_progress_handler(on_vm_steps, _VM_STEPS)
    old_profile = sys.getprofile()
    sys.setprofile(on_call)
    try:
        db.refresh_nodes(g, touched, model)
    finally:
        sys.setprofile(old_profile)
        db.conn.set_progress_handler(None, 0)
    assert _sorted_contents(db) == _sorted_contents(FactDB.from_model(model))
    return steps[0] + calls[0]


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_refresh_work_grows_linearly_with_the_edit(edit):
    small = _refresh_work(300, EDITS[edit])
    large = _refresh_work(1200, EDITS[edit])
    # 4x the nodes (and 4x the edit): linear work is ~4x; the quadratic refresh was ~16x
    assert large < 6 * small, (edit, small, large)


@pytest.mark.parametrize("edit", sorted(EDITS))
def test_large_edit_refresh_equals_fresh_derivation(edit):
    """Also through the pipeline's shared fact database, with the body subgraph edited as well."""
    model = _model(200)
    ctx = PassContext()
    shared_facts(model, ctx)
    for g in model.graphs:
        EDITS[edit](g)
    cached = shared_facts(model, ctx)
    assert _sorted_contents(cached) == _sorted_contents(FactDB.from_model(model))


def test_small_edit_after_large_refresh_still_equals_fresh_derivation():
    """Positions renumbered by a large refresh are dense again: a following small insertion shifts them in place
    and still gives a fresh derivation's node_prop."""
    model = _model(300)
    db = FactDB.from_model(model)
    g = model.root
    _reverse_order(g)
    db.refresh_nodes(g, sorted(g.touched), model)
    g.touched.clear()
    g.add_node(Node("late", "Identity", input_desc=[TensorDesc()], output_desc=[TensorDesc()]), after="n150")
    db.refresh_nodes(g, sorted(g.touched), model)
    assert _sorted_contents(db) == _sorted_contents(FactDB.from_model(model))


@pytest.mark.parametrize("removed", [1, 15, 16, 17, 40])
def test_positions_after_spread_removals_equal_fresh_derivation(removed):
    """Each removal is one step of the position shift: up to _CASE_STEPS steps go through one CASE, more through
    the step table; both give a fresh derivation's positions, and a later insertion shifts them right again."""
    from anchorlog.facts import relations

    model = _model(300)
    db = FactDB.from_model(model)
    g = model.root
    for i in range(removed):
        g.remove_node(f"n{5 + 7 * i}")
    statements: list[str] = []
    db.conn.set_trace_callback(statements.append)
    db.refresh_nodes(g, sorted(g.touched), model)
    db.conn.set_trace_callback(None)
    g.touched.clear()
    assert any("_anchorlog_pos_step" in s for s in statements) == (removed > relations._CASE_STEPS)
    assert _sorted_contents(db) == _sorted_contents(FactDB.from_model(model))
    g.add_node(Node("late", "Identity", input_desc=[TensorDesc()], output_desc=[TensorDesc()]), after="n3")
    db.refresh_nodes(g, sorted(g.touched), model)
    assert _sorted_contents(db) == _sorted_contents(FactDB.from_model(model))

"""Invariants of the fact relations on random builder graphs (hypothesis) and on GE's real graph dumps:
every relation agrees with the IR it came from, and the SQLite tables equal the derived rows."""

from __future__ import annotations

import glob
import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import COLUMNS, RELATIONS, FactDB, tables_from_model
from tests.shared_paths import SHARED

TYPES = ["Data", "ReLU", "Add", "Reshape", "Merge", "TensorMove", "Const", "Concat", "Identity"]


@st.composite
def random_models(draw) -> Model:
    """A DAG of up to 12 ops in a root graph (edges only from earlier to later ops), some control edges, some
    reuse flags, optionally a While owning a body subgraph with parent indexes."""
    n = draw(st.integers(1, 12))
    b = GraphBuilder("root", model_name="rnd")
    names = []
    for i in range(n):
        t = draw(st.sampled_from(TYPES))
        name = f"n{i}"
        b.node(f"{name}:{t}")
        names.append(name)
        if i and t not in ("Data", "Const"):
            for _ in range(draw(st.integers(0, 3))):
                src = names[draw(st.integers(0, i - 1))]
                b.edge(src, draw(st.integers(0, 1)), name, None)
        if i and draw(st.booleans()):
            b.ctrl(names[draw(st.integers(0, i - 1))], name)
        if draw(st.integers(0, 4)) == 0:
            node = b.graph.node(name)
            if node.num_inputs:
                b.reuse_input(name, 0, draw(st.integers(0, node.num_inputs - 1)))
    if draw(st.booleans()):
        add_while_with_add_body(b)
        b.edge(names[0], 0, "w", 0)
    return b.build()


def add_while_with_add_body(b: GraphBuilder) -> None:
    """A While ``w`` (2 inputs, 2 outputs, inputs left to the caller) whose body ``body`` adds its two Data
    into output 0 and passes the second through to output 1."""
    b.node("w:While", inputs=2, outputs=2)
    body = b.subgraph("body", owner="w", index=1)
    body.data("bx", 0)
    body.data("by", 1)
    body.chain("bx", "bz:Add")
    body.chain("by", "bz")
    body.output("bz", 0)
    body.output("by", 1)


def check_against_ir(model: Model, db: FactDB) -> None:
    rows = {rel: db.rows(rel) for rel in RELATIONS}
    # SQLite holds exactly the derived rows, in derivation order
    derived = tables_from_model(model, next(iter(db.models)))
    for rel in RELATIONS:
        assert rows[rel] == derived[rel], rel
    nodes = {(r[0], r[1]): r[2] for r in rows["node"]}
    assert len(nodes) == model.num_nodes() == len(rows["node_prop"])
    assert {r[0] for r in rows["graph"]} == {g.name for g in model.graphs}
    # edges: both ends exist; each input has at most one producer; counts as in the IR
    seen_inputs = set()
    n_out = {(r[0], r[1]): r[6] for r in rows["node_prop"]}
    for g, src, so, dst, di in rows["data_edge"]:
        assert (g, dst) in nodes and (g, src) in nodes
        assert 0 <= so < n_out[(g, src)]
        assert (g, dst, di) not in seen_inputs
        seen_inputs.add((g, dst, di))
    assert len(rows["data_edge"]) == sum(len(list(gr.data_edges())) for gr in model.graphs)
    assert len(rows["ctrl_edge"]) == sum(len(list(gr.ctrl_edges())) for gr in model.graphs)
    # in_anchor.connected agrees with data_edge; anchor counts agree with node_prop
    connected = {(r[0], r[1], r[2]) for r in rows["in_anchor"] if r[3] == 1}
    assert connected == seen_inputs
    props = {(r[0], r[1]): r for r in rows["node_prop"]}
    n_in_rows: dict[tuple, int] = {}
    for r in rows["in_anchor"]:
        n_in_rows[(r[0], r[1])] = n_in_rows.get((r[0], r[1]), 0) + 1
    n_out_rows: dict[tuple, int] = {}
    for r in rows["out_anchor"]:
        n_out_rows[(r[0], r[1])] = n_out_rows.get((r[0], r[1]), 0) + 1
    for key, p in props.items():
        assert n_in_rows.get(key, 0) == p[5] and n_out_rows.get(key, 0) == p[6]
    # ref_io: one row per output at most, on an existing output
    outs = {(r[0], r[1], r[2]) for r in rows["out_anchor"]}
    refs = [(r[0], r[1], r[2]) for r in rows["ref_io"]]
    assert len(refs) == len(set(refs)) and set(refs) <= outs
    # parent links point at existing owners and anchors
    for sub, d, pg, pn, k in rows["parent_in"]:
        assert (sub, d) in nodes and (pg, pn) in nodes
        assert 0 <= k < props[(pg, pn)][5]
        assert (pg, pn, sub) in {(r[0], r[1], r[3]) for r in rows["subgraph"]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_models())
def test_random_graphs_facts_agree_with_ir(model):
    db = FactDB.from_model(model)
    check_against_ir(model, db)
    frames = db.frames()
    for rel in RELATIONS:
        assert [tuple(r) for r in frames[rel].itertuples(index=False)] == db.rows(rel)
        assert tuple(frames[rel].columns) == COLUMNS[rel]


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_models())
def test_refresh_after_random_edit_equals_fresh_derivation(model):
    db = FactDB.from_model(model)
    root = model.root
    victim = list(root.nodes)[-1]
    if root.node(victim).subgraph_names:
        return
    root.remove_node(victim)
    db.refresh_graph(root)
    fresh = FactDB.from_model(model)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


REAL = sorted(glob.glob(f"{SHARED}/real-graphs/*.txt"))


@pytest.mark.skipif(not REAL, reason="real GE dumps not available")
@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_real_graph_facts_agree_with_ir(path):
    from anchorlog.facts import ge_io

    model = ge_io.read_model(path)
    db = FactDB.from_model(model)
    check_against_ir(model, db)
    # every op attr and tensor attr of the dump is a fact; origin_format/origin_shape equal to the tensor's own
    # format/shape are the anchor rows' origin columns instead of tensor_attr rows (docs/facts.md)
    assert db.count("node_attr") == sum(len(n.attrs) for n in model.all_nodes())
    descs = [(n, io, i, td) for n in model.all_nodes() for io, tds in (("in", n.input_desc), ("out", n.output_desc))
             for i, td in enumerate(tds)]  # fmt: skip
    expected = {
        (n.name, io, i, key) for n, io, i, td in descs for key, a in td.attrs.items() if not _implied_origin(td, key, a)
    }
    assert {(r[1], r[2], r[3], r[4]) for r in db.rows("tensor_attr")} == expected
    assert db.count("tensor_attr") == len(expected)
    anchors = {(r[1], "in", r[2]): r for r in db.rows("in_anchor")}
    anchors.update({(r[1], "out", r[2]): r for r in db.rows("out_anchor")})
    for n, io, i, td in descs:
        row = anchors[(n.name, io, i)]
        ofmt, oshape = (row[7], row[8]) if io == "in" else (row[6], row[7])
        assert ofmt == td.attr("origin_format", td.layout)
        assert json.loads(oshape) == td.attr("origin_shape", td.shape)


def _implied_origin(td, key: str, a) -> bool:
    """An origin attr that only repeats the descriptor's own format/shape (no tensor_attr row for it)."""
    if key == "origin_format":
        return a.kind == "s" and a.value == td.layout
    if key == "origin_shape":
        return a.kind == "list" and a.value.kind in ("i", None) and not a.value.other and a.value.items == td.shape
    return False


@st.composite
def edited_models(draw):
    """A random model plus one random local edit; returns (model, facts before the edit, touched nodes)."""
    from anchorlog.facts.graph import Node, TensorDesc

    model = draw(random_models())
    db = FactDB.from_model(model)
    g = model.root
    kind = draw(st.sampled_from(["insert_identity", "remove_leaf", "set_attr", "add_ctrl", "rewire"]))
    names = list(g.nodes)
    edges = list(g.data_edges())
    touched: set[str] = set()
    if kind == "insert_identity" and edges:
        src, so, dst, di = edges[draw(st.integers(0, len(edges) - 1))]
        ident = g.unique_name("ident")
        g.add_node(
            Node(ident, "Identity", inputs=[(src, so)], input_desc=[TensorDesc()], output_desc=[TensorDesc()]),
            after=src,
        )
        g.connect(ident, 0, dst, di)
        touched = {ident, dst}
    elif kind == "remove_leaf":
        leaves = [n for n in names if not any(g.consumers(n, o) for o in range(4)) and not g.ctrl_successors(n)]
        leaves = [n for n in leaves if not g.node(n).subgraph_names]
        if leaves:
            victim = leaves[draw(st.integers(0, len(leaves) - 1))]
            g.remove_node(victim)
            touched = {victim}
    elif kind == "set_attr":
        n = names[draw(st.integers(0, len(names) - 1))]
        g.node(n).set_attr("reference", True)
        g.node(n).set_attr("_output_reuse_input", draw(st.booleans()))
        touched = {n}
    elif kind == "add_ctrl" and len(names) > 1:
        a, b = draw(st.integers(0, len(names) - 2)), None
        b = draw(st.integers(a + 1, len(names) - 1))
        g.add_ctrl(names[a], names[b])
        touched = {names[b]}
    elif kind == "rewire" and edges:
        src, so, dst, di = edges[draw(st.integers(0, len(edges) - 1))]
        g.disconnect(dst, di)
        touched = {dst}
    return model, db, touched


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(edited_models())
def test_refresh_nodes_equals_fresh_derivation(case):
    model, db, touched = case
    db.refresh_nodes(model.root, touched)
    fresh = FactDB.from_model(model)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


@st.composite
def multi_edited_models(draw):
    """A random model, its facts, then 1-3 rounds of 1-4 random node insertions/removals/moves each; returns
    (model, db, rounds) where rounds lists the graph's touched set after each round (the edits are applied
    lazily by the test, round by round, through ``apply``)."""
    from anchorlog.facts.graph import Node, TensorDesc

    model = draw(random_models())
    db = FactDB.from_model(model)
    g = model.root
    g.touched.clear()  # the facts hold everything built so far: only the edits below are touched
    rounds = []
    for _ in range(draw(st.integers(1, 3))):
        edits = []
        for _ in range(draw(st.integers(1, 4))):
            names = [n for n in g.nodes if not g.node(n).subgraph_names]
            kind = draw(st.sampled_from(["insert_after", "append", "remove", "move"]))
            if kind in ("remove", "move") and not names:
                kind = "append"
            if kind == "insert_after" and g.nodes:
                after = list(g.nodes)[draw(st.integers(0, len(g.nodes) - 1))]
                ident = g.unique_name("ins")
                g.add_node(
                    Node(ident, "Identity", inputs=[(after, 0)], input_desc=[TensorDesc()], output_desc=[TensorDesc()]),
                    after=after,
                )
            elif kind in ("insert_after", "append"):
                g.add_node(Node(g.unique_name("app"), "Const", output_desc=[TensorDesc()]))
            elif kind == "remove":
                g.remove_node(names[draw(st.integers(0, len(names) - 1))])
            else:  # remove a node and add it back elsewhere under the same name: only the IR order moved
                victim = g.remove_node(names[draw(st.integers(0, len(names) - 1))])
                rest = list(g.nodes)
                after = rest[draw(st.integers(0, len(rest) - 1))] if rest and draw(st.booleans()) else None
                victim.inputs = [None] * len(victim.inputs)
                victim.ctrl_inputs = []
                g.add_node(victim, after=after)
            edits.append(kind)
        rounds.append(sorted(g.touched))
        # the database follows each round, as the shared fact cache does between passes
        db.refresh_nodes(g, g.touched, model)
        g.touched.clear()
    return model, db, rounds


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(multi_edited_models())
def test_refresh_nodes_after_inserts_and_removals_equals_fresh_derivation(case):
    """Positions of the untouched nodes are shifted in place, not re-derived: the tables must still equal a fresh
    derivation row for row (node_prop's positions included)."""
    model, db, _ = case
    fresh = FactDB.from_model(model)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(random_models(), st.data())
def test_refresh_nodes_after_stale_positions_equals_fresh_derivation(model, data):
    """``positions=False`` leaves positions stale (gaps); the owed refresh with positions, together with an
    insertion, must still give a fresh derivation's tables."""
    from anchorlog.facts.graph import Node, TensorDesc

    db = FactDB.from_model(model)
    g = model.root
    g.touched.clear()
    names = [n for n in g.nodes if not g.node(n).subgraph_names]
    victims = data.draw(st.lists(st.sampled_from(names), unique=True, max_size=3)) if names else []
    for v in victims:
        g.remove_node(v)
    db.refresh_nodes(g, g.touched, model, positions=False)
    owed = set(g.touched)
    g.touched.clear()
    if g.nodes:
        after = list(g.nodes)[data.draw(st.integers(0, len(g.nodes) - 1))]
        g.add_node(
            Node(g.unique_name("ins"), "Identity", input_desc=[TensorDesc()], output_desc=[TensorDesc()]), after=after
        )
    db.refresh_nodes(g, owed | g.touched, model)
    fresh = FactDB.from_model(model)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


@st.composite
def largely_edited_models(draw):
    """A random model whose root is edited at large: its ops permuted at random, then up to 8 Identities inserted
    and up to 3 ops removed (a relink, then a pass's insertions and deletions, all listed in one refresh)."""
    from anchorlog.facts.graph import Node, TensorDesc

    model = draw(random_models())
    db = FactDB.from_model(model)
    g = model.root
    g.touched.clear()
    names = list(g.nodes)
    perm = draw(st.permutations(names))
    reordered = {name: g.nodes[name] for name in perm}
    g.nodes.clear()
    g.nodes.update(reordered)
    g.invalidate()
    for _ in range(draw(st.integers(0, 8))):
        after = list(g.nodes)[draw(st.integers(0, len(g.nodes) - 1))]
        g.add_node(
            Node(
                g.unique_name("ins"),
                "Identity",
                inputs=[(after, 0)],
                input_desc=[TensorDesc()],
                output_desc=[TensorDesc()],
            ),
            after=after,
        )
    removable = [n for n in g.nodes if not g.node(n).subgraph_names]
    for victim in draw(st.lists(st.sampled_from(removable), unique=True, max_size=3)) if removable else []:
        g.remove_node(victim)
    return model, db


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(largely_edited_models())
def test_refresh_nodes_after_a_large_edit_equals_fresh_derivation(case):
    """Every op listed (moved, inserted, removed): node_prop's positions are renumbered through the step table,
    the other rows re-derived; the tables equal a fresh derivation row for row."""
    model, db = case
    g = model.root
    db.refresh_nodes(g, sorted(g.touched), model)
    fresh = FactDB.from_model(model)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel

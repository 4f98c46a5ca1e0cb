"""symbols.dl's demand-driven part follows ref links on demand (session 6): a ref output (ref_io) is numbered only
where a demanded founder chain reaches it, the anchors of an asked founder are found by following plain and ref
links forward from it, and the founder count counts the plain nodes' ref outputs by name. These tests check that
the demand-driven relations still equal the whole table (every anchor asked, sym_all) restricted to what is
asked, and equal session 5's rules (frozen in tests/oracles/symbols_s5.dl, which numbered every ref_io anchor)
for the same asks, on graphs rich in ref chains: Reshape chains, outputs reusing an input other than 0 or a
missing input, pass-through subgraphs nested in subgraphs, While loops, Merge + NextIteration, RefData aliases
(also on outputs that reuse an input: two founders), subgraph RefData behind a Data, late edges; and on generated
transformer graphs (Reshape / Assign / pass-through NetOutput chains)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOLS_DL, symbol_inputs
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program

try:  # tests/ is on sys.path in pytest's default import mode
    from test_symbols_demand import ASKING
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.test_symbols_demand import ASKING

ORACLES = Path(__file__).resolve().parent / "oracles"

WHOLE = ["tree_root", "sym_root", "root_reach", "in_aid", "out_aid"]
# the relations the consumers read (layout.dl, tm_symtab.dl): exactly equal whatever numbering is behind them
EXACT = [
    "ds_root_reach",
    "ds_root_edge",
    "ds_sg_out_union",
    "ds_merge_peer",
    "ds_nextiter_out",
    "ds_phantom_out",
    "ds_late_link",
    "ds_member_in",
    "ds_member_out",
    "ds_root_count",
]
DEMAND = [*EXACT, "ds_tree", "ds_in_aid", "ds_out_aid"]


def _program(dl: Path) -> Program:
    """symbols.dl (or a frozen copy) with the asks of tests/test_symbols_demand.py supplied as input relations."""
    return Program.from_text(ASKING.replace('.include "symbols.dl"', f'.include "{dl.name}"'), base_dir=dl.parent)


NEW = _program(SYMBOLS_DL)
OLD = _program(ORACLES / "symbols_s5.dl")


def _asks(
    whole, rng: random.Random, share: float, roots_share: float
) -> tuple[set[int], set[int], dict[int, tuple], dict[int, tuple]]:
    name_in = {a: (g, n, i) for g, n, i, a in whole.set("in_aid")}
    name_out = {a: (g, n, i) for g, n, i, a in whole.set("out_aid")}
    asked = {a for a in sorted((*name_in, *name_out)) if rng.random() < share}
    roots = {r for (r,) in sorted(whole.set("sym_root")) if rng.random() < roots_share}
    # (a consumer asks for the members of founders it found through asked anchors: each asked founder's own
    # anchor is asked too)
    return asked | roots, roots, name_in, name_out


def assert_demand_equal(m: Model, *, seed: int = 0, shares: tuple = ((1, 1), (0, 1), (0.3, 0.2), (0.05, 0))) -> None:
    """For each mapped graph and each (anchor share, founder share) asked at random: the demand-driven relations
    equal the whole table restricted to the asks, and equal session 5's rules for the same asks."""
    db = FactDB.from_model(m)
    rng = random.Random(seed)
    for g in m.graphs:
        top = None if g is m.root else g.name
        order = node_order_rows(m, g)
        whole = NEW.run(db, extra=symbol_inputs(order, top, whole=True), outputs=WHOLE)
        old_whole = OLD.run(db, extra=symbol_inputs(order, top, whole=True), outputs=WHOLE)
        for rel in WHOLE:  # the whole table itself has not moved
            assert whole.set(rel) == old_whole.set(rel), (m.name, g.name, rel)
        tree = whole.set("tree_root")
        for share, roots_share in shares:
            asked, roots, name_in, name_out = _asks(whole, rng, share, roots_share)
            where = (m.name, g.name, share, roots_share)
            extra = {
                **symbol_inputs(order, top),
                "ask_in": [name_in[a] for a in asked if a in name_in],
                "ask_out": [name_out[a] for a in asked if a in name_out],
                "ask_root": [(r,) for r in roots],
            }
            res = NEW.run(db, extra=extra, outputs=DEMAND)
            old = OLD.run(db, extra=extra, outputs=DEMAND)
            for rel in EXACT:
                assert res.set(rel) == old.set(rel), (*where, rel)
            ds_tree = res.set("ds_tree")
            assert {(a, r) for a, r in tree if a in asked} == {(a, r) for a, r in ds_tree if a in asked}, where
            assert ds_tree <= tree and ds_tree <= old.set("ds_tree"), where
            assert res.set("ds_in_aid") <= old.set("ds_in_aid") and res.set("ds_out_aid") <= old.set("ds_out_aid")
            assert res.set("ds_member_in") == {(r, *name_in[a], a) for a, r in tree if r in roots and a in name_in}
            assert res.set("ds_member_out") == {(r, *name_out[a], a) for a, r in tree if r in roots and a in name_out}
            assert res.set("ds_root_reach") == whole.set("root_reach"), where
            assert res.set("ds_root_count") == {(len(whole.set("sym_root")),)}, where


@st.composite
def ref_rich_graphs(draw: st.DrawFn) -> Model:
    """Random graphs where founder chains run through many ref links: Reshape chains, outputs reusing input 0 or 1
    (or an input the node lacks), pass-through subgraphs (nested once more), While loops, Merge + NextIteration,
    RefData aliases (also on a reusing output), a subgraph RefData behind its Data, control edges, and now and
    then an edge from a later node (a late link: GE's mapping fails)."""
    b = GraphBuilder("g", shape=(2,))
    names: list[str] = []
    n = draw(st.integers(3, 14))
    kinds = ["Data", "Reshape", "Reshape", "Reuse0", "Reuse1", "ReuseMissing", "Add", "Merge", "Call", "While"]
    kinds += ["RefData", "NextIter"]
    for i in range(n):
        kind = draw(st.sampled_from(kinds)) if names else "Data"
        name = f"n{i}"
        src = draw(st.sampled_from(names)) if names else ""
        if kind in ("Data", "RefData"):
            b.node(name, kind, inputs=0, outputs=1)
        elif kind == "Reshape":
            b.node(name, "Reshape", inputs=1, outputs=1)
            b.edge(src, 0, name, 0)
        elif kind in ("Reuse0", "Reuse1", "ReuseMissing", "Add"):
            b.node(name, "Add", inputs=2, outputs=1)
            for k in range(2):
                if draw(st.booleans()):
                    b.edge(draw(st.sampled_from(names)), 0, name, k)
            if kind != "Add":
                b.reuse_input(name, 0, {"Reuse0": 0, "Reuse1": 1, "ReuseMissing": 5}[kind])
        elif kind == "Merge":
            b.node(name, "Merge", inputs=2, outputs=1)
            for k in range(2):
                b.edge(draw(st.sampled_from(names)), 0, name, k)
        elif kind == "NextIter":  # a NextIteration fed by an earlier node, linked to an earlier Merge
            merges = [x for x in names if b.graph.nodes[x].type == "Merge"]
            b.node(name, "NextIteration", inputs=1, outputs=1)
            b.edge(src, 0, name, 0)
            if merges:
                b.attr(draw(st.sampled_from(merges)), "_next_iteration_node", name)
        elif kind == "Call":  # a subgraph passing its input through (maybe via a nested call and a Reshape)
            b.node(name, "PartitionedCall", inputs=1, outputs=1)
            b.edge(src, 0, name, 0)
            sub = b.subgraph(f"sub{i}", owner=name)
            sub.data(f"{name}_d", 0)
            how = draw(st.sampled_from(["through", "reshape", "nested", "new", "refdata"]))
            if how == "through":
                sub.output(f"{name}_d", 0)
            elif how == "reshape":
                sub.chain(f"{name}_d", f"{name}_rs:Reshape")
                sub.output(f"{name}_rs", 0)
            elif how == "nested":
                sub.node(f"{name}_pc", "PartitionedCall", inputs=1, outputs=1)
                sub.edge(f"{name}_d", 0, f"{name}_pc", 0)
                inner = sub.subgraph(f"inner{i}", owner=f"{name}_pc")
                inner.data(f"{name}_id", 0)
                inner.chain(f"{name}_id", f"{name}_irs:Reshape")
                inner.output(f"{name}_irs", 0)
                sub.output(f"{name}_pc", 0)
            elif how == "refdata":  # a subgraph RefData controlled by the inner Data: an alias of it
                sub.node(f"{name}_ref", "RefData", inputs=0, outputs=1)
                sub.ctrl(f"{name}_d", f"{name}_ref")
                sub.chain(f"{name}_ref", f"{name}_rr:Reshape")
                sub.output(f"{name}_rr", 0)
            else:
                sub.chain(f"{name}_d", f"{name}_r:ReLU")
                sub.output(f"{name}_r", 0)
        else:  # While: the body passes the loop variable through a Reshape
            b.node(name, "While", inputs=1, outputs=1)
            b.edge(src, 0, name, 0)
            cond = b.subgraph(f"cond{i}", owner=name)
            cond.data(f"{name}_cd", 0)
            cond.chain(f"{name}_cd", f"{name}_cr:ReLU")
            cond.output(f"{name}_cr")
            body = b.subgraph(f"body{i}", owner=name)
            body.data(f"{name}_bd", 0)
            body.chain(f"{name}_bd", f"{name}_br:Reshape")
            body.output(f"{name}_br", 0)
        if names and draw(st.integers(0, 4)) == 0:
            b.ctrl(draw(st.sampled_from(names)), name)
        if draw(st.integers(0, 4)) == 0 and kind not in ("RefData", "Data"):
            refs = [x for x in names if b.graph.nodes[x].type == "RefData"]
            if refs:
                b.out_attr(name, 0, "ref_var_src_var_name", draw(st.sampled_from(refs)))
        names.append(name)
    if draw(st.integers(0, 5)) == 0:  # a late edge: an earlier Reshape reads a later node
        early = [x for x in names[:-1] if b.graph.nodes[x].type == "Reshape"]
        if early:
            b.edge(names[-1], 0, early[0], 0)
    return b.build()


# (no shrinking: each example runs the rules a dozen times, and a failing example is small already)
@settings(
    max_examples=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    phases=[Phase.explicit, Phase.reuse, Phase.generate],
)
@given(ref_rich_graphs(), st.integers(0, 3))
def test_demand_equals_whole_table_and_session5_on_ref_rich_graphs(m: Model, seed: int) -> None:
    assert_demand_equal(m, seed=seed)


def test_long_reshape_chain_through_nested_subgraphs() -> None:
    """A founder whose class is a long chain of ref links across two subgraph levels: asked by one anchor at the
    end of the chain (up) or by its founder alone (down)."""
    b = GraphBuilder("g", shape=(2,))
    b.chain("x:Data", "r1:Reshape", "r2:Reshape", "pc:PartitionedCall", "r3:Reshape", "sink:ReLU")
    b.node("add", "Add", inputs=2, outputs=1)
    b.edge("r3", 0, "add", 1)
    b.edge("x", 0, "add", 0)
    b.reuse_input("add", 0, 1)
    b.chain("add", "r4:Reshape", "tail:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("d", 0)
    sub.node("ipc", "PartitionedCall", inputs=1, outputs=1)
    sub.chain("d", "s1:Reshape", "ipc")
    sub.output("ipc", 0)
    inner = sub.subgraph("inner", owner="ipc")
    inner.data("id", 0)
    inner.chain("id", "i1:Reshape", "i2:Reshape")
    inner.output("i2", 0)
    m = b.build()
    assert_demand_equal(m, shares=((1, 1), (0, 1), (0.1, 0), (0.5, 0.5)))


@pytest.mark.parametrize("nodes", [400, 1500])
def test_demand_equals_whole_table_and_session5_on_transformer_graphs(nodes: int) -> None:
    """Generated decoders: KV-cache Assigns, Reshape chains, pass-through NetOutputs of PartitionedCall/If."""
    m = generate_transformer(nodes=nodes, seed=1)
    assert_demand_equal(m, shares=((0, 1), (0.2, 0.1), (0.02, 0.02)))

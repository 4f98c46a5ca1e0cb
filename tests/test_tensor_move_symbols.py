"""The symbol table tensor-move-delete reads (``TMSymbols``) is asked for, not built whole: ``tm_symtab.dl`` asks
symbols.dl's demand-driven part (ds_*) for the classes of every TensorMove's input 0 and output 0 (and of every
class a union, a Merge, an anchor with two founders or a late link touches), and
``anchorlog.analysis.symbols.asked_symbol_table`` lays them out. Every symbol it lists must be the whole table's
(name, anchors, order), every TensorMove anchor must have the whole table's symbol, the same merges after deletions
must leave the same symbols, and where GE's mapping fails the asked table must fail with the same message.

Checked on every conformance model, the real GE dumps, a generated decoder, and random builder graphs (Merge,
RefData aliases, subgraphs, control edges) in which some one-input nodes are made TensorMoves."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.analysis.registry import PassContext
from anchorlog.analysis.symbols import asked_symbol_table, symbol_table_rules
from anchorlog.analysis.tensor_move import TM_SYMTAB_DL, TMSymbols, _program
from anchorlog.errors import AnchorlogError
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model

try:  # tests/ is on sys.path in pytest's default import mode
    from test_symbols_oracle import builder_graphs
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.test_symbols_oracle import builder_graphs

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
DUMPS = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []

# node types whose role in GE's mapping is not that of a plain node: never turned into TensorMoves
_SPECIAL = {"Data", "RefData", "AippData", "AnnData", "NetOutput", "Merge", "StreamMerge", "NextIteration"}


def _tensor_moves(m: Model) -> list[tuple[str, str]]:
    return [(g.name, n.name) for g in m.graphs for n in g.nodes.values() if n.type == "TensorMove"]


def _table_of(a2s: dict, s2a: dict) -> TMSymbols:
    t = TMSymbols.__new__(TMSymbols)
    t.a2s, t.s2a = dict(a2s), {s: list(v) for s, v in s2a.items()}
    return t


def assert_asked_equals_whole(m: Model) -> str:
    """Compare; returns "fails" / "collision" / "ok" (what was compared)."""
    ctx = PassContext(options={}, engine="sqlite")
    prog = _program(TM_SYMTAB_DL)
    try:
        whole = symbol_table_rules(m, ctx=ctx)
    except AnchorlogError as err:  # GE's mapping fails: so must the asked one, with the same message
        with pytest.raises(type(err)) as got:
            asked_symbol_table(m, ctx, prog, "tm_sym_tree")
        assert str(got.value) == str(err), m.name
        return "fails"
    asked = asked_symbol_table(m, ctx, prog, "tm_sym_tree")
    if asked is None:  # a symbol name could collide across graphs: the pass takes the whole table then
        names: dict[str, set[str]] = {}
        for g in m.graphs:
            for n in g.nodes:
                names.setdefault(n, set()).add(g.name)
        assert any(len(gs) > 1 for gs in names.values()), m.name
        return "collision"
    # every symbol listed is the whole table's, in the same order; every anchor listed maps as in the whole table
    for s, lst in asked.symbol_to_anchors.items():
        assert whole.symbol_to_anchors.get(s) == lst, (m.name, s)
    for a, s in asked.anchor_to_symbol.items():
        assert whole.anchor_to_symbol[a] == s, (m.name, a)
    tms = _tensor_moves(m)
    anchors = [(g, tm, io, 0) for g, tm in tms for io in ("in", "out")]
    for a in anchors:
        assert asked.anchor_to_symbol.get(a) == whole.anchor_to_symbol.get(a), (m.name, a)
    # GE's merges after deleting every TensorMove in turn leave the same symbols for the TensorMove anchors
    t_asked, t_whole = _table_of(*asked.as_pair()), _table_of(*whole.as_pair())
    for g, tm in tms:
        for a in anchors:
            s = t_whole.a2s.get(a)
            assert t_asked.a2s.get(a) == s, (m.name, a)
            if s is not None:
                assert t_asked.s2a[s] == t_whole.s2a[s], (m.name, a, s)
        t_asked.merge_after_delete(g, tm)
        t_whole.merge_after_delete(g, tm)
    return "ok"


def _with_tensor_moves(m: Model, every: int) -> Model:
    """Turn every ``every``-th plain one-input node into a TensorMove (the table's rules only care which nodes
    the pass asks about; both tables are computed on the edited model)."""
    k = 0
    for g in m.graphs:
        for n in g.nodes.values():
            if n.type not in _SPECIAL and n.type != "TensorMove" and len(n.inputs) == 1 and not n.subgraph_names:
                if k % every == 0:
                    n.type = "TensorMove"
                k += 1
    return m


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_asked_table_equals_whole_on_conformance_models() -> None:
    seen: dict[str, int] = {}
    for p in CASES:
        m = read_model(p)
        if not _tensor_moves(m):
            _with_tensor_moves(m, 2)
        what = assert_asked_equals_whole(m)
        seen[what] = seen.get(what, 0) + 1
    assert seen.get("ok", 0) > 100, seen  # the comparison really ran on most models


@pytest.mark.skipif(not DUMPS, reason="../shared/real-graphs is not available")
def test_asked_table_equals_whole_on_real_dumps() -> None:
    for p in DUMPS:
        assert assert_asked_equals_whole(_with_tensor_moves(read_model(p), 3)) in ("ok", "fails", "collision")


def test_asked_table_equals_whole_on_a_generated_decoder() -> None:
    m = generate_transformer(nodes=3000, seed=1, tensor_move_share=0.06)
    assert len(m.graphs) > 1 and _tensor_moves(m)
    assert assert_asked_equals_whole(m) == "ok"


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder_graphs(), st.integers(1, 3))
def test_asked_table_equals_whole_on_random_graphs(m: Model, every: int) -> None:
    assert_asked_equals_whole(_with_tensor_moves(m, every))


def test_name_collision_across_graphs_falls_back_to_the_whole_table() -> None:
    """A subgraph node named like a root node whose output founds a symbol: in GE's table (keyed by name) one of
    the two symbols replaces the other, which a part of the table cannot tell; the pass takes the whole table."""
    b = GraphBuilder("g", shape=(2,))
    b.node("x", "Data", inputs=0, outputs=1)
    b.node("c", "PartitionedCall", inputs=1, outputs=1)
    b.edge("x", 0, "c", 0)
    sub = b.subgraph("sub", owner="c")
    sub.data("d", 0)
    sub.chain("d", "r:ReLU")
    sub.output("r", 0)
    b.node("r", "ReLU", inputs=1, outputs=1)  # the same name as the subgraph's ReLU
    b.edge("c", 0, "r", 0)
    b.node("tm", "TensorMove", inputs=1, outputs=1)
    b.edge("r", 0, "tm", 0)
    b.node("y", "ReLU", inputs=1, outputs=1)
    b.edge("tm", 0, "y", 0)
    m = b.build()
    ctx = PassContext(options={}, engine="sqlite")
    assert asked_symbol_table(m, ctx, _program(TM_SYMTAB_DL), "tm_sym_tree") is None
    assert assert_asked_equals_whole(m) == "collision"
    whole = symbol_table_rules(m)
    t = TMSymbols(m, ctx)
    for io in ("in", "out"):
        assert t.a2s.get(("g", "tm", io, 0)) == whole.anchor_to_symbol.get(("g", "tm", io, 0))


def test_late_link_fails_with_the_whole_tables_message() -> None:
    """A graph GE cannot sort (a cycle: the stored order stays) fails GE's mapping at the consumer visited before its
    producer; the asked table fails with the same message, naming both anchors."""
    b = GraphBuilder("g", shape=(2,))
    b.node("x", "Data", inputs=0, outputs=1)
    b.node("a", "Add", inputs=2, outputs=1)
    b.node("r", "ReLU", inputs=1, outputs=1)
    b.node("tm", "TensorMove", inputs=1, outputs=1)
    b.node("y", "ReLU", inputs=1, outputs=1)
    b.edge("x", 0, "a", 0)
    b.edge("r", 0, "a", 1)  # r comes after a, and a feeds r: a cycle
    b.edge("a", 0, "r", 0)
    b.edge("x", 0, "tm", 0)
    b.edge("tm", 0, "y", 0)
    m = b.build()
    assert assert_asked_equals_whole(m) == "fails"


def test_rule5_derives_the_layout_attributes_of_the_symbols_nodes_once(monkeypatch) -> None:
    """Rule 5 asks layout.dl for the attributes of the nodes of the table's symbols only (a merge joins only
    them), in one derivation; the pass decides as with the attributes of every node."""
    import json

    from anchorlog.analysis import tensor_move as tmmod
    from anchorlog.analysis.layout_conflict import api

    def report(model: Model) -> str:
        section = tmmod.run_tensor_move_delete(model, {}, engine="sqlite")
        return json.dumps({k: v for k, v in section.items() if k != "timings"}, sort_keys=True, default=str)

    asks: list = []
    real_derive = api._derive

    def derive(model, g, opts, ctx, ask=None):
        asks.append(ask)
        return real_derive(model, g, opts, ctx, ask)

    monkeypatch.setattr(api, "_derive", derive)
    scoped = generate_transformer(2, seed=1, tensor_move_share=0.06)
    got = report(scoped)
    assert len(asks) == 1 and asks[0] is not None
    assert 0 < len(asks[0]) < scoped.num_nodes()
    # the same decisions with every node's attributes (no asked nodes: the whole-model derivation)
    monkeypatch.setattr(
        api, "_derive", lambda model, g, opts, ctx, ask=None: asks.append(None) or real_derive(model, g, opts, ctx)
    )
    assert report(generate_transformer(2, seed=1, tensor_move_share=0.06)) == got
    assert asks[1:] == [None]

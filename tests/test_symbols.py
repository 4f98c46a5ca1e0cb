"""Symbol table (reference §3) from the rules: every joining rule, GE naming/order, and equality with the
step-by-step GE replay kept as an oracle (tests/oracles/ge_refmap.py)."""

from __future__ import annotations

import pytest

from anchorlog.analysis.symbols import (
    all_nodes,
    ref_mapping,
    symbol_table,
    symbol_table_datalog,
    topo_nodes,
)
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB

try:  # tests/ is on sys.path in pytest's default import mode
    from oracles.ge_refmap import oracle_table
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.oracles.ge_refmap import oracle_table


def same(m: Model, a: tuple, b: tuple) -> bool:
    return ref_mapping(m).same(a, b)


def partition(st) -> list[list]:
    return sorted(sorted(c) for c in st.classes())


def check_datalog_agrees(m: Model, graph: str | None = None) -> None:
    """The rules' table (from the model and from a fact database alone) equals the GE replay exactly:
    symbol names, anchor order inside each symbol, phantom entries."""
    oa, os_ = oracle_table(m, m.graph(graph) if graph else None)
    for st in (ref_mapping(m, graph), symbol_table_datalog(FactDB.from_model(m), graph)):
        assert st.symbol_to_anchors == os_
        assert st.anchor_to_symbol == oa


def test_edge_joins_consumer_and_producer() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU", "s:ReLU")
    m = b.build()
    st = ref_mapping(m)
    assert st.symbol_of(("g", "r", "in", 0)) == "d_out_0"
    assert st.symbol_of(("g", "r", "out", 0)) == "r_out_0"
    assert not st.same(("g", "r", "in", 0), ("g", "r", "out", 0))


def test_reshape_output_reuses_input() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "rs:Reshape", "r:ReLU")
    m = b.build()
    assert same(m, ("g", "d", "out", 0), ("g", "r", "in", 0))


def test_reference_op_and_reuse_input() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign", "r:ReLU")
    b.ref_op("asg", {0: 0})
    b.chain("d:Data", "m:Mul", "r2:ReLU")
    b.reuse_input("m", 0, 0)
    m = b.build()
    assert same(m, ("g", "v", "out", 0), ("g", "asg", "out", 0))
    assert same(m, ("g", "d", "out", 0), ("g", "m", "out", 0))


def test_unconnected_input_founds_its_own_symbol() -> None:
    b = GraphBuilder("g")
    b.node("a", "Add", inputs=2)
    b.chain("d:Data", "a")
    st = ref_mapping(b.build())
    assert st.symbol_of(("g", "a", "in", 1)) == "a_in_1"


def test_subgraph_data_joins_parent_input_and_netoutput_parent_output() -> None:
    b = GraphBuilder("g")
    b.chain("x:Data", "pc:PartitionedCall", "sink:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sr:ReLU")
    sub.output("sr", 0)
    m = b.build()
    st = ref_mapping(m)
    assert st.same(("g", "x", "out", 0), ("sub", "sd", "out", 0))
    assert st.same(("sub", "sr", "out", 0), ("g", "pc", "out", 0))
    assert st.same(("g", "pc", "out", 0), ("g", "sink", "in", 0))
    check_datalog_agrees(m)


def test_if_branch_passthrough_merges_input_and_output_tie_keeps_parent_name() -> None:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=1, outputs=1)
    b.chain("x:Data", "if", "sink:ReLU")
    then = b.subgraph("then", owner="if")
    then.data("t", 0)
    then.chain("t", "tr:ReLU")
    then.output("tr", 0)
    els = b.subgraph("else", owner="if")
    els.data("e", 0)
    els.output("e", 0)
    m = b.build()
    st = ref_mapping(m)
    # then branch: tr_out_0 (1 anchor) vs if_out_0 (1 anchor): the tie keeps the parent's symbol
    assert st.symbol_of(("then", "tr", "out", 0)) in ("if_out_0", "x_out_0")
    # else branch passes Data through: the If's input producer and the If's output share memory
    assert st.same(("g", "x", "out", 0), ("g", "if", "out", 0))
    assert st.symbol_of(("g", "if", "out", 0)) == "x_out_0"  # the longer list survives the union
    check_datalog_agrees(m)


def test_while_loop_variable_is_one_symbol() -> None:
    b = GraphBuilder("g")
    b.node("w", "While", inputs=1, outputs=1)
    b.chain("x:Data", "w", "sink:ReLU")
    cond = b.subgraph("cond", owner="w")
    cond.data("cd", 0)
    cond.chain("cd", "cr:ReLU")
    cond.output("cr")
    body = b.subgraph("body", owner="w")
    body.data("bd", 0)
    body.chain("bd", "br:ReLU")
    body.output("br", 0)
    m = b.build()
    st = ref_mapping(m)
    for a in [("g", "w", "out", 0), ("body", "bd", "out", 0), ("body", "br", "out", 0), ("g", "sink", "in", 0)]:
        assert st.same(("g", "x", "out", 0), a)
    check_datalog_agrees(m)


def test_merge_inputs_unioned() -> None:
    b = GraphBuilder("g")
    b.node("mg", "Merge", inputs=2, outputs=1)
    b.chain("a:Data", "ra:ReLU", "mg")
    b.chain("b2:Data", "rb:ReLU")
    b.edge("rb", 0, "mg", 1)
    b.chain("mg", "sink:ReLU")
    m = b.build()
    st = ref_mapping(m)
    assert st.same(("g", "ra", "out", 0), ("g", "rb", "out", 0))
    assert st.same(("g", "mg", "out", 0), ("g", "ra", "out", 0))
    check_datalog_agrees(m)


def test_refdata_alias_by_src_var_name() -> None:
    b = GraphBuilder("g")
    b.chain("rd:RefData", "r:ReLU")
    b.chain("d:Data", "upd:ScatterUpdate", "s:ReLU")
    b.out_attr("upd", 0, "ref_var_src_var_name", "rd")
    m = b.build()
    assert same(m, ("g", "rd", "out", 0), ("g", "upd", "out", 0))
    check_datalog_agrees(m)


def test_subgraph_mapping_treats_own_io_as_plain() -> None:
    b = GraphBuilder("g")
    b.chain("x:Data", "pc:PartitionedCall", "sink:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sr:ReLU")
    sub.output("sr", 0)
    m = b.build()
    st = ref_mapping(m, "sub")
    assert all(a[0] == "sub" for a in st.anchor_to_symbol)
    assert st.symbol_of(("sub", "sd", "in", 0)) == "sd_in_0"
    assert st.same(("sub", "sd", "in", 0), ("sub", "sd", "out", 0))  # still a subgraph input: pass-through
    check_datalog_agrees(m, "sub")


def test_anchor_order_and_api_pair() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU")
    b.chain("d", "s:ReLU")
    m = b.build()
    a2s, s2a = symbol_table(m)
    # GE's DFS order pushes d's consumers r, s and pops the last pushed first: d, s, r
    assert s2a["d_out_0"] == [("g", "d", "out", 0), ("g", "s", "in", 0), ("g", "r", "in", 0)]
    assert a2s[("g", "s", "in", 0)] == "d_out_0"
    check_datalog_agrees(m)


def test_topo_nodes_fixes_stored_order() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU")
    m = b.build()
    g = m.root
    g.nodes = {"r": g.nodes["r"], "d": g.nodes["d"]}
    assert [n.name for n in topo_nodes(g)] == ["d", "r"]
    assert [n.name for _, n in all_nodes(m)] == ["d", "r"]


@pytest.mark.parametrize("seed", [0, 1])
def test_datalog_agrees_with_replay_on_generated(seed: int) -> None:
    from anchorlog.facts.generate import generate_transformer

    check_datalog_agrees(generate_transformer(layers=1, seed=seed))


def test_notask_concat_output_joins_input_zero_only() -> None:
    b = GraphBuilder("g")
    b.node("cc", "ConcatD", inputs=2)
    b.chain("a:Data", "ra:ReLU", "cc")
    b.chain("b2:Data", "rb:ReLU")
    b.edge("rb", 0, "cc", 1)
    b.chain("cc", "sink:ReLU")
    for k in ("_no_task", "_no_padding_continuous_input", "_output_reuse_input"):
        b.attr("cc", k, True)
    m = b.build()
    st = ref_mapping(m)
    assert st.same(("g", "cc", "out", 0), ("g", "ra", "out", 0))
    assert not st.same(("g", "cc", "out", 0), ("g", "rb", "out", 0))
    check_datalog_agrees(m)


def test_continuous_input_alone_joins_nothing() -> None:
    b = GraphBuilder("g")
    b.node("cc", "ConcatD", inputs=2)
    b.chain("a:Data", "cc")
    b.edge("a", 0, "cc", 1)
    b.attr("cc", "continuous_input", True)
    b.chain("cc", "sink:ReLU")
    st = ref_mapping(b.build())
    assert not st.same(("g", "cc", "out", 0), ("g", "a", "out", 0))

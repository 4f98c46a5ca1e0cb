"""RW types (reference §2): one test per attribute/rule, per matrix row, per pass rule; rules vs Python."""

from __future__ import annotations

import copy

import pytest

from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.analysis.rw_conflict import (
    DO_NOTHING,
    IN_INVALID,
    IN_RO,
    IN_SW,
    IN_W,
    INSERT_IDENTITY,
    OUT_CONST,
    OUT_INVALID,
    OUT_RO,
    OUT_SOFT,
    OUT_W,
    WRONG_GRAPH,
    RWTypes,
    conflict_result,
    handle_memory_rw_conflict,
    merge_input_types,
    rw_types_datalog,
    would_delete_cause_rw_conflict,
)
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model
from anchorlog.facts.synthetic import rw_split_heavy

try:  # the Python replay of GE's procedure, kept as the oracle (tests/oracles/rw_replay.py)
    from oracles import rw_replay
except ImportError:  # pragma: no cover
    from tests.oracles import rw_replay


def types(model: Model) -> RWTypes:
    rw = RWTypes(model)
    rw.init()
    return rw


def out_t(model: Model, node: str, i: int = 0) -> str:
    return types(model).output_type_of(node, i)


def in_t(model: Model, node: str, i: int = 0) -> str:
    return types(model).input_type_of(node, i)


def copies(model: Model) -> list[str]:
    return [n.name for n in model.all_nodes() if n.type == "Identity"]


def feeder(model: Model, node: str, i: int = 0) -> str:
    n = model.find_node(node)
    assert n is not None and n.inputs[i] is not None
    return n.inputs[i][0]


# ------------------------------------------------------------------------------------------------ matrix
MATRIX_ROWS = [
    (OUT_CONST, IN_RO, DO_NOTHING),
    (OUT_CONST, IN_W, INSERT_IDENTITY),
    (OUT_CONST, IN_SW, INSERT_IDENTITY),
    (OUT_RO, IN_RO, DO_NOTHING),
    (OUT_RO, IN_W, DO_NOTHING),
    (OUT_RO, IN_SW, INSERT_IDENTITY),
    (OUT_SOFT, IN_RO, DO_NOTHING),
    (OUT_SOFT, IN_W, DO_NOTHING),
    (OUT_SOFT, IN_SW, DO_NOTHING),
    (OUT_W, IN_RO, DO_NOTHING),
    (OUT_W, IN_W, DO_NOTHING),
    (OUT_W, IN_SW, INSERT_IDENTITY),
    (OUT_INVALID, IN_RO, WRONG_GRAPH),
    (OUT_W, IN_INVALID, WRONG_GRAPH),
]


@pytest.mark.parametrize("out_type,in_type,result", MATRIX_ROWS)
def test_matrix_row(out_type: str, in_type: str, result: str) -> None:
    assert conflict_result(out_type, in_type) == result


@pytest.mark.parametrize(
    "types_set,merged",
    [
        (set(), IN_RO),
        ({IN_RO}, IN_RO),
        ({IN_W}, IN_W),
        ({IN_RO, IN_W}, IN_W),
        ({IN_SW}, IN_SW),
        ({IN_RO, IN_SW}, IN_SW),
        ({IN_W, IN_SW}, IN_INVALID),
        ({IN_RO, IN_INVALID}, IN_INVALID),
    ],
)
def test_merge_input_types(types_set: set[str], merged: str) -> None:
    assert merge_input_types(types_set) == merged


# ------------------------------------------------------------------------------------------------ output types
def test_output_variable_is_writeable() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "r:ReLU")
    assert out_t(b.build(), "v") == OUT_W


def test_output_root_data_is_writeable() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU")
    b.chain("d", "r2:ReLU")
    assert out_t(b.build(), "d") == OUT_W


def test_output_const_is_readonly_const_even_with_one_consumer() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "r:ReLU")
    b.chain("p:ConstPlaceHolder", "r2:ReLU")
    m = b.build()
    assert out_t(m, "c") == OUT_CONST
    assert out_t(m, "p") == OUT_CONST


def test_output_fileconstant_is_not_const() -> None:
    b = GraphBuilder("g")
    b.chain("f:FileConstant", "r:ReLU")
    assert out_t(b.build(), "f") == OUT_SOFT


def test_output_fanout_decides_readonly_or_softread() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "x:ReLU")
    b.chain("a", "y:ReLU")
    b.chain("x", "z:ReLU")
    m = b.build()
    assert out_t(m, "a") == OUT_RO
    assert out_t(m, "x") == OUT_SOFT


def test_output_ref_by_name_is_writeable_and_marks_reference() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.chain("asg", "r:ReLU")
    m = b.build()
    asg = m.find_node("asg")
    asg.set_attr("_input_name_key", ["ref", "value"])
    asg.set_attr("_input_name_value", [0, 1])
    asg.set_attr("_output_name_key", ["ref"])
    asg.set_attr("_output_name_value", [0])
    rw = types(m)
    assert rw.output_type_of("asg", 0) == OUT_W
    assert rw.input_type_of("asg", 0) == IN_W
    assert rw.input_type_of("asg", 1) == IN_RO
    assert asg.attr("reference") is True  # MarkRefRelations writes the attr


def test_output_refswitch_frameworkop_is_writeable() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "f:FrameworkOp", "r:ReLU")
    b.attr("f", "original_type", "RefSwitch")
    m = b.build()
    assert out_t(m, "f") == OUT_W
    assert in_t(m, "f", 0) == IN_W


def test_output_subgraph_data_takes_parent_producer_type() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "pc:PartitionedCall", "r:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sr:ReLU")
    sub.output("sr", 0)
    m = b.build()
    assert out_t(m, "sd") == OUT_CONST


def test_output_while_is_always_softread() -> None:
    b = GraphBuilder("g")
    b.node("w", "While", inputs=1, outputs=1)
    b.chain("d:Data", "w")
    b.chain("w", "a:ReLU")
    b.chain("w", "b2:ReLU")
    assert out_t(b.build(), "w") == OUT_SOFT


def test_output_partitioned_call_reads_subgraph_netoutput_type() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "pc:PartitionedCall", "r:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("v:Variable")
    sub.output("v", 0)
    m = b.build()
    assert out_t(m, "pc") == OUT_W


def test_output_if_ignores_branches() -> None:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=1, outputs=1)
    b.chain("d:Data", "if", "r:ReLU")
    for name in ("then", "else"):
        sg = b.subgraph(name, owner="if")
        sg.node(f"v_{name}", "Variable")
        sg.output(f"v_{name}", 0)
    assert out_t(b.build(), "if") == OUT_SOFT


# ------------------------------------------------------------------------------------------------ input types
def test_input_mutable_is_scope_writeable() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    assert in_t(b.build(), "ar") == IN_SW


def test_input_special_size_is_scope_writeable() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU")
    b.in_attr("r", 0, "_special_input_size", 1)
    assert in_t(b.build(), "r") == IN_SW


def test_input_phony_concat_reads_only_even_when_named_like_output() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "pc:PhonyConcat", "r:ReLU")
    b.ref_op("pc", {0: 0})
    assert in_t(b.build(), "pc") == IN_RO


def test_input_while_is_scope_writeable() -> None:
    b = GraphBuilder("g")
    b.node("w", "While", inputs=1, outputs=1)
    b.chain("d:Data", "w")
    assert in_t(b.build(), "w") == IN_SW


def test_input_wrapper_merges_subgraph_consumers() -> None:
    b = GraphBuilder("g")
    b.node("pc", "PartitionedCall", inputs=2, outputs=1)
    b.chain("d:Data", "pc")
    b.edge("d", 0, "pc", 1)
    sub = b.subgraph("sub", owner="pc")
    sub.data("s0", 0)
    sub.data("s1", 1)
    sub.chain("s0", "asg:Assign")
    sub.edge("s1", 0, "asg", 1)
    sub.ref_op("asg", {0: 0})
    sub.output("asg", 0)
    m = b.build()
    rw = types(m)
    assert rw.input_type_of("pc", 0) == IN_W
    assert rw.input_type_of("pc", 1) == IN_RO


def test_input_wrapper_write_and_scope_write_is_invalid() -> None:
    b = GraphBuilder("g")
    b.node("pc", "PartitionedCall", inputs=1, outputs=1)
    b.chain("d:Data", "pc")
    sub = b.subgraph("sub", owner="pc")
    sub.data("s0", 0)
    sub.chain("s0", "asg:Assign")
    sub.node("c", "Const")
    sub.edge("c", 0, "asg", 1)
    sub.ref_op("asg", {0: 0})
    sub.chain("s0", "ar:HcomAllReduce")
    sub.attr("ar", "_input_mutable", True)
    sub.output("asg", 0)
    assert in_t(b.build(), "pc") == IN_INVALID


# ------------------------------------------------------------------------------------------------ the pass
def test_const_to_scope_write_gets_identity() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce", "out:NetOutput")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    rw = handle_memory_rw_conflict(m)
    ident = feeder(m, "ar")
    assert m.find_node(ident).type == "Identity"
    assert feeder(m, ident) == "c"
    d = [x for x in rw.decisions if x.identity][0]
    assert (d.out_type, d.in_type, d.result) == (OUT_CONST, IN_SW, INSERT_IDENTITY)


def test_identity_desc_drops_reuse_and_foreign_attrs() -> None:
    b = GraphBuilder("g")
    b.node("mul", "Mul", inputs=1, outputs=1)
    b.chain("d:Data", "mul")
    b.reuse_input("mul", 0, 0)
    b.out_attr("mul", 0, "ref_var_src_var_name", "v")
    b.chain("mul", "r:ReLU")
    b.chain("mul", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    ident = m.find_node(feeder(m, "ar"))
    assert ident.type == "Identity"
    for td in ident.input_desc + ident.output_desc:
        assert td.reuse_input is False and td.reuse_input_index == 0
        assert "ref_var_src_var_name" not in td.attrs


def test_readonly_output_to_single_scope_write_node_last_edge_skipped() -> None:
    # every consumer edge of the output is a scope-write input of one node: all but the last get a copy
    b = GraphBuilder("g")
    b.node("hc", "HcomAllReduce", inputs=2, outputs=1)
    b.chain("d:Data", "a:ReLU")
    b.edge("a", 0, "hc", 0)
    b.edge("a", 0, "hc", 1)
    b.attr("hc", "_input_mutable", True)
    m = b.build()
    rw = handle_memory_rw_conflict(m)
    assert m.find_node(feeder(m, "hc", 0)).type == "Identity"
    assert feeder(m, "hc", 1) == "a"
    assert any(d.action == "skip_last_scope_write" for d in rw.decisions)


def test_readonly_output_with_other_reader_copies_every_scope_write() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "r:ReLU")
    b.chain("a", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert m.find_node(feeder(m, "ar")).type == "Identity"


def test_skip_rw_conflict_attr_leaves_edge() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    b.attr("ar", "_skip_rw_conflict", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert feeder(m, "ar") == "c"


def test_root_data_to_two_ref_inputs_no_copy() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a1:Assign")
    b.chain("d", "a2:Assign")
    b.ref_op("a1", {0: 0})
    b.ref_op("a2", {0: 0})
    m = b.build()
    handle_memory_rw_conflict(m)
    assert copies(m) == []


def test_split_identity_readers_bypass_writers_keep_copy() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "id:Identity", "r:ReLU")
    b.chain("id", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert feeder(m, "r") == "c"  # reader fed directly
    chain = feeder(m, "ar")
    assert m.find_node(chain).type == "Identity"
    # the split leaves c -> id -> copy -> ar; RemoveNoUseIdentity then drops id (Const -> read-only copy input)
    assert m.find_node("id") is None and feeder(m, chain) == "c"


def test_remove_no_use_identity() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "id:Identity", "r:ReLU")
    m = b.build()
    handle_memory_rw_conflict(m)
    assert m.find_node("id") is None
    assert feeder(m, "r") == "a"


def test_identity_kept_when_it_separates_a_conflict() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "id:Identity", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    # why it stays: without it the root Data (kWriteable) would feed a scope-writable input directly
    assert conflict_result(out_t(m, "d"), in_t(m, "ar")) == INSERT_IDENTITY
    rw = handle_memory_rw_conflict(m)
    assert feeder(m, "ar") == "id" and feeder(m, "id") == "d"
    assert copies(m) == ["id"]  # kept, and nothing else inserted
    # the Identity's own edge needs nothing (kSoftRead -> kScopeWriteable), so no decision acts on it
    assert [d.action for d in rw.decisions] == []


def test_cannot_be_deleted_identity_untouched() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "id:Identity", "r:ReLU")
    b.attr("id", "_cannot_be_deleted", True)
    m = b.build()
    # it separates nothing (kSoftRead -> kReadOnly): only the attribute keeps it (test_remove_no_use_identity)
    assert conflict_result(out_t(m, "a"), in_t(m, "r")) == DO_NOTHING
    rw = handle_memory_rw_conflict(m)
    assert feeder(m, "r") == "id" and feeder(m, "id") == "a"
    assert copies(m) == ["id"]
    assert rw.decisions == []  # GE skips the node entirely: no split, no removal, no insertion


def test_identity_near_subgraph_kept() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "id:Identity", "pc:PartitionedCall", "r:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.output("sd", 0)
    m = b.build()
    # the matrix alone would drop it (root Data kWriteable -> a wrapper input whose subgraph only reads)
    assert conflict_result(out_t(m, "d"), in_t(m, "pc")) == DO_NOTHING
    rw = handle_memory_rw_conflict(m)
    assert feeder(m, "pc") == "id" and feeder(m, "id") == "d"
    assert copies(m) == ["id"]  # CheckIdentityIsNearSubgraph keeps it; nothing else inserted
    assert not any(d.action in ("remove_identity", "insert_identity") for d in rw.decisions)


def test_if_branch_writeable_output_gets_identity_before_netoutput() -> None:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=1, outputs=1)
    b.chain("d:Data", "if", "asg:Assign")
    b.chain("v0:Variable", "asg")
    b.ref_op("asg", {0: 0})
    then = b.subgraph("then", owner="if")
    then.node("c1", "Const")
    then.output("c1", 0)
    els = b.subgraph("else", owner="if")
    els.chain("v1:Variable", "a2:Assign")
    els.data("de", 0)
    els.edge("de", 0, "a2", 1)
    els.ref_op("a2", {0: 0})
    els.output("a2", 0)
    m = b.build()
    res = rw_types_datalog(m)
    net = els.netoutput().name
    assert ("else", net, 0, "a2", 0) in res.set("rw_sub_identity")
    handle_memory_rw_conflict(m)
    assert m.find_node(feeder(m, net)).type == "Identity"


def test_would_delete_cause_rw_conflict_api() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "tm:TensorMove", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    b.chain("d:Data", "x:ReLU", "tm2:TensorMove", "r:ReLU")
    m = b.build()
    rw = RWTypes.init_rw_conflict_check(m)
    assert rw.would_delete_cause_rw_conflict("c", 0, "ar", 0) is True
    assert rw.would_delete_cause_rw_conflict("x", 0, "r", 0) is False
    assert rw.would_delete_cause_rw_conflict("nope", 0, "r", 0) is True
    assert would_delete_cause_rw_conflict(m, "x", 0, "r", 0) is False
    assert rw.is_node_input_writable("ar", 0) and not rw.is_node_input_writable("r", 0)


def test_pass_report_and_warning_only_failure() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    rep = run_passes(m, ["rw-conflict"], PassContext())
    sec = rep["passes"][0]
    assert sec["pass"] == "rw-conflict" and sec["copies"] == 1
    assert sec["inserted"][0]["dst"] == "ar"
    # a subgraph NetOutput without _parent_node_index makes GE's RW pass fail: only a warning
    b2 = GraphBuilder("g2")
    b2.chain("d:Data", "pc:PartitionedCall")
    sub = b2.subgraph("s2", owner="pc")
    sub.data("sd", 0)
    sub.output("sd")
    rep2 = run_passes(b2.build(), ["rw-conflict"], PassContext())
    assert rep2["passes"][0]["status"] == "warning"


def _py_vs_rules(m: Model) -> None:
    """The full rule relations, the pass's demand-driven ones and the Python replay (the oracle) agree."""
    res = rw_types_datalog(m)
    work = copy.deepcopy(m)
    replay = rw_replay.RWTypes.init_rw_conflict_check(work)
    rw = types(m)
    facts = rw.evaluate(ask_out=[r[:3] for r in res.rows("out_rw")], ask_in=[r[:3] for r in res.rows("in_rw")])
    for g, n, i, t in res.rows("in_rw"):
        if i < len(work.graph(g).nodes[n].inputs) and work.graph(g).nodes[n].inputs[i] is not None:
            assert replay.input_type(work.graph(g), work.graph(g).nodes[n], i)[0] == t, (g, n, i)
            assert facts.in_type(g, n, i)[0] == t, (g, n, i)
    for g, n, i, t in res.rows("out_rw"):
        assert replay.output_type(work.graph(g), work.graph(g).nodes[n], i)[0] == t, (g, n, i)
        assert facts.out_type(g, n, i)[0] == t, (g, n, i)


def test_rules_agree_with_python_on_generated_graph() -> None:
    from anchorlog.facts.generate import generate_transformer

    _py_vs_rules(generate_transformer(layers=1, seed=3))


def test_rules_agree_with_python_on_wrappers() -> None:
    b = GraphBuilder("g")
    b.node("pc", "PartitionedCall", inputs=2, outputs=2)
    b.chain("d:Data", "pc")
    b.chain("c:Const", "pc")
    b.chain("pc", "r1:ReLU")
    b.edge("pc", 0, "r2:ReLU", 0)
    b.edge("pc", 1, "r3:ReLU", 0)
    sub = b.subgraph("sub", owner="pc")
    sub.data("s0", 0)
    sub.data("s1", 1)
    sub.chain("s0", "ar:HcomAllReduce")
    sub.attr("ar", "_input_mutable", True)
    sub.chain("s1", "sr:ReLU")
    sub.output("ar", 0)
    sub.output("s1", 1)
    _py_vs_rules(b.build())


def test_explain_anchor_and_identity() -> None:
    from anchorlog.analysis.rw_conflict import explain

    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    b.chain("d:Data", "a:ReLU", "id:Identity", "r:ReLU")
    m = b.build()
    fresh = copy.deepcopy(m)
    text = explain(m, "c", options={}, anchor=("c", 0))
    assert "kReadOnlyConst" in text and "kScopeWriteable" in text and "INSERT_IDENTITY" in text
    assert "Identities inserted after it: c_Identity" in text
    text2 = explain(fresh, "id", options={})
    assert "RemoveNoUseIdentity" in text2 and "removed" in text2


def test_ref_chain_back_to_single_use_root_data_keeps_buffer() -> None:
    # GE TestMulRefNode2ScopeWriteNode: a ref chain to a single-use root Data may write the original buffer;
    # one whose chain reaches a shared Data may not
    b = GraphBuilder("g")
    for n in ("d1", "d2", "d3"):
        b.node(n, "Data")
    b.node("ar", "HcomAllReduce", inputs=2)
    b.attr("ar", "_input_mutable", True)
    for name, a, c in (("m1", "d1", "d2"), ("m2", "m1", "d2"), ("m3", "d2", "d3")):
        b.node(name, "Mul", inputs=2)
        b.edge(a, 0, name, 0)
        b.edge(c, 0, name, 1)
        b.ref_op(name, {0: 0}, input_names=["ref", "value"], output_names=["ref"])
    b.edge("m2", 0, "ar", 0)
    b.edge("m3", 0, "ar", 1)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert feeder(m, "ar", 0) == "m2"
    assert m.find_node(feeder(m, "ar", 1)).type == "Identity"


def test_shared_root_data_to_scope_writes() -> None:
    # GE TestData2ScopeWriteNode
    b = GraphBuilder("g")
    b.node("d1", "Data")
    b.node("d2", "Data")
    b.node("a1", "HcomAllReduce", inputs=1)
    b.node("a2", "HcomAllReduce", inputs=2)
    for a in ("a1", "a2"):
        b.attr(a, "_input_mutable", True)
    b.edge("d1", 0, "a1", 0)
    b.edge("d1", 0, "a2", 0)
    b.edge("d2", 0, "a2", 1)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert m.find_node(feeder(m, "a1")).type == "Identity"
    assert m.find_node(feeder(m, "a2", 0)).type == "Identity"
    assert feeder(m, "a2", 1) == "d2"


def test_readonly_to_two_scope_write_nodes_both_copied() -> None:
    # GE TestSoftread2MultiScopeWrite
    b = GraphBuilder("g")
    b.chain("d:Data", "mul:Mul", "a1:HcomAllReduce")
    b.chain("mul", "a2:HcomAllReduce")
    for a in ("a1", "a2"):
        b.attr(a, "_input_mutable", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    assert m.find_node(feeder(m, "a1")).type == "Identity"
    assert m.find_node(feeder(m, "a2")).type == "Identity"


def test_identity_insert_before_moves_consumer_ctrl_inputs() -> None:
    # GE testReadonlyScopeWriteConflict / testIdentiytSplit: InsertNodeBefore moves the consumer's control inputs
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce")
    b.node("k", "Const")
    b.ctrl("k", "ar")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    handle_memory_rw_conflict(m)
    ident = m.find_node(feeder(m, "ar"))
    assert ident.ctrl_inputs == ["k"] and "k" not in m.find_node("ar").ctrl_inputs


# ------------------------------------------------------------------------------------------------ order and rounds
def _same_as_replay(m: Model) -> RWTypes:
    """Run the rule-driven pass and the replay on copies; they must leave the same graph and decisions."""
    a, b = copy.deepcopy(m), copy.deepcopy(m)
    rw = handle_memory_rw_conflict(a)
    ref = rw_replay.handle_memory_rw_conflict(b)
    key = [(d.action, d.src, d.src_out, d.dst, d.dst_in, d.identity) for d in rw.decisions]
    assert key == [(d.action, d.src, d.src_out, d.dst, d.dst_in, d.identity) for d in ref.decisions]
    for g in a.graphs:
        assert [(n.name, n.inputs, n.ctrl_inputs) for n in g.nodes.values()] == [
            (n.name, n.inputs, n.ctrl_inputs) for n in b.graph(g.name).nodes.values()
        ]
    m.graphs[:] = a.graphs
    return rw


def test_insertion_before_ref_input_rederives_the_skip_chain() -> None:
    # c (Const, two readers) -> asg (ref input 0) -> hc (scope-writes, asg's only consumer). Walking c first puts an
    # Identity before asg:0 (kReadOnlyConst -> kWriteable); asg's chain of single-use ref outputs now ends at that
    # Identity instead of the shared Const, so the last scope-write edge asg -> hc may keep the buffer. Deciding on
    # the facts of the first evaluation would copy it: the rules must be evaluated again after the edit.
    b = GraphBuilder("g")
    b.chain("c:Const", "asg:Assign", "hc:HcomAllReduce")
    b.chain("v:Variable", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("c", "r:ReLU")
    b.attr("hc", "_input_mutable", True)
    m = b.build()
    rw = _same_as_replay(m)
    assert m.find_node(feeder(m, "asg")).type == "Identity"
    assert feeder(m, "hc") == "asg"
    assert [d.action for d in rw.decisions] == ["insert_identity", "skip_last_scope_write"]
    assert rw.evaluations == 2


def test_split_then_removal_uses_the_fan_out_after_the_split() -> None:
    # id has a reader and a scope-writer: the split feeds r from a directly (a's fan-out grows) and gives hc its
    # own copy behind id; RemoveNoUseIdentity then judges id -> copy with a's new type
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "id:Identity", "r:ReLU")
    b.chain("id", "hc:HcomAllReduce")
    b.attr("hc", "_input_mutable", True)
    b.chain("a", "hc2:HcomAllReduce")
    b.attr("hc2", "_input_mutable", True)
    m = b.build()
    rw = _same_as_replay(m)
    assert feeder(m, "r") == "a"
    assert rw.evaluations >= 2


def test_unchanged_graph_needs_one_evaluation() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU", "r:ReLU")
    b.chain("a", "hc:HcomAllReduce")
    b.attr("hc", "_skip_rw_conflict", True)
    b.attr("hc", "_input_mutable", True)
    m = b.build()
    rw = _same_as_replay(m)
    assert rw.evaluations == 1 and [d.action for d in rw.decisions] == ["skip"]


def test_removals_after_splits_read_a_slice_and_match_the_replay() -> None:
    # every Identity has a reader and a scope-writer: each split changes its producer's fan-out, and its removal
    # is decided on the rules evaluated over the Identity's neighbourhood only (not the whole graph)
    m = rw_split_heavy(4)
    rw = _same_as_replay(m)
    assert rw.slice_evaluations == 4 and rw.evaluations == 5
    assert all(m.find_node(f"id{i}") is None for i in range(4))


def test_identity_guarding_an_assign_kept_after_its_split() -> None:
    # v -> id -> {r, hc (scope-writes)}, v -> asg (ref), control id -> asg: after the split id guards the read
    # of v before the Assign (IsIdentityUsefulForRWControl), so RemoveNoUseIdentity keeps it
    b = GraphBuilder("g")
    b.chain("v:Variable", "id:Identity", "r:ReLU")
    b.chain("id", "hc:HcomAllReduce")
    b.attr("hc", "_input_mutable", True)
    b.chain("v", "asg:Assign")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.ctrl("id", "asg")
    m = b.build()
    _same_as_replay(m)
    assert m.find_node("id") is not None

"""TensorMove elimination (seeds 000/003 scenarios 1–5, reference §5), built with the builder DSL."""

from __future__ import annotations

import pytest

from anchorlog.analysis.tensor_move import (
    derive_facts,
    explain,
    parse_input_reuse_indexes,
    parse_output_reuse_pairs,
    paths_from_facts,
    run_tensor_move_delete,
)
from anchorlog.errors import OptionError, PassFailure
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model

REUSE_OUT = "ge.exec.outputReuseInputMemIndexes"
REUSE_IN = "ge.exec.inputReuseMemIndexes"
INIT = "anchorlog.tensor_move.init"


def run(model: Model, **options: str) -> dict:
    opts = {k.replace("__", "."): v for k, v in options.items()}
    return run_tensor_move_delete(model, opts)


def verdict(section: dict, tm: str) -> dict:
    return next(t for t in section["tensor_moves"] if t["tensor_move"] == tm)


def has_node(model: Model, name: str) -> bool:
    return model.find_node(name) is not None


def edge(model: Model, src: str, out: int, dst: str, din: int) -> bool:
    n = model.find_node(dst)
    return n is not None and din < len(n.inputs) and n.inputs[din] == (src, out)


def ctrl(model: Model, src: str, dst: str) -> bool:
    n = model.find_node(dst)
    return n is not None and src in n.ctrl_inputs


# ---------------------------------------------------------------------------------------------- scenario 1
def test_scenario1_direct_single_path_deleted():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "tm:TensorMove", "op2:Add")
    m = b.build()
    sec = run(m)
    assert not has_node(m, "tm")
    assert edge(m, "op1", 0, "op2", 0)
    assert sec["deleted"] == 1 and verdict(sec, "tm")["decision"] == "deleted"


# ---------------------------------------------------------------------------------------------- scenario 2
def test_scenario2_variant1_through_refop_deleted():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "reshape:Reshape", "tm:TensorMove", "op2:Add")
    m = b.build()
    sec = run(m)
    assert not has_node(m, "tm")
    assert verdict(sec, "tm")["path"] == ["reshape(out:0)", "op1(out:0)"]
    assert edge(m, "reshape", 0, "op2", 0)


def test_scenario2_reuse_input_refop_and_reference_op_pass_through():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "r1:MyRef", "r2:Assign", "tm:TensorMove", "op2:Add")
    b.reuse_input("r1", 0, 0)
    b.ref_op("r2", {0: 0})
    m = b.build()
    sec = run(m)
    assert verdict(sec, "tm")["path"] == ["r2(out:0)", "r1(out:0)", "op1(out:0)"]
    assert not has_node(m, "tm")


def _pcall(b: GraphBuilder, name: str, sub: str) -> GraphBuilder:
    b.node(f"{name}:PartitionedCall", inputs=1, outputs=1)
    return b.subgraph(sub, owner=name)


def test_scenario2_variant2_through_subgraph_deleted():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "pc:PartitionedCall", "tm:TensorMove", "op2:Add")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sub_data", 0)
    sub.output("sub_data", 0)
    m = b.build()
    sec = run(m)
    v = verdict(sec, "tm")
    assert v["path"] == ["pc(out:0)", "sub_netoutput(out:0)", "sub_data(out:0)", "pc", "op1(out:0)"]
    assert v["decision"] == "deleted"


def test_scenario2_variant3_drill_into_subgraph_deleted():
    b = GraphBuilder("g")
    b.node("pc:PartitionedCall", inputs=0, outputs=1)
    b.chain("pc", "tm:TensorMove", "op2:Add")
    sub = b.subgraph("sub", owner="pc")
    sub.chain("c:Const", "op1:ReLU")
    sub.output("op1", 0)
    m = b.build()
    sec = run(m)
    assert verdict(sec, "tm")["facts"]["source"]["node"] == "op1"
    assert not has_node(m, "tm")


def test_scenario2_variant4_jump_out_of_subgraph_deleted():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "pc:PartitionedCall", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.data("d", 0)
    sub.chain("d", "tm:TensorMove", "op2:ReLU")
    sub.output("op2", 0)
    m = b.build()
    sec = run(m)
    v = verdict(sec, "tm")
    assert v["path"] == ["d(out:0)", "pc", "op1(out:0)"] and v["decision"] == "deleted"
    assert edge(m, "d", 0, "op2", 0)


def test_scenario2_combination_refops_and_two_subgraph_levels():
    # op1 -> Reshape -> PC{ d -> PC2{ d2 -> Reshape -> NetOutput } -> TM -> relu -> NetOutput }
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "rs0:Reshape", "pc:PartitionedCall", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.data("d", 0)
    sub.chain("d", "pc2:PartitionedCall", "tm:TensorMove", "relu:ReLU")
    sub.output("relu", 0)
    sub2 = sub.subgraph("sub2", owner="pc2")
    sub2.data("d2", 0)
    sub2.chain("d2", "rs2:Reshape")
    sub2.output("rs2", 0)
    m = b.build()
    sec = run(m)
    v = verdict(sec, "tm")
    assert v["path"] == [
        "pc2(out:0)",
        "sub2_netoutput(out:0)",
        "rs2(out:0)",
        "d2(out:0)",
        "pc2",
        "d(out:0)",
        "pc",
        "rs0(out:0)",
        "op1(out:0)",
    ]
    assert v["decision"] == "deleted"


def test_trace_from_rules_equals_python_trace():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "rs0:Reshape", "pc:PartitionedCall", "tmr:TensorMove", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.data("d", 0)
    sub.chain("d", "pc2:PartitionedCall", "tm:TensorMove", "relu:ReLU")
    sub.output("relu", 0)
    sub2 = sub.subgraph("sub2", owner="pc2")
    sub2.data("d2", 0)
    sub2.chain("d2", "rs2:Reshape")
    sub2.output("rs2", 0)
    b.chain("op1", "iff:If", "tmi:TensorMove", "x:ReLU")
    m = b.build()
    from tests.oracles.tm_trace import ModelView, trace_source

    rule_paths = paths_from_facts(derive_facts(m, outputs=("tm", "tm_path")))
    view = ModelView(m)
    for g in m.graphs:
        for n in g.nodes.values():
            if n.type == "TensorMove":
                assert rule_paths[(g.name, n.name)] == trace_source(view, g, n), n.name


# ---------------------------------------------------------------------------------------------- scenario 3
def _data_tm(index: int | None = 0, succ: str = "out:NetOutput") -> Model:
    b = GraphBuilder("g")
    d = b.node("data:Data")
    if index is not None:
        d.set_attr("index", index)
    b.chain("data", "tm:TensorMove", succ)
    return b.build()


def test_scenario3_data_source_needs_reuse_option():
    m = _data_tm()
    sec = run(m)
    assert has_node(m, "tm") and verdict(sec, "tm")["kept_by"] == "rule2-reuse"


@pytest.mark.parametrize(
    ("key", "value", "deleted"),
    [
        (REUSE_OUT, "0,0", True),
        (REUSE_OUT, "1,1|0,0", True),
        (REUSE_OUT, "1,0", False),  # pairs are input,output: input 1 only
        (REUSE_IN, "0", True),
        (REUSE_IN, "1,0", True),
        (REUSE_IN, "1", False),
        (REUSE_IN, "abc", False),
        (REUSE_IN, "12abc", False),
        (REUSE_IN, "", False),
        (REUSE_IN, "999999999999999999999999", False),
    ],
)
def test_scenario3_reuse_options(key, value, deleted):
    m = _data_tm()
    run_tensor_move_delete(m, {key: value})
    assert has_node(m, "tm") is not deleted


def test_scenario3_data_without_index_kept_even_with_option():
    m = _data_tm(index=None)
    sec = run_tensor_move_delete(m, {REUSE_OUT: "0,0"})
    assert verdict(sec, "tm")["kept_by"] == "rule2-reuse"


def test_reuse_option_parsing_matches_ge():
    assert parse_output_reuse_pairs("1,1|0,0") == [(1, 1), (0, 0)]
    assert parse_output_reuse_pairs("1,2,3") == [(1, 2)]  # stoul stops at the second comma
    assert parse_output_reuse_pairs(" 3, 4||x|-1,0|5,z") == [(3, 4)]
    assert parse_input_reuse_indexes("0,1,1,") == [0, 1]
    assert parse_input_reuse_indexes("0,x") is None


def test_output_reuse_option_without_any_pair_is_an_error():
    with pytest.raises(OptionError):
        run_tensor_move_delete(_data_tm(), {REUSE_OUT: "zero"})


def test_refdata_source_is_special_and_data():
    b = GraphBuilder("g")
    d = b.node("rd:RefData")
    d.set_attr("index", 0)
    b.chain("rd", "tm:TensorMove", "relu:ReLU")
    m = b.build()
    sec = run_tensor_move_delete(m, {REUSE_IN: "0"})
    assert verdict(sec, "tm")["facts"]["source"]["special"] is True
    assert not has_node(m, "tm")
    m2 = GraphBuilder("g")
    d2 = m2.node("rd:RefData")
    d2.set_attr("index", 0)
    m2.chain("rd", "tm:TensorMove", "relu:ReLU")
    model2 = m2.build()
    assert verdict(run(model2), "tm")["kept_by"] == "rule2-reuse"


# ---------------------------------------------------------------------------------------------- scenario 4
def _special(src_type: str, succ: str, **node_attrs) -> Model:
    b = GraphBuilder("g")
    b.chain(f"src:{src_type}", "tm:TensorMove", succ)
    succ_name = succ.split(":")[0]
    for k, v in node_attrs.items():
        b.attr(succ_name, k, v)
    return b.build()


def test_scenario4_variable_pure_read_successor_deleted():
    m = _special("Variable", "relu:ReLU")
    run(m)
    assert not has_node(m, "tm") and edge(m, "src", 0, "relu", 0)


@pytest.mark.parametrize("src_type", ["Variable", "VariableV2", "Const", "Constant", "ConstPlaceHolder"])
def test_scenario4_special_source_to_netoutput_kept(src_type):
    m = _special(src_type, "out:NetOutput")
    assert verdict(run(m), "tm")["kept_by"] == "rule1-path"


def test_scenario4_overwriting_successor_kept():
    m = _special("Variable", "w:Add", _input_mutable=True)
    sec = run(m)
    assert verdict(sec, "tm")["kept_by"] == "rule1-path"
    assert verdict(sec, "tm")["facts"]["overwriting_successor"]["rw_in"] == "kScopeWriteable"


def test_scenario4_ref_successor_and_wrapper_successor_kept():
    b = GraphBuilder("g")
    b.chain("src:Variable", "tm:TensorMove", "r:Add")
    b.reuse_input("r", 0, 0)
    m = b.build()
    assert verdict(run(m), "tm")["kept_by"] == "rule1-path"
    b = GraphBuilder("g")
    b.chain("src:Variable", "tm:TensorMove", "pc:PartitionedCall")
    sub = b.subgraph("sub", owner="pc")
    sub.data("d", 0)
    sub.output("d", 0)
    m = b.build()
    assert verdict(run(m), "tm")["kept_by"] == "rule1-path"


def test_scenario4_ref_var_src_var_name_makes_a_source_special():
    b = GraphBuilder("g")
    b.chain("src:ReLU", "tm:TensorMove", "out:NetOutput")
    b.attr("src", "ref_var_src_var_name", "var0")
    m = b.build()
    assert verdict(run(m), "tm")["kept_by"] == "rule1-path"


def test_scenario4_const_via_reshape_deleted_with_symbol_table():
    m = _special("Const", "relu:ReLU")
    b = GraphBuilder("g")
    b.chain("c:Const", "rs:Reshape", "tm:TensorMove", "relu:ReLU")
    m = b.build()
    sec = run(m)
    assert sec["symbol_table"] == "built" and not has_node(m, "tm")


# ---------------------------------------------------------------------------------------------- scenario 5
def _multiref(sibling_attrs=None, succ_attrs=None, succ_type="Add", ctrl_succ_to_sib=False) -> GraphBuilder:
    b = GraphBuilder("g")
    b.chain("src:ReLU", "sib:Add")
    b.chain("src", "tm:TensorMove", f"succ:{succ_type}")
    for k, v in (sibling_attrs or {}).items():
        b.attr("sib", k, v)
    for k, v in (succ_attrs or {}).items():
        b.attr("succ", k, v)
    if ctrl_succ_to_sib:
        b.ctrl("succ", "sib")
    return b


def test_scenario5_case_a_writing_sibling_needs_existing_ctrl():
    m = _multiref({"_input_mutable": True}).build()
    sec = run(m)
    assert has_node(m, "tm") and verdict(sec, "tm")["kept_by"] == "rule3-single-path"
    m = _multiref({"_input_mutable": True}, ctrl_succ_to_sib=True).build()
    sec = run(m)
    assert not has_node(m, "tm")
    assert sec["ctrl_edges_added"] == []
    assert edge(m, "src", 0, "succ", 0) and edge(m, "src", 0, "sib", 0) and ctrl(m, "succ", "sib")


def test_scenario5_case_a_both_writers_kept_even_with_ctrl():
    m = _multiref({"_input_mutable": True}, {"_input_mutable": True}, ctrl_succ_to_sib=True).build()
    assert "both overwrite" in verdict(run(m), "tm")["reason"]


def test_scenario5_case_a_ref_successor_kept():
    b = _multiref({"_input_mutable": True}, ctrl_succ_to_sib=True)
    b.reuse_input("succ", 0, 0)
    m = b.build()
    assert has_node(m, "tm")


def test_scenario5_case_b_reader_sibling_writer_successor_adds_ctrl():
    b = _multiref(succ_type="Assign")
    b.node("v:Data")
    b.chain("v", "succ")
    b.ref_op("succ", {0: 0})
    m = b.build()
    sec = run(m)  # RW types primed: Assign's ref input is kWriteable
    v = verdict(sec, "tm")
    assert v["decision"] == "deleted"
    assert v["ctrl_edges_added"] == [["sib", "succ"]]
    assert ctrl(m, "sib", "succ") and edge(m, "src", 0, "succ", 0)


def test_scenario5_case_b_scope_writer_kept_by_rw_conflict_without_ctrl():
    m = _multiref(succ_attrs={"_input_mutable": True}).build()
    sec = run(m)
    assert verdict(sec, "tm")["kept_by"] == "rule4-rw-conflict"
    assert not ctrl(m, "sib", "succ") and edge(m, "tm", 0, "succ", 0)


def test_scenario5_case_c_readers_no_ctrl():
    m = _multiref().build()
    sec = run(m)
    assert not has_node(m, "tm") and sec["ctrl_edges_added"] == [] and not ctrl(m, "sib", "succ")


def test_scenario5_cycle_check_keeps_tm():
    b = GraphBuilder("g")
    b.chain("src:ReLU", "tm:TensorMove", "succ:Add")
    b.chain("succ", "sib:Add")
    b.chain("src", "sib")
    b.attr("succ", "_input_mutable", True)
    m = b.build()
    sec = run(m)
    assert has_node(m, "tm") and not ctrl(m, "sib", "succ")
    assert verdict(sec, "tm")["kept_by"] in ("rule3-single-path", "rule4-rw-conflict")


def test_scenario5_sibling_netoutput_or_wrapper_kept():
    b = GraphBuilder("g")
    b.chain("src:ReLU", "tm:TensorMove", "succ:ReLU")
    b.chain("src", "out:NetOutput")
    m = b.build()
    assert verdict(run(m), "tm")["kept_by"] == "rule3-single-path"


def test_multiref_only_direct_form_handled():
    # Relu -> Add, Relu -> RefOp1 -> TM -> RefOp2: TM hangs behind a ref op; branch above is not handled
    b = GraphBuilder("g")
    b.chain("relu:ReLU", "add:Add")
    b.chain("relu", "ref1:Add", "tm:TensorMove", "ref2:Add")
    b.reuse_input("ref1", 0, 0)
    b.reuse_input("ref2", 0, 0)
    m = b.build()
    v = verdict(run(m), "tm")
    assert v["kept_by"] == "rule3-single-path" and "not one of them" in v["reason"]


def test_multiple_outputs_sharing_one_input_kept():
    b = GraphBuilder("g")
    b.node("data:Data").set_attr("index", 0)
    b.node("ref:Add", inputs=1, outputs=2)
    b.chain("data", "ref")
    b.reuse_input("ref", 0, 0)
    b.reuse_input("ref", 1, 0)
    b.edge("ref", 0, b.node("tm:TensorMove"), 0)
    b.chain("tm", "out:NetOutput")
    b.edge("ref", 1, b.node("add:Add"), 0)
    m = b.build()
    v = verdict(run_tensor_move_delete(m, {REUSE_OUT: "1,1|0,0"}), "tm")
    assert v["kept_by"] == "rule3-single-path" and "both reuse input 0" in v["reason"]


# ---------------------------------------------------------------------------------------------- entry, order
def test_reserved_attributes():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "tm1:TensorMove", "b:ReLU", "tm2:TensorMove", "c:ReLU", "tm3:TensorMove", "d:ReLU")
    b.attr("tm1", "_cannot_be_deleted", True)
    b.attr("tm2", "no_need_constant_folding", False)  # presence alone reserves
    b.attr("tm3", "_cannot_be_deleted", False)
    m = b.build()
    sec = run(m)
    assert verdict(sec, "tm1")["kept_by"] == "reserved"
    assert verdict(sec, "tm2")["kept_by"] == "reserved"
    assert verdict(sec, "tm3")["decision"] == "deleted"


def test_ge_order_upstream_deletion_blocks_downstream():
    # GE test TensorMoveTraceStopsAtUpstreamTensorMove_DataBranched: TM1 deleted first; TM2 then sees Data
    # branched (Add, RefOp) without being a direct consumer -> kept.
    b = GraphBuilder("g")
    b.node("data:Data").set_attr("index", 0)
    b.chain("data", "tm1:TensorMove", "ref:Add", "tm2:TensorMove", "out:NetOutput")
    b.chain("data", "add:Add", "out")
    b.reuse_input("ref", 0, 0)
    m = b.build()
    sec = run_tensor_move_delete(m, {REUSE_OUT: "1,1|0,0"})
    assert verdict(sec, "tm1")["decision"] == "deleted"
    assert verdict(sec, "tm2")["kept_by"] == "rule3-single-path"
    assert [t["tensor_move"] for t in sec["tensor_moves"]] == ["tm1", "tm2"]


def test_sibling_tensormoves_are_plain_readers():
    b = GraphBuilder("g")
    b.chain("relu:ReLU", "tm_a:TensorMove", "r1:ReLU")
    b.chain("relu", "tm_b:TensorMove", "r2:ReLU")
    m = b.build()
    sec = run(m)
    assert verdict(sec, "tm_a")["decision"] == "deleted"
    assert edge(m, "relu", 0, "r1", 0)


def test_if_stops_trace_case_does_not():
    b = GraphBuilder("g")
    b.chain("x:ReLU", "iff:If", "tm:TensorMove", "y:ReLU")
    b.chain("x", "cs:Case", "tm2:TensorMove", "z:ReLU")
    m = b.build()
    sec = run(m)
    assert verdict(sec, "tm")["kept_by"] == "rule1-path"
    assert verdict(sec, "tm2")["decision"] == "deleted"


def test_tm_in_if_branch_from_parent_input_kept():
    b = GraphBuilder("g")
    b.chain("relu:ReLU", "iff:If", "out:NetOutput")
    br = b.subgraph("then", owner="iff")
    br.data("d", 0)
    br.chain("d", "tm:TensorMove")
    br.output("tm", 0)
    m = b.build()
    v = verdict(run(m), "tm")
    assert v["path"] == ["d(out:0)", "iff", "relu(out:0)"] and v["kept_by"] == "rule3-single-path"


def test_deletion_relinks_control_edges_like_isolate_node():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "tm:TensorMove", "c:ReLU")
    b.node("x:ReLU")
    b.node("y:ReLU")
    b.ctrl("x", "tm")
    b.ctrl("tm", "y")
    m = b.build()
    sec = run(m)
    v = verdict(sec, "tm")
    assert v["decision"] == "deleted"
    assert ctrl(m, "x", "c") and ctrl(m, "a", "y") and ctrl(m, "x", "y")
    assert sorted(map(tuple, v["relink_ctrl_edges"])) == [("a", "y"), ("x", "c"), ("x", "y")]


def test_broken_subgraph_data_fails_the_pass():
    b = GraphBuilder("g")
    b.chain("op1:ReLU", "pc:PartitionedCall", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.node("d:Data")  # no _parent_node_index
    sub.chain("d", "tm:TensorMove")
    sub.output("tm", 0)
    m = b.build()
    with pytest.raises(PassFailure):
        run_tensor_move_delete(m, {INIT: "none"})


def test_oo_level_below_o3_disables_the_pass():
    m = _special("Variable", "relu:ReLU")
    sec = run_tensor_move_delete(m, {"ge.oo.level": "O1"})
    assert sec["enabled"] is False and has_node(m, "tm")


def test_init_mode_option_validated_and_reported():
    with pytest.raises(OptionError):
        run_tensor_move_delete(_special("Variable", "relu:ReLU"), {INIT: "maybe"})
    sec = run_tensor_move_delete(_special("Variable", "relu:ReLU"), {INIT: "none"})
    assert sec["symbol_table"] == "not built" and sec["rw_types"] == "not run"


def test_unprimed_rw_types_do_not_know_name_matched_writers():
    # Without InitRWConflictCheck GE's ref tables are empty: Assign's ref input reads as kReadOnly.
    def build() -> Model:
        b = GraphBuilder("g")
        b.chain("v:Variable", "tm:TensorMove", "assign:Assign")
        b.node("x:Data")
        b.chain("x", "assign")
        b.ref_op("assign", {0: 0})
        return b.build()

    sec = run_tensor_move_delete(build(), {INIT: "full"})
    assert verdict(sec, "tm")["kept_by"] == "rule1-path"


def test_layout_rule_keeps_tm_when_merge_conflicts():
    # GE KeepTMWhenMemLayoutConflictAfterSymbolMerge: two Variables copied into one no-padding continuous input
    def build() -> Model:
        b = GraphBuilder("g")
        b.node("pc:PhonyConcat", inputs=2, outputs=1)
        b.chain("var1:Variable", "tm1:TensorMove")
        b.chain("var2:Variable", "tm2:TensorMove")
        b.edge("tm1", 0, "pc", 0)
        b.edge("tm2", 0, "pc", 1)
        b.attr("pc", "_no_padding_continuous_input", True)
        b.attr("pc", "_output_reuse_input", True)
        b.reuse_input("pc", 0, 0)
        b.out_attr("var1", 0, "ref_var_src_var_name", "var1")
        b.out_attr("var2", 0, "ref_var_src_var_name", "var2")
        return b.build()

    # tm1 feeds PhonyConcat input 0, which its output reuses: Rule 1 already keeps it (GE only asserts "kept").
    # tm2 passes Rules 1-4; merging var2's symbol into the continuous input's is what the layout rule refuses.
    sec = run_tensor_move_delete(build(), {INIT: "full"})
    assert verdict(sec, "tm1")["kept_by"] == "rule1-path"
    assert verdict(sec, "tm2")["kept_by"] == "rule5-layout"
    sec = run_tensor_move_delete(build(), {INIT: "none"})
    assert verdict(sec, "tm2")["decision"] == "deleted"


def test_explain_names_the_rule_and_facts():
    text = explain(_data_tm(), "tm", options={REUSE_IN: "1"})
    assert "KEPT" in text and "Rule 2" in text and "graph input 0" in text
    text = explain(_special("Variable", "relu:ReLU"), "tm")
    assert "DELETED" in text and "special source" in text
    with pytest.raises(OptionError):
        explain(_special("Variable", "relu:ReLU"), "nope")


def test_explain_command_dispatches_by_node_type(tmp_path, capsys):
    from anchorlog.analysis.explainers import explain as dispatch
    from anchorlog.facts.ge_io import write_model

    m = _data_tm()
    path = tmp_path / "m.pbtxt"
    write_model(m, path)
    text = dispatch(m, "tm", options={REUSE_OUT: "0,0"})
    assert "DELETED" in text
    with pytest.raises(OptionError):
        dispatch(_data_tm(), "data")
    from anchorlog.cli import main

    rc = main(["explain", str(path), "tm"])
    assert rc in (0, None)
    assert "rule2-reuse" not in capsys.readouterr().out  # words, not rule ids


def test_report_relations_of_the_rule_program():
    b = GraphBuilder("g")
    b.chain("v:Variable", "rs:Reshape", "tm:TensorMove", "succ:Add")
    b.chain("rs", "sib:ReLU")
    b.reuse_input("succ", 0, 0)
    b.attr("tm", "no_need_constant_folding", False)
    facts = derive_facts(b.build())
    assert facts["tm_source"] == [("g", "tm", "g", "v", "Variable", 0)]
    assert facts["tm_reserved"] == [("g", "tm", "no_need_constant_folding")]
    assert facts["tm_succ"] == [("g", "tm", "succ", 0, "Add", 1, 0)]
    assert ("g", "tm", 0, 2) in facts["tm_path_consumers"]
    # a special source with a successor passing its input on: Rule 1 keeps tm, so no sibling rows are derived
    assert facts["tm_succ_unsafe"] == [("g", "tm", "succ", 0, "ref_out")] and facts["tm_sibling"] == []


def test_siblings_derived_only_when_rule1_lets_the_tensor_move_through():
    # same shape with a plain source: Rule 1 passes, Rule 3 reads the sibling on the shared anchor
    b = GraphBuilder("g")
    b.chain("a:ReLU", "rs:Reshape", "tm:TensorMove", "succ:Add")
    b.chain("rs", "sib:ReLU")
    b.reuse_input("succ", 0, 0)
    facts = derive_facts(b.build())
    assert facts["tm_src_class"] == [] and ("g", "tm", 0, "sib", 0) in facts["tm_sibling"]
    # a special source whose successors are all safe: siblings are derived too
    b = GraphBuilder("g")
    b.chain("v:Variable", "rs:Reshape", "tm:TensorMove", "succ:ReLU")
    b.chain("rs", "sib:ReLU")
    facts = derive_facts(b.build())
    assert facts["tm_succ_unsafe"] == [] and ("g", "tm", 0, "sib", 0) in facts["tm_sibling"]


def test_siblings_of_a_graph_input_derived_only_when_a_reuse_option_covers_it():
    def shared_input() -> Model:
        b = GraphBuilder("g")
        b.node("data:Data").set_attr("index", 0)
        b.chain("data", "tm:TensorMove", "succ:ReLU")
        b.chain("data", "sib:ReLU")
        return b.build()

    # Rule 2 keeps tm (graph input 0 without a reuse option): its many readers are not derived per TensorMove
    facts = derive_facts(shared_input())
    assert facts["tm_data_index"] == [("g", "tm", 0)] and facts["tm_reuse"] == [] and facts["tm_sibling"] == []
    assert verdict(run(shared_input()), "tm")["kept_by"] == "rule2-reuse"
    # input 0 declared reusable: Rule 3 runs and reads the sibling
    facts = derive_facts(shared_input(), options={REUSE_IN: "0"})
    assert facts["tm_sibling"] == [("g", "tm", 0, "sib", 0)]
    sec = run_tensor_move_delete(shared_input(), {REUSE_IN: "0"})
    assert verdict(sec, "tm")["facts"]["siblings"] == {"data:0": ["sib:0"]}


def test_symbol_table_merged_after_each_deletion():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "tm1:TensorMove", "tm2:TensorMove", "c:ReLU")
    m = b.build()
    sec = run(m)
    v1, v2 = verdict(sec, "tm1"), verdict(sec, "tm2")
    assert v1["facts"]["symbols"] == {"in": "a_out_0", "out": "tm1_out_0"}
    # tm1's output symbol was merged into a's: tm2 now reads a_out_0
    assert v2["facts"]["symbols"] == {"in": "a_out_0", "out": "tm2_out_0"}
    assert v2["path"] == ["a(out:0)"]  # traced through tm1: the path the rules derived with tm1 bypassed
    # tm2's facts after tm1's deletion came from the first derivation's look-through run, not a re-derivation
    assert sec["rederived"] == 0 and sec["looked_through"] == 1 and edge(m, "a", 0, "c", 0)


def test_rule_program_rw_facts_match_the_decider():
    m = _multiref(succ_attrs={"_input_mutable": True}).build()
    facts = derive_facts(m)
    assert ("g", "tm", "successor_in", "succ", 0, "kScopeWriteable") in facts["tm_rw"]
    assert ("g", "tm", "sibling_in", "sib", 0, "kReadOnly") in facts["tm_rw"]
    assert facts["tm_rw_check"] == [("g", "tm", "succ", 0, "kReadOnly", "kScopeWriteable", "INSERT_IDENTITY")]
    assert verdict(run(m), "tm")["kept_by"] == "rule4-rw-conflict"


def test_rule_program_pending_edges_and_cycle_check():
    # reader sibling + Assign (kWriteable) successor: ordering edge sib -> succ, no cycle
    b = _multiref(succ_type="Assign")
    b.node("v:Data")
    b.chain("v", "succ")
    b.ref_op("succ", {0: 0})
    facts = derive_facts(b.build())
    assert facts["tm_pending"] == [("g", "tm", "sib", "succ")] and facts["tm_pending_cycle"] == []
    # the writing successor already feeds the sibling: the edge would close a cycle
    b = GraphBuilder("g")
    b.chain("src:ReLU", "tm:TensorMove", "succ:Add", "sib:Add")
    b.chain("src", "sib")
    b.attr("succ", "_input_mutable", True)
    facts = derive_facts(b.build())
    assert facts["tm_pending_cycle"] == [("g", "tm", "sib", "succ")]


def test_rule_program_symbols_and_simulated_merge():
    b = GraphBuilder("g")
    b.chain("c:Const", "rs:Reshape", "tm:TensorMove", "relu:ReLU")
    facts = derive_facts(b.build())
    assert ("g", "tm", "in", "c_out_0") in facts["tm_symbol"] and ("g", "tm", "out", "tm_out_0") in facts["tm_symbol"]
    merged = {(r[4], r[5], r[6]) for r in facts["tm_merged"]}
    assert {
        ("c", "out", 0),
        ("rs", "in", 0),
        ("rs", "out", 0),
        ("tm", "in", 0),
        ("tm", "out", 0),
        ("relu", "in", 0),
    } == merged
    assert {r[2] for r in facts["tm_merged"]} == {"c_out_0"}


def test_shared_facts_after_the_pass_equal_a_fresh_derivation():
    # During the walk the pass refreshes the shared fact database per deletion without re-deriving positions;
    # it hands the refreshed nodes back (Graph.touched), so the next pass's shared_facts is exact again.
    from anchorlog.analysis.fact_cache import shared_facts
    from anchorlog.analysis.registry import PassContext
    from anchorlog.facts.generate import generate_transformer
    from anchorlog.facts.relations import RELATIONS, FactDB

    m = generate_transformer(nodes=1500, seed=3, tensor_move_share=0.15)
    ctx = PassContext(options={})
    shared_facts(m, ctx)
    section = run_tensor_move_delete(m, {}, ctx=ctx)
    assert section["deleted"] > 0 and section["rule_runs"] > 1  # re-derivations after deletions happened
    gone = {t["tensor_move"] for t in section["tensor_moves"] if t["decision"] == "deleted"}
    assert gone <= m.graphs[0].touched  # every node refreshed without positions is handed back
    db = shared_facts(m, ctx)
    fresh = FactDB.from_model(m)
    for rel in RELATIONS:
        assert sorted(db.rows(rel), key=repr) == sorted(fresh.rows(rel), key=repr), rel


def _check_skipped_rederivations(model, options=None):
    """Run the pass; whenever a TensorMove the broad rule (facts mention a touched node) would have re-derived
    but the bypass rule did not is decided, re-derive its facts anyway and compare: they must be unchanged."""
    from anchorlog.analysis import tensor_move as tmmod

    checked = []

    class Checking(tmmod.TensorMoveDecider):
        def _apply(self, graph, tm, v, pending):
            touched = {(graph.name, n) for n in (tm.name, *in_nodes_of(graph, tm.name), *out_nodes_of(graph, tm.name))}
            broad = self.facts.stale_after(touched)
            before = set(self.stale)
            super()._apply(graph, tm, v, pending)
            self.skipped = getattr(self, "skipped", set()) | (broad - self.stale - before)

        def _current(self, key):
            super()._current(key)
            if key in getattr(self, "skipped", set()) and key not in self.deleted:
                self._refresh()
                fresh = self.rules.derive([key])
                for rel in (*tmmod.DECISION_OUTPUTS, "tm_pending_cycle"):
                    want = sorted(tuple(r[2:]) for r in fresh.get(rel, []) if (r[0], r[1]) == key)
                    assert sorted(self.facts.get(key, rel)) == want, (key, rel)
                checked.append(key)
                self.skipped.discard(key)

    from anchorlog.runtime.rewrite import in_nodes as in_nodes_of
    from anchorlog.runtime.rewrite import out_nodes as out_nodes_of

    orig = tmmod.TensorMoveDecider
    tmmod.TensorMoveDecider = Checking
    try:
        section = tmmod.run_tensor_move_delete(model, dict(options or {}))
    finally:
        tmmod.TensorMoveDecider = orig
    return section, checked


def test_bypass_staleness_skips_only_unchanged_facts():
    # After a plain bypass only TensorMoves mentioning the deleted one or passing its producer are re-derived;
    # every other TensorMove whose facts mention a touched node is re-derived here anyway and must be unchanged.
    from anchorlog.facts.generate import generate_transformer

    m = generate_transformer(nodes=1500, seed=1, tensor_move_share=0.2)
    section, checked = _check_skipped_rederivations(m)
    assert section["deleted"] > 0 and checked


def _verified_run(model, options=None, *, look_through=True):
    """Run the pass re-deriving every installed look-through fact set on the graph of that moment (the decider
    fails unless the rows are the same); ``look_through=False`` runs with re-derivations only."""
    from anchorlog.analysis import tensor_move as tmmod

    saved = (tmmod.TensorMoveDecider.verify_look_through, tmmod.TensorMoveDecider._derive_look_through)
    tmmod.TensorMoveDecider.verify_look_through = True
    if not look_through:
        tmmod.TensorMoveDecider._derive_look_through = lambda self, seed: None
    try:
        return tmmod.run_tensor_move_delete(model, dict(options or {}))
    finally:
        tmmod.TensorMoveDecider.verify_look_through, tmmod.TensorMoveDecider._derive_look_through = saved


def _decisions(section):
    keys = ("tensor_move", "graph", "decision", "kept_by", "reason", "path", "facts", "ctrl_edges_added")
    return [{k: t.get(k) for k in keys} for t in section["tensor_moves"]]


def test_look_through_facts_equal_a_rederivation_on_chains():
    # chains of TensorMoves (a 3-chain: only the first link is looked through, the rest falls back), a
    # TensorMove behind a ref op behind a TensorMove, two TensorMoves sharing a producer, a chain into a subgraph
    def model() -> Model:
        b = GraphBuilder("g")
        b.chain("a:ReLU", "t1:TensorMove", "t2:TensorMove", "t3:TensorMove", "c:ReLU")
        b.chain("x:ReLU", "u1:TensorMove", "r:Assign", "u2:TensorMove", "d:ReLU")
        b.node("v:ReLU")
        b.chain("v", "r")
        b.ref_op("r", {0: 0})
        b.chain("y:ReLU", "s1:TensorMove", "e:ReLU")
        b.chain("y", "s2:TensorMove", "f:ReLU")
        return b.build()

    sec = _verified_run(model())
    plain = _verified_run(model(), look_through=False)
    assert _decisions(sec) == _decisions(plain)
    assert sec["looked_through"] >= 3 and sec["rederived"] < plain["rederived"]
    assert verdict(sec, "t2")["path"] == ["a(out:0)"] and verdict(sec, "t3")["path"] == ["a(out:0)"]


def test_look_through_on_generated_graphs_matches_rederivation():
    # the generator's chained and producer-sharing TensorMoves; with the reuse option the rope-table ones reach
    # Rule 3 too (many TensorMoves on one graph input: look-through falls back to re-derivation there)
    from anchorlog.facts.generate import generate_transformer

    for options in ({}, {REUSE_IN: "0,1,2,3,4,5,6,7"}):
        sec = _verified_run(generate_transformer(nodes=1500, seed=1, tensor_move_share=0.2), options)
        plain = _verified_run(
            generate_transformer(nodes=1500, seed=1, tensor_move_share=0.2), options, look_through=False
        )
        assert _decisions(sec) == _decisions(plain)
        assert sec["looked_through"] > 0 and sec["rederived"] < plain["rederived"]


def test_look_through_falls_back_when_control_edges_move():
    # t1 has a control successor: deleting it re-links control edges (not a plain bypass), so t2 is re-derived
    b = GraphBuilder("g")
    b.chain("a:ReLU", "t1:TensorMove", "t2:TensorMove", "c:ReLU")
    b.node("z:ReLU")
    b.ctrl("t1", "z")
    sec = _verified_run(b.build())
    assert verdict(sec, "t2")["path"] == ["a(out:0)"]
    assert sec["looked_through"] == 0 and sec["rederived"] == 1

"""layout-conflict (GE MemLayoutConflictOptimizer, reference §4): attribute marking, the absolute tables, every
registered checker (both outcomes), solving, the control-node step, the TensorMove API and explain."""

from __future__ import annotations

import pytest

from anchorlog.analysis.layout_conflict import (
    construct_single_node_symbol_table,
    explain_anchor,
    is_graph_exist_mem_conflict_symbol,
    marks_from_facts,
    run,
)
from anchorlog.analysis.layout_conflict.attributes import (
    CONT_IN,
    CONT_OUT,
    IMMUT_OUT,
    NOPAD_IN,
    NOPAD_OUT,
    NORMAL_IN,
    NORMAL_OUT,
    REF_OUT,
    RTS_IN,
    RTS_OUT,
    UNSUP_IN,
    UNSUP_OUT,
    USER_IN,
    USER_OUT,
    AnchorAttribute,
    LayoutOptions,
    Marks,
    graph_info,
)
from anchorlog.analysis.layout_conflict.checkers import CHECKERS, REGISTRY, find_conflict_nodes
from anchorlog.analysis.layout_conflict.order import topological_sorting
from anchorlog.analysis.layout_conflict.refmap import AnchorRef, get_ref_mapping
from anchorlog.analysis.layout_conflict.rules import layout_facts
from anchorlog.analysis.layout_conflict.tables import ABSOLUTE_CONFLICT_ROWS, ABSOLUTE_NO_CONFLICT_ROWS
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import ModelIndex

P2P = 17  # RT_MEMORY_P2P_DDR
TS = 64


# --------------------------------------------------------------------------------------------------------- helpers
def analyse(model: Model, options: dict[str, str] | None = None):
    """Symbol table, marks and the conflicts of every symbol of the root graph (nothing inserted)."""
    topological_sorting(model)
    opts = LayoutOptions.parse(options or {}, env={})
    g = model.root
    index = ModelIndex(model)
    table = get_ref_mapping(model, g, index)
    # the attributes as the pass gets them: layout.dl (NORMAL for every anchor the rules list nothing for)
    marks = marks_from_facts(model, table, layout_facts(model, g, options or {}))
    info = graph_info(g, opts)
    found = {}
    for sym in sorted(table.s2a):
        for a, why in find_conflict_nodes(table.s2a[sym], marks, info, index).items():
            found[a.name] = why.rule
    return table, marks, found


def attrs_of(model: Model, node: str, io: str, idx: int, options: dict[str, str] | None = None) -> list:
    _, marks, _ = analyse(model, options)
    return marks.of(AnchorRef(model.find_node(node), io, idx))


def run_pass(model: Model, options: dict[str, str] | None = None) -> dict:
    return run(model, PassContext(options=dict(options or {})))


def producer_of(model: Model, node: str, idx: int):
    n = model.find_node(node)
    src = n.inputs[idx]
    return n.graph.nodes[src[0]]


# --------------------------------------------------------------------------------------------------------- marking
def test_user_memory_input_and_output_marked_in_processed_graph_only():
    b = GraphBuilder("g")
    b.chain("data:Data", "relu:ReLU", "out:NetOutput")
    m = b.build()
    assert attrs_of(m, "data", "out", 0) == [USER_IN]
    assert attrs_of(m, "out", "in", 0) == [USER_OUT]
    assert attrs_of(m, "relu", "in", 0) == [NORMAL_IN]
    assert attrs_of(m, "relu", "out", 0) == [NORMAL_OUT]


def test_subgraph_data_and_netoutput_are_not_user_io():
    b = GraphBuilder("g")
    b.chain("data:Data", "pc:PartitionedCall", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "srelu:ReLU")
    sub.output("srelu", 0)
    m = b.build()
    assert attrs_of(m, "sd", "out", 0) == [REF_OUT]  # subgraph input: pass-through, not a user input
    assert attrs_of(m, "sub_netoutput", "in", 0) == [NORMAL_IN]


@pytest.mark.parametrize("typ", ["Const", "Constant", "FileConstant", "ConstPlaceHolder", "Variable", "VariableV2"])
def test_immutable_address_output(typ):
    b = GraphBuilder("g")
    b.chain(f"c:{typ}", "relu:ReLU", "out:NetOutput")
    assert attrs_of(b.build(), "c", "out", 0) == [IMMUT_OUT]


def test_refdata_is_user_input_not_immutable():
    b = GraphBuilder("g")
    b.chain("r:RefData", "relu:ReLU", "out:NetOutput")
    assert attrs_of(b.build(), "r", "out", 0) == [USER_IN]


@pytest.mark.parametrize("typ", ["StreamSwitch", "LabelSwitchByIndex"])
def test_switch_ops_are_unrefreshable(typ):
    b = GraphBuilder("g")
    b.chain("a:ReLU", f"s:{typ}", "out:NetOutput")
    m = b.build()
    assert attrs_of(m, "s", "in", 0) == [UNSUP_IN]
    assert attrs_of(m, "s", "out", 0) == [UNSUP_OUT]


def test_hccl_unrefreshable_unless_feature_map_refreshable():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "h:HcomAllReduce", "out:NetOutput")
    b.attr("h", "_ge_attr_op_kernel_lib_name", "ops_kernel_info_hccl")
    m = b.build()
    assert attrs_of(m, "h", "in", 0) == [UNSUP_IN]
    assert attrs_of(m, "h", "in", 0, {"ge.featureBaseRefreshable": "1"}) == [NORMAL_IN]


def test_continuous_attributes_need_more_than_one_anchor():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "c1:Concat")
    b.chain("b:ReLU", "c1")
    b.chain("x:ReLU", "c2:Concat")
    for n in ("c1", "c2"):
        b.attr(n, "continuous_input", True)
    b.node("s", "Split", outputs=2)
    b.chain("c1", "s")
    b.attr("s", "continuous_output", True)
    b.node("s1", "Split", outputs=1)
    b.chain("c2", "s1")
    b.attr("s1", "continuous_output", True)
    m = b.build()
    assert attrs_of(m, "c1", "in", 0) == [CONT_IN]
    assert attrs_of(m, "c2", "in", 0) == [NORMAL_IN]  # a single input is not continuous
    assert attrs_of(m, "s", "out", 1) == [CONT_OUT]
    assert attrs_of(m, "s1", "out", 0) == [NORMAL_OUT]


def test_nopadding_attributes():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "pc:PhonyConcat")
    b.chain("b:ReLU", "pc")
    b.attr("pc", "_no_padding_continuous_input", True)
    b.node("ps", "PhonySplit", outputs=2)
    b.chain("pc", "ps")
    b.attr("ps", "_no_padding_continuous_output", True)
    m = b.build()
    assert attrs_of(m, "pc", "in", 1) == [NOPAD_IN]
    assert attrs_of(m, "ps", "out", 0) == [NOPAD_OUT]


def test_rts_special_memory_types():
    b = GraphBuilder("g")
    b.node("h", "HcomAllReduce", inputs=2, outputs=2)
    b.chain("a:ReLU", "h")
    b.chain("b:ReLU", (0, 1), "h")
    b.attr("h", "_input_memory_type", [P2P, 2])
    b.attr("h", "_output_memory_type", [4, TS])
    m = b.build()
    assert attrs_of(m, "h", "in", 0) == [RTS_IN]
    assert attrs_of(m, "h", "in", 1) == [NORMAL_IN]  # HBM is not special
    assert attrs_of(m, "h", "out", 0) == [NORMAL_OUT]  # DDR is not special
    assert attrs_of(m, "h", "out", 1) == [RTS_OUT]


def test_reference_output_by_input_reuse_and_by_ref_var():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "r:Reshape", "out:NetOutput")
    b.chain("v:Variable", "assign:Assign")
    b.chain("a", (0, 1), "assign")
    b.ref_op("assign", {0: 0})
    b.out_attr("assign", 0, "ref_var_src_var_name", "v")
    m = b.build()
    assert attrs_of(m, "r", "out", 0) == [REF_OUT]
    table, marks, _ = analyse(m)
    a = AnchorRef(m.find_node("assign"), "out", 0)
    assert marks.of(a) == [REF_OUT]
    assert marks.ref_map[a].name == "v"  # IsRefFromVar: same symbol as v_out_0


def test_attribute_order_is_ge_append_order():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "s:StreamSwitch", "out:NetOutput")
    b.chain("b:ReLU", (0, 1), "s")
    b.attr("s", "continuous_input", True)
    b.attr("s", "_no_padding_continuous_input", True)
    b.attr("s", "_input_memory_type", [P2P])
    assert attrs_of(b.build(), "s", "in", 0) == [UNSUP_IN, NOPAD_IN, CONT_IN, RTS_IN]


def test_fourteen_attributes():
    assert len(AnchorAttribute) == 14
    assert [a.value for a in AnchorAttribute] == list(range(14))


# --------------------------------------------------------------------------------------------------------- tables
def _synthetic(ta, tb, io_a="out", io_b="in"):
    """Two anchors of one symbol on distinct nodes with given attributes (for the table rows)."""
    b = GraphBuilder("g")
    b.node("x", "ReLU", inputs=1, outputs=1)
    b.node("y", "ReLU", inputs=1, outputs=1)
    m = b.build()
    topological_sorting(m)
    x, y = m.find_node("x"), m.find_node("y")
    a, c = AnchorRef(x, io_a, 0), AnchorRef(y, io_b, 0)
    marks = Marks({a: list(ta), c: list(tb)})
    info = graph_info(m.root, LayoutOptions())
    return a, c, find_conflict_nodes([a, c], marks, info, ModelIndex(m))


@pytest.mark.parametrize("row", ABSOLUTE_CONFLICT_ROWS, ids=lambda r: f"{r[0].name}-{r[1].name}")
def test_absolute_conflict_rows_mark_the_in_anchor(row):
    x, y = row
    for ta, tb in ((x, y), (y, x)):
        a, c, found = _synthetic([ta], [tb], "out", "in")
        assert list(found) == [c] and found[c].rule.startswith("absolute conflict")
        a, c, found = _synthetic([ta], [tb], "in", "out")
        assert list(found) == [a]


def test_absolute_conflict_two_inputs_marks_the_earlier_node():
    a, c, found = _synthetic([USER_IN], [UNSUP_IN], "in", "in")
    assert list(found) == [a]  # x has the smaller topological id


def test_absolute_conflict_between_two_outputs_fails():
    from anchorlog.errors import PassFailure

    with pytest.raises(PassFailure):
        _synthetic([USER_OUT], [RTS_OUT], "out", "out")


@pytest.mark.parametrize("row", ABSOLUTE_NO_CONFLICT_ROWS, ids=lambda r: f"{r[0].name}-{r[1].name}")
def test_absolute_no_conflict_rows(row):
    x, y = row
    assert not _synthetic([x], [y])[2]
    assert not _synthetic([y], [x])[2]


def test_reference_output_never_conflicts():
    assert not _synthetic([REF_OUT], [USER_OUT])[2]


def test_registry_has_55_pairs_in_22_checkers_none_in_tables():
    pairs = {frozenset((x, y)) for (x, y) in REGISTRY}
    assert len(pairs) == 55
    assert len(CHECKERS) == 22
    table_pairs = {frozenset(r) for r in ABSOLUTE_CONFLICT_ROWS + ABSOLUTE_NO_CONFLICT_ROWS}
    assert not pairs & table_pairs


def test_unregistered_pair_is_no_conflict():
    assert not _synthetic([USER_IN], [NORMAL_IN])[2]


# --------------------------------------------------------------------------------------------------------- checkers
def test_continuous_input_and_continuous_input_second_consumer():
    b = GraphBuilder("g")
    b.node("c1", "Concat", inputs=2)
    b.node("c2", "Concat", inputs=2)
    b.chain("a:ReLU", (0, 0), "c1")
    b.chain("bb:ReLU", (0, 1), "c1")
    b.chain("a", (0, 0), "c2")
    b.chain("bb", (0, 1), "c2")
    for n in ("c1", "c2"):
        b.attr(n, "continuous_input", True)
    _, _, found = analyse(b.build())
    assert set(found) == {"c2_in_0", "c2_in_1"}
    assert "continuous_input_and_continuous_input" in found["c2_in_0"]


def test_continuous_input_cascade_and_single_consumer_ok():
    b = GraphBuilder("g")
    b.node("c1", "Concat", inputs=2)
    b.node("c2", "Concat", inputs=2)
    b.chain("a:ReLU", (0, 0), "c1")
    b.chain("bb:ReLU", (0, 1), "c1")
    b.chain("c1", (0, 1), "c2")
    b.chain("d:ReLU", (0, 0), "c2")
    b.reuse_input("c1", 0, 0)
    for n in ("c1", "c2"):
        b.attr(n, "continuous_input", True)
    _, _, found = analyse(b.build())
    assert set(found) == {"c2_in_1"}
    # without the output reuse the two concats never share a symbol
    b.node("c1").output_desc[0].reuse_input = False
    assert not analyse(b.build())[2]


def _split_concat(concat_inputs):
    b = GraphBuilder("g")
    b.node("s", "Split", outputs=4)
    b.chain("x:ReLU", "s")
    b.attr("s", "continuous_output", True)
    b.node("c", "Concat", inputs=len(concat_inputs))
    for i, o in enumerate(concat_inputs):
        b.edge("s", o, "c", i)
    b.attr("c", "continuous_input", True)
    return b.build()


def test_continuous_output_and_continuous_input_same_or_partial():
    assert not analyse(_split_concat([0, 1, 2, 3]))[2]
    assert not analyse(_split_concat([1, 2, 3]))[2]
    found = analyse(_split_concat([1, 3]))[2]
    # GE marks node_a, the pair's first anchor: the split output (producers come first in a symbol)
    assert set(found) == {"s_out_1", "s_out_3"}
    assert "continuous_output_and_continuous_input" in found["s_out_1"]


def test_continuous_out_and_continuous_out_cascade():
    b = GraphBuilder("g")
    b.node("s1", "Split", outputs=2)
    b.node("s2", "Split", outputs=2)
    b.chain("x:ReLU", "s1")
    b.chain("s1", "s2")
    b.reuse_input("s2", 0, 0)
    b.attr("s1", "continuous_output", True)
    b.attr("s2", "_no_padding_continuous_output", True)
    found = analyse(b.build())[2]
    assert set(found) == {"s1_out_0"}
    assert "continuous_out_and_continuous_out" in found["s1_out_0"]


def test_nopadding_out_and_nopadding_out():
    b = GraphBuilder("g")
    b.node("s1", "PhonySplit", outputs=2)
    b.node("s2", "PhonySplit", outputs=2)
    b.chain("x:ReLU", "s1")
    b.chain("s1", "s2")
    b.reuse_input("s2", 0, 0)
    for n in ("s1", "s2"):
        b.attr(n, "_no_padding_continuous_output", True)
    found = analyse(b.build())[2]
    assert set(found) == {"s1_out_0"}
    b.node("s2").output_desc[0].reuse_input = False
    assert not analyse(b.build())[2]


def _two_phony(first, second):
    b = GraphBuilder("g")
    for n in "abcd":
        b.node(f"{n}:ReLU")
    b.node("p1", "PhonyConcat", inputs=len(first))
    b.node("p2", "PhonyConcat", inputs=len(second))
    for i, s in enumerate(first):
        b.edge(s, 0, "p1", i)
    for i, s in enumerate(second):
        b.edge(s, 0, "p2", i)
    for n in ("p1", "p2"):
        b.attr(n, "_no_padding_continuous_input", True)
    return b.build()


def test_nopadding_in_and_nopadding_in_subvector_or_gap():
    assert not analyse(_two_phony("abcd", "cd"))[2]
    assert not analyse(_two_phony("ab", "ab"))[2]
    found = analyse(_two_phony("abcd", "ad"))[2]
    assert set(found) == {"p2_in_0", "p2_in_1"}


def test_nopadding_in_and_nopadding_out():
    b = GraphBuilder("g")
    b.node("ps", "PhonySplit", outputs=2)
    b.node("pc", "PhonyConcat", inputs=2)
    b.chain("x:ReLU", "ps")
    b.chain("a:ReLU", (0, 0), "pc")
    b.chain("ps", (0, 1), "pc")
    b.attr("ps", "_no_padding_continuous_output", True)
    b.attr("pc", "_no_padding_continuous_input", True)
    assert set(analyse(b.build())[2]) == {"pc_in_1"}
    # PhonyConcat -> PhonySplit directly: no conflict
    b2 = GraphBuilder("g")
    b2.node("pc", "PhonyConcat", inputs=2)
    b2.node("ps", "PhonySplit", outputs=2)
    b2.chain("a:ReLU", (0, 0), "pc")
    b2.chain("bb:ReLU", (0, 1), "pc")
    b2.chain("pc", "ps")
    b2.reuse_input("pc", 0, 0)
    b2.reuse_input("ps", 0, 0)
    b2.attr("ps", "_no_padding_continuous_output", True)
    b2.attr("pc", "_no_padding_continuous_input", True)
    assert not analyse(b2.build())[2]


def test_immutable_out_and_continuous_out_marks_ref_input():
    b = GraphBuilder("g")
    b.node("s", "Split", outputs=2)
    b.chain("c:Const", "s")
    b.reuse_input("s", 0, 0)
    b.attr("s", "continuous_output", True)
    assert set(analyse(b.build())[2]) == {"s_in_0"}


def test_immutable_out_and_continuous_out_assign_special_case():
    b = GraphBuilder("g")
    b.chain("v:Variable", "assign:Assign")
    b.chain("k:Const", (0, 1), "assign")
    b.ref_op("assign", {0: 0})
    b.node("h", "HcomBroadcast", inputs=2, outputs=2)
    b.chain("assign", (0, 0), "h")
    b.chain("r:ReLU", (0, 1), "h")
    b.ref_op("h", {0: 0, 1: 1})
    b.attr("h", "continuous_output", True)
    found = analyse(b.build())[2]
    assert "h_in_0" in found and "immutable_out_and_continuous_out" in found["h_in_0"]


def test_immutable_out_and_nopadding_in_same_real_input_skipped():
    b = GraphBuilder("g")
    b.node("pc", "PhonyConcat", inputs=2)
    b.chain("v:Variable", "s0:Assign")
    b.chain("v", "s1:Assign")
    b.ref_op("s0", {0: 0})
    b.ref_op("s1", {0: 0})
    b.chain("s0", (0, 0), "pc")
    b.chain("s1", (0, 1), "pc")
    b.attr("pc", "_no_padding_continuous_input", True)
    assert not analyse(b.build())[2]
    b2 = GraphBuilder("g")
    b2.node("pc", "PhonyConcat", inputs=2)
    b2.chain("c:Const", (0, 0), "pc")
    b2.chain("v:Variable", (0, 1), "pc")
    b2.attr("pc", "_no_padding_continuous_input", True)
    assert set(analyse(b2.build())[2]) == {"pc_in_0", "pc_in_1"}


def test_immutable_out_and_rts_out():
    b = GraphBuilder("g")
    b.chain("v:Variable", "h:HcomBroadcast", "r:ReLU")
    b.reuse_input("h", 0, 0)
    b.attr("h", "_output_memory_type", [P2P])
    assert set(analyse(b.build())[2]) == {"v_out_0"}


def test_continuous_and_rts_special():
    b = GraphBuilder("g")
    b.node("c", "Concat", inputs=2)
    b.chain("a:ReLU", (0, 0), "c")
    b.chain("bb:ReLU", (0, 1), "c")
    b.chain("bb", "h:HcomAllReduce")
    b.attr("c", "continuous_input", True)
    b.attr("h", "_input_memory_type", [P2P])
    found = analyse(b.build())[2]
    assert set(found) == {"c_in_1"}
    # the continuous anchor itself in special memory: no conflict
    b.attr("c", "_input_memory_type", [P2P, P2P])
    assert "c_in_1" not in analyse(b.build())[2]


def test_rts_in_and_rts_in():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "h:HcomAllReduce")
    b.chain("a", "m:MemcpyAsync")
    b.attr("h", "_input_memory_type", [P2P])
    b.attr("m", "_input_memory_type", [TS])
    m = b.build()
    found = analyse(m)[2]
    assert len(found) == 1
    (name,) = found
    first = min((m.find_node("h"), m.find_node("m")), key=lambda n: n.id)
    assert name == f"{first.name}_in_0"
    b.attr("m", "_input_memory_type", [P2P])
    assert not analyse(b.build())[2]


def test_rts_in_and_rts_out():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "h:HcomAllReduce")
    b.attr("a", "_output_memory_type", [TS])
    b.attr("h", "_input_memory_type", [P2P])
    assert set(analyse(b.build())[2]) == {"a_out_0"}
    b.attr("a", "_output_memory_type", [P2P])
    assert not analyse(b.build())[2]


def test_rts_out_and_rts_out():
    b = GraphBuilder("g")
    b.chain("a:ReLU", "h:HcomBroadcast", "r:ReLU")
    b.reuse_input("h", 0, 0)
    b.attr("a", "_output_memory_type", [TS])
    b.attr("h", "_output_memory_type", [P2P])
    assert set(analyse(b.build())[2]) == {"a_out_0"}
    b.attr("a", "_output_memory_type", [P2P])
    assert not analyse(b.build())[2]


def test_unrefresh_in_needs_feature_map_refreshable():
    b = GraphBuilder("g")
    b.chain("a:Add", "s:StreamSwitch", "r:ReLU")
    m = b.build()
    assert not analyse(m)[2]
    found = analyse(m, {"ge.featureBaseRefreshable": "1"})[2]
    assert set(found) == {"s_in_0", "s_out_0"}  # a:out x s:in (unrefresh_in), s:out x r:in (unrefresh_out)
    assert "unrefresh_in_checker" in found["s_in_0"] and "unrefresh_out_checker" in found["s_out_0"]


def test_unrefresh_in_with_physical_memory_policy():
    b = GraphBuilder("g")
    b.chain("a:Add", "s:StreamSwitch", "r:ReLU")
    found = analyse(b.build(), {"ge.exec.staticMemoryPolicy": "4"})[2]
    assert set(found) == {"s_in_0", "s_out_0"}
    assert not analyse(b.build(), {"ge.exec.staticMemoryPolicy": "2"})[2]  # static extend only


def test_unrefresh_out():
    b = GraphBuilder("g")
    b.chain("c:Const", "s:StreamSwitch", "r:ReLU")
    b.reuse_input("s", 0, 0)
    m = b.build()
    assert not analyse(m)[2]
    found = analyse(m, {"ge.featureBaseRefreshable": "1"})[2]
    assert set(found) == {"s_in_0", "s_out_0"}


def test_user_in_and_continuous_marks_data_output():
    b = GraphBuilder("g")
    b.node("c", "Concat", inputs=2)
    b.chain("d:Data", (0, 0), "c")
    b.chain("x:ReLU", (0, 1), "c")
    b.attr("c", "continuous_input", True)
    assert set(analyse(b.build())[2]) == {"d_out_0"}


def test_user_in_and_continuous_assign_special_case():
    b = GraphBuilder("g")
    b.chain("r:RefData", "assign:Assign")
    b.chain("k:Const", (0, 1), "assign")
    b.ref_op("assign", {0: 0})
    b.node("pc", "PhonyConcat", inputs=2)
    b.chain("assign", (0, 0), "pc")
    b.chain("x:ReLU", (0, 1), "pc")
    b.attr("pc", "_no_padding_continuous_input", True)
    assert set(analyse(b.build())[2]) == {"pc_in_0"}


def test_user_in_and_nopadding_out_depends_on_build_mode():
    b = GraphBuilder("g")
    b.node("ps", "PhonySplit", outputs=2)
    b.chain("d:Data", "ps")
    b.reuse_input("ps", 0, 0)
    b.attr("ps", "_no_padding_continuous_output", True)
    m = b.build()
    assert not analyse(m)[2]
    assert set(analyse(m, {"ge.buildGraphMode": "offline"})[2]) == {"d_out_0"}
    m.root.set_attr("_single_op_scene", True)
    assert set(analyse(m)[2]) == {"d_out_0"}


def test_user_in_and_rts_out():
    b = GraphBuilder("g")
    b.chain("d:Data", "h:HcomAllReduce", "r:ReLU")
    b.reuse_input("h", 0, 0)
    b.attr("h", "_output_memory_type", [P2P])
    assert set(analyse(b.build())[2]) == {"d_out_0"}


def test_user_in_and_unrefresh_out_side_depends_on_feature_map():
    b = GraphBuilder("g")
    b.chain("d:Data", "s:StreamSwitch", "r:ReLU")
    b.reuse_input("s", 0, 0)
    m = b.build()
    assert set(analyse(m)[2]) == {"d_out_0", "s_in_0"}  # s_in_0 by the absolute USER_IN x UNSUP_IN row
    found = analyse(m, {"ge.featureBaseRefreshable": "1"})[2]
    assert "s_out_0" in found and "d_out_0" not in found


def test_user_out_and_continuous_input():
    b = GraphBuilder("g")
    b.node("pc", "PhonyConcat", inputs=2)
    b.chain("a:Add", (0, 0), "pc")
    b.chain("x:ReLU", (0, 1), "pc")
    b.chain("a", "out:NetOutput")
    b.attr("pc", "_no_padding_continuous_input", True)
    assert set(analyse(b.build())[2]) == {"out_in_0"}
    # the NetOutput input produced by the continuous node itself: no conflict
    b2 = GraphBuilder("g")
    b2.node("c", "Concat", inputs=2)
    b2.chain("a:ReLU", (0, 0), "c")
    b2.chain("x:ReLU", (0, 1), "c")
    b2.chain("c", "out:NetOutput")
    b2.reuse_input("c", 0, 0)
    b2.attr("c", "continuous_input", True)
    assert not analyse(b2.build())[2]


def test_user_out_and_immutable_out():
    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    assert set(analyse(b.build())[2]) == {"out_in_0"}
    b2 = GraphBuilder("g")
    b2.chain("v:Variable", "out:NetOutput")
    assert not analyse(b2.build())[2]  # var-like
    b3 = GraphBuilder("g")
    b3.chain("c:Const", "out:NetOutput")
    m3 = b3.build()
    m3.root.set_attr("_graph_unknown_flag", True)
    # unknown root: the pass skips the root entirely (no static graph)
    assert run_pass(m3)["identities"] == []


def test_user_out_and_unrefresh_in_and_out():
    b = GraphBuilder("g")
    b.chain("a:Add", "s:StreamSwitch")
    b.chain("a", "out:NetOutput")
    m = b.build()
    assert set(analyse(m)[2]) == {"out_in_0"}
    assert set(analyse(m, {"ge.featureBaseRefreshable": "1"})[2]) == {"s_in_0"}
    b2 = GraphBuilder("g")
    b2.chain("a:Add", "s:StreamSwitch", "b:Add")
    b2.chain("a", "out:NetOutput")
    b2.reuse_input("s", 0, 0)
    m2 = b2.build()
    assert set(analyse(m2)[2]) == {"out_in_0"}
    assert set(analyse(m2, {"ge.featureBaseRefreshable": "1"})[2]) == {"s_in_0", "s_out_0"}


# --------------------------------------------------------------------------------------------------------- solving
def test_identity_inserted_before_in_anchor_with_ge_attributes():
    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    m = b.build()
    rep = run_pass(m)
    (rec,) = rep["identities"]
    ident = m.find_node(rec["identity"])
    assert ident.type == "Identity" and ident.name.startswith("identity_0_out_MemLayoutConflict_")
    assert ident.attr("_cannot_be_deleted") is True
    assert ident.attr("no_need_constant_folding") is False
    assert m.find_node("out").inputs[0] == (ident.name, 0)
    assert ident.inputs[0] == ("c", 0)
    assert rec["rule"].startswith("checker user_out_and_immutable_out_checker")
    assert rec["pair"] == ["c_out_0", "out_in_0"]
    assert rec["before"] == "out_in_0"


def test_identity_after_out_anchor_takes_all_consumers_and_ctrl_edges():
    b = GraphBuilder("g")
    b.node("c", "Concat", inputs=2)
    b.chain("d:Data", (0, 0), "c")
    b.chain("x:ReLU", (0, 1), "c")
    b.chain("d", "y:ReLU")
    b.ctrl("d", "x")
    b.attr("c", "continuous_input", True)
    m = b.build()
    rep = run_pass(m)
    (rec,) = rep["identities"]
    ident = rec["identity"]
    assert rec["after"] == "d_out_0"
    assert m.find_node("c").inputs[0] == (ident, 0)
    assert m.find_node("y").inputs[0] == (ident, 0)
    assert "d" not in m.find_node("x").ctrl_inputs and ident in m.find_node("x").ctrl_inputs


def test_skip_insert_when_already_identity_or_unknown_shape():
    b = GraphBuilder("g")
    b.chain("c:Const", "i:Identity", "out:NetOutput")
    assert run_pass(b.build())["identities"] == []
    b2 = GraphBuilder("g")
    b2.chain("c:Const", "out:NetOutput")
    b2.in_desc("out", 0, shape=[-1, 4])
    rep = run_pass(b2.build())
    assert rep["identities"] == [] and rep["skipped_insertions"]


def test_pass_is_idempotent():
    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    m = b.build()
    run_pass(m)
    n = m.num_nodes()
    assert run_pass(m)["identities"] == []
    assert m.num_nodes() == n


def test_unknown_root_processes_top_static_subgraph():
    b = GraphBuilder("g")
    b.chain("d:Data", "pc:PartitionedCall", "out:NetOutput")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sw:StreamSwitch")
    sub.output("sw", 0)
    m = b.build()
    m.root.set_attr("_graph_unknown_flag", True)
    m.graph("sub").set_attr("_graph_unknown_flag", False)
    rep = run_pass(m)
    # sub is the processed graph: its Data is a user input, the switch input conflicts absolutely
    assert any(r.get("before") == "sw_in_0" for r in rep["identities"])


# --------------------------------------------------------------------------------------------------------- ctrl node
def _if_model(then_src: str, with_mul_twice: bool = False) -> Model:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=2, outputs=2 if with_mul_twice else 1)
    b.chain("c:Data", (0, 0), "if")
    b.chain("x:Data", (0, 1), "if")
    b.chain("if", "out:NetOutput")
    t = b.subgraph("then", owner="if")
    t.data("t_in", 1)
    if then_src == "data":
        t.output("t_in", 0)
    elif then_src == "const":
        t.chain("k:Const")
        t.output("k", 0)
    else:
        t.chain("t_in", "mul:Mul")
        t.output("mul", 0)
        if with_mul_twice:
            t.output("mul", 1)
    e = b.subgraph("else", owner="if")
    e.data("e_in", 1)
    e.chain("e_in", "relu:ReLU")
    e.output("relu", 0)
    if with_mul_twice:
        e.chain("e_in", "relu2:ReLU")
        e.output("relu2", 1)
    return b.build()


@pytest.mark.parametrize("src", ["data", "const"])
def test_if_branch_output_from_data_or_const_gets_identity(src):
    m = _if_model(src)
    rep = run_pass(m)
    steps = [r for r in rep["identities"] if "step" in r]
    assert len(steps) == 1 and steps[0]["before"] == ["then_netoutput_in_0"]
    assert producer_of(m, "then_netoutput", 0).type == "Identity"


def test_if_branch_one_buffer_two_outputs_gets_identity_on_second():
    m = _if_model("mul", with_mul_twice=True)
    rep = run_pass(m)
    steps = [r for r in rep["identities"] if "step" in r]
    assert [s["before"] for s in steps] == [["then_netoutput_in_1"]]


def test_if_branch_plain_compute_output_no_identity():
    assert not [r for r in run_pass(_if_model("mul"))["identities"] if "step" in r]


def _while_model(body_kind: str) -> Model:
    b = GraphBuilder("g")
    b.node("w", "While", inputs=2, outputs=2)
    b.chain("d0:Data", (0, 0), "w")
    b.chain("d1:Data", (0, 1), "w")
    b.chain("w", "out:NetOutput")
    cond = b.subgraph("cond", owner="w")
    cond.data("c_in", 0)
    cond.output("c_in", 0)
    body = b.subgraph("body", owner="w")
    body.data("b0", 0)
    body.data("b1", 1)
    if body_kind == "swap":
        body.output("b1", 0)
        body.output("b0", 1)
    elif body_kind == "same":
        body.output("b0", 0)
        body.output("b1", 1)
    return b.build()


def test_while_body_swapped_indexes_get_input_and_output_identities():
    m = _while_model("swap")
    rep = run_pass(m)
    steps = [r["step"] for r in rep["identities"] if "step" in r]
    assert steps == ["While w body outputs", "While w body inputs"]
    # Data -> in-Identity -> out-Identity -> NetOutput
    first = producer_of(m, "body_netoutput", 0)
    assert first.type == "Identity"
    second = first.graph.nodes[first.inputs[0][0]]
    assert second.type == "Identity" and second.inputs[0][0] in ("b0", "b1")


def test_while_body_pass_through_same_index_no_identity():
    m = _while_model("same")
    rep = run_pass(m)
    assert not [r for r in rep["identities"] if "step" in r]


def test_while_body_single_inner_node_gets_output_identity():
    b = GraphBuilder("g")
    b.node("w", "While", inputs=1, outputs=1)
    b.chain("d:Data", "w", "out:NetOutput")
    cond = b.subgraph("cond", owner="w")
    cond.data("c_in", 0)
    cond.output("c_in", 0)
    body = b.subgraph("body", owner="w")
    body.data("b0", 0)
    body.chain("b0", "cast:Cast")
    body.output("cast", 0)
    m = b.build()
    rep = run_pass(m)
    assert [r["before"] for r in rep["identities"] if "step" in r] == [["body_netoutput_in_0"]]
    assert run_pass(m)["identities"] == []  # a second run adds nothing


# --------------------------------------------------------------------------------------------------------- API
def test_is_graph_exist_mem_conflict_symbol_on_hypothetical_merge():
    # c -> tm -> out: deleting the TensorMove would put Const and NetOutput in one symbol
    b = GraphBuilder("g")
    b.chain("c:Const", "tm:TensorMove", "out:NetOutput")
    m = b.build()
    topological_sorting(m)
    t = get_ref_mapping(m, m.root)
    si, so = t.a2s["tm_in_0"], t.a2s["tm_out_0"]
    assert not is_graph_exist_mem_conflict_symbol(m, m.root, t.a2s, t.s2a)
    a2s, s2a = construct_single_node_symbol_table(si, so, t.a2s, t.s2a)
    assert list(s2a) == [si] and len(s2a[si]) == len(t.s2a[si]) + len(t.s2a[so])
    assert is_graph_exist_mem_conflict_symbol(m, m.root, a2s, s2a)
    # anchors may be given as names or tuples too
    named = {k: [a.name for a in v] for k, v in s2a.items()}
    assert is_graph_exist_mem_conflict_symbol(m, "g", a2s, named)
    assert m.num_nodes() == 3  # nothing inserted


def test_explain_anchor_names_symbol_attributes_and_rule():
    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    m = b.build()
    text = explain_anchor(m, "c", 0)
    assert "symbol c_out_0" in text
    assert "IMMUTABLE_ADDRESS_OUTPUT" in text and "USER_MEMORY_OUTPUT" in text
    assert "user_out_and_immutable_out_checker" in text
    assert m.num_nodes() == 2  # explain works on a copy


def test_continuous_out_and_continuous_out_not_cascaded_no_conflict():
    # two continuous-output nodes reuse the same producer: they share a symbol but neither feeds the other
    b = GraphBuilder("g")
    b.node("s1", "Split", outputs=2)
    b.node("s2", "Split", outputs=2)
    b.chain("x:ReLU", "s1")
    b.chain("x", "s2")
    b.reuse_input("s1", 0, 0)
    b.reuse_input("s2", 0, 0)
    b.attr("s1", "continuous_output", True)
    b.attr("s2", "continuous_output", True)
    table, marks, found = analyse(b.build())
    assert table.a2s["s1_out_0"] == table.a2s["s2_out_0"]
    assert not found


def test_user_in_and_nopadding_in_same_real_input_skipped():
    b = GraphBuilder("g")
    b.node("pc", "PhonyConcat", inputs=2)
    b.chain("d:Data", "s0:Assign")
    b.chain("d", "s1:Assign")
    b.ref_op("s0", {0: 0})
    b.ref_op("s1", {0: 0})
    b.chain("s0", (0, 0), "pc")
    b.chain("s1", (0, 1), "pc")
    b.attr("pc", "_no_padding_continuous_input", True)
    assert not analyse(b.build())[2]
    # different real inputs: the Data output gets the Identity
    b2 = GraphBuilder("g")
    b2.node("pc", "PhonyConcat", inputs=2)
    b2.chain("d:Data", (0, 0), "pc")
    b2.chain("x:ReLU", (0, 1), "pc")
    b2.attr("pc", "_no_padding_continuous_input", True)
    found = analyse(b2.build())[2]
    assert set(found) == {"d_out_0"} and "user_in_and_continuous_in_out_checker" in found["d_out_0"]


def test_immutable_out_and_rts_out_assign_special_case():
    b = GraphBuilder("g")
    b.chain("v:Variable", "assign:Assign")
    b.chain("k:Const", (0, 1), "assign")
    b.ref_op("assign", {0: 0})
    b.chain("assign", "h:HcomBroadcast", "r:ReLU")
    b.ref_op("h", {0: 0})
    b.attr("h", "_output_memory_type", [P2P])
    found = analyse(b.build())[2]
    # the Identity goes between the Assign and the ref node, not after the Variable
    assert "h_in_0" in found and "v_out_0" not in found


def test_ge_dfs_topological_ids():
    # sources: data-like first in stored order, then the others; a popped node's ready consumers are pushed in
    # link order and the last pushed is popped first (GE DFSTopologicalSorting)
    b = GraphBuilder("g")
    b.chain("k:Const", "add:Add")
    b.chain("d:Data", (0, 1), "add")
    b.chain("d", "x:ReLU")
    b.chain("d", "y:ReLU")
    m = b.build()
    topological_sorting(m)
    ids = {n.name: n.id for n in m.root}
    assert ids["d"] == 0
    assert ids["y"] < ids["x"]  # pushed x then y: y pops first
    assert ids["k"] > ids["x"]  # the Const source waits below the data source
    assert list(m.root.nodes) == ["k", "add", "d", "x", "y"]  # the stored order is kept


def test_cli_explain_anchor(tmp_path, capsys):
    from anchorlog.cli import main
    from anchorlog.facts.ge_io import write_model

    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    path = tmp_path / "m.pbtxt"
    write_model(b.build(), path)
    assert main(["explain", str(path), "c", "--anchor", "c:0"]) == 0
    out = capsys.readouterr().out
    assert "user_out_and_immutable_out_checker" in out and "symbol c_out_0" in out


def test_cli_optimize_layout_conflict(tmp_path):
    import json

    from anchorlog.cli import main
    from anchorlog.facts.ge_io import read_model, write_model

    b = GraphBuilder("g")
    b.chain("c:Const", "out:NetOutput")
    src, dst, rep = tmp_path / "m.pbtxt", tmp_path / "o.pbtxt", tmp_path / "r.json"
    write_model(b.build(), src)
    rc = main(["optimize", str(src), "--output", str(dst), "--report", str(rep), "--passes", "layout-conflict"])
    assert rc == 0
    m = read_model(dst)
    assert producer_of(m, "out", 0).type == "Identity"
    section = next(p for p in json.loads(rep.read_text())["passes"] if p["pass"] == "layout-conflict")
    assert section["identities"][0]["pair"] == ["c_out_0", "out_in_0"]


def test_explain_mentions_control_node_step():
    text = explain_anchor(_if_model("mul", with_mul_twice=True), "mul", 0)
    assert "control-node step (runs first): Identity before then_netoutput_in_1" in text

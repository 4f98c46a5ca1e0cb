"""concat-notask: every check of GE's ConcatNotaskPass, both sides of each condition (reference §6)."""

from __future__ import annotations

import pytest

from anchorlog.analysis.concat_notask import ConcatNotaskAnalysis, explain
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model, TensorDesc

L1 = 1 << 16
L2 = 1 << 17
UB = 1 << 15


def td(shape, fmt="ND", ofmt="ND", oshape=None, dtype="DT_FLOAT16", origin=True) -> TensorDesc:
    t = TensorDesc(dtype=dtype, shape=None if shape is None else list(shape), layout=fmt)
    if origin:
        t.set_attr("origin_format", ofmt)
        t.set_attr("origin_shape", list(oshape if oshape is not None else (shape or [])))
    return t


def build(
    n: int = 2,
    *,
    shape=(2, 16),
    fmt="ND",
    ofmt="ND",
    oshape=None,
    dtype="DT_FLOAT16",
    dim: int | None = 0,
    producer: str = "ReLU",
    concat_type: str = "ConcatD",
    name: str = "cat",
) -> tuple[Model, GraphBuilder]:
    """Data_i -> p_i (producer) -> concat input i; concat -> out (NetOutput). All tensors get ``shape``."""
    b = GraphBuilder("g")
    for i in range(n):
        b.chain(f"d{i}:Data", f"p{i}:{producer}")
    b.node(f"{name}:{concat_type}", inputs=n)
    for i in range(n):
        b.edge(f"p{i}", 0, name, i)
    b.chain(name, "out:NetOutput")
    m = b.build()
    g = m.root
    for i in range(n):
        g.nodes[f"p{i}"].output_desc[0] = td(shape, fmt, ofmt, oshape, dtype)
    c = g.nodes[name]
    c.input_desc = [td(shape, fmt, ofmt, oshape, dtype) for _ in range(n)]
    c.output_desc = [td(shape, fmt, ofmt, oshape, dtype)]
    if dim is not None:
        c.set_attr("concat_dim", dim)
    return m, b


def decide(m: Model, **options: str):
    vs = ConcatNotaskAnalysis(m, options).run(apply=True)
    return {v.node: v for v in vs}


def verdict(m: Model, node: str = "cat", **options: str):
    return decide(m, **options)[node]


# ----------------------------------------------------------------------------------------------- marking


def test_accepted_concat_gets_ge_attributes_and_locks_producers():
    m, _ = build()
    v = verdict(m)
    assert v.marked
    c = m.root.nodes["cat"]
    assert c.attrs["_no_task"].kind == "b" and c.attr("_no_task") is True
    assert c.attr("_no_padding_continuous_input") is True
    assert c.attr("_output_reuse_input") is True
    assert c.attrs["_reuse_input_on_dim_index"].kind == "i" and c.attr("_reuse_input_on_dim_index") == 0
    for p in ("p0", "p1"):
        d = m.root.nodes[p].output_desc[0]
        assert d.attrs["can_reused_for_concat_optimize"].kind == "b"
        assert d.attr("can_reused_for_concat_optimize") is False
    # the layout of the block the output reuses
    blk = v.facts["block"]
    assert [p["offset"] for p in blk["pieces"]] == [0, 64]


def test_rejected_concat_is_left_alone():
    m, _ = build(producer="Data")
    v = verdict(m)
    assert not v.marked and v.check == "IsPreNodeTypeValid"
    assert "_no_task" not in m.root.nodes["cat"].attrs
    assert "can_reused_for_concat_optimize" not in m.root.nodes["p0"].output_desc[0].attrs


def test_concatv2d_is_a_target_but_plain_concat_is_not():
    m, _ = build(concat_type="ConcatV2D")
    assert verdict(m).marked
    m, _ = build(concat_type="ConcatV2")
    assert "cat" not in decide(m)


# ------------------------------------------------------------------------------------ scenario exclusions


def test_single_op_scene_graph_attr_skips_graph():
    m, _ = build()
    m.root.set_attr("_single_op_scene", True)
    v = verdict(m)
    assert not v.marked and v.check == "ShouldSkipGraph" and v.reason == "single_op_scene"
    m, _ = build()
    m.root.set_attr("_single_op_scene", False)
    m.root.nodes["d0"].set_attr("_single_op_scene", True)  # graph attr present: it wins
    assert verdict(m).marked


def test_single_op_scene_from_first_node_with_attr_or_option():
    m, _ = build()
    m.root.nodes["d0"].set_attr("_single_op_scene", True)
    assert verdict(m).reason == "single_op_scene"
    m, _ = build()
    m.root.nodes["d0"].set_attr("_single_op_scene", False)
    m.root.nodes["d1"].set_attr("_single_op_scene", True)  # only the first carrier counts
    assert verdict(m).marked
    m, _ = build()
    assert verdict(m, **{"anchorlog.singleOpScene": "true"}).reason == "single_op_scene"


def test_memory_discontiguous_graph_is_skipped():
    m, _ = build()
    m.root.set_attr("_memory_discontiguous_allocation", True)
    assert verdict(m).reason == "memory_discontiguous_allocation"
    m, _ = build()
    m.root.set_attr("_memory_discontiguous_allocation", False)
    assert verdict(m).marked
    m, _ = build()
    assert not verdict(m, **{"anchorlog.memoryDiscontiguousAllocation": "1"}).marked


@pytest.mark.parametrize("where", ["input", "output"])
def test_unknown_shape_op_is_skipped(where):
    m, _ = build()
    c = m.root.nodes["cat"]
    (c.input_desc[1] if where == "input" else c.output_desc[0]).shape = [2, -1]
    v = verdict(m)
    assert not v.marked and v.check == "IsUnknownShapeOp" and v.reason == f"unknown_shape_{where}"


@pytest.mark.parametrize("attr", ["_graph_unknown_flag", "_dynamic_shape_partitioned"])
def test_owner_graph_unknown(attr):
    m, _ = build()
    m.root.set_attr(attr, True)
    v = verdict(m)
    assert not v.marked and v.check == "IsOwnerGraphUnknown"
    m, _ = build()
    m.root.set_attr(attr, False)
    assert verdict(m).marked


# ------------------------------------------------------------------------------------------- InputCheck


def test_scalar_input_rejected():
    m, _ = build()
    m.root.nodes["cat"].input_desc[1].set_attr("origin_shape", [])
    v = verdict(m)
    assert (v.check, v.input) == ("IsScalarInput", 1)


def test_missing_origin_shape_counts_as_scalar_like_ge():
    m, _ = build()
    m.root.nodes["cat"].input_desc[0].del_attr("origin_shape")
    assert verdict(m).check == "IsScalarInput"


def test_tensor_not_32_byte_aligned_rejected_unless_single_input():
    m, _ = build(shape=(3, 5))  # 15 fp16 = 30 bytes
    v = verdict(m)
    assert (v.check, v.reason) == ("CheckTensorAlign", "tensor_not_32B_aligned")
    assert v.facts["bytes"] == 30
    m, _ = build(n=1, shape=(3, 5))
    assert verdict(m).marked


def test_zero_sized_tensor_rejected():
    m, _ = build(shape=(0, 16))
    assert verdict(m).check == "CheckTensorAlign"


def test_same_source_anchor_directly_and_through_reshape():
    m, b = build()
    g = m.root
    g.connect("p0", 0, "cat", 1)
    v = verdict(m)
    assert (v.check, v.input) == ("HasSameSourceAnchor", 1)
    # input 0 through a Reshape (ref node) to the same anchor p0:0 as input 1
    m, b = build()
    b.node("rs:Reshape", inputs=2)
    g = m.root
    g.nodes["rs"].output_desc[0] = td([2, 16])
    g.connect("p0", 0, "rs", 0)
    g.connect("rs", 0, "cat", 0)
    g.connect("p0", 0, "cat", 1)
    v = verdict(m)
    assert (v.check, v.input) == ("HasSameSourceAnchor", 1)
    assert v.facts["real_source"] == "p0:0"


def test_two_outputs_of_one_producer_are_different_sources():
    m, b = build()
    g = m.root
    p0 = g.nodes["p0"]
    p0.output_desc.append(td([2, 16]))
    g.connect("p0", 1, "cat", 1)
    assert verdict(m).marked


@pytest.mark.parametrize("ptype", ["Data", "RefData", "Variable", "Const", "Constant"])
def test_memory_owning_producers_rejected(ptype):
    m, _ = build(producer=ptype)
    v = verdict(m)
    assert (v.check, v.reason) == ("IsPreNodeTypeValid", "source_type")


@pytest.mark.parametrize("ptype", ["VariableV2", "ConstPlaceHolder", "FileConstant", "AippData", "HcomAllGather"])
def test_producers_ge_lets_through(ptype):
    m, _ = build(producer=ptype)
    assert verdict(m).marked


def test_real_source_through_reshape_is_checked():
    m, b = build()
    g = m.root
    b.node("rs:Reshape", inputs=2)
    g.nodes["rs"].output_desc[0] = td([2, 16])
    g.connect("d0", 0, "rs", 0)
    g.connect("rs", 0, "cat", 0)
    v = verdict(m)
    assert (v.check, v.input) == ("IsPreNodeTypeValid", 0)
    assert v.facts["producer"] == "rs:0" and v.facts["real_source_type"] == "Data"


def test_ref_chain_into_unconnected_input_has_no_source():
    m, b = build()
    g = m.root
    b.node("rs:Reshape", inputs=2)
    g.nodes["rs"].output_desc[0] = td([2, 16])
    g.connect("rs", 0, "cat", 0)
    v = verdict(m)
    assert (v.check, v.reason) == ("IsPreNodeTypeValid", "no_real_source")


def test_producer_with_subgraph_rejected():
    m, b = build(producer="PartitionedCall")
    sub = b.subgraph("body", owner="p0")
    sub.data("a", 0)
    sub.chain("a", "r:ReLU")
    sub.output("r", 0)
    v = verdict(m)
    assert (v.check, v.input) == ("IsPreNodeWithSubgraph", 0)


def test_producer_with_only_unnamed_subgraphs_counts_as_wrapper():
    m, _ = build()
    m.root.nodes["p1"].subgraph_names = [""]
    assert (verdict(m).check, verdict(build()[0]).marked) == ("IsPreNodeWithSubgraph", True)


def test_producer_output_already_taken():
    m, _ = build()
    m.root.nodes["p1"].output_desc[0].set_attr("can_reused_for_concat_optimize", False)
    v = verdict(m)
    assert (v.check, v.input) == ("IsPreOutAnchorCanReuse", 1)
    m, _ = build()
    m.root.nodes["p1"].output_desc[0].set_attr("can_reused_for_concat_optimize", True)
    assert verdict(m).marked


def test_second_concat_on_the_same_producer_output_loses():
    """Order matters: the first concat takes (locks) p0:0 and p1:0, the second one may not."""
    m, b = build()
    g = m.root
    b.node("cat2:ConcatD", inputs=2)
    g.nodes["cat2"].input_desc = [td([2, 16]), td([2, 16])]
    g.nodes["cat2"].output_desc = [td([4, 16])]
    g.connect("p0", 0, "cat2", 0)
    g.connect("p1", 0, "cat2", 1)
    b.chain("cat2", "out2:NetOutput")
    an = ConcatNotaskAnalysis(m)
    vs = {v.node: v for v in an.run()}
    assert vs["cat"].marked
    assert (vs["cat2"].check, vs["cat2"].input) == ("IsPreOutAnchorCanReuse", 0)
    assert vs["cat2"].facts["taken_by"] == ["cat"]
    assert an.rounds == 2  # cat2 waits for cat's verdict; the second round reads cat's mark (cn_marked)


def test_producer_output_also_feeding_netoutput():
    m, b = build()
    b.edge("p1", 0, "out")
    v = verdict(m)
    assert (v.check, v.input) == ("IsPreOutAnchorValidMultiRef", 1)
    # several consumers, none a NetOutput: fine
    m, b = build()
    b.chain("p1", "q:ReLU")
    assert verdict(m).marked


@pytest.mark.parametrize(
    "attr",
    [
        "continuous_input",
        "continuous_output",
        "reference",
        "_no_task",
        "_output_reuse_input",
        "_no_padding_continuous_input",
    ],
)
def test_producer_attrs_forbid(attr):
    m, _ = build()
    m.root.nodes["p1"].set_attr(attr, True)
    v = verdict(m)
    assert (v.check, v.input) == ("IsPreNodeAttrValid", 1)
    m, _ = build()
    m.root.nodes["p1"].set_attr(attr, False)
    assert verdict(m).marked


def test_producer_atomic_output_forbids_but_empty_list_does_not():
    m, _ = build()
    m.root.nodes["p1"].set_attr("atomic_output_index", [0])
    assert verdict(m).reason == "producer_atomic_output"
    m, _ = build()
    m.root.nodes["p1"].set_attr("atomic_output_index", [])
    assert verdict(m).marked


def test_input_memory_types_must_match():
    m, _ = build()
    m.root.nodes["p1"].set_attr("_output_memory_type", [L1])
    v = verdict(m)
    assert (v.check, v.input) == ("IsSameInputMemType", 1)
    assert v.facts["memory_types"] == {0: 2, 1: L1}
    # HBM, DDR and default all count as HBM; two equal special types match
    m, _ = build()
    m.root.nodes["p0"].set_attr("_output_memory_type", [4])
    m.root.nodes["p1"].set_attr("_output_memory_type", [0])
    assert verdict(m).marked
    m, _ = build()
    for p in ("p0", "p1"):
        m.root.nodes[p].set_attr("_output_memory_type", [0x10])
    assert verdict(m).marked


# --------------------------------------------------------------------------------------------- CheckDim


def test_nd_dims_before_concat_axis_must_be_one():
    m, _ = build(shape=(2, 16), dim=1)
    v = verdict(m)
    assert (v.check, v.reason) == ("CheckDim", "front_dims_not_one")
    m, _ = build(shape=(1, 16), dim=1)
    assert verdict(m).marked


def test_concat_dim_default_and_negative():
    m, _ = build(shape=(2, 16), dim=None)  # default 0
    assert verdict(m).marked
    m, _ = build(shape=(1, 16), dim=-1)  # -> 1
    assert verdict(m).marked
    m, _ = build(shape=(2, 16), dim=-1)
    assert verdict(m).reason == "front_dims_not_one"


def test_concat_dim_out_of_range():
    m, _ = build(shape=(32,), dim=1)
    v = verdict(m)
    assert (v.check, v.reason) == ("CheckDim", "concat_dim_out_of_range")


def test_5hd_concat_on_c():
    kw = dict(fmt="NC1HWC0", ofmt="NCHW", oshape=(1, 32, 16, 16), shape=(1, 2, 16, 16, 16))
    m, _ = build(dim=1, **kw)
    assert verdict(m).marked
    m, _ = build(dim=-3, **kw)
    assert verdict(m).marked
    m, _ = build(dim=1, **{**kw, "shape": (2, 2, 16, 16, 16)})
    assert verdict(m).reason == "front_dims_not_one"
    m, _ = build(dim=1, **{**kw, "oshape": (1, 31, 16, 16)})
    v = verdict(m)
    assert v.reason == "dim_not_aligned" and v.facts["alignment"] == 16


def test_5hd_c0_follows_platform_sizes():
    kw = dict(fmt="NC1HWC0", ofmt="NCHW", oshape=(1, 8, 16, 16), shape=(1, 1, 16, 16, 8), dim=1)
    m, _ = build(**kw)
    assert verdict(m).reason == "dim_not_aligned"
    m, _ = build(**kw)
    assert verdict(m, **{"anchorlog.dtypeMKN": "Default:16,16,16;DT_FLOAT16:16,8,16"}).marked


@pytest.mark.parametrize(
    ("oshape", "shape", "dim", "ok"),
    [
        ((1, 2, 3, 16), (2, 1, 16, 16), 1, True),  # W with H = 1, C <= c0
        ((2, 1, 32, 32), (2, 1, 32, 32), 1, False),  # W with C = 32 > c0
        ((2, 2, 3, 16), (4, 1, 16, 16), 2, False),  # C = 3 not a multiple of c0
        ((1, 1, 3, 32), (1, 1, 3, 32), 3, True),  # N, multiple of n0
        ((2, 1, 3, 32), (2, 1, 3, 32), 3, False),  # N with C1HW = 2 in front
    ],
)
def test_fractal_z_concat(oshape, shape, dim, ok):
    m, _ = build(fmt="FRACTAL_Z", ofmt="HWCN", oshape=oshape, shape=shape, dim=dim, n=3)
    assert verdict(m).marked is ok


def test_nd_origin_with_4d_storage_format_is_unsupported():
    m, _ = build(fmt="NCHW", ofmt="ND", shape=(1, 1, 16, 16))
    assert verdict(m).reason == "aligned_shape_unsupported"


# ------------------------------------------------------------------------------------------ OutputCheck


def test_virtual_consumer_rejected_directly_and_through_reshape():
    m, b = build()
    g = m.root
    b.chain("cat", "r:ReLU")
    g.nodes["r"].set_attr("_no_task", True)
    assert verdict(m).check == "OutputCheck"
    m, b = build()
    g = m.root
    b.node("rs:Reshape", inputs=2)
    g.connect("cat", 0, "rs", 0)
    b.chain("rs", "r:ReLU")
    g.nodes["r"].set_attr("_output_reuse_input", True)
    v = verdict(m)
    assert v.check == "OutputCheck" and v.facts["virtual_consumers"] == ["r"]
    m, b = build()
    b.chain("cat", "r:ReLU")
    m.root.nodes["r"].set_attr("_no_task", False)
    assert verdict(m).marked


def test_reshape_without_consumers_is_itself_checked():
    m, b = build()
    g = m.root
    b.node("rs:Reshape", inputs=2)
    g.connect("cat", 0, "rs", 0)
    g.nodes["rs"].set_attr("_no_padding_continuous_input", True)
    assert verdict(m).check == "OutputCheck"


def test_chained_concats_first_in_order_wins():
    """cat feeds cat_b: cat is visited first and marked, so cat_b's producer is virtual."""
    m, b = build()
    g = m.root
    g.disconnect("out", 0)  # cat's output feeds only cat_b
    b.chain("d9:Data", "p9:ReLU")
    g.nodes["p9"].output_desc[0] = td([4, 16])
    g.nodes["cat"].output_desc[0] = td([4, 16])
    b.node("cat_b:ConcatD", inputs=2)
    g.nodes["cat_b"].input_desc = [td([4, 16]), td([4, 16])]
    g.nodes["cat_b"].output_desc = [td([8, 16])]
    g.nodes["cat_b"].set_attr("concat_dim", 0)
    g.connect("cat", 0, "cat_b", 0)
    g.connect("p9", 0, "cat_b", 1)
    vs = decide(m)
    assert vs["cat"].marked
    assert (vs["cat_b"].check, vs["cat_b"].reason) == ("IsPreNodeAttrValid", "producer_attr")


def test_downstream_concat_first_in_order_blocks_upstream():
    m, b = build(name="cat_a")
    g = m.root
    g.disconnect("out", 0)
    # a second concat *before* cat_a in node order consuming cat_a's output
    from anchorlog.facts.graph import Node

    first = Node("cat_0", "ConcatD", inputs=[None, None])
    first.input_desc = [td([4, 16]), td([4, 16])]
    first.output_desc = [td([8, 16])]
    first.set_attr("concat_dim", 0)
    nodes = list(g.nodes.values())
    g.nodes.clear()
    g.invalidate()
    g.add_node(first)
    for n in nodes:
        g.add_node(n)
    g.nodes["cat_a"].output_desc[0] = td([4, 16])
    b.chain("d9:Data", "p9:ReLU")
    g.nodes["p9"].output_desc[0] = td([4, 16])
    g.connect("cat_a", 0, "cat_0", 0)
    g.connect("p9", 0, "cat_0", 1)
    vs = decide(m)
    assert vs["cat_0"].marked
    assert vs["cat_a"].check == "OutputCheck"


def test_mark_makes_a_new_ref_node_for_later_traces():
    """cat -> Reshape -> cat2: once cat is marked its output reuses input 0 (p0:0), so cat2's input 0 now
    traces to p0:0, the same source as cat2's input 1 (reached through an Identity-free ref chain)."""
    m, b = build()
    g = m.root
    b.node("rs:Reshape", inputs=2)
    g.nodes["rs"].output_desc[0] = td([4, 16])
    g.nodes["cat"].output_desc[0] = td([4, 16])
    g.connect("cat", 0, "rs", 0)
    b.node("rs2:Reshape", inputs=2)
    g.nodes["rs2"].output_desc[0] = td([4, 16])
    g.connect("p0", 0, "rs2", 0)
    b.node("cat2:ConcatD", inputs=2)
    g.nodes["cat2"].input_desc = [td([4, 16]), td([4, 16])]
    g.nodes["cat2"].output_desc = [td([8, 16])]
    g.connect("rs", 0, "cat2", 0)
    g.connect("rs2", 0, "cat2", 1)
    an = ConcatNotaskAnalysis(m)
    vs = {v.node: v for v in an.run()}
    assert vs["cat"].marked
    assert (vs["cat2"].check, vs["cat2"].input) == ("HasSameSourceAnchor", 1)
    assert an.rounds == 2


def test_analysis_only_run_does_not_cascade():
    """apply=False: nothing is marked, so each verdict sees the graph as given."""
    m, b = build()
    g = m.root
    g.disconnect("out", 0)
    b.node("cat2:ConcatD", inputs=2)
    g.nodes["cat2"].input_desc = [td([4, 16]), td([4, 16])]
    g.nodes["cat2"].output_desc = [td([8, 16])]
    b.chain("d9:Data", "p9:ReLU")
    g.nodes["p9"].output_desc[0] = td([4, 16])
    g.connect("cat", 0, "cat2", 0)
    g.connect("p9", 0, "cat2", 1)
    vs = {v.node: v for v in ConcatNotaskAnalysis(m).run(apply=False)}
    assert vs["cat"].marked and vs["cat2"].marked
    assert "_no_task" not in g.nodes["cat"].attrs


# ------------------------------------------------------------------------------------------------ LxFusion


@pytest.mark.parametrize(
    ("key", "mem"), [("_input_memory_type", L1), ("_output_memory_type", L2), ("_input_memory_type", UB)]
)
def test_lx_fusion_memory_rejected(key, mem):
    m, _ = build()
    m.root.nodes["cat"].set_attr(key, [2, mem])
    v = verdict(m)
    assert (v.check, v.reason) == ("LxFusionCheck", "lx_fusion_memory")
    m, _ = build()
    m.root.nodes["cat"].set_attr(key, [2, 2])
    assert verdict(m).marked


def test_lxslice_name_rejected():
    m, _ = build(name="concat_lxslice_3")
    assert verdict(m, node="concat_lxslice_3").reason == "lx_fusion_op"


# ------------------------------------------------------------------------------------------- subgraphs


def test_subgraph_concat_decided_in_its_graph():
    m, b = build(producer="Data")
    g = m.root
    b.node("pc:PartitionedCall", inputs=1)
    b.edge("d0", 0, "pc", 0)
    sub = b.subgraph("inner", owner="pc")
    sub.data("a", 0)
    sub.chain("a", "r1:ReLU")
    sub.chain("a", "r2:ReLU")
    sub.node("c_in:ConcatD", inputs=2)
    sub.edge("r1", 0, "c_in", 0)
    sub.edge("r2", 0, "c_in", 1)
    sub.output("c_in", 0)
    sg = m.graph("inner")
    for r in ("r1", "r2"):
        sg.nodes[r].output_desc[0] = td([2, 16])
    sg.nodes["c_in"].input_desc = [td([2, 16]), td([2, 16])]
    sg.nodes["c_in"].output_desc = [td([4, 16])]
    vs = decide(m)
    assert not vs["cat"].marked
    assert vs["c_in"].marked and vs["c_in"].graph == "inner"
    del g


def test_subgraph_data_feeding_concat_has_no_source():
    m, b = build(producer="Data")
    b.node("pc:PartitionedCall", inputs=1)
    b.edge("d0", 0, "pc", 0)
    sub = b.subgraph("inner", owner="pc")
    sub.data("a", 0)
    sub.chain("a", "r1:ReLU")
    sub.node("c_in:ConcatD", inputs=2)
    sub.edge("a", 0, "c_in", 0)
    sub.edge("r1", 0, "c_in", 1)
    sub.output("c_in", 0)
    sg = m.graph("inner")
    sg.nodes["a"].output_desc[0] = td([2, 16])
    sg.nodes["r1"].output_desc[0] = td([2, 16])
    sg.nodes["c_in"].input_desc = [td([2, 16]), td([2, 16])]
    v = decide(m)["c_in"]
    assert (v.check, v.reason, v.input) == ("IsPreNodeTypeValid", "no_real_source", 0)


# ---------------------------------------------------------------------------------------------- explain


def test_explain_rejected_and_accepted():
    m, _ = build(producer="Data")
    text = explain(m, "cat")
    assert "rejected by IsPreNodeTypeValid on input 0" in text and "real_source_type = Data" in text
    assert "_no_task" not in m.root.nodes["cat"].attrs  # explain does not change the model
    m, _ = build()
    text = explain(m, "cat")
    assert "marked no-task" in text and "input 1 <- p1:0 at offset 64" in text


def test_explain_already_marked_concat_rechecks_from_scratch():
    m, _ = build()
    ConcatNotaskAnalysis(m).run()
    text = explain(m, "cat")
    assert "already no-task" in text


def test_explain_unknown_node():
    from anchorlog.errors import AnchorlogError

    m, _ = build()
    with pytest.raises(AnchorlogError):
        explain(m, "nope")
    with pytest.raises(AnchorlogError):
        explain(m, "p0")


def test_model_without_concats_is_a_no_op():
    m, _ = build(concat_type="ConcatV2")
    an = ConcatNotaskAnalysis(m)
    assert an.run() == [] and an.timings == {}


# ------------------------------------------------------------------------------------ CLI and registry


def test_registered_pass_reports_every_concat():
    from anchorlog.analysis.registry import PassContext, run_passes

    m, b = build()
    b.chain("d7:Data", "p7:ReLU")
    b.node("cat_bad:ConcatD", inputs=2)
    b.edge("d7", 0, "cat_bad", 0)
    b.edge("p7", 0, "cat_bad", 1)
    g = m.root
    g.nodes["cat_bad"].input_desc = [td([2, 16]), td([2, 16])]
    report = run_passes(m, ["concat-notask"], PassContext())
    sec = report["passes"][0]
    assert sec["pass"] == "concat-notask" and sec["marked"] == 1 and sec["rejected"] == 1
    bad = next(c for c in sec["concats"] if c["node"] == "cat_bad")
    assert bad["check"] == "IsPreNodeTypeValid" and bad["input"] == 0
    assert bad["facts"]["producer"] == "d7:0"
    ok = next(c for c in sec["concats"] if c["node"] == "cat")
    assert ok["marked"] and ok["facts"]["block"]["pieces"][1]["offset"] == 64
    assert sec["output_bytes_saved"] == 96  # the [2, 16] fp16 output: 64 bytes + 32 guard


def test_cli_optimize_and_explain(tmp_path, capsys):
    import json

    from anchorlog.cli import main
    from anchorlog.facts.ge_io import read_model, write_model

    m, _ = build()
    src = tmp_path / "in.pbtxt"
    write_model(m, src)
    assert main(["explain", str(src), "cat"]) == 0
    assert "marked no-task" in capsys.readouterr().out
    out, rep = tmp_path / "out.pbtxt", tmp_path / "r.json"
    assert main(["optimize", str(src), "--output", str(out), "--report", str(rep), "--passes", "concat-notask"]) == 0
    m2 = read_model(out)
    assert m2.find_node("cat").attr("_no_task") is True
    assert m2.find_node("p1").output_desc[0].attr("can_reused_for_concat_optimize") is False
    assert json.loads(rep.read_text())["passes"][0]["marked"] == 1


def test_duckdb_engine_agrees():
    pytest.importorskip("duckdb")

    def model():
        m, b = build()
        b.chain("d7:Data", "p7:ReLU")
        b.node("cat_bad:ConcatD", inputs=2)
        b.edge("d7", 0, "cat_bad", 0)
        b.edge("p7", 0, "cat_bad", 1)
        m.root.nodes["cat_bad"].input_desc = [td([2, 16]), td([2, 16])]
        return m

    a = ConcatNotaskAnalysis(model(), engine="sqlite").run()
    b = ConcatNotaskAnalysis(model(), engine="duckdb").run()
    assert [v.as_dict() for v in a] == [v.as_dict() for v in b]
    assert [v.marked for v in a] == [True, False]


@pytest.mark.parametrize(
    "option, message",
    [
        ("anchorlog.dtypeMKN=garbage", "is not KEY:m0,k0,n0"),
        ("anchorlog.dtypeMKN=Default:0,0,0", "three positive integers"),
        ("anchorlog.dtypeMKN=-16,16,16", "is not KEY:m0,k0,n0"),
        ("anchorlog.dtypeMKN=DT_FOO:1,2,3", "unknown dtype 'DT_FOO'"),
        ("anchorlog.singleOpScene=maybe", "expected true or false"),
        ("anchorlog.memoryDiscontiguousAllocation=2", "expected true or false"),
        ("_single_op_scene=sure", "expected true or false"),
    ],
)
def test_cli_refuses_bad_option_values_before_any_pass(tmp_path, capsys, option, message):
    from anchorlog.cli import main
    from anchorlog.facts.ge_io import write_model

    m, _ = build()
    src, out, rep = tmp_path / "in.pbtxt", tmp_path / "out.pbtxt", tmp_path / "r.json"
    write_model(m, src)
    argv = ["optimize", str(src), "--output", str(out), "--report", str(rep), "--passes", "concat-notask"]
    assert main([*argv, "--option", option]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and message in err and "Traceback" not in err
    assert "invalid literal" not in err
    assert not out.exists() and not rep.exists()


@pytest.mark.parametrize(
    "option, marked",
    [
        ("anchorlog.dtypeMKN=Default:16,16,16;DT_INT8:16,32,16", 1),
        ("_single_op_scene=true", 0),  # GE's graph attribute name, applied to every graph
        ("_memory_discontiguous_allocation=on", 0),
        ("anchorlog.singleOpScene=false", 1),
    ],
)
def test_cli_accepts_good_option_values(tmp_path, option, marked):
    import json

    from anchorlog.cli import main
    from anchorlog.facts.ge_io import write_model

    m, _ = build()
    src, out, rep = tmp_path / "in.pbtxt", tmp_path / "out.pbtxt", tmp_path / "r.json"
    write_model(m, src)
    argv = ["optimize", str(src), "--output", str(out), "--report", str(rep), "--passes", "concat-notask"]
    assert main([*argv, "--option", option]) == 0
    assert json.loads(rep.read_text())["passes"][0]["marked"] == marked


def test_explain_anchor_names_the_taker_and_the_loser():
    m, b = build()
    g = m.root
    b.node("cat2:ConcatD", inputs=2)
    g.nodes["cat2"].input_desc = [td([2, 16]), td([2, 16])]
    g.nodes["cat2"].output_desc = [td([4, 16])]
    g.connect("p0", 0, "cat2", 0)
    g.connect("p1", 0, "cat2", 1)
    b.chain("cat2", "out2:NetOutput")
    text = explain(m, "p1", anchor=("p1", 0))
    assert "cat: no-task; takes this buffer over at offset 64" in text
    assert "cat2: rejected by IsPreOutAnchorCanReuse on input 0" in text  # p0:0 is taken too, and first
    assert m.find_node("cat").attr("_no_task") is None  # explained on a copy
    assert "no ConcatD/ConcatV2D reads" in explain(m, "d0", anchor=("d0", 0))


def test_chained_concats_second_round_reads_the_first_mark():
    """cat feeds cat2: cat2 waits for cat's verdict; the rules then see cat as marked (cn_marked) and reject
    cat2 by IsPreNodeAttrValid, and cat (decided first) was not yet blocked by cat2 being virtual."""
    m, b = build()
    g = m.root
    b.node("q:ReLU", inputs=1)
    g.connect("d0", 0, "q", 0)
    g.nodes["q"].output_desc = [td([4, 16])]
    b.node("cat2:ConcatD", inputs=2)
    g.nodes["cat2"].input_desc = [td([4, 16]), td([4, 16])]
    g.nodes["cat2"].output_desc = [td([8, 16])]
    g.nodes["cat"].output_desc = [td([4, 16])]
    g.remove_node("out")  # cat feeds only cat2 (a NetOutput consumer would fail check g first)
    g.connect("cat", 0, "cat2", 0)
    g.connect("q", 0, "cat2", 1)
    b.chain("cat2", "out2:NetOutput")
    an = ConcatNotaskAnalysis(m)
    vs = {v.node: v for v in an.run()}
    assert vs["cat"].marked
    assert (vs["cat2"].check, vs["cat2"].input, vs["cat2"].reason) == ("IsPreNodeAttrValid", 0, "producer_attr")
    assert an.rounds == 2

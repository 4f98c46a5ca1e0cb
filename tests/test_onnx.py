"""ONNX import: node/edge/attr mapping, descriptors, control-flow bodies with parent indexes and outer-scope
references, bad files, and the model files the onnx package ships (plus its If/Loop/Scan node tests)."""

from __future__ import annotations

import glob
import os
import random
import struct
import warnings

import numpy as np
import onnx
import pytest
from _model_checks import check_model
from onnx import TensorProto, helper, numpy_helper

from anchorlog.errors import InputError
from anchorlog.facts.onnx_import import read_onnx


def _model(nodes, inputs, outputs, initializers=(), opset=17, name="g"):
    graph = helper.make_graph(nodes, name, inputs, outputs, initializer=list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _vi(name, dtype=TensorProto.FLOAT, shape=(2, 3)):
    return helper.make_tensor_value_info(name, dtype, list(shape) if shape is not None else None)


def test_inputs_initializers_nodes_outputs():
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(3, 4), "w")
    nodes = [
        helper.make_node("Relu", ["x"], ["r"], name="relu"),
        helper.make_node("MatMul", ["r", "w"], ["mm"], name="mm"),
        helper.make_node("Identity", ["mm"], ["out1"], name="id"),
        helper.make_node("Tanh", ["x"], ["out0"]),  # unnamed: named after its output
    ]
    proto = _model(
        nodes, [_vi("x"), _vi("unused", TensorProto.INT64, (5,))], [_vi("out0"), _vi("out1", shape=(2, 4))], [w]
    )
    m = read_onnx(proto)
    check_model(m)
    g = m.root
    assert [(n.name, n.type) for n in g.nodes_of_type("Data")] == [("x", "Data"), ("unused", "Data")]
    assert [n.attr("index") for n in g.nodes_of_type("Data")] == [0, 1]
    assert g.nodes["relu"].type == "ReLU" and g.nodes["mm"].type == "MatMul" and g.nodes["id"].type == "Identity"
    assert g.nodes["Tanh_out0"].type == "TanH"
    assert g.nodes["mm"].inputs == [("relu", 0), ("w", 0)]
    const = g.nodes["w"]
    assert const.type == "Const"
    value = const.attrs["value"]
    assert value.kind == "t" and value.value.desc.shape == [3, 4] and value.value.desc.dtype == "DT_FLOAT"
    assert np.frombuffer(value.value.data, dtype=np.float32).tolist() == list(range(12))
    (net,) = g.nodes_of_type("NetOutput")
    assert net.inputs == [("Tanh_out0", 0), ("id", 0)]
    # shapes come from shape inference where the file has no value_info
    assert g.nodes["mm"].output_desc[0].shape == [2, 4] and g.nodes["mm"].output_desc[0].dtype == "DT_FLOAT"
    d = g.nodes["relu"].output_desc[0]
    assert d.layout == "ND" and d.attr("origin_shape") == [2, 3] and d.size == 2 * 3 * 4 + 32 + 8
    assert g.nodes["unused"].output_desc[0].dtype == "DT_INT64"


def test_large_initializer_keeps_desc_only():
    w = numpy_helper.from_array(np.zeros((64, 64), dtype=np.float32), "w")
    proto = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", shape=(64, 64))], [_vi("y", shape=(64, 64))], [w]
    )
    m = read_onnx(proto, max_const_bytes=1024)
    tdef = m.root.nodes["w"].attrs["value"].value
    assert tdef.data == b"" and tdef.desc.shape == [64, 64]


def test_attribute_kinds():
    t = numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "t")
    node = helper.make_node(
        "CustomThing",
        ["x"],
        ["y"],
        name="c",
        domain="my.domain",
        i=3,
        f=0.5,
        s="hello",
        ints=[1, 2, 3],
        floats=[0.25, 0.5],
        strings=["a", "b"],
        t=t,
    )
    proto = _model([node], [_vi("x")], [_vi("y")])
    proto.opset_import.append(helper.make_opsetid("my.domain", 1))
    m = read_onnx(proto, infer_shapes=False)
    n = m.root.nodes["c"]
    assert n.type == "CustomThing" and n.attr("_onnx_domain") == "my.domain"
    kinds = {k: a.kind for k, a in n.attrs.items()}
    assert kinds["i"] == "i" and kinds["f"] == "f" and kinds["s"] == "s" and kinds["t"] == "t"
    assert n.attr("ints") == [1, 2, 3] and n.attrs["ints"].value.kind == "i"
    assert n.attr("floats") == [0.25, 0.5] and n.attr("strings") == ["a", "b"]
    assert n.attrs["t"].value.desc.dtype == "DT_INT64"
    assert struct.unpack("<2q", n.attrs["t"].value.data) == (1, 2)


def test_constant_and_concat_mapping():
    nodes = [
        helper.make_node("Constant", [], ["c"], name="k", value_floats=[1.0, 2.0, 3.0]),
        helper.make_node("Concat", ["x", "x"], ["y"], name="cat", axis=0),
    ]
    m = read_onnx(_model(nodes, [_vi("x", shape=(3,))], [_vi("y", shape=(6,)), _vi("c", shape=(3,))]))
    k = m.root.nodes["k"]
    assert k.type == "Const" and struct.unpack("<3f", k.attrs["value"].value.data) == (1.0, 2.0, 3.0)
    cat = m.root.nodes["cat"]
    assert cat.type == "ConcatV2D" and cat.attr("concat_dim") == 0 and cat.attr("N") == 2


def _if_model():
    # then: y = a + b (a, b from the outer graph); else: y = a * 2 (a from outer, const inside)
    then_g = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["t_out"], name="then_add")], "then", [], [_vi("t_out")]
    )
    two = numpy_helper.from_array(np.full((2, 3), 2.0, dtype=np.float32), "two")
    else_g = helper.make_graph(
        [helper.make_node("Mul", ["a", "two"], ["e_out"], name="else_mul")],
        "else",
        [],
        [_vi("e_out")],
        initializer=[two],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], name="make_a"),
        helper.make_node("Sigmoid", ["x"], ["b"], name="make_b"),
        helper.make_node("If", ["cond"], ["y"], name="if", then_branch=then_g, else_branch=else_g),
    ]
    return _model(nodes, [_vi("cond", TensorProto.BOOL, ()), _vi("x")], [_vi("y")])


def test_if_bodies_become_subgraphs_with_parent_indexes():
    m = read_onnx(_if_model())
    check_model(m)
    node = m.root.nodes["if"]
    assert node.type == "If"
    assert len(node.subgraph_names) == 2
    # outer tensors a, b become explicit parent inputs after the condition, shared by both branches
    assert node.inputs == [("cond", 0), ("make_a", 0), ("make_b", 0)]
    assert len(node.input_desc) == 3
    then_g, else_g = (m.graph(s) for s in node.subgraph_names)
    then_data = {n.name: n.attr("_parent_node_index") for n in then_g.nodes_of_type("Data")}
    else_data = {n.name: n.attr("_parent_node_index") for n in else_g.nodes_of_type("Data")}
    assert sorted(then_data.values()) == [1, 2] and list(else_data.values()) == [1]
    add = then_g.nodes["then_add"]
    assert [then_data[a[0]] for a in add.inputs] == [1, 2]
    for g in (then_g, else_g):
        (net,) = g.nodes_of_type("NetOutput")
        assert [d.attr("_parent_node_index") for d in net.input_desc] == [0]
        assert list(g.nodes)[0] in then_data or g is else_g  # Data first: node lists stay topological
    assert else_g.nodes["two"].type == "Const"


def test_nested_outer_reference_goes_through_each_level():
    # Loop body contains an If whose then-branch reads `w` from the root graph.
    then_g = helper.make_graph(
        [helper.make_node("Add", ["v_in", "w"], ["t"], name="inner_add")], "then", [], [_vi("t")]
    )
    else_g = helper.make_graph([helper.make_node("Identity", ["v_in"], ["e"], name="inner_id")], "else", [], [_vi("e")])
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep_going"),
            helper.make_node("If", ["cond_in"], ["v_out"], name="inner_if", then_branch=then_g, else_branch=else_g),
        ],
        "body",
        [_vi("iter", TensorProto.INT64, ()), _vi("cond_in", TensorProto.BOOL, ()), _vi("v_in")],
        [_vi("cond_out", TensorProto.BOOL, ()), _vi("v_out")],
    )
    nodes = [
        helper.make_node("Relu", ["x"], ["w"], name="make_w"),
        helper.make_node("Loop", ["n", "c", "x"], ["v_final"], name="loop", body=body),
    ]
    proto = _model(nodes, [_vi("n", TensorProto.INT64, ()), _vi("c", TensorProto.BOOL, ()), _vi("x")], [_vi("v_final")])
    m = read_onnx(proto)
    check_model(m)
    loop = m.root.nodes["loop"]
    assert loop.inputs == [("n", 0), ("c", 0), ("x", 0), ("make_w", 0)]
    body_g = m.graph(loop.subgraph_names[0])
    pni = {n.name: n.attr("_parent_node_index") for n in body_g.nodes_of_type("Data")}
    assert sorted(pni.values()) == [0, 1, 2, 3]
    inner_if = body_g.nodes["inner_if"]
    w_in_body = next(name for name, k in pni.items() if k == 3)
    v_in_body = next(name for name, k in pni.items() if k == 2)
    assert inner_if.inputs[1:] == [(v_in_body, 0), (w_in_body, 0)]
    then_g = m.graph(inner_if.subgraph_names[0])
    assert sorted(n.attr("_parent_node_index") for n in then_g.nodes_of_type("Data")) == [1, 2]
    (net,) = body_g.nodes_of_type("NetOutput")
    # body outputs (cond, v...) -> Loop outputs (v...): the condition has no parent output
    assert [d.attr("_parent_node_index") for d in net.input_desc] == [None, 0]


def test_undefined_tensor_is_an_input_error():
    proto = _model([helper.make_node("Relu", ["nowhere"], ["y"])], [_vi("x")], [_vi("y")])
    with pytest.raises(InputError) as e:
        read_onnx(proto, infer_shapes=False)
    assert "nowhere" in str(e.value) and "\n" not in str(e.value)


def test_bad_file_is_one_line_input_error(tmp_path):
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x08\x07this is not a protobuf \xff\xff\xff")
    with pytest.raises(InputError) as e:
        read_onnx(bad)
    msg = str(e.value)
    assert msg.startswith(str(bad)) and "\n" not in msg
    with pytest.raises(InputError) as e:
        read_onnx(tmp_path / "missing.onnx")
    assert "\n" not in str(e.value)
    empty = tmp_path / "empty.onnx"
    empty.write_bytes(b"")
    with pytest.raises(InputError):
        read_onnx(empty)


def test_reads_from_path(tmp_path):
    path = tmp_path / "if.onnx"
    onnx.save(_if_model(), str(path))
    m = read_onnx(path)
    assert m.root.nodes["if"].type == "If"


# -- the model files the onnx package ships -------------------------------------------------------------
ONNX_DATA = os.path.join(os.path.dirname(onnx.__file__), "backend", "test", "data")
CONTROL_FLOW = ("If", "Loop", "Scan")


def _uses(graph, types) -> bool:
    for n in graph.node:
        if n.op_type in types:
            return True
        for a in n.attribute:
            subs = [a.g] if a.type == onnx.AttributeProto.GRAPH else list(a.graphs)
            if any(_uses(s, types) for s in subs):
                return True
    return False


@pytest.fixture(scope="module")
def node_test_models() -> list[tuple[str, onnx.ModelProto]]:
    """The node-test models: from data/node/*/model.onnx when the wheel ships them, else regenerated
    in memory by onnx's own test-case generators (the same models)."""
    files = sorted(glob.glob(os.path.join(ONNX_DATA, "node", "*", "model.onnx")))
    if files:
        return [(os.path.basename(os.path.dirname(f)), onnx.load(f)) for f in files]
    import importlib
    import pkgutil

    from onnx.backend.test.case import node as node_cases

    # Importing a case module runs its generators. Three pooling modules take ~3/4 of the time (they compute
    # big reference outputs) and hold no control flow, so they stay out of the sample's population.
    slow = {"lppool", "averagepool", "maxpool"}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if not hasattr(node_cases, "_NodeTestCases"):
            cases = node_cases.collect_testcases(None)
        else:
            for mod in pkgutil.iter_modules(node_cases.__path__):
                if mod.name not in slow and not mod.ispkg:
                    importlib.import_module(f"{node_cases.__name__}.{mod.name}")
            cases = list(node_cases._NodeTestCases)
    return [(c.name, c.model) for c in cases]


def test_node_test_models_sample_and_all_control_flow(node_test_models):
    flow = [(n, p) for n, p in node_test_models if _uses(p.graph, CONTROL_FLOW)]
    rest = [(n, p) for n, p in node_test_models if not _uses(p.graph, CONTROL_FLOW)]
    sample = random.Random(1234).sample(rest, 50)
    assert len(flow) >= 10
    with_subgraphs = 0
    for name, proto in flow + sample:
        m = read_onnx(proto)
        check_model(m)
        with_subgraphs += len(m.graphs) > 1
        assert m.root.nodes_of_type("NetOutput"), name
    assert with_subgraphs >= len(flow)


def test_shipped_model_files():
    files = sorted(
        glob.glob(os.path.join(ONNX_DATA, "*", "*", "model.onnx")) + glob.glob(os.path.join(ONNX_DATA, "*", "*.onnx"))
    )
    if not files:
        pytest.skip("this onnx wheel ships no model files")
    for f in files:
        check_model(read_onnx(f))


def test_ge_attributes_for_adapted_ops():
    sizes = numpy_helper.from_array(np.array([1, 2], dtype=np.int64), "sizes")
    nodes = [
        helper.make_node("Split", ["x", "sizes"], ["s0", "s1"], name="split", axis=1),
        helper.make_node("Split", ["x"], ["e0", "e1", "e2"], name="even", axis=1, num_outputs=3),
        helper.make_node("Softmax", ["x"], ["sm"], name="sm"),
        helper.make_node("Transpose", ["x"], ["tr"], name="tr", perm=[1, 0]),
        helper.make_node("Cast", ["x"], ["c"], name="cast", to=TensorProto.FLOAT16),
        helper.make_node("Gemm", ["x", "tr"], ["g"], name="gemm", transB=1),
    ]
    outs = [_vi(n, shape=None) for n in ("s0", "s1", "e0", "e1", "e2", "sm", "tr", "g")] + [
        _vi("c", TensorProto.FLOAT16, None)
    ]
    m = read_onnx(_model(nodes, [_vi("x", shape=(2, 3))], outs, [sizes], opset=18))
    check_model(m)
    g = m.root
    split = g.nodes["split"]
    assert split.type == "SplitVD" and split.attr("size_splits") == [1, 2] and split.attr("split_dim") == 1
    assert split.inputs == [("x", 0)] and split.attr("num_split") == 2
    assert g.nodes["even"].type == "SplitD" and g.nodes["even"].attr("num_split") == 3
    assert g.nodes["sm"].type == "SoftmaxV2" and g.nodes["sm"].attr("axes") == [-1]
    assert g.nodes["tr"].type == "TransposeD" and g.nodes["tr"].attr("perm") == [1, 0]
    assert g.nodes["cast"].attr("dst_type") == 1  # ge::DT_FLOAT16
    gemm = g.nodes["gemm"]
    assert gemm.type == "MatMulV2" and gemm.attr("transpose_x2") is True and gemm.attr("transpose_x1") is False


def test_imported_models_round_trip_through_ge_files(tmp_path, node_test_models):
    ge_io = pytest.importorskip("anchorlog.facts.ge_io")
    picked = [
        p for n, p in node_test_models if n in ("test_if", "test_loop11", "test_scan9_sum", "test_gemm_default_no_bias")
    ]
    picked.append(_if_model())
    for k, proto in enumerate(picked):
        m = read_onnx(proto)
        for suffix in (".pbtxt", ".pb"):
            path = tmp_path / f"m{k}{suffix}"
            ge_io.write_model(m, path)
            back = ge_io.read_model(path)
            assert [(g.name, [(n.name, n.type, n.inputs, n.subgraph_names) for n in g]) for g in back.graphs] == [
                (g.name, [(n.name, n.type, n.inputs, n.subgraph_names) for n in g]) for g in m.graphs
            ]
            pni = [(n.name, n.attr("_parent_node_index")) for n in back.all_nodes()]
            assert pni == [(n.name, n.attr("_parent_node_index")) for n in m.all_nodes()]


def test_local_functions_become_partitioned_calls():
    inner = helper.make_function(
        "custom",
        "Act",
        ["a"],
        ["b"],
        [helper.make_node("Relu", ["a"], ["b"], name="act_relu")],
        [helper.make_opsetid("", 17)],
    )
    outer = helper.make_function(
        "custom",
        "Block",
        ["x", "w"],
        ["y"],
        [
            helper.make_node("Add", ["x", "w"], ["s"], name="block_add"),
            helper.make_node("Act", ["s"], ["y"], domain="custom", name="block_act"),
        ],
        [helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)],
    )
    nodes = [
        helper.make_node("Block", ["x", "x"], ["h"], domain="custom", name="call1"),
        helper.make_node("Block", ["h", "x"], ["y"], domain="custom", name="call2"),
    ]
    graph = helper.make_graph(nodes, "g", [_vi("x")], [_vi("y")])
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)], functions=[inner, outer]
    )
    m = read_onnx(proto)
    check_model(m)
    for call in ("call1", "call2"):
        node = m.root.nodes[call]
        assert node.type == "PartitionedCall" and node.attr("_onnx_op_type") == "Block"
        (sub_name,) = node.subgraph_names
        sub = m.graph(sub_name)
        assert sorted(n.attr("_parent_node_index") for n in sub.nodes_of_type("Data")) == [0, 1]
        inner_call = next(n for n in sub if n.type == "PartitionedCall")
        assert inner_call.attr("_onnx_op_type") == "Act"
        inner_g = m.graph(inner_call.subgraph_names[0])
        assert [n.type for n in inner_g] == ["Data", "ReLU", "NetOutput"]
        (net,) = inner_g.nodes_of_type("NetOutput")
        assert net.input_desc[0].attr("_parent_node_index") == 0
    # each call owns its own copy of the body
    assert len(m.graphs) == 1 + 2 * 2

"""GE model I/O: lossless text/binary round trips of real GE dumps and conformance models, the text parser's
syntax coverage, unknown-field preservation, floats and strings as protobuf writes them."""

from __future__ import annotations

import dataclasses
import glob
import math
import os
import struct

import pytest
from google.protobuf import text_format

from anchorlog.errors import InputError
from anchorlog.facts import ge_io
from anchorlog.facts import ge_ir_pb2 as pb
from anchorlog.facts.graph import Attr, AttrList, Graph, Model, Node, TensorDesc
from tests.shared_paths import SHARED, requires_shared

REAL = sorted(glob.glob(f"{SHARED}/real-graphs/*.txt"))
CASES = sorted(glob.glob(f"{SHARED}/conformance/cases/*/model.pbtxt"))
REAL_OPS = {
    "ge_proto_00015_OptimizeQuantGraph_FeGraphFusionAfter.txt": 465,
    "ge_proto_00017_OptimizeOriginalGraph_FeGraphFusionAfter.txt": 710,
    "ge_proto_00026_afterUBMatch.txt": 399,
    "ge_proto_00046_afterUBMatch.txt": 234,
    "origin.txt": 4,
}


# ---------------------------------------------------------------------------------------------------------
# Structural comparison: every field of the IR, floats bit-exact (NaN equal to NaN)
# ---------------------------------------------------------------------------------------------------------
_FIELDS: dict[type, tuple[str, ...]] = {}


def canon(obj):
    if isinstance(obj, Model):
        return ("Model", obj.name, obj.version, obj.custom_version, [canon(g) for g in obj.graphs],
                canon(obj.attrs), canon(obj.other), canon(obj.extra))  # fmt: skip
    if isinstance(obj, Graph):
        return ("Graph", obj.name, list(obj.input), list(obj.output), [canon(n) for n in obj.nodes.values()],
                canon(obj.attrs), canon(obj.other), canon(obj.extra))  # fmt: skip
    if isinstance(obj, Node):
        return ("Node", obj.name, obj.type, canon(obj.inputs), list(obj.ctrl_inputs), canon(obj.attrs),
                canon(obj.input_desc), canon(obj.output_desc), list(obj.subgraph_names), obj.id, obj.stream_id,
                canon(obj.other), canon(obj.extra))  # fmt: skip
    names = _FIELDS.get(type(obj))
    if names is None and dataclasses.is_dataclass(obj):
        names = _FIELDS[type(obj)] = tuple(f.name for f in dataclasses.fields(obj))
    if names is not None:
        return (type(obj).__name__,) + tuple(canon(getattr(obj, n)) for n in names)
    if isinstance(obj, dict):
        return ("dict", sorted((k, canon(v)) for k, v in obj.items()))
    if isinstance(obj, (list, tuple)):
        return [canon(x) for x in obj]
    if isinstance(obj, float):
        return ("float", struct.pack("<d", obj))
    return obj


def assert_same_model(a: Model, b: Model) -> None:
    assert [g.name for g in a.graphs] == [g.name for g in b.graphs]
    for ga, gb in zip(a.graphs, b.graphs):
        assert list(ga.nodes) == list(gb.nodes), ga.name  # same ops, same order
        for name, na in ga.nodes.items():
            assert canon(na) == canon(gb.nodes[name]), f"{ga.name}/{name}"
        assert (ga.input, ga.output) == (gb.input, gb.output)
        assert canon((ga.attrs, ga.other, ga.extra)) == canon((gb.attrs, gb.other, gb.extra))
    assert (a.name, a.version, a.custom_version) == (b.name, b.version, b.custom_version)
    assert canon((a.attrs, a.other, a.extra)) == canon((b.attrs, b.other, b.extra))


# ---------------------------------------------------------------------------------------------------------
# Real GE dumps
# ---------------------------------------------------------------------------------------------------------
@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_real_dump_text_round_trip_is_byte_identical(path):
    original = open(path, encoding="utf-8").read()
    model = ge_io.read_model(path)
    assert model.num_nodes() == REAL_OPS[os.path.basename(path)]
    assert ge_io.model_to_text(model) == original


@pytest.mark.parametrize("path", REAL, ids=os.path.basename)
def test_real_dump_structural_round_trips(path):
    model = ge_io.read_model(path)
    again = ge_io.read_model_text(ge_io.model_to_text(model))
    assert_same_model(model, again)
    via_binary = ge_io.read_model_bytes(ge_io.model_to_bytes(model))
    assert_same_model(model, via_binary)


@pytest.mark.parametrize("path", REAL + CASES[:10], ids=lambda p: p.split("/")[-2] + "/" + os.path.basename(p))
def test_matches_protobuf_text_format(path):
    """protobuf's own text parser and ours agree on every field (equal messages)."""
    original = open(path, encoding="utf-8").read()
    reference = pb.ModelDef()
    text_format.Parse(original, reference)
    ours = pb.ModelDef()
    ours.ParseFromString(ge_io.model_to_bytes(ge_io.read_model_text(original, validate=False)))
    assert ours == reference


@requires_shared
def test_real_dump_content():
    model = ge_io.read_model(f"{SHARED}/real-graphs/origin.txt")
    g = model.root
    assert g.name == "partition0_rank31_new_sub_graph102"
    pad = g.nodes["generator/resblock_7/res1/conv_0/reflect"]
    assert pad.type == "MirrorPad"
    assert pad.inputs == [("new_sub_graph102_PlaceHolder122", 0), ("new_sub_graph102_PlaceHolder123", 0)]
    assert pad.attrs["T"] == Attr("dt", 0)
    assert pad.attrs["paramLen"] == Attr("b", False)
    assert pad.attrs["_input_name_key"].value == AttrList("s", ["paddings", "x"], None)
    assert pad.attrs["_op_infer_depends"].value.val_type == 1
    blob = pad.attrs["customized_op_def"]
    assert blob.kind == "bt" and isinstance(blob.value, bytes) and blob.value.startswith(b"\x12\tMirrorPad")
    assert pad.other["has_out_attr"] is True
    assert pad.other["src_name"] == ["new_sub_graph102_PlaceHolder122", "new_sub_graph102_PlaceHolder123"]
    assert pad.other["src_index"] == [0, 0]
    td = pad.input_desc[0]
    assert (td.dtype, td.shape, td.layout) == ("DT_FLOAT", [1, 64, 64, 256], "NHWC")
    assert td.attr("origin_shape") == [1, 64, 64, 256]
    assert td.attrs["shape_range"] == Attr("list_list_int", [])
    assert td.other == {"has_out_attr": True, "device_type": "NPU", "real_dim_cnt": 4}
    assert pad.id == 0 and g.nodes["new_sub_graph102_PlaceHolder122"].id == 1
    assert g.nodes["new_sub_graph102_PlaceHolder122"].output_desc[0].shape is None  # no ShapeDef at all


@requires_shared
def test_real_dump_func_and_float_attrs():
    model = ge_io.read_model(REAL[1])
    kinds = {a.kind for n in model.all_nodes() for a in n.attrs.values()}
    assert {"func", "f", "list", "s", "i", "b"} <= kinds
    func = next(a for n in model.all_nodes() for a in n.attrs.values() if a.kind == "func")
    assert func.value.attrs["aipp_mode"] == Attr("i", 1)


# ---------------------------------------------------------------------------------------------------------
# Conformance models
# ---------------------------------------------------------------------------------------------------------
@requires_shared
def test_every_conformance_model_round_trips():
    assert len(CASES) > 100
    for path in CASES:
        model = ge_io.read_model(path)
        text = ge_io.model_to_text(model)
        again = ge_io.read_model_text(text)
        assert_same_model(model, again)
        assert ge_io.model_to_text(again) == text
        assert_same_model(model, ge_io.read_model_bytes(ge_io.model_to_bytes(model)))


@requires_shared
def test_subgraphs_and_control_inputs_of_a_case():
    path = next(p for p in CASES if "subgraph_name" in open(p).read())
    model = ge_io.read_model(path)
    owners = [n for n in model.all_nodes() if n.subgraph_names]
    assert owners and all(model.has_graph(s) for n in owners for s in n.subgraph_names)


# ---------------------------------------------------------------------------------------------------------
# The general text parser (hand-written files)
# ---------------------------------------------------------------------------------------------------------
HAND_WRITTEN = """
# a comment
name: 'm'  version: 1
graph <
  name: "g"
  op { name: "a" type: "Data" output_desc { dtype: DT_FLOAT16 shape { dim: [2, 0x10] } layout: "ND" } }
  op { name: "b"; type: "ReLU", input: "a:0" input: "a:-1" attr { key: "x" value { f: 1.5f } } }
  op {
    name: "c" type: "Add"
    input: ["b:0", ""]
    attr: { key: "s" value: { s: "tab\\there" " and \\303\\251" } }
    attr { key: "raw" value { bt: "\\377\\000\\x41" } }
    attr { key: "dt" value { dt: 3 } }
    attr { key: "e" value { list { val_type: VT_LIST_INT } } }
    attr { key: "inf" value { f: -inf } }
    id: 012
  }
>
"""


def test_general_syntax():
    model = ge_io.read_model_text(HAND_WRITTEN)
    assert model.name == "m" and model.version == 1
    g = model.root
    a, b, c = g.nodes["a"], g.nodes["b"], g.nodes["c"]
    assert a.output_desc[0].shape == [2, 16] and a.output_desc[0].dtype == "DT_FLOAT16"
    assert b.inputs == [("a", 0)] and b.ctrl_inputs == ["a"]
    assert b.attrs["x"] == Attr("f", 1.5)
    assert c.inputs == [("b", 0), None]
    assert c.attrs["s"].value == "tab\there and é"
    assert c.attrs["raw"].value == b"\xff\x00A"
    assert c.attrs["dt"] == Attr("dt", 3)
    assert c.attrs["e"].value == AttrList(None, [], 2)
    assert c.attrs["inf"].value == -math.inf
    assert c.id == 10  # octal literal
    # what we write reads back the same, and protobuf agrees with our reading
    text = ge_io.model_to_text(model)
    assert_same_model(model, ge_io.read_model_text(text))
    ref = pb.ModelDef()
    text_format.Parse(text, ref)
    assert ref.graph[0].op[2].attr["raw"].bt == b"\xff\x00A"


@requires_shared
def test_fast_and_general_paths_agree():
    printer_shaped = REAL[-2:] + CASES[:20]
    checked = 0
    for path in printer_shaped:
        text = open(path, encoding="utf-8").read()
        fast = ge_io._fast_tree(text)
        general = ge_io.parse_text_tree(text)
        if path in REAL:
            assert fast is not None, path
        if fast is None:
            # hand-written layout: our own printer's output of it takes the fast path
            text = ge_io.model_to_text(ge_io._model_from_tree(general))
            fast = ge_io._fast_tree(text)
            general = ge_io.parse_text_tree(text)
            assert fast is not None, path
        checked += 1
        assert canon(ge_io._model_from_tree(fast)) == canon(ge_io._model_from_tree(general))


def test_fast_path_declines_other_layouts():
    assert ge_io._fast_tree(HAND_WRITTEN) is None
    assert ge_io._fast_tree('graph {\n  name: "g"\n  op { name: "a" }\n}\n') is None
    assert ge_io._fast_tree('graph {\n  input: ["a", "b"]\n}\n') is None


def test_strings_escaped_like_protobuf():
    node = Node("n\"q'", "T")
    node.set_attr("s", "line\nbreak\\ \x01 é")
    node.set_attr("bt", b'\x00\xff"', kind="bt")
    g = Graph("g")
    g.add_node(node)
    text = ge_io.model_to_text(Model("m", [g]))
    assert 'name: "n\\"q\\\'"' in text
    assert 's: "line\\nbreak\\\\ \\001 \\303\\251"' in text
    assert 'bt: "\\000\\377\\""' in text
    ref = pb.ModelDef()
    text_format.Parse(text, ref)
    assert ref.graph[0].op[0].attr["bt"].bt == b'\x00\xff"'
    assert ref.graph[0].op[0].attr["s"].s.decode() == "line\nbreak\\ \x01 é"
    back = ge_io.read_model_text(text)
    assert back.root.nodes["n\"q'"].attrs["s"].value == "line\nbreak\\ \x01 é"


@pytest.mark.parametrize("value", [0.1, 1e-05, 9.92608356, 3.4028234663852886e38, -0.0, 1.0, 1 / 3, 7.0e-45])
def test_floats_read_back_to_the_same_single(value):
    single = struct.unpack("<f", struct.pack("<f", value))[0]
    text = ge_io.format_float(single)
    assert struct.unpack("<f", struct.pack("<f", float(text)))[0] == single
    g = Graph("g")
    g.add_node(Node("n", "T", attrs={"f": Attr("f", single), "l": Attr("list", AttrList("f", [single], 3))}))
    m = Model("m", [g])
    back = ge_io.read_model_text(ge_io.model_to_text(m))
    assert back.root.nodes["n"].attrs["f"].value == single
    assert ge_io.read_model_bytes(ge_io.model_to_bytes(m)).root.nodes["n"].attrs["l"].value.items == [single]


def test_format_float_matches_cpp_printer_style():
    assert ge_io.format_float(1.0) == "1"
    assert ge_io.format_float(1e-05) == "1e-05"
    assert ge_io.format_float(struct.unpack("<f", struct.pack("<f", 0.1))[0]) == "0.1"
    assert ge_io.format_float(math.inf) == "inf" and ge_io.format_float(math.nan) == "nan"


# ---------------------------------------------------------------------------------------------------------
# Unknown fields and rarely used attribute kinds survive
# ---------------------------------------------------------------------------------------------------------
UNKNOWN = """graph {
  name: "g"
  op {
    name: "a"
    type: "Data"
    future_field: 7
    future_msg {
      x: "y"
      inner {
        z: ENUM_VALUE
      }
    }
    attr {
      key: "k"
      value {
        i: 3
      }
    }
  }
  attr_groups {
    other_group_def {
      attr {
        key: "q"
        value {
          i: 5
        }
      }
    }
  }
}
"""


def test_unknown_named_fields_survive_text_round_trip():
    model = ge_io.read_model_text(UNKNOWN)
    node = model.root.nodes["a"]
    assert node.extra[0] == "future_field" and node.extra[1] == 7
    assert "attr_groups" in model.root.other
    text = ge_io.model_to_text(model)
    assert "future_field: 7" in text and "z: ENUM_VALUE" in text
    assert_same_model(model, ge_io.read_model_text(text))
    # attr_groups is known to the schema: it goes to binary too
    back = ge_io.read_model_bytes(ge_io.model_to_bytes(model))
    assert canon(back.root.other) == canon(model.root.other)


def test_unknown_binary_fields_survive():
    msg = pb.ModelDef()
    op = msg.graph.add(name="g").op.add(name="a", type="Data")
    raw = op.SerializeToString() + b"\xb8\x06\x2a" + b"\xc2\x06\x03abc"  # fields 103 (varint) and 104 (bytes)
    op2 = pb.OpDef()
    op2.ParseFromString(raw)
    msg.graph[0].op[0].CopyFrom(op2)
    data = msg.SerializeToString()
    model = ge_io.read_model_bytes(data)
    assert model.root.nodes["a"].extra[0] == "#wire"
    again = pb.ModelDef()
    again.ParseFromString(ge_io.model_to_bytes(model))
    assert again == msg
    # via text: printed by number, read back and re-encoded
    text = ge_io.model_to_text(model)
    assert "103: 42" in text and '104: "abc"' in text
    assert ge_io.model_to_bytes(ge_io.read_model_text(text)) == ge_io.model_to_bytes(model)


def test_all_attribute_kinds_round_trip():
    td = TensorDesc(dtype="DT_INT32", shape=[2], layout="ND", size=64, reuse_input=True, reuse_input_index=1)
    td.set_attr("origin_format", "ND")
    sub = Graph("inner")
    sub.add_node(Node("x", "Const"))
    n = Node("n", "T", inputs=[None])
    n.set_attr("s", "str")
    n.set_attr("i", -5)
    n.set_attr("f", 0.5)
    n.set_attr("b", True)
    n.set_attr("bt", b"\x01\x02")
    n.set_attr("dt", 8, kind="dt")
    n.set_attr("e", "x+1", kind="expression")
    n.set_attr("li", [1, 2, 3])
    n.set_attr("ls", ["a", "b"])
    n.set_attr("lf", [0.25])
    n.set_attr("lb", [True, False])
    n.set_attr("ll", [[1, 2], [3]])
    n.set_attr("llf", [[0.5], [1.5, 2.5]])
    n.set_attr("td", td)
    n.set_attr("g", sub)
    n.attrs["none"] = Attr(None)
    n.attrs["func"] = Attr("func", ge_io.NamedAttrs("fn", {"k": Attr("i", 1)}))
    n.attrs["t"] = Attr("t", ge_io.TensorDef(td, b"\x00\x01"))
    n.attrs["ltd"] = Attr("list", AttrList("td", [td], 6))
    n.attrs["ldt"] = Attr("list", AttrList("dt", [1, 3], 10))
    n.input_desc.append(td)
    n.output_desc.append(TensorDesc(dtype="DT_FLOAT", shape=[]))
    n.id, n.stream_id = 4, 2
    g = Graph("g")
    g.add_node(n)
    m = Model("m", [g])
    m.version = 3
    via_text = ge_io.read_model_text(ge_io.model_to_text(m))
    via_binary = ge_io.read_model_bytes(ge_io.model_to_bytes(m))
    assert_same_model(via_text, via_binary)
    back = via_text.root.nodes["n"]
    assert back.output_desc[0].shape == []  # scalar: ShapeDef present, no dims
    assert back.attrs["ll"] == Attr("list_list_int", [[1, 2], [3]])
    assert back.attrs["g"].value.nodes["x"].type == "Const"
    assert back.attrs["t"].value.data == b"\x00\x01"
    assert back.attrs["none"] == Attr(None)
    assert (back.id, back.stream_id, back.inputs) == (4, 2, [None])


# ---------------------------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------------------------
@requires_shared
def test_write_model_by_suffix_and_sniffing(tmp_path):
    model = ge_io.read_model(REAL[-1])
    for name in ("m.pbtxt", "m.txt", "m.pb"):
        ge_io.write_model(model, tmp_path / name)
        assert_same_model(model, ge_io.read_model(tmp_path / name))
    # unknown suffix: content decides
    os.rename(tmp_path / "m.pb", tmp_path / "m.model")
    assert_same_model(model, ge_io.read_model(tmp_path / "m.model"))
    assert sorted(os.listdir(tmp_path)) == ["m.model", "m.pbtxt", "m.txt"]  # no temp files left


def test_read_any_imports_onnx(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])],
    )
    path = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(path))
    model = ge_io.read_any(path)
    assert model.num_nodes() >= 1


TRICKY_STRINGS = [
    "a: b",
    "ends with colon: ",
    'quote " inside',
    "brace {",
    "}",
    "line\nbreak",
    "tab\there",
    "\x01",
    "ends in marker\x01",
    "ends in marker\x02",
    "x\x00",
    "é ü 中文",
    "back\\slash",
    "[1, 2]",
    ', "k", 1',
    "",
]


def test_fast_path_keeps_tricky_strings():
    g = Graph("g")
    for i, value in enumerate(TRICKY_STRINGS):
        n = Node(f"n{i}: {value[:3]}", "T")
        n.set_attr("s", value)
        n.set_attr("l", [value, "x"])
        n.set_attr("bt", value.encode() + b"\xff", kind="bt")
        n.output_desc.append(TensorDesc(dtype="DT_INT8", shape=[1], layout=value))
        g.add_node(n)
    model = Model("m", [g])
    text = ge_io.model_to_text(model)
    fast = ge_io._fast_tree(text)
    assert fast is not None
    via_fast = ge_io._model_from_tree(fast)
    assert canon(via_fast) == canon(ge_io._model_from_tree(ge_io.parse_text_tree(text)))
    for n, back in zip(model.root.nodes.values(), via_fast.root.nodes.values()):
        assert back.name == n.name
        assert canon(back.attrs) == canon(n.attrs)
        assert canon(back.output_desc) == canon(n.output_desc)


def test_input_strings_parsed_like_ge():
    text = (
        'graph {\n  name: "g"\n'
        '  op {\n    name: "a"\n    type: "Data"\n  }\n'
        '  op {\n    name: "b"\n    type: "T"\n'
        '    input: "a:-1"\n    input: "a:0"\n    input: ""\n    input: "noindex"\n    input: "a:0x"\n  }\n}\n'
    )
    b = ge_io.read_model_text(text).root.nodes["b"]
    # control inputs do not take a data slot; no ":" leaves the slot unconnected; the index is read like strtol
    assert b.ctrl_inputs == ["a"]
    assert b.inputs == [("a", 0), None, None, ("a", 0)]


def test_origin_attrs_shared_between_descriptors_keep_exact_values():
    g = Graph("g")
    for i, (fmt, shape) in enumerate([("ND", [2, 3]), ("ND", [2, 3]), ("NCHW", [1, 2, 3, 4])]):
        n = Node(f"n{i}", "Relu")
        td = TensorDesc(dtype="DT_FLOAT", shape=shape, layout=fmt)
        td.set_attr("origin_format", fmt)
        td.set_attr("origin_shape", shape)
        n.output_desc.append(td)
        g.add_node(n)
    odd = Node("odd", "Relu")  # float lists: 0.0 and -0.0 (equal as keys) must stay distinct values
    for v in (0.0, -0.0, 1.0):
        td = TensorDesc(shape=[1], layout="ND")
        td.attrs["origin_shape"] = Attr("list", AttrList("f", [v], 3))
        odd.output_desc.append(td)
    g.add_node(odd)
    text = ge_io.model_to_text(Model("m", [g]))
    back = ge_io.read_model_text(text)
    assert canon(back) == canon(ge_io._model_from_tree(ge_io.parse_text_tree(text)))  # as the general reader
    d0, d1, d2 = (back.root.node(f"n{i}").output_desc[0] for i in range(3))
    assert d0.attrs["origin_shape"] is d1.attrs["origin_shape"]  # one object per distinct value
    assert d0.attrs["origin_format"] is d1.attrs["origin_format"]
    assert d2.attr("origin_shape") == [1, 2, 3, 4] and d2.attr("origin_format") == "NCHW"
    d0.set_attr("origin_shape", [6])  # an edit replaces the attr: the other descriptor keeps its value
    assert d1.attr("origin_shape") == [2, 3] and d0.attr("origin_shape") == [6]
    floats = [td.attrs["origin_shape"].value.items[0] for td in back.root.node("odd").output_desc]
    assert [math.copysign(1, x) for x in floats] == [1, -1, 1]
    # an integer list written with a float element is refused as before (not taken from the shared values)
    bad = text.replace("i: 3\n", "i: 3.0\n", 1)
    with pytest.raises(InputError):
        ge_io.read_model_text(bad)

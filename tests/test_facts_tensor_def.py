"""``node_attr`` values of TensorDef attributes (Const weights): the direct encoder gives exactly the generic
``to_json`` text for every descriptor shape, attribute kind and data length, and memoised descriptor attrs
never leak between descriptors with different attrs."""

from __future__ import annotations

import math

import pytest

from anchorlog.facts import relations
from anchorlog.facts.graph import Attr, AttrList, Graph, Model, Node, TensorDef, TensorDesc

_ORIGIN = Attr("s", "ND")
_OSHAPE = Attr("list", AttrList("i", [4], 2))

CASES = [
    TensorDef(None, b""),
    TensorDef(TensorDesc("DT_FLOAT16", [4], "ND"), b"\x00\x01" * 4),
    TensorDef(TensorDesc("DT_FLOAT", None, "", name="w", size=16), b"x" * 1024),
    TensorDef(TensorDesc("DT_INT32", [], "ND", reuse_input=True, reuse_input_index=2), b"y" * 1025),
    TensorDef(TensorDesc("DT_FLOAT16", [4], "ND", attrs={"origin_format": _ORIGIN, "origin_shape": _OSHAPE}), b""),
    TensorDef(
        TensorDesc(
            "DT_FLOAT16",
            [1, 2],
            "NCHW",
            attrs={
                "origin_format": Attr("s", "NCHW"),
                "f": Attr("f", math.nan),
                "b": Attr("b", True),
                "bt": Attr("bt", b"\xff\x00"),
                "l": Attr("list", AttrList("s", ["a", "é"], 1)),
                "td": Attr("td", TensorDesc("DT_BOOL", [1], "ND")),
            },
        ),
        b"\x7f",
    ),
    TensorDef(TensorDesc("DT_FLOAT", [2], "ND", name="é\u2603"), b"z"),
]


@pytest.mark.parametrize("value", CASES, ids=range(len(CASES)))
def test_tensor_def_json_equals_generic_encoding(value: TensorDef) -> None:
    memo: dict = {}
    assert relations._tensor_def_json(value, memo) == relations.to_json(value)
    assert relations._tensor_def_json(value, memo) == relations.to_json(value)  # memo hit, same text


def test_const_values_in_node_attr_rows() -> None:
    g = Graph("g")
    shared = {"origin_format": _ORIGIN, "origin_shape": _OSHAPE}
    for i, case in enumerate(CASES):
        n = Node(f"c{i}", "Const", output_desc=[TensorDesc("DT_FLOAT16", [4], "ND")])
        n.attrs["value"] = Attr("t", case)
        g.add_node(n)
    # same attr keys, different Attr objects and values: the memo must keep them apart
    for i, fmt in enumerate(("ND", "NHWC", "ND")):
        n = Node(f"k{i}", "Const")
        attrs = dict(shared) if i == 0 else {"origin_format": Attr("s", fmt), "origin_shape": _OSHAPE}
        n.attrs["value"] = Attr("t", TensorDef(TensorDesc("DT_FLOAT16", [4], "ND", attrs=attrs), b"\x01"))
        g.add_node(n)
    rows = relations.tables_from_model(Model("m", [g]), relations=["node_attr"])["node_attr"]
    by_node = {r[1]: r for r in rows if r[2] == "value"}
    assert len(by_node) == len(CASES) + 3
    for name, (_g, _n, _k, kind, value) in by_node.items():
        node = g.nodes[name]
        assert kind == "t"
        assert value == relations.to_json(node.attrs["value"].value)
    assert '"origin_format":"NHWC"' in by_node["k1"][4] and '"origin_format":"ND"' in by_node["k2"][4]


def test_memo_keeps_equal_but_differently_typed_fields_apart() -> None:
    """The descriptor memo keys on every field with the types of its numbers: 1, 1.0 and True are equal Python
    keys but different JSON, and every descriptor through one memo still gives the generic encoding."""
    descs = [
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1),
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1.0),  # type: ignore[arg-type]
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=True),  # type: ignore[arg-type]
        TensorDesc("DT_FLOAT", [True, 2], "ND", size=1),
        TensorDesc("DT_FLOAT", [1.0, 2], "ND", size=1),  # type: ignore[list-item]
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1, reuse_input=True, reuse_input_index=1),
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1, reuse_input=True, reuse_input_index=True),  # type: ignore[arg-type]
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1, reuse_input=1, reuse_input_index=1),  # type: ignore[arg-type]
        TensorDesc("DT_FLOAT", [1, 2], "ND", size=1, reuse_input=False, reuse_input_index=1),
        TensorDesc("DT_FLOAT", [[1], 2], "ND"),  # type: ignore[list-item]  # unhashable: the general path
        TensorDesc("DT_FLOAT", (1, 2), "ND"),  # type: ignore[arg-type]  # a tuple: same text as the list
        TensorDesc("DT_FLOAT", 5, "ND"),  # type: ignore[arg-type]  # no sequence: the general path
        TensorDesc("DT_FLOAT", [1, 2], "ND", name="a"),
        TensorDesc("DT_FLOAT", [1, 2], "ND", name=""),
        TensorDesc("DT_FLOAT", [1, 2], "NCHW", attrs={"origin_format": _ORIGIN}),
        TensorDesc("DT_FLOAT", [1, 2], "NCHW", attrs={"origin_format": Attr("s", "NCHW")}),
    ]
    memo: dict = {}
    for _ in range(2):
        for desc in descs:
            value = TensorDef(desc, b"\x01\x02")
            assert relations._tensor_def_json(value, memo) == relations.to_json(value), desc

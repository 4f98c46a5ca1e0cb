"""The text writer's reuse of formatted text (descriptor blocks and whole attribute entries, keyed by value) writes
exactly what formatting every line in place writes: on generated transformers, real GE dumps, every conformance
model and attributes made to trip a value key (-0.0 beside 0.0, nan, equal values of different types, unicode,
non-UTF-8 bytes, empty strings and lists, nested lists, unknown fields, unhashable values)."""

from __future__ import annotations

import glob
import math
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings

from anchorlog.facts import ge_io
from anchorlog.facts.graph import Attr, AttrList, Model, NamedAttrs, Node, TensorDef, TensorDesc
from tests.shared_paths import SHARED

try:  # the model helpers of the older writer and fuzz tests
    from test_ge_io_fuzz import models
    from test_ge_io_writer import _model
except ImportError:  # pragma: no cover - run from the project root with another import mode
    from tests.test_ge_io_fuzz import models
    from tests.test_ge_io_writer import _model

# ../shared beside the checkout (absent in a clone elsewhere: those tests skip)
REAL_GRAPHS = sorted(glob.glob(os.path.join(SHARED, "real-graphs", "*.txt")))
CONFORMANCE_MODELS = sorted(glob.glob(os.path.join(SHARED, "conformance", "cases", "*", "model.pbtxt")))


def _reference_text(model: Model) -> str:
    """The model's text with every line formatted where it stands (no reuse of descriptor or entry text)."""
    w = ge_io._TextWriter(reuse=False)
    w.model(model)
    w.out.append("")
    return "\n".join(w.out)


def _desc(shape: list[int] | None = None, **attrs: Attr) -> TensorDesc:
    return TensorDesc("DT_FLOAT", shape, "ND", attrs=dict(attrs))


# Values whose keys must not collide although some of them compare equal (0.0 == -0.0, 1 == 1.0 == True).
TRICKY_SCALARS = [
    Attr("f", 0.0),
    Attr("f", -0.0),
    Attr("f", math.nan),
    Attr("f", math.inf),
    Attr("f", -math.inf),
    Attr("f", 1.0),
    Attr("f", 1),
    Attr("f", -2.5e-12),
    Attr("f", 3.4e38),
    Attr("s", ""),
    Attr("s", "ünïcødé ✓ 名前"),
    Attr("s", 'quote " backslash \\ tab \t newline \n'),
    Attr("s", b"\xff\xfe not utf-8"),
    Attr("s", 1),
    Attr("s", True),
    Attr("s", 1.0),
    Attr("s", 0.0),
    Attr("s", -0.0),
    Attr("bt", b""),
    Attr("bt", b"\x00\x01\x7f\x80\xff"),
    Attr("bt", "text in bt"),
    Attr("expression", "s0 * 2"),
    Attr("dt", 1),
    Attr("dt", True),
    Attr("dt", -3),
    Attr("i", -(2**63)),
    Attr("i", 2**63 - 1),
    Attr("i", True),
    Attr("i", 1.0),
    Attr("b", 0),
    Attr("b", 2),
    Attr(None),
]
TRICKY_LISTS = [
    Attr("list", AttrList(None, [], None)),
    Attr("list", AttrList(None, [], 2)),
    Attr("list", AttrList("i", [], 2)),
    Attr("list", AttrList("i", [1, -2, 0], 2)),
    Attr("list", AttrList("i", [1, True, 1.0], 2)),
    Attr("list", AttrList("f", [0.0, 1.5], 3)),
    Attr("list", AttrList("f", [-0.0, 1.5], 3)),
    Attr("list", AttrList("f", [math.nan, math.inf, -math.inf], 3)),
    Attr("list", AttrList("f", [1, 1.0], 3)),
    Attr("list", AttrList("s", ["", "ä", "a b"], 1)),
    Attr("list", AttrList("s", [1, True], 1)),
    Attr("list", AttrList("s", [0.0], 1)),
    Attr("list", AttrList("s", [-0.0], 1)),
    Attr("list", AttrList("bt", [b"\x00", b""], 5)),
    Attr("list", AttrList("b", [True, False, 2], 4)),
    Attr("list", AttrList("dt", [0, 1, 27], 10)),
    Attr("list", AttrList("i", [1, 2], 2, other={"f": [0.5]})),
    Attr("list", AttrList("td", [_desc([2]), _desc([2])], 6)),
    Attr("list", AttrList("na", [NamedAttrs("fn", {"k": Attr("i", 1)})], 9)),
    Attr("list_list_int", [[1, -2], [], [3]]),
    Attr("list_list_float", [[0.0, -0.0], [math.nan]]),
    Attr("func", NamedAttrs("f", {"alpha": Attr("f", -0.0), "beta": Attr("list", AttrList("i", [1], 2))})),
    Attr("td", _desc([3, 4], origin_format=Attr("s", "NCHW"))),
    Attr("td", _desc(None)),
    Attr("t", TensorDef(_desc([2]), b"\x00\x00\x80\x3f")),
    Attr("t", TensorDef(_desc([2]), b"")),
    Attr("t", TensorDef(None, b"raw")),
    Attr("t", TensorDef(_desc([2]), bytearray(b"mutable"))),  # unhashable data
    Attr("t", TensorDef(_desc([1]), b"x", extra=["99", 5])),
    Attr("i", 7, extra=["99", 1]),
]


def _copy_attr(a: Attr) -> Attr:
    """An equal Attr in new objects (so equal values meet the cache as distinct objects, as after a read)."""
    import copy

    return copy.deepcopy(a)


def test_tricky_attribute_values_written_as_formatted_in_place() -> None:
    values = TRICKY_SCALARS + TRICKY_LISTS
    nodes = []
    # every value twice under the same key and depth (the second meets the first one's text), in both orders of
    # each equal-comparing pair, as an op attr and as a descriptor attr
    for k, order in enumerate((values, values[::-1], values)):
        for j, a in enumerate(order):
            attr = _copy_attr(a)
            nodes.append(
                Node(
                    f"n{k}_{j}",
                    "Const",
                    attrs={"v": attr, "w": _copy_attr(a)},
                    output_desc=[_desc([1], x=_copy_attr(a))],
                )
            )
    m = _model(nodes)
    text = ge_io.model_to_text(m)
    assert text == _reference_text(m)
    # the values that compare equal but print differently are all there
    assert "f: -0.0" in text and "f: 0\n" in text and '"-0.0"' in text and '"0.0"' in text and '"True"' in text


def test_random_mangled_attributes_written_as_formatted_in_place() -> None:
    rng = random.Random(5)
    pool = TRICKY_SCALARS + TRICKY_LISTS
    keys = ["a", "value", "ü", "", "k k", '"q"']
    nodes = []
    for i in range(400):
        attrs = {rng.choice(keys): _copy_attr(rng.choice(pool)) for _ in range(rng.randint(0, 4))}
        desc_attrs = {rng.choice(keys): _copy_attr(rng.choice(pool)) for _ in range(rng.randint(0, 2))}
        nodes.append(
            Node(f"op{i}", rng.choice(["Const", "Add", "ünï"]), attrs=attrs, output_desc=[_desc([i % 3], **desc_attrs)])
        )
    m = _model(nodes)
    assert ge_io.model_to_text(m) == _reference_text(m)


def test_shared_attr_edited_between_writes_is_written_as_it_now_is() -> None:
    shared = Attr("list", AttrList("i", [1, 2], 2))
    const = Attr("t", TensorDef(_desc([2]), b"ab"))
    m = _model([Node("a", "Const", attrs={"axes": shared, "value": const}), Node("b", "Const", attrs={"axes": shared})])
    first = ge_io.model_to_text(m)
    shared.value.items.append(3)
    const.value.data = b"cd"
    const.value.desc.shape.append(1)
    second = ge_io.model_to_text(m)
    assert second != first and second == _reference_text(m)
    assert second.count("i: 3") == 2 and '"cd"' in second


def test_generated_transformer_written_as_formatted_in_place() -> None:
    from anchorlog.facts.generate import generate_transformer

    m = generate_transformer(nodes=1500, seed=1)
    text = ge_io.model_to_text(m)
    assert text == _reference_text(m)
    back = ge_io.read_model_text(text)
    assert ge_io.model_to_text(back) == text == _reference_text(back)


@pytest.mark.skipif(not REAL_GRAPHS, reason="no real GE dumps on this machine")
@pytest.mark.parametrize("path", REAL_GRAPHS, ids=os.path.basename)
def test_real_graph_written_as_formatted_in_place_and_as_read(path: str) -> None:
    m = ge_io.read_model(path)
    text = ge_io.model_to_text(m)
    assert text == _reference_text(m)
    with open(path, encoding="utf-8") as f:
        assert text == f.read()


@pytest.mark.skipif(not CONFORMANCE_MODELS, reason="no conformance cases on this machine")
def test_conformance_models_written_as_formatted_in_place() -> None:
    for path in CONFORMANCE_MODELS:
        m = ge_io.read_model(path)
        assert ge_io.model_to_text(m) == _reference_text(m), path


def test_unwritable_value_fails_alike_with_and_without_reuse() -> None:
    nested = Attr("list", AttrList("i", [[1, 2]], 2))  # an unhashable element the writer cannot print as an int
    m = _model([Node("a", "Add", attrs={"x": nested}), Node("b", "Add", attrs={"x": _copy_attr(nested)})])
    with pytest.raises(TypeError):
        _reference_text(m)
    with pytest.raises(TypeError):
        ge_io.model_to_text(m)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models())
def test_random_models_written_as_formatted_in_place(model: Model) -> None:
    # each random op twice (equal values in distinct objects), so that the second meets the first one's text
    import copy

    g = model.root
    for n in list(g.nodes.values()):
        twin = copy.deepcopy(n)
        twin.name = n.name + "#twin"
        twin.graph = None
        g.add_node(twin)
    assert ge_io.model_to_text(model) == _reference_text(model)


@pytest.mark.parametrize("step", [1, 2, 3, 7, 4096])
def test_utf8_in_pieces_is_the_encoded_text(monkeypatch, step: int) -> None:
    # multi-byte characters, surrogate-escaped bytes and empty pieces on every side of a piece boundary
    nodes = [
        Node("ünï", "Add", attrs={"s": Attr("s", "名前 ✓"), "raw": Attr("s", b"\xff\xfe"), "e": Attr("s", "")}),
        Node("b\udcff", "Ç", inputs=[("ünï", 0)], output_desc=[_desc([1], x=Attr("s", "€"))]),
        Node("c", "Relu", inputs=[("b\udcff", 0)], attrs={"v": Attr("t", TensorDef(_desc([2]), b"\x80\x00"))}),
    ]
    m = _model(nodes)
    monkeypatch.setattr(ge_io, "_ENCODE_PIECES", step)
    assert bytes(ge_io.model_to_utf8(m)) == ge_io.model_to_text(m).encode("utf-8", "surrogateescape")


def test_write_model_text_file_is_the_encoded_text(tmp_path) -> None:
    from anchorlog.facts.generate import generate_transformer

    m = generate_transformer(nodes=800, seed=2)
    out = tmp_path / "m.pbtxt"
    ge_io.write_model(m, out)
    assert out.read_bytes() == ge_io.model_to_text(m).encode("utf-8", "surrogateescape")
    real = REAL_GRAPHS[0] if REAL_GRAPHS else None
    if real:
        ge_io.write_model(ge_io.read_model(real), out)
        with open(real, "rb") as f:
            assert out.read_bytes() == f.read()

"""The text writer's reuse of descriptor blocks: equal descriptors share one text, and every descriptor is still
written exactly as it is (edits after an earlier write, unhashable extra fields, distinct Attr objects with equal
values, nested descriptors)."""

from __future__ import annotations

from anchorlog.facts import ge_io
from anchorlog.facts.graph import Attr, AttrList, Graph, Model, Node, TensorDesc
from tests.shared_paths import SHARED, requires_shared


def _desc(shape: list[int], shared: dict[str, Attr] | None = None, **kw) -> TensorDesc:
    attrs = dict(shared) if shared is not None else {}
    return TensorDesc("DT_FLOAT16", shape, "ND", attrs=attrs, **kw)


def _uncached_text(model: Model) -> str:
    """The model's text with every descriptor written by tensor_desc directly (no block reuse)."""
    w = ge_io._TextWriter()
    w.desc_block = w.render_desc_block  # type: ignore[method-assign]
    w.model(model)
    w.out.append("")
    return "\n".join(w.out)


def _model(nodes: list[Node]) -> Model:
    g = Graph("g")
    for n in nodes:
        g.add_node(n)
    return Model("m", [g])


def test_equal_descriptors_share_one_text_and_differences_show() -> None:
    origin = {"origin_format": Attr("s", "ND"), "origin_shape": Attr("list", AttrList("i", [2, 3], 2))}
    a = Node("a", "Relu", input_desc=[_desc([2, 3], origin)], output_desc=[_desc([2, 3], origin)])
    b = Node("b", "Relu", inputs=[("a", 0)], input_desc=[_desc([2, 3], origin)], output_desc=[_desc([2, 3], origin)])
    # same values in new Attr objects, a different shape, a name, reuse flags, unhashable and unknown fields
    c = Node(
        "c",
        "Relu",
        inputs=[("b", 0)],
        input_desc=[_desc([2, 3], {"origin_format": Attr("s", "NCHW")})],
        output_desc=[
            _desc([3, 2], origin),
            _desc([2, 3], origin, name="y", size=96, reuse_input=True, reuse_input_index=0),
            _desc([2, 3], origin, other={"input_name": ["x", "y"]}),
            _desc(None, origin, other={"device_type": "NPU"}),  # type: ignore[arg-type]
            _desc([2, 3], {"origin_format": Attr("s", "NHWC"), "origin_shape": origin["origin_shape"]}),
        ],
    )
    m = _model([a, b, c])
    text = ge_io.model_to_text(m)
    assert text == _uncached_text(m)
    back = ge_io.read_model_text(text)
    assert ge_io.model_to_text(back) == text
    descs = back.graphs[0].nodes["c"].output_desc
    assert [d.shape for d in descs] == [[3, 2], [2, 3], [2, 3], None, [2, 3]]
    assert descs[4].attrs["origin_format"].value == "NHWC"
    assert descs[1].name == "y" and descs[1].reuse_input and descs[1].size == 96
    assert back.graphs[0].nodes["c"].input_desc[0].attrs["origin_format"].value == "NCHW"


def test_descriptor_edited_between_writes_is_written_as_it_now_is() -> None:
    origin = {"origin_format": Attr("s", "ND")}
    a = Node("a", "Relu", input_desc=[_desc([4], origin)], output_desc=[_desc([4], origin)])
    m = _model([a])
    first = ge_io.model_to_text(m)
    a.output_desc[0].shape.append(5)
    a.output_desc[0].attrs["origin_format"] = Attr("s", "NC1HWC0")
    second = ge_io.model_to_text(m)
    assert second != first
    assert second == _uncached_text(m)
    out = ge_io.read_model_text(second).graphs[0].nodes["a"].output_desc[0]
    assert out.shape == [4, 5] and out.attrs["origin_format"].value == "NC1HWC0"


def test_generated_graph_text_identical_with_and_without_block_reuse() -> None:
    from anchorlog.facts.generate import generate_transformer

    m = generate_transformer(nodes=600, seed=3)
    assert ge_io.model_to_text(m) == _uncached_text(m)
    text = ge_io.model_to_text(m)
    assert ge_io.model_to_text(ge_io.read_model_text(text)) == text


@requires_shared
def test_binary_output_is_the_same_in_every_process(tmp_path) -> None:
    import subprocess
    import sys

    real = f"{SHARED}/real-graphs/ge_proto_00017_OptimizeOriginalGraph_FeGraphFusionAfter.txt"
    code = (
        "import hashlib, sys\n"
        "from anchorlog.facts import ge_io\n"
        "print(hashlib.sha256(ge_io.model_to_bytes(ge_io.read_model(sys.argv[1]))).hexdigest())\n"
    )
    digests = {
        subprocess.run([sys.executable, "-c", code, real], capture_output=True, text=True, check=True).stdout
        for _ in range(3)
    }
    assert len(digests) == 1
    pb = tmp_path / "m.pb"
    ge_io.write_model(ge_io.read_model(real), pb)
    with open(real, encoding="utf-8") as f:
        assert ge_io.model_to_text(ge_io.read_model(pb)) == f.read()

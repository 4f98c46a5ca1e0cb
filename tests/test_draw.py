"""Drawing: DOT structure (clusters, labels, dashed control edges, highlights, region cut), SVG/PNG output,
draw_diff, and the ``draw`` command including a missing ``dot``."""

from __future__ import annotations

import argparse
import copy
import re
import shutil

import pytest

from anchorlog import draw
from anchorlog.errors import AnchorlogError, InputError, OptionError
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="graphviz dot not installed")


def small_model() -> Model:
    """a -> b -> out, ctrl a -> c, and an If-like wrapper w owning subgraph 'sub'."""
    m = Model("m")
    g = Graph("root")
    m.add_graph(g)
    for name, typ, ins in [
        ("a", "Data", []),
        ("b", "ReLU", [("a", 0)]),
        ("c", "Identity", [("a", 0)]),
        ("w", "PartitionedCall", [("b", 0)]),
    ]:
        g.add_node(
            Node(name, typ, inputs=list(ins), input_desc=[TensorDesc() for _ in ins], output_desc=[TensorDesc()])
        )
    g.add_node(Node("out", "NetOutput", inputs=[("w", 0), ("c", 0)], input_desc=[TensorDesc(), TensorDesc()]))
    g.add_ctrl("b", "c")
    g.nodes["w"].subgraph_names = ["sub"]
    s = Graph("sub")
    m.add_graph(s)
    s.add_node(Node("sub_in", "Data", output_desc=[TensorDesc()]))
    s.add_node(Node("sub_out", "NetOutput", inputs=[("sub_in", 0)], input_desc=[TensorDesc()]))
    return m


def _ids(dot: str) -> dict[str, str]:
    """node label name -> dot id"""
    return {m.group(2): m.group(1) for m in re.finditer(r'^\s*(g\d+n\d+) \[label="([^"\\]+)\\n', dot, re.M)}


def test_dot_structure():
    dot = draw.to_dot(small_model(), highlight=["b"], highlight_types=["Identity"])
    ids = _ids(dot)
    assert set(ids) == {"a", "b", "c", "w", "out", "sub_in", "sub_out"}
    assert "subgraph cluster_0" in dot and 'label="sub"' in dot
    assert f'{ids["a"]} -> {ids["b"]} [label="0:0"]' in dot
    assert f'{ids["c"]} -> {ids["out"]} [label="0:1"]' in dot
    assert re.search(rf"{ids['b']} -> {ids['c']} \[style=dashed", dot)
    assert re.search(rf"{ids['w']} -> {ids['sub_in']} \[lhead=cluster_0", dot)
    b_line = next(line for line in dot.splitlines() if line.strip().startswith(ids["b"] + " ["))
    assert draw.HIGHLIGHT_COLOR in b_line
    c_line = next(line for line in dot.splitlines() if line.strip().startswith(ids["c"] + " ["))
    assert draw.TYPE_COLOR in c_line


def test_draw_one_subgraph_and_unknown_graph():
    dot = draw.to_dot(small_model(), graph="sub")
    assert set(_ids(dot)) == {"sub_in", "sub_out"}
    with pytest.raises(InputError):
        draw.to_dot(small_model(), graph="nope")


def test_quoting_of_odd_names():
    m = small_model()
    n = m.root.nodes["b"]
    m.root.nodes.pop("b")
    n.name = 'b"q\\x'
    m.root.nodes[n.name] = n
    dot = draw.to_dot(m)
    assert 'label="b\\"q\\\\x\\nReLU"' in dot


def test_max_nodes_cuts_a_region_around_highlights():
    m = generate_transformer(3, seed=0)
    target = "layer1/attn/softmax"
    dot = draw.to_dot(m, highlight=[target], max_nodes=25)
    ids = _ids(dot)
    assert len(ids) == 25 and target in ids
    assert "showing 25 of" in dot
    assert "layer1/attn/cast_fp32" in ids  # a direct neighbour comes along
    assert len(_ids(draw.to_dot(m, max_nodes=10))) == 10


@needs_dot
def test_svg_object_and_files(tmp_path):
    svg = draw.render(small_model())
    assert svg._repr_svg_().lstrip().startswith(("<?xml", "<svg", "<!DOCTYPE"))
    assert "<svg" in str(svg)
    dot = draw.to_dot(small_model())
    draw.write_drawing(dot, tmp_path / "x.png")
    assert (tmp_path / "x.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    draw.write_drawing(dot, tmp_path / "x.dot")
    assert (tmp_path / "x.dot").read_text() == dot
    with pytest.raises(AnchorlogError):
        draw.write_drawing(dot, tmp_path / "x.jpg2")


def test_diff_marks_removed_and_added():
    before = generate_transformer(2, seed=0, tp=1)
    after = copy.deepcopy(before)
    g = after.root
    tm = "layer0/attn/k_cache_update/tensor_move"
    src = g.nodes[tm].inputs[0]
    for dst, i in g.consumers(tm, 0):
        g.connect(src[0], src[1], dst, i)
    g.remove_node(tm)
    g.add_node(
        Node(
            "new_identity",
            "Identity",
            inputs=[("layer0/attn/k_rope", 0)],
            input_desc=[TensorDesc()],
            output_desc=[TensorDesc()],
        )
    )
    dot = draw.diff_dot(before, after, max_nodes=12)
    ids = _ids(dot)
    assert tm in ids and "new_identity" in ids and "layer0/attn/k_cache_update" in ids
    removed_line = next(line for line in dot.splitlines() if line.strip().startswith(ids[tm] + " ["))
    assert draw.REMOVED_COLOR in removed_line and "dashed" in removed_line
    added_line = next(line for line in dot.splitlines() if line.strip().startswith(ids["new_identity"] + " ["))
    assert draw.ADDED_COLOR in added_line
    # the removed node's old edges are drawn as red ghosts; the bypass edge is drawn as new
    assert re.search(
        rf'{ids[tm]} -> {ids["layer0/attn/k_cache_update"]} \[label="0:1", style=dashed, color="#c62828"', dot
    )
    assert re.search(
        rf'{ids["layer0/attn/k_rope"]} -> {ids["layer0/attn/k_cache_update"]} \[label="0:1", color="#2e7d32"', dot
    )
    assert "+1 -1 nodes" in dot
    # the input models are left alone
    assert tm in before.root.nodes and tm not in after.root.nodes


def _run_cli(argv: list[str]) -> int:
    from anchorlog.commands import draw as cmd

    parser = argparse.ArgumentParser(prog="anchorlog")
    cmd.register(parser.add_subparsers(dest="command"))
    args = parser.parse_args(argv)
    return args.func(args)


@needs_dot
def test_draw_command(tmp_path):
    ge_io = pytest.importorskip("anchorlog.facts.ge_io")
    src = tmp_path / "m.pbtxt"
    ge_io.write_model(generate_transformer(2, seed=1), src)
    out = tmp_path / "m.svg"
    argv = [
        "draw",
        str(src),
        "-o",
        str(out),
        "--highlight",
        "layer0/attn/softmax",
        "--highlight-type",
        "TensorMove",
        "--max-nodes",
        "30",
    ]
    assert _run_cli(argv) == 0
    assert "<svg" in out.read_text()
    assert _run_cli(["draw", str(src), "-o", str(tmp_path / "m.png"), "--graph", "final_norm_then"]) == 0
    with pytest.raises(InputError):
        _run_cli(["draw", str(src), "-o", str(out), "--highlight", "no_such_node"])


def test_draw_command_without_dot(tmp_path, monkeypatch):
    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    out = tmp_path / "m.svg"
    with pytest.raises(AnchorlogError) as e:
        _run_cli(["draw", "whatever.pbtxt", "-o", str(out)])
    assert "apt-get install graphviz" in str(e.value) and "\n" not in str(e.value)
    assert e.value.exit_status == 2 and not out.exists()


@needs_dot
def test_dot_text_displays_as_svg_in_jupyter():
    dot = draw.to_dot(small_model())
    assert isinstance(dot, str)
    assert "<svg" in dot._repr_svg_()


@needs_dot
def test_draw_command_reads_onnx(tmp_path):
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    vi = helper.make_tensor_value_info
    graph = helper.make_graph(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        "g",
        [vi("x", TensorProto.FLOAT, [2])],
        [vi("y", TensorProto.FLOAT, [2])],
    )
    src = tmp_path / "m.onnx"
    onnx.save(helper.make_model(graph), str(src))
    out = tmp_path / "m.dot"
    assert _run_cli(["draw", str(src), "-o", str(out)]) == 0
    assert 'label="relu\\nReLU"' in out.read_text()


def test_cli_main_reports_missing_dot_in_one_line(tmp_path, monkeypatch, capsys):
    cli = pytest.importorskip("anchorlog.cli")
    monkeypatch.setattr(draw.shutil, "which", lambda name: None)
    out = tmp_path / "m.png"
    assert cli.main(["draw", "in.pbtxt", "-o", str(out)]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "apt-get install graphviz" in err
    assert not out.exists()


def test_every_drawn_node_is_declared_even_without_its_owner():
    m = generate_transformer(2, seed=4, partition_every=1)
    sub = m.graphs[1].name
    first_inner = next(iter(m.graphs[1].nodes))
    for budget in (1, 2, 3, 6):
        dot = draw.to_dot(m, highlight=[first_inner], max_nodes=budget)
        declared = set(re.findall(r"^\s*(g\d+n\d+) \[label=", dot, re.M))
        used = set(re.findall(r"(g\d+n\d+) -> ", dot)) | set(re.findall(r"-> (g\d+n\d+)", dot))
        assert used <= declared and first_inner in _ids(dot)
        assert f'label="{sub}"' in dot


def test_draw_command_diff(tmp_path):
    ge_io = pytest.importorskip("anchorlog.facts.ge_io")
    before = generate_transformer(1, seed=2, tp=1)
    after = copy.deepcopy(before)
    g = after.root
    tm = "hidden_states/tensor_move"
    src = g.nodes[tm].inputs[0]
    for dst, i in g.consumers(tm, 0):
        g.connect(src[0], src[1], dst, i)
    g.remove_node(tm)
    ge_io.write_model(before, tmp_path / "before.pbtxt")
    ge_io.write_model(after, tmp_path / "after.pbtxt")
    out = tmp_path / "d.dot"
    assert (
        _run_cli(
            [
                "draw",
                str(tmp_path / "after.pbtxt"),
                "--diff",
                str(tmp_path / "before.pbtxt"),
                "-o",
                str(out),
                "--max-nodes",
                "10",
            ]
        )
        == 0
    )
    text = out.read_text()
    assert "+0 -1 nodes" in text and draw.REMOVED_COLOR in text and tm in text
    with pytest.raises(OptionError):
        _run_cli(
            [
                "draw",
                str(tmp_path / "after.pbtxt"),
                "--diff",
                str(tmp_path / "before.pbtxt"),
                "-o",
                str(out),
                "--highlight",
                tm,
            ]
        )

"""Bad input is reported as one line naming the place (file:line:col, graph, node, input index), through the
API (InputError) and the CLI (exit 2, one stderr line, no traceback, no output file)."""

from __future__ import annotations

import os

import pytest

from anchorlog.cli import main
from anchorlog.errors import InputError
from anchorlog.facts import ge_io
from anchorlog.facts.validate import find_cycle


def op(name: str, typ: str = "ReLU", inputs=(), outputs: int = 1, extra: str = "") -> str:
    ins = "".join(f'    input: "{i}"\n' for i in inputs)
    outs = "".join("    output_desc {\n      dtype: DT_FLOAT\n    }\n" for _ in range(outputs))
    return f'  op {{\n    name: "{name}"\n    type: "{typ}"\n{ins}{extra}{outs}  }}\n'


def model(*ops: str, graphs: str = "") -> str:
    return 'graph {\n  name: "g"\n' + "".join(ops) + "}\n" + graphs


BAD = {
    "syntax": ('graph {\n  name: "g"\n  op {\n    name "a"\n  }\n}\n', r"<f>:4:10: malformed text proto"),
    "unclosed": ('graph {\n  name: "g"\n  op {\n', r"malformed text proto: expected '}' before end of input"),
    "wrong_type": ('graph {\n  name: "g"\n  op {\n    name: "a"\n    id: "x"\n  }\n}\n', r"<f>:5:9: malformed text proto: field 'id' expects an integer"),
    "dangling": (model(op("a", "Data", outputs=1), op("b", inputs=["a:0", "zz:0"])), r"node 'b' input 1 refers to missing node 'zz'"),
    "dangling_ctrl": (model(op("a", "Data"), op("b", inputs=["a:0", "zz:-1"])), r"node 'b' control input refers to missing node 'zz'"),
    "duplicate": (model(op("a", "Data"), op("a", "Data")), r"graph 'g': duplicate node name 'a'"),
    "unknown_subgraph": (model(op("a", "If", extra='    subgraph_name: "nope"\n')), r"node 'a' names unknown subgraph 'nope'"),
    "negative_index": (model(op("a", "Data"), op("b", inputs=["a:-2"])), r"node 'b' input 0 has negative output index -2"),
    "out_of_range": (model(op("a", "Data", outputs=2), op("b", inputs=["a:2"])), r"node 'b' input 0 reads output 2 of 'a', which has 2 output"),
    "data_cycle": (model(op("a", inputs=["c:0"]), op("b", inputs=["a:0"]), op("c", inputs=["b:0"])), r"cycle over data/control edges: a -> b -> c -> a"),
    "ctrl_cycle": (model(op("a", inputs=["b:-1"]), op("b", inputs=["a:0"])), r"cycle over data/control edges: "),
    "duplicate_graph": (model(op("a", "Data")) + 'graph {\n  name: "g"\n}\n', r"duplicate graph name 'g'"),
    "no_graph": ('name: "m"\n', r"model has no graph"),
}  # fmt: skip


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_text_input_api(case, tmp_path):
    text, expected = BAD[case]
    path = tmp_path / "f.pbtxt"
    path.write_text(text)
    with pytest.raises(InputError) as err:
        ge_io.read_model(path)
    msg = str(err.value)
    assert "\n" not in msg
    assert expected.replace("<f>", str(path)) in msg, msg
    assert msg.startswith(str(path))


@pytest.mark.parametrize("case", sorted(BAD))
def test_bad_text_input_cli(case, tmp_path, capsys, monkeypatch):
    from anchorlog.analysis import registry

    registry.load_all()
    monkeypatch.setitem(registry.PASSES, "test-noop", registry.PassInfo("test-noop", lambda m, c: {}, "no-op"))
    text, expected = BAD[case]
    path = tmp_path / "f.pbtxt"
    path.write_text(text)
    out = tmp_path / "out.pb"
    assert main(["--quiet", "convert", str(path), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err
    assert expected.replace("<f>", str(path)) in err
    assert not out.exists()
    report = tmp_path / "r.json"
    assert main(["optimize", str(path), "--output", str(out), "--report", str(report), "--passes", "test-noop"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and expected.replace("<f>", str(path)) in err
    assert not out.exists() and not report.exists()


def test_next_iteration_back_edge_is_not_a_cycle():
    text = model(
        op("enter", "Enter", outputs=1),
        op("merge", "Merge", inputs=["enter:0", "next:0"]),
        op("body", "Add", inputs=["merge:0"]),
        op("next", "NextIteration", inputs=["body:0"]),
    )
    m = ge_io.read_model_text(text)
    assert find_cycle(m.root) == []


def test_cycle_nodes_are_named_in_edge_order():
    text = model(op("x", "Data"), op("a", inputs=["x:0", "c:-1"]), op("b", inputs=["a:0"]), op("c", inputs=["b:0"]))
    m = ge_io.read_model_text(text, validate=False)
    cyc = find_cycle(m.root)
    assert sorted(cyc) == ["a", "b", "c"]
    i = cyc.index("a")
    assert cyc[i:] + cyc[:i] == ["a", "b", "c"]


def test_missing_file(tmp_path, capsys):
    with pytest.raises(InputError, match="no such file"):
        ge_io.read_model(tmp_path / "nope.pbtxt")
    assert main(["show", str(tmp_path / "nope.pbtxt")]) == 2
    err = capsys.readouterr().err
    assert "no such file" in err and err.count("\n") == 1


def test_binary_garbage(tmp_path, capsys):
    path = tmp_path / "g.pb"
    path.write_bytes(b"\xff\xff\xff\xff\x0f garbage \x00\x01")
    with pytest.raises(InputError, match="not a binary GE model"):
        ge_io.read_model(path)
    out = tmp_path / "o.pbtxt"
    assert main(["convert", str(path), str(out)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err and not out.exists()


def test_text_that_is_not_utf8(tmp_path):
    path = tmp_path / "g.pbtxt"
    path.write_bytes(b'graph { name: "\xff" }')
    with pytest.raises(InputError, match="not UTF-8"):
        ge_io.read_model(path)


@pytest.mark.parametrize("target", ["missing_dir/out.pbtxt", "."])
def test_unwritable_output(tmp_path, capsys, target):
    src = "/work/shared/real-graphs/origin.txt"
    out = str(tmp_path / target) if target != "." else str(tmp_path)
    assert main(["convert", src, out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write output" in err or "is a directory" in err
    assert not os.path.exists(tmp_path / "missing_dir")


def test_unwritable_output_read_only_dir(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    assert main(["convert", "/work/shared/real-graphs/origin.txt", str(ro / "o.pbtxt")]) == 2
    assert "permission denied" in capsys.readouterr().err

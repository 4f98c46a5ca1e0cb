"""Bad input is reported as one line naming the place (file:line:col, graph, node, input index), through the
API (InputError) and the CLI (exit 2, one stderr line, no traceback, no output file)."""

from __future__ import annotations

import os

import pytest

from anchorlog.cli import main
from anchorlog.errors import InputError
from anchorlog.facts import ge_io
from anchorlog.facts.validate import find_cycle
from tests.shared_paths import SHARED, requires_shared


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


@requires_shared
@pytest.mark.parametrize("target", ["missing_dir/out.pbtxt", "."])
def test_unwritable_output(tmp_path, capsys, target):
    src = f"{SHARED}/real-graphs/origin.txt"
    out = str(tmp_path / target) if target != "." else str(tmp_path)
    assert main(["convert", src, out]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot write output" in err or "is a directory" in err
    assert not os.path.exists(tmp_path / "missing_dir")


@requires_shared
def test_unwritable_output_read_only_dir(tmp_path, capsys):
    if os.geteuid() == 0:
        pytest.skip("root can write anywhere")
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o500)
    assert main(["convert", f"{SHARED}/real-graphs/origin.txt", str(ro / "o.pbtxt")]) == 2
    assert "permission denied" in capsys.readouterr().err


# --- outputs that would destroy an input, unknown output formats, outputs that cannot be created ----------

ORIGIN = f"{SHARED}/real-graphs/origin.txt"


@pytest.fixture
def noop_pass(monkeypatch):
    """A pass that records that it ran (so a test can tell that a refusal came before any work)."""
    from anchorlog.analysis import registry

    registry.load_all()
    ran: list[str] = []

    def noop(model, ctx):
        ran.append("test-noop")
        return {}

    monkeypatch.setitem(registry.PASSES, "test-noop", registry.PassInfo("test-noop", noop, "no-op"))
    return ran


def _read_only_copy(tmp_path, name: str = "case.pbtxt"):
    path = tmp_path / name
    path.write_text(model(op("a", "Data"), op("b", inputs=["a:0"])))
    path.chmod(0o444)
    return path


def _one_error_line(capsys, *needles: str) -> str:
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: ") and "Traceback" not in err, err
    for needle in needles:
        assert needle in err, err
    return err


def test_optimize_refuses_to_overwrite_its_input(tmp_path, capsys, noop_pass, monkeypatch):
    src = _read_only_copy(tmp_path)
    before = src.read_bytes()
    report = tmp_path / "r.json"
    assert main(["optimize", str(src), "--output", str(src), "--report", str(report), "--passes", "test-noop"]) == 2
    _one_error_line(capsys, str(src), "input")
    # the same file under another spelling (relative path through a symlinked directory)
    (tmp_path / "link").symlink_to(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["optimize", str(src), "-o", "link/case.pbtxt", "--report", str(report), "--passes", "test-noop"]) == 2
    _one_error_line(capsys, "link/case.pbtxt", "input")
    # the report must not replace the input either
    assert (
        main(["optimize", str(src), "-o", str(tmp_path / "o.pbtxt"), "--report", str(src), "--passes", "test-noop"])
        == 2
    )
    _one_error_line(capsys, str(src))
    assert src.read_bytes() == before and noop_pass == [] and not report.exists()


def test_optimize_output_and_report_differ_under_any_spelling(tmp_path, capsys, noop_pass):
    src = _read_only_copy(tmp_path)
    out = tmp_path / "o.pbtxt"
    other_spelling = tmp_path / "sub" / ".." / "o.pbtxt"
    (tmp_path / "sub").mkdir()
    assert main(["optimize", str(src), "-o", str(out), "--report", str(other_spelling), "--passes", "test-noop"]) == 2
    _one_error_line(capsys, "same file")
    assert not out.exists() and noop_pass == []


def test_convert_refuses_to_overwrite_its_input(tmp_path, capsys):
    src = _read_only_copy(tmp_path)
    before = src.read_bytes()
    assert main(["convert", str(src), str(src)]) == 2
    _one_error_line(capsys, str(src), "input")
    assert src.read_bytes() == before


def test_facts_refuses_to_overwrite_an_input(tmp_path, capsys):
    src = _read_only_copy(tmp_path)
    before = src.read_bytes()
    assert main(["facts", str(src), "--db", str(src)]) == 2
    _one_error_line(capsys, str(src), "input")
    assert src.read_bytes() == before


def test_draw_refuses_to_overwrite_its_input(tmp_path, capsys):
    # a GE text model named *.dot is read (the format is sniffed) and would be replaced by the drawing
    src = _read_only_copy(tmp_path, "case.dot")
    before = src.read_bytes()
    assert main(["draw", str(src), "-o", str(src)]) == 2
    _one_error_line(capsys, str(src), "input")
    other = _read_only_copy(tmp_path, "before.dot")
    assert main(["draw", str(src), "--diff", str(other), "-o", str(other)]) == 2
    _one_error_line(capsys, str(other), "input")
    assert src.read_bytes() == before


@pytest.mark.parametrize("command", ["optimize", "convert"])
@pytest.mark.parametrize("name", ["out.xyz", "out", "out.json"])
def test_unknown_model_output_suffix_is_refused(tmp_path, capsys, noop_pass, command, name):
    src = _read_only_copy(tmp_path)
    out = tmp_path / name
    if command == "optimize":
        argv = ["optimize", str(src), "-o", str(out), "--report", str(tmp_path / "r.json"), "--passes", "test-noop"]
    else:
        argv = ["convert", str(src), str(out)]
    assert main(argv) == 2
    _one_error_line(capsys, str(out), ".pbtxt", ".txt", ".pb")
    assert not out.exists() and noop_pass == []


@pytest.mark.parametrize("name", ["out.pbtxt", "out.txt", "out.prototxt", "out.pb", "OUT.PB"])
def test_known_model_output_suffixes_are_written(tmp_path, name):
    src = _read_only_copy(tmp_path)
    assert main(["-q", "convert", str(src), str(tmp_path / name)]) == 0
    assert ge_io.read_model(tmp_path / name).num_nodes() == 2


def test_check_writable_really_tries(tmp_path):
    from anchorlog.fileutil import check_writable

    # /proc is a directory that even root cannot create files in; os.access() says it can
    with pytest.raises(InputError, match="cannot write output"):
        check_writable("/proc/anchorlog-out.pbtxt")
    check_writable(tmp_path / "fine.pbtxt")
    assert list(tmp_path.iterdir()) == []  # the probe leaves nothing behind


@pytest.mark.parametrize("where", ["proc", "file_parent"])
def test_unwritable_output_refused_before_any_work_even_as_root(tmp_path, capsys, noop_pass, where):
    src = _read_only_copy(tmp_path)
    if where == "proc":
        out = "/proc/anchorlog-test-out.pbtxt"
    else:
        (tmp_path / "plain").write_text("x")
        out = str(tmp_path / "plain" / "out.pbtxt")
    report = tmp_path / "r.json"
    assert main(["optimize", str(src), "-o", out, "--report", str(report), "--passes", "test-noop"]) == 2
    _one_error_line(capsys, out, "cannot write output")
    assert noop_pass == [] and not report.exists() and not os.path.exists(out)
    assert main(["convert", str(src), out]) == 2
    _one_error_line(capsys, out, "cannot write output")
    assert main(["facts", str(src), "--db", out]) == 2
    _one_error_line(capsys, out, "cannot write output")


def test_query_on_a_directory_says_so(tmp_path, capsys):
    d = tmp_path / "adir.pbtxt"
    d.mkdir()
    assert main(["query", str(d), "SELECT 1"]) == 2
    err = _one_error_line(capsys, str(d), "directory")
    assert "no such" not in err
    assert main(["query", str(tmp_path / "missing.sqlite"), "SELECT 1"]) == 2
    _one_error_line(capsys, "no such fact database")


def test_explain_checks_options(tmp_path, capsys):
    src = _read_only_copy(tmp_path)
    assert main(["explain", str(src), "b", "--option", "zz=1"]) == 2
    _one_error_line(capsys, "unknown option 'zz'")


def test_explain_checks_option_values(tmp_path, capsys):
    from anchorlog.analysis import registry

    registry.load_all()
    key = next(iter(sorted(registry.OPTION_VALIDATORS)))
    src = _read_only_copy(tmp_path)
    assert main(["explain", str(src), "b", "--option", f"{key}=\x01not-a-value"]) == 2
    _one_error_line(capsys, "bad value", key)


def test_optimize_checks_options_before_reading_the_model(tmp_path, capsys, noop_pass):
    missing = tmp_path / "missing.pbtxt"
    out, report = tmp_path / "o.pbtxt", tmp_path / "r.json"
    argv = ["optimize", str(missing), "-o", str(out), "--report", str(report), "--passes", "test-noop"]
    assert main([*argv, "--option", "zz=1"]) == 2
    _one_error_line(capsys, "unknown option 'zz'")
    assert main(argv) == 2
    _one_error_line(capsys, "no such file")


# --- input indexes that are not canonical numbers ("a:abc"): read like GE (strtol), written back unchanged --


def _two_outputs_model(*inputs: str) -> str:
    return model(op("a", "Data", outputs=2), op("b", inputs=list(inputs)))


@pytest.mark.parametrize(
    "text, anchor",
    [
        ("a:abc", ("a", 0)),  # no digits: strtol gives 0
        ("a:1abc", ("a", 1)),  # leading digits only
        ("a: 1", ("a", 1)),  # strtol skips leading white space
        ("a:+1", ("a", 1)),
        ("a:01", ("a", 1)),
        ("a:1_0", ("a", 1)),  # Python's int() would read 10; strtol stops at '_'
        ("a:\uff11", ("a", 0)),  # a full-width digit is not a digit to strtol
        ("a:4294967296", ("a", 0)),  # strtol's long cast to int32_t wraps
    ],
)
def test_noncanonical_input_index_reads_like_ge(text, anchor):
    m = ge_io.read_model_text(_two_outputs_model(text))
    assert m.root.nodes["b"].inputs == [anchor]


@pytest.mark.parametrize("suffix", [".pbtxt", ".pb"])
def test_noncanonical_input_is_written_back_unchanged(tmp_path, suffix):
    m = ge_io.read_model_text(_two_outputs_model("a:abc", "a:1", "a:-1x"))
    b = m.root.nodes["b"]
    assert b.inputs == [("a", 0), ("a", 1)] and b.ctrl_inputs == ["a"]
    out = tmp_path / f"o{suffix}"
    ge_io.write_model(m, out)
    again = ge_io.read_model(out)
    assert _raw_inputs(out, "b") == ["a:abc", "a:1", "a:-1x"]
    assert again.root.nodes["b"].inputs == [("a", 0), ("a", 1)]


def test_input_without_colon_stays_unconnected_and_round_trips(tmp_path):
    # GE's ParseNodeIndex refuses an entry without ':'; the slot still counts and stays unconnected
    m = ge_io.read_model_text(_two_outputs_model("a", "a:1"))
    assert m.root.nodes["b"].inputs == [None, ("a", 1)]
    out = tmp_path / "o.pbtxt"
    ge_io.write_model(m, out)
    assert _raw_inputs(out, "b") == ["a", "a:1"]


def test_edited_input_is_written_canonically(tmp_path):
    m = ge_io.read_model_text(_two_outputs_model("a:abc", "a:-1x"))
    g = m.root
    g.disconnect("b", 0)
    g.connect("a", 1, "b", 0)
    g.remove_ctrl("a", "b")
    out = tmp_path / "o.pbtxt"
    ge_io.write_model(m, out)
    assert _raw_inputs(out, "b") == ["a:1"]
    # an edge moved back to the anchor the original text named is written canonically too (the text is
    # kept only while it still reads as the current anchor)
    g.disconnect("b", 0)
    g.connect("a", 0, "b", 0)
    ge_io.write_model(m, out)
    assert _raw_inputs(out, "b") in (["a:abc"], ["a:0"])


def _raw_inputs(path, node: str) -> list[str]:
    from anchorlog.facts import ge_ir_pb2

    msg = ge_ir_pb2.ModelDef()
    data = open(path, "rb").read()
    if str(path).endswith(".pb"):
        msg.ParseFromString(data)
    else:
        from google.protobuf import text_format

        text_format.Parse(data.decode(), msg)
    return [list(o.input) for g in msg.graph for o in g.op if o.name == node][0]

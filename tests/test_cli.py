"""The anchorlog command line: discovery, convert, show, optimize (contract of the conformance runner),
error handling (exit 2 for user errors, 1 for internal errors, one stderr line)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from anchorlog.analysis import registry
from anchorlog.cli import build_parser, main
from anchorlog.errors import PassFailure
from anchorlog.facts import ge_io
from tests.shared_paths import SHARED, requires_shared

REAL = f"{SHARED}/real-graphs/ge_proto_00046_afterUBMatch.txt"
CASE = f"{SHARED}/conformance/cases/tm_st_both_writers_kept/model.pbtxt"


@pytest.fixture
def passes(monkeypatch):
    """Register throw-away passes for the duration of a test."""
    registry.load_all()

    def add(name, fn, options=()):
        monkeypatch.setitem(registry.PASSES, name, registry.PassInfo(name, fn, name, tuple(options)))

    return add


def test_commands_are_discovered():
    sub = next(a for a in build_parser()._actions if a.dest == "command")
    assert {"convert", "show", "optimize"} <= set(sub.choices)


def test_no_command_prints_help(capsys):
    assert main([]) == 2
    assert "COMMAND" in capsys.readouterr().err


def test_help_exits_zero(capsys):
    assert main(["optimize", "--help"]) == 0
    assert "--report" in capsys.readouterr().out


@requires_shared
def test_convert_text_binary_text(tmp_path, capsys):
    pb, txt = tmp_path / "m.pb", tmp_path / "m.pbtxt"
    assert main(["convert", REAL, str(pb)]) == 0
    assert main(["--quiet", "convert", str(pb), str(txt)]) == 0
    assert txt.read_text() == open(REAL).read()
    err = capsys.readouterr().err
    assert "m.pb" in err and err.count("\n") == 1  # one progress line, none with --quiet


@requires_shared
def test_convert_refuses_onnx_output(tmp_path, capsys):
    assert main(["convert", REAL, str(tmp_path / "m.onnx")]) == 2
    assert "ONNX" in capsys.readouterr().err


@requires_shared
def test_show(capsys):
    assert main(["show", REAL]) == 0
    out = capsys.readouterr().out
    assert "234 nodes" in out and "op types" in out and "output tensors" in out
    assert main(["show", "--json", REAL]) == 0
    s = json.loads(capsys.readouterr().out)
    assert s["nodes"] == 234 and sum(s["op_types"].values()) == 234
    assert s["graphs"][0]["root"] and s["tensors"]["total_bytes"] > 0


@requires_shared
def test_show_subgraph_owner(capsys):
    case = next(
        p
        for p in sorted(__import__("glob").glob(f"{SHARED}/conformance/cases/*/model.pbtxt"))
        if "subgraph_name" in open(p).read()
    )
    assert main(["show", "--json", case]) == 0
    s = json.loads(capsys.readouterr().out)
    subs = [g for g in s["graphs"] if not g["root"]]
    assert subs and all(g["owner"] for g in subs)


@requires_shared
def test_optimize_runs_passes_and_writes_report(tmp_path, passes, capsys):
    seen = []

    def mark(model, ctx):
        seen.append(ctx.options.get("test.opt"))
        model.root.nodes["Relu"].set_attr("_test_mark", True)
        ctx.report["lint"].append({"code": "W18888", "nodes": ["Relu", "TensorMove"]})
        ctx.progress("marking")
        return {"changed": ["Relu"]}

    passes("test-mark", mark, options=("test.opt",))
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    rc = main(["optimize", CASE, "--output", str(out), "--report", str(rep), "--passes", "test-mark",
               "--option", "test.opt=1"])  # fmt: skip
    assert rc == 0 and seen == ["1"]
    report = json.loads(rep.read_text())
    assert report["passes"] == [{"pass": "test-mark", "changed": ["Relu"]}]
    assert report["lint"][0]["nodes"] == ["Relu", "TensorMove"]
    assert ge_io.read_model(out).root.nodes["Relu"].attr("_test_mark") is True
    assert "pass test-mark" in capsys.readouterr().err  # progress lines


@requires_shared
def test_optimize_binary_output(tmp_path, passes):
    passes("test-noop", lambda m, c: {})
    out, rep = tmp_path / "o.pb", tmp_path / "r.json"
    assert main(["-q", "optimize", CASE, "-o", str(out), "--report", str(rep), "--passes", "test-noop"]) == 0
    assert ge_io.read_model(out).num_nodes() == ge_io.read_model(CASE).num_nodes()


@requires_shared
@pytest.mark.parametrize(
    "extra, message",
    [
        (["--passes", "no-such-pass"], "unknown pass 'no-such-pass'; known passes:"),
        (["--passes", "test-noop", "--option", "no.such.option=1"], "unknown option 'no.such.option'; known options:"),
        (["--passes", "test-noop", "--option", "novalue"], "expected KEY=VALUE"),
        (["--passes", ","], "no pass named"),
        (["--passes", "test-noop", "--engine", "oracle"], "invalid choice"),
    ],
)
def test_optimize_option_errors(tmp_path, passes, capsys, extra, message):
    passes("test-noop", lambda m, c: {})
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    assert main(["optimize", CASE, "--output", str(out), "--report", str(rep), *extra]) == 2
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists() and not rep.exists()


@requires_shared
def test_optimize_pass_failure_writes_no_output(tmp_path, passes, capsys):
    def fail(model, ctx):
        raise PassFailure("GE fails the compile here", "node Relu")

    passes("test-fail", fail)
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    assert main(["optimize", CASE, "--output", str(out), "--report", str(rep), "--passes", "test-fail"]) == 2
    err = capsys.readouterr().err
    assert "error: node Relu: GE fails the compile here" in err
    assert not out.exists()
    report = json.loads(rep.read_text())
    assert report["lint"] == [] and "GE fails the compile" in report["error"]


@requires_shared
def test_internal_error_is_one_line_exit_1(tmp_path, passes, capsys):
    def boom(model, ctx):
        raise RuntimeError("unexpected\nstate")

    passes("test-boom", boom)
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    assert main(["-q", "optimize", CASE, "-o", str(out), "--report", str(rep), "--passes", "test-boom"]) == 1
    err = capsys.readouterr().err
    assert err == "internal error: RuntimeError: unexpected state\n"
    assert not out.exists() and not rep.exists()
    assert main(["--debug", "optimize", CASE, "-o", str(out), "--report", str(rep), "--passes", "test-boom"]) == 1
    assert "Traceback" in capsys.readouterr().err


@requires_shared
def test_output_and_report_must_differ(tmp_path, passes, capsys):
    passes("test-noop", lambda m, c: {})
    same = tmp_path / "x.json"
    assert main(["optimize", CASE, "-o", str(same), "--report", str(same), "--passes", "test-noop"]) == 2


@requires_shared
def test_default_passes_is_o3(tmp_path, capsys):
    if "o3" not in registry.load_all():
        pytest.skip("o3 pipeline not registered yet")
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    rc = main(["-q", "optimize", CASE, "--output", str(out), "--report", str(rep)])
    assert rc in (0, 2)
    report = json.loads(rep.read_text())
    assert "lint" in report and "passes" in report


def test_console_script_entry_point(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "anchorlog.cli", "show", "/nonexistent.pbtxt"],
                          capture_output=True, text=True)  # fmt: skip
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == ["error: /nonexistent.pbtxt: no such file"]


def test_version(capsys):
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.startswith("anchorlog ")

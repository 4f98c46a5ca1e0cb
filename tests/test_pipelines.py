"""Composite passes: mem-conflict order, o3 order and skipping of passes not registered yet."""

from __future__ import annotations

from anchorlog.analysis import pipelines
from anchorlog.analysis.registry import PASSES, PassContext, load_all, run_passes
from anchorlog.facts.builder import GraphBuilder


def test_mem_conflict_is_rw_then_layout() -> None:
    load_all()
    assert PASSES["mem-conflict"].pipeline == ("rw-conflict", "layout-conflict")


def test_o3_follows_ge_compile_order() -> None:
    order = list(pipelines.O3_ORDER)
    assert order.index("graph-lint") < order.index("hccl-memcpy")
    assert order.count("hccl-memcpy") == 2
    assert order.index("concat-notask") < order.index("tensor-move-delete") < order.index("rw-conflict")
    assert order.index("rw-conflict") < order.index("layout-conflict") < order.index("set-io-offset")
    assert "mark-same-addr" not in order  # GE never invokes MarkSameAddrPass


def test_available_skips_unregistered() -> None:
    ok, missing = pipelines.available(["rw-conflict", "no-such-pass", "mem-conflict"])
    assert ok == ["rw-conflict", "rw-conflict", "layout-conflict"]
    assert missing == ["no-such-pass"]


def test_o3_runs_and_reports_missing(monkeypatch) -> None:
    monkeypatch.setattr(pipelines, "O3_ORDER", ("graph-lint", "not-built-yet", "rw-conflict"))
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce")
    b.attr("ar", "_input_mutable", True)
    m = b.build()
    rep = run_passes(m, ["o3"], PassContext())
    names = [p["pass"] for p in rep["passes"]]
    assert names == ["graph-lint", "rw-conflict", "o3"]
    assert rep["passes"][-1]["not_available"] == ["not-built-yet"]


def test_mem_conflict_runs_both() -> None:
    b = GraphBuilder("g")
    b.chain("c:Const", "ar:HcomAllReduce", "out:NetOutput")
    b.attr("ar", "_input_mutable", True)
    rep = run_passes(b.build(), ["mem-conflict"], PassContext())
    assert [p["pass"] for p in rep["passes"]] == ["rw-conflict", "layout-conflict"]

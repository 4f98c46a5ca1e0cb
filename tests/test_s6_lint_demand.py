"""GraphLint's demand set of named ops (``lint_named_demand``, session 6: one index search per name key merged in
Python, the consumer count tested first) against the frozen base version (tests/oracles/lint_demand_s6base.py):
the same set on generated decoders (also after a pipeline edited them, over its refreshed shared fact database),
hand-built subgraph cases, the lint_ conformance cases and the real GE dumps; and the whole pass reports the same."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.graph_lint import lint_named_demand, verify
from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.shared_paths import SHARED

try:  # the oracle lives next to the tests (importable whichever way pytest put tests/ on the path)
    from oracles.lint_demand_s6base import lint_named_demand_s6base
except ImportError:  # pragma: no cover
    from tests.oracles.lint_demand_s6base import lint_named_demand_s6base

CASES = sorted((SHARED / "conformance" / "cases").glob("lint_*/model.pbtxt")) if SHARED.is_dir() else []
REAL = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []


def _same_demand(model: Model, ctx: PassContext | None = None) -> set[tuple[str, str]]:
    conn = shared_facts(model, ctx or PassContext(options={}, engine="sqlite")).conn
    new = lint_named_demand(model, conn)
    assert new == lint_named_demand_s6base(model, conn)
    return new


def _shared_and_subgraph_readers() -> Model:
    # a shared Variable read by a named writer (Assign) and a reader; in a subgraph, a named op fed by a Data
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign", "r:ReLU")
    b.chain("x:Data", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r2:ReLU")
    b.chain("y:Data", "a1:Assign")
    b.chain("w:Variable", "a1")
    b.ref_op("a1", {0: 1})
    b.chain("c:Const", "pc:PartitionedCall", "r3:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sa:Assign")
    sub.chain("sv:Variable", "sa")
    sub.ref_op("sa", {0: 0})
    sub.output("sa", 0)
    return b.build()


def test_demand_on_built_graph() -> None:
    got = _same_demand(_shared_and_subgraph_readers())
    assert got == {("g", "asg"), ("sub", "sa")}


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_demand_on_generated(seed: int) -> None:
    m = generate_transformer(nodes=3000, seed=seed)
    _same_demand(m)
    # after the mem-conflict passes edited the model, over the refreshed shared database
    ctx = PassContext(options={}, engine="sqlite")
    shared_facts(m, ctx)
    run_passes(m, ["mem-conflict"], ctx)
    _same_demand(m, ctx)


@pytest.mark.parametrize(
    "path", CASES + REAL, ids=[p.parent.name if p.name == "model.pbtxt" else p.name for p in CASES + REAL]
)
def test_demand_on_cases_and_dumps(path: Path) -> None:
    m = read_model(path)
    _same_demand(m)
    # the pass over the lean database (no pipeline) and over a shared one agree
    ctx = PassContext(options={}, engine="sqlite")
    assert verify(copy.deepcopy(m)) == verify(m, db=shared_facts(m, ctx))

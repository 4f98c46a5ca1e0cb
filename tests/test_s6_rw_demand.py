"""Session 6 speed changes of the rw-conflict pass, each against the path it replaced.

1. ``rw_types.dl``'s demand (``rwc_hot``): a ref input (kWriteable, kReadOnly on a Phony op) no longer makes its
   producer's output hot unless an edge there can act (producer possibly kReadOnlyConst / kInvalidRWType, a consumer
   with ``_skip_rw_conflict``, or the output asked about). The pass must decide exactly as with the frozen base rules
   (``tests/oracles/rw_types_s6base.dl``): same decisions, warnings, rule evaluations and resulting graph, and the
   same facts for every output that acts (its matrix cells, chain, last-scope-write permission).
2. ``io_name`` rows from the shared fact database (``named_ops_from_facts``): the same rows in the same order as the
   visit of every node (``io_name_rows``), also after a pipeline edited the model.
Models: hand-built graphs for each way a ref input's producer can act, generated decoders, the conformance
cases of the RW, TensorMove and lint families and the real GE dumps (skipped when ../shared is absent)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from anchorlog.analysis import rw_conflict
from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.analysis.rw_conflict import RWTypes, handle_memory_rw_conflict, io_name_rows, io_rows_of
from anchorlog.errors import PassFailure
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.synthetic import rw_split_heavy
from tests.shared_paths import SHARED
from tests.test_rw_rules_oracle import _graph_state  # nodes in order, edges, attrs, descs

BASE_DL = Path(__file__).resolve().parent / "oracles" / "rw_types_s6base.dl"
CASES = (
    sorted(
        p
        for fam in ("rw_", "tm_", "lint_", "concat_")
        for p in (SHARED / "conformance" / "cases").glob(f"{fam}*/model.pbtxt")
    )
    if SHARED.is_dir()
    else []
)
REAL = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []


# ------------------------------------------------------------------------------------------------ hand-built graphs
def _const_to_assign() -> Model:
    # kReadOnlyConst -> ref input (kWriteable): INSERT_IDENTITY, reachable only through the ref input
    b = GraphBuilder("g")
    b.chain("c:Const", "asg:Assign", "r:ReLU")
    b.chain("v:Variable", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("c", "r2:ReLU")
    return b.build()


def _variable_assigns() -> Model:
    # the common case: Variable -> Assign ref inputs (kWriteable -> kWriteable), a chain of Assigns, readers
    b = GraphBuilder("g")
    b.chain("v:Variable", "a1:Assign", "a2:Assign", "r:ReLU")
    b.chain("x:Data", "a1")
    b.chain("y:Data", "a2")
    b.ref_op("a1", {0: 0})
    b.ref_op("a2", {0: 0})
    b.chain("v", "r2:ReLU")
    b.chain("a2", "hc:HcomAllReduce")
    b.attr("hc", "_input_mutable", True)
    return b.build()


def _data_and_subgraph_data_to_assign() -> Model:
    # a root Data (kWriteable) and a subgraph Data standing for a Const parent input (kReadOnlyConst) feed refs
    b = GraphBuilder("g")
    b.chain("d:Data", "a0:Assign")
    b.chain("v0:Variable", "a0")
    b.ref_op("a0", {0: 0})
    b.chain("c:Const", "pc:PartitionedCall", "r:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sa:Assign")
    sub.chain("sv:Variable", "sa")
    sub.ref_op("sa", {0: 0})
    sub.output("sa", 0)
    return b.build()


def _wrapper_to_assign() -> Model:
    # a PartitionedCall output (type from its subgraph's NetOutput) feeding a ref input
    b = GraphBuilder("g")
    b.chain("d:Data", "pc:PartitionedCall", "asg:Assign", "r:ReLU")
    b.chain("v:Variable", "asg")
    b.ref_op("asg", {0: 0})
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.node("sc", "Const")
    sub.output("sc", 0)
    return b.build()


def _invalid_to_assign() -> Model:
    # a subgraph Data without a parent input (kInvalidRWType) feeding a ref input: WRONG_GRAPH warnings
    b = GraphBuilder("g")
    b.node("pc", "PartitionedCall", inputs=1, outputs=1)
    b.chain("pc", "r:ReLU")
    sub = b.subgraph("sub", owner="pc")
    sub.data("sd", 0)
    sub.chain("sd", "sa:Assign")
    sub.chain("sv:Variable", "sa")
    sub.ref_op("sa", {0: 0})
    sub.chain("sd", "sr:ReLU")
    sub.output("sa", 0)
    return b.build()


def _skip_consumer_next_to_ref() -> Model:
    # a Variable read by a ref input and by a consumer carrying _skip_rw_conflict: GE's loop reports the skip
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("x:Data", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "k:ReLU")
    b.attr("k", "_skip_rw_conflict", True)
    return b.build()


def _phony_with_ref_name() -> Model:
    # PhonyConcat inputs read only even when named like an output; a Const producer then does nothing
    b = GraphBuilder("g")
    b.chain("c:Const", "pc:PhonyConcat", "r:ReLU")
    b.ref_op("pc", {0: 0})
    return b.build()


def _const_assign_then_scope_write() -> Model:
    # the session-2 round case: the Identity before asg:0 re-derives asg's skip chain
    b = GraphBuilder("g")
    b.chain("c:Const", "asg:Assign", "hc:HcomAllReduce")
    b.chain("v:Variable", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("c", "r:ReLU")
    b.attr("hc", "_input_mutable", True)
    return b.build()


BUILT = {
    "const_to_assign": _const_to_assign,
    "variable_assigns": _variable_assigns,
    "data_and_subgraph_data_to_assign": _data_and_subgraph_data_to_assign,
    "wrapper_to_assign": _wrapper_to_assign,
    "invalid_to_assign": _invalid_to_assign,
    "skip_consumer_next_to_ref": _skip_consumer_next_to_ref,
    "phony_with_ref_name": _phony_with_ref_name,
    "const_assign_then_scope_write": _const_assign_then_scope_write,
    "split_heavy": lambda: rw_split_heavy(3),
}


# ------------------------------------------------------------------------------------------------ helpers
def _run_pass(model: Model, dl: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """The pass on a copy of ``model`` with the rules of ``dl``, in a pipeline context (shared fact database)."""
    work = copy.deepcopy(model)
    with monkeypatch.context() as mp:
        mp.setattr(rw_conflict, "RW_TYPES_DL", dl)
        try:
            rw = handle_memory_rw_conflict(work, PassContext(options={}, engine="sqlite"))
        except PassFailure as err:
            return {"failure": str(err), "graph": _graph_state(work)}
    return {
        "decisions": [d.as_dict() for d in rw.decisions],
        "warnings": rw.warnings,
        "evaluations": rw.evaluations,
        "slice_evaluations": rw.slice_evaluations,
        "graph": _graph_state(work),
    }


def _acting_facts(model: Model, dl: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """What the first evaluation says about the outputs that act (the only ones the walk decides on)."""
    with monkeypatch.context() as mp:
        mp.setattr(rw_conflict, "RW_TYPES_DL", dl)
        rw = RWTypes(copy.deepcopy(model), PassContext(options={}, engine="sqlite"))
        try:
            rw.init(mark_subgraphs=True)
        except PassFailure as err:
            return {"failure": str(err)}
        f = rw.facts
    hot = {(g, s, o) for (g, s), per_out in f.edges.items() for o in per_out}
    return {
        "hot": hot,
        "acting": f.acting,
        "active": f.active,
        "cells": {k: f.edges[(k[0], k[1])][k[2]] for k in f.acting},
        "chain": {k: f.chain.get(k) for k in f.acting},
        "skip_ok": {k for k in f.acting if k in f.skip_ok},
        "types": {k: f.out_type(*k) for k in f.acting},
        "skip_node": f.skip_node,
        "ident": f.ident,
        "ident_keep": f.ident_keep,
        "remove": f.remove,
        "refs": sorted(f.refs),
    }


def _check(model: Model, monkeypatch: pytest.MonkeyPatch) -> None:
    new_dl = rw_conflict.RW_TYPES_DL
    old = _acting_facts(model, BASE_DL, monkeypatch)
    new = _acting_facts(model, new_dl, monkeypatch)
    if "failure" in old:
        assert new == old
    else:
        assert new["hot"] <= old["hot"]  # the demand only shrinks
        old_hot, new_hot = old.pop("hot"), new.pop("hot")
        assert old["acting"] <= new_hot <= old_hot
        assert new == old
    assert _run_pass(model, new_dl, monkeypatch) == _run_pass(model, BASE_DL, monkeypatch)


# ------------------------------------------------------------------------------------------------ tests
@pytest.mark.parametrize("name", sorted(BUILT))
def test_narrowed_demand_decides_as_before_on_built_graphs(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(BUILT[name](), monkeypatch)


def test_narrowed_demand_acts_where_it_must(monkeypatch: pytest.MonkeyPatch) -> None:
    # the cases above do exercise the rules that keep a ref input's producer hot
    acts = {n: _acting_facts(BUILT[n](), rw_conflict.RW_TYPES_DL, monkeypatch) for n in BUILT}
    assert ("g", "c", 0) in acts["const_to_assign"]["acting"]
    assert ("sub", "sd", 0) in acts["data_and_subgraph_data_to_assign"]["acting"]
    assert ("g", "v", 0) in acts["skip_consumer_next_to_ref"]["acting"]
    assert acts["invalid_to_assign"]["acting"]
    assert acts["variable_assigns"]["hot"] == {("g", "a2", 0)}  # only the scope-written output stays hot


@pytest.mark.parametrize("seed", [1, 2])
def test_narrowed_demand_decides_as_before_on_generated(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(generate_transformer(nodes=1500, seed=seed), monkeypatch)


@pytest.mark.parametrize("path", CASES, ids=[p.parent.name for p in CASES])
def test_narrowed_demand_decides_as_before_on_cases(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(read_model(path), monkeypatch)


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_narrowed_demand_decides_as_before_on_real_dumps(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    _check(read_model(path), monkeypatch)


def _io_rows_via_facts(model: Model, ctx: PassContext) -> list[tuple] | None:
    named = rw_conflict.named_ops_from_facts(model, shared_facts(model, ctx))
    return None if named is None else io_rows_of(named)


@pytest.mark.parametrize("seed", [0, 3])
def test_io_rows_from_facts_equal_the_node_visit(seed: int) -> None:
    m = generate_transformer(nodes=2000, seed=seed)
    ctx = PassContext(options={}, engine="sqlite")
    rows = _io_rows_via_facts(m, ctx)
    assert rows is not None and rows == io_name_rows(m) and rows
    # after a pipeline edited the model (Identities inserted, nodes moved): the shared database, refreshed,
    # still gives the visit's rows in the visit's order
    run_passes(m, ["mem-conflict", "tensor-move-delete"], ctx)
    assert _io_rows_via_facts(m, ctx) == io_name_rows(m)


def test_io_rows_from_facts_fall_back_for_a_foreign_database() -> None:
    m = _variable_assigns()
    other = _const_to_assign()
    ctx = PassContext(options={}, engine="sqlite")
    db = shared_facts(other, ctx)
    assert rw_conflict.named_ops_from_facts(m, db) is None  # names a node the model lacks
    assert rw_conflict.named_ops_from_facts(m, object()) is None  # not a fact database


@pytest.mark.parametrize("path", REAL, ids=[p.name for p in REAL])
def test_io_rows_from_facts_on_real_dumps(path: Path) -> None:
    m = read_model(path)
    assert _io_rows_via_facts(m, PassContext(options={}, engine="sqlite")) == io_name_rows(m)

"""rw_types.dl and the rule-driven rw-conflict pass against the Python replay of GE (tests/oracles/rw_replay.py).

1. Types, anchor by anchor: the full rule relations ``in_rw`` / ``out_rw`` (what tensor_move.dl reads) and the
   demand-driven relations the pass reads (``rwd_in_t`` / ``rwd_out_t``, every anchor asked) must give exactly the
   type the replay of GE's GetInputRWTypeByIndex / GetOutputRWTypeByIndex gives after InitRWConflictCheck.
2. The whole pass: ``handle_memory_rw_conflict`` (facts from the rules, applied in GE's order) and the replay must
   leave the same graph (nodes in order, edges, control edges, attributes) and make the same decisions, or fail
   alike (GE's pass only warns then; the Identities inserted before the failure stay).
Models: every conformance case (skipped when ../shared is absent), the real GE dumps, generated decoders."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest

from anchorlog.analysis.rw_conflict import RWTypes, handle_memory_rw_conflict, rw_types_datalog
from anchorlog.errors import AnchorlogError
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.shared_paths import SHARED

try:  # the oracle lives next to the tests (importable whichever way pytest put tests/ on the path)
    from oracles import rw_replay
except ImportError:  # pragma: no cover
    from tests.oracles import rw_replay

CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
REAL = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []


def _type_disagreements(model: Model) -> list[str]:
    """Anchors where the rules (full and demand-driven) and the replay differ (empty when they agree)."""
    res = rw_types_datalog(model)
    rule_out = {(g, n, o): t for g, n, o, t in res.rows("out_rw")}
    rule_in = {(g, n, i): t for g, n, i, t in res.rows("in_rw")}
    work = copy.deepcopy(model)
    try:
        replay = rw_replay.RWTypes.init_rw_conflict_check(work)
    except AnchorlogError:
        return []  # GE's InitRWConflictCheck fails on this model (the pass only warns): no types to compare
    outs = sorted(rule_out)
    ins = sorted(
        (g.name, n.name, i) for g in model.graphs for n in g.nodes.values() for i, a in enumerate(n.inputs) if a
    )
    # the pass's demand-driven relations, every anchor asked, on the model as GE's init left it
    rules = RWTypes(copy.deepcopy(model))
    rules.init()
    demand = rules.evaluate(ask_out=outs, ask_in=ins)
    bad: list[str] = []
    for g, n, o in outs:
        py = replay.output_type(work.graph(g), work.graph(g).nodes[n], o)[0]
        if py != rule_out[(g, n, o)]:
            bad.append(f"out {g}/{n}:{o} rules {rule_out[(g, n, o)]} python {py}")
        if demand.out_type(g, n, o)[0] != py:
            bad.append(f"out {g}/{n}:{o} demand rules {demand.out_type(g, n, o)[0]} python {py}")
    for g, n, i in ins:
        py = replay.input_type(work.graph(g), work.graph(g).nodes[n], i)[0]
        if py != rule_in.get((g, n, i)):
            bad.append(f"in {g}/{n}:{i} rules {rule_in.get((g, n, i))} python {py}")
        if demand.in_type(g, n, i)[0] != py:
            bad.append(f"in {g}/{n}:{i} demand rules {demand.in_type(g, n, i)[0]} python {py}")
    return bad


def _graph_state(model: Model) -> list[Any]:
    return [
        (
            g.name,
            [
                (
                    n.name,
                    n.type,
                    list(n.inputs),
                    list(n.ctrl_inputs),
                    sorted((k, a.kind, repr(a.value)) for k, a in n.attrs.items()),
                    [(d.dtype, d.shape, sorted(d.attrs)) for d in n.input_desc + n.output_desc],
                )
                for n in g.nodes.values()
            ],
        )
        for g in model.graphs
    ]


def _decisions(ds: list) -> list[tuple]:
    return [
        (d.action, d.graph, d.src, d.src_out, d.dst, d.dst_in, d.out_type, d.in_type, d.result, d.identity) for d in ds
    ]


def _pass_disagreement(model: Model) -> str | None:
    """Run the rule-driven pass and the replay on copies of ``model``; describe the first difference."""
    a, b = copy.deepcopy(model), copy.deepcopy(model)
    ra = rb = None
    ea = eb = None
    try:
        ra = handle_memory_rw_conflict(a)
    except AnchorlogError as err:
        ea = str(err)
    try:
        rb = rw_replay.handle_memory_rw_conflict(b)
    except AnchorlogError as err:
        eb = str(err)
    if (ea is None) != (eb is None):
        return f"rules failed: {ea}; replay failed: {eb}"
    if ra is not None and rb is not None:
        if _decisions(ra.decisions) != _decisions(rb.decisions):
            return f"decisions differ:\nrules  {_decisions(ra.decisions)}\nreplay {_decisions(rb.decisions)}"
        if ra.warnings != rb.warnings:
            return f"warnings differ: {ra.warnings} vs {rb.warnings}"
    if _graph_state(a) != _graph_state(b):
        return "graphs differ after the pass"
    return None


def _check(model: Model) -> None:
    assert _type_disagreements(model) == []
    assert _pass_disagreement(model) is None


@pytest.mark.skipif(not CASES, reason="../shared/conformance is absent")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.parent.name)
def test_rules_match_replay_on_conformance_model(path: Path) -> None:
    _check(read_model(path))


@pytest.mark.skipif(not REAL, reason="../shared/real-graphs is absent")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_rules_match_replay_on_real_dump(path: Path) -> None:
    _check(read_model(path))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rules_match_replay_on_generated_decoder(seed: int) -> None:
    _check(generate_transformer(nodes=600, seed=seed))

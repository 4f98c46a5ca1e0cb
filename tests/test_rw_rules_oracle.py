"""rw_types.dl against the Python replay of GE's RW-type functions (``RWTypes``), anchor by anchor.

Every input and output anchor of every node: the rule relations ``in_rw`` / ``out_rw`` must give exactly the
type the Python replay of GE's GetInputRWTypeByIndex / GetOutputRWTypeByIndex gives after GE's
InitRWConflictCheck (refs and subgraphs marked). Models: every conformance case (skipped when ../shared is
absent), the real GE dumps, generated decoders."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest

from anchorlog.analysis.rw_conflict import RWTypes, rw_types_datalog
from anchorlog.errors import AnchorlogError
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
REAL = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []


def _disagreements(model: Model) -> list[str]:
    """Anchors where the rules and the Python replay differ (empty when they agree)."""
    res = rw_types_datalog(model)
    rule_out = {(g, n, o): t for g, n, o, t in res.rows("out_rw")}
    rule_in = {(g, n, i): t for g, n, i, t in res.rows("in_rw")}
    work = copy.deepcopy(model)
    try:
        rw = RWTypes.init_rw_conflict_check(work)
    except AnchorlogError:
        pytest.skip("GE's InitRWConflictCheck fails on this model (the pass only warns)")
    outs_by_node: dict[tuple[str, str], list[int]] = {}
    for gg, nn, o in rule_out:
        outs_by_node.setdefault((gg, nn), []).append(o)
    bad: list[str] = []
    for g in model.graphs:
        wg = work.graph(g.name)
        for n in g.nodes.values():
            wn = wg.nodes[n.name]
            outs = outs_by_node.get((g.name, n.name), ())
            for o in sorted(outs):
                py = rw.output_type(wg, wn, o)[0]
                if py != rule_out[(g.name, n.name, o)]:
                    bad.append(f"out {g.name}/{n.name}:{o} rules {rule_out[(g.name, n.name, o)]} python {py}")
            ins = {i for i, a in enumerate(n.inputs) if a is not None}
            for i in sorted(ins):
                py = rw.input_type(wg, wn, i)[0]
                rt = rule_in.get((g.name, n.name, i))
                if py != rt:
                    bad.append(f"in {g.name}/{n.name}:{i} rules {rt} python {py}")
    return bad


@pytest.mark.skipif(not CASES, reason="../shared/conformance is absent")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.parent.name)
def test_rules_match_python_types_on_conformance_model(path: Path) -> None:
    assert _disagreements(read_model(path)) == []


@pytest.mark.skipif(not REAL, reason="../shared/real-graphs is absent")
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_rules_match_python_types_on_real_dump(path: Path) -> None:
    assert _disagreements(read_model(path)) == []


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_rules_match_python_types_on_generated_decoder(seed: int) -> None:
    assert _disagreements(generate_transformer(nodes=600, seed=seed)) == []

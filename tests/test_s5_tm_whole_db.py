"""``TMRules.derive`` runs tensor_move.dl over the whole fact database when the demand is large (the first
derivation) and over a slice of it otherwise: the slice is a demand restriction, so both must give the same rows,
and the pass the same report."""

from __future__ import annotations

import json

import pytest

from anchorlog.analysis import tensor_move as tmmod
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.shared_paths import SHARED

TM_CASES = sorted((SHARED / "conformance" / "cases").glob("tm_*/model.pbtxt")) if SHARED.is_dir() else []


def _facts(model: Model, threshold: int, monkeypatch: pytest.MonkeyPatch, options=None) -> dict:
    monkeypatch.setattr(tmmod.TMRules, "whole_db_seed", threshold)
    out = tmmod.derive_facts(model, options=options)
    return {rel: sorted(map(tuple, rows)) for rel, rows in out.items()}


def _report(model: Model, threshold: int, monkeypatch: pytest.MonkeyPatch, options=None) -> str:
    monkeypatch.setattr(tmmod.TMRules, "whole_db_seed", threshold)
    section = tmmod.run_tensor_move_delete(model, dict(options or {}))
    return json.dumps({k: v for k, v in section.items() if k != "timings"}, sort_keys=True, default=str)


@pytest.mark.parametrize("options", [{}, {"ge.exec.inputReuseMemIndexes": "0"}])
def test_whole_database_and_slice_give_the_same_rows(monkeypatch: pytest.MonkeyPatch, options) -> None:
    m = generate_transformer(nodes=2500, seed=4, tensor_move_share=0.07)
    slices: list = []
    real = tmmod.TMRules._slice

    def spy(self, *a, **k):
        slices.append(1)
        return real(self, *a, **k)

    monkeypatch.setattr(tmmod.TMRules, "_slice", spy)
    whole = _facts(m, 0, monkeypatch, options)
    assert not slices  # really the whole database
    sliced = _facts(m, 10**9, monkeypatch, options)
    assert slices
    assert whole == sliced
    assert whole["tm_rw_check"] and whole["tm_sibling"] and whole["tm_path"]


def test_pass_reports_match(monkeypatch: pytest.MonkeyPatch) -> None:
    def make() -> Model:
        return generate_transformer(nodes=2500, seed=5, tensor_move_share=0.07)

    assert _report(make(), 0, monkeypatch) == _report(make(), 10**9, monkeypatch)


@pytest.mark.skipif(not TM_CASES, reason="../shared/conformance is not available")
def test_conformance_tm_models_same_rows(monkeypatch: pytest.MonkeyPatch) -> None:
    for p in TM_CASES:
        try:
            whole = _facts(read_model(p), 0, monkeypatch)
        except Exception as err:  # noqa: BLE001 - both paths must fail alike
            with pytest.raises(type(err)):
                _facts(read_model(p), 10**9, monkeypatch)
            continue
        assert whole == _facts(read_model(p), 10**9, monkeypatch), p

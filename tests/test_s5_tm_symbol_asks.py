"""tensor-move-delete asks the symbol table only for the TensorMoves that can reach Rule 5
(``TensorMoveDecider._symbol_asks``): those the first derivation keeps for good before Rule 5 (reserved attribute,
multi-branch source, special source read by a NetOutput / ref / wrapper successor that is no TensorMove) are left
out. The pass must decide exactly as with every TensorMove asked (the old path), and every TensorMove left out must
end up kept before Rule 5."""

from __future__ import annotations

import json

import pytest

from anchorlog.analysis import tensor_move as tmmod
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.shared_paths import SHARED

TM_CASES = sorted((SHARED / "conformance" / "cases").glob("tm_*/model.pbtxt")) if SHARED.is_dir() else []


def _report(model: Model, options: dict[str, str] | None = None) -> str:
    section = tmmod.run_tensor_move_delete(model, dict(options or {}), engine="sqlite")
    return json.dumps({k: v for k, v in section.items() if k != "timings"}, sort_keys=True, default=str)


def _with_every_tm_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(tmmod.TensorMoveDecider, "_symbol_asks", lambda self, seed: list(seed))


def _compare(monkeypatch: pytest.MonkeyPatch, make, options: dict[str, str] | None = None) -> dict:
    asked: list = []
    real = tmmod.TensorMoveDecider._symbol_asks

    def spy(self, seed):
        got = real(self, seed)
        asked.append((list(seed), got))
        return got

    with monkeypatch.context() as mp:
        mp.setattr(tmmod.TensorMoveDecider, "_symbol_asks", spy)
        new = _report(make(), options)
    with monkeypatch.context() as mp:
        _with_every_tm_asked(mp)
        old = _report(make(), options)
    assert new == old
    section = json.loads(new)
    if asked:
        seed, got = asked[0]
        left_out = {tm for _g, tm in seed} - {tm for _g, tm in got}
        for t in section.get("tensor_moves", []):
            if t["tensor_move"] in left_out:
                assert t["decision"] == "kept" and t["kept_by"] in ("reserved", "rule1-path"), t
        section["_left_out"] = left_out
    return section


def test_generated_decoder_same_decisions_and_fewer_asks(monkeypatch: pytest.MonkeyPatch) -> None:
    section = _compare(monkeypatch, lambda: generate_transformer(nodes=3000, seed=1, tensor_move_share=0.06))
    assert section["deleted"] > 0
    assert section["_left_out"], "the generated decoder has TensorMoves Rule 1 keeps for good"


@pytest.mark.parametrize("option", [{}, {"ge.exec.outputReuseInputMemIndexes": "0,0"}])
def test_generated_decoder_with_reuse_option(monkeypatch: pytest.MonkeyPatch, option: dict[str, str]) -> None:
    _compare(monkeypatch, lambda: generate_transformer(nodes=1500, seed=2, tensor_move_share=0.08), option)


def _special_source_with_tm_successor() -> Model:
    """A Const read by TensorMove a, whose only unsafe successor is another TensorMove b (a ref output via
    reuse_input, GE's IsRefFromInput): once b is deleted, a's successors change, so a must stay asked."""
    b = GraphBuilder("g", shape=(4,))
    b.chain(b.node("c", "Const", inputs=0, outputs=1), "a:TensorMove", "b:TensorMove", "r:ReLU")
    b.output("r")
    b.reuse_input("b", out_idx=0, in_idx=0)
    return b.build()


def test_special_source_kept_only_by_a_tensor_move_successor_stays_asked(monkeypatch: pytest.MonkeyPatch) -> None:
    got: list = []
    real = tmmod.TensorMoveDecider._symbol_asks

    def spy(self, seed):
        r = real(self, seed)
        got.append(r)
        return r

    monkeypatch.setattr(tmmod.TensorMoveDecider, "_symbol_asks", spy)
    _report(_special_source_with_tm_successor())
    assert got and ("g", "a") in got[0]
    monkeypatch.undo()
    _compare(monkeypatch, _special_source_with_tm_successor)


@pytest.mark.skipif(not TM_CASES, reason="../shared/conformance is not available")
def test_conformance_tm_models_same_decisions(monkeypatch: pytest.MonkeyPatch) -> None:
    for p in TM_CASES:
        case = json.loads((p.parent / "case.json").read_text())
        options = {k: str(v) for k, v in (case.get("options") or {}).items()} if isinstance(case, dict) else {}
        try:
            _compare(monkeypatch, lambda p=p: read_model(p), options)
        except Exception as err:  # a case whose pass fails must fail the same way on both paths
            with monkeypatch.context() as mp:
                _with_every_tm_asked(mp)
                with pytest.raises(type(err)) as old:
                    _report(read_model(p), options)
            assert str(old.value) == str(err), p

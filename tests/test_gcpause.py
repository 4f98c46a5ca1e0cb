"""The collector pause shared by the readers, the fact derivation and the passes."""

from __future__ import annotations

import gc

import pytest

from anchorlog.analysis import registry
from anchorlog.analysis.registry import PassContext, PassInfo, run_passes
from anchorlog.facts.builder import GraphBuilder
from anchorlog.gcpause import paused_gc, settle_young_objects


@pytest.fixture
def gc_enabled():
    was = gc.isenabled()
    gc.enable()
    yield
    if not was:
        gc.disable()


def test_paused_inside_and_restored_after(gc_enabled):
    with paused_gc():
        assert not gc.isenabled()
    assert gc.isenabled()


def test_restored_after_an_exception(gc_enabled):
    with pytest.raises(RuntimeError), paused_gc():
        raise RuntimeError("boom")
    assert gc.isenabled()


def test_a_caller_that_paused_it_keeps_it_paused(gc_enabled):
    gc.disable()
    with paused_gc(settle=True):
        assert not gc.isenabled()
    assert not gc.isenabled()


def test_settle_moves_survivors_out_of_the_young_generation(gc_enabled):
    gc.collect()
    with paused_gc(settle=True):
        kept = [[i] for i in range(5000)]  # containers the young generation would count
        assert gc.get_count()[0] >= 5000
    assert gc.get_count()[0] < 5000
    assert gc.get_freeze_count() == 0  # moved to the oldest generation, not left frozen
    assert gc.is_tracked(kept[0])


def test_settle_leaves_a_program_s_frozen_objects_frozen(gc_enabled):
    gc.collect()
    gc.freeze()
    try:
        frozen = gc.get_freeze_count()
        settle_young_objects()
        assert gc.get_freeze_count() == frozen
    finally:
        gc.unfreeze()


def test_run_passes_keeps_the_collector_paused_across_the_list(gc_enabled, monkeypatch):
    seen: list[bool] = []

    def probe(model, ctx):
        seen.append(gc.isenabled())
        return {}

    monkeypatch.setitem(registry.PASSES, "probe-a", PassInfo("probe-a", probe, "test probe"))
    monkeypatch.setitem(registry.PASSES, "probe-b", PassInfo("probe-b", probe, "test probe"))
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU", "o:NetOutput")
    report = run_passes(b.build(), ["probe-a", "probe-b"], PassContext())
    assert seen == [False, False]
    assert gc.isenabled()
    assert [p["pass"] for p in report["passes"]] == ["probe-a", "probe-b"]

"""``deferred_placement``'s splice for few anchors (``rewrite._settle_few``): the op list, edges and touched names
it leaves are exactly those of the one-by-one insertions and of the general walk (``_FEW_ANCHORS = 0``), with
insertions next to earlier Identities, nodes appended meanwhile, and removals (which take the general walk)."""

from __future__ import annotations

import copy
import random

import pytest

from anchorlog.facts.graph import Graph
from anchorlog.runtime import rewrite
from anchorlog.runtime.rewrite import deferred_placement
from tests import test_rewrite_deferred as deferred_tests
from tests.test_rewrite_deferred import _chain_model, _edits, _state


def _few_edits(g: Graph, rng: random.Random, steps: int, removals: bool) -> None:
    """``_edits`` (Identities before/after anchors, nodes appended meanwhile), its removals only with
    ``removals``."""
    if removals:
        _edits(g, rng, steps)
        return
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(deferred_tests, "isolate_and_delete", lambda *args, **kwargs: None)
        _edits(g, rng, steps)


@pytest.mark.parametrize("seed", range(40))
def test_few_anchor_splice_equals_one_by_one_and_general_walk(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = random.Random(seed)
    steps = rng.randint(1, 10)
    removals = rng.random() < 0.3
    m = _chain_model(rng.randint(3, 25))
    one_by_one, spliced, general = copy.deepcopy(m), copy.deepcopy(m), copy.deepcopy(m)
    for x in (one_by_one, spliced, general):
        x.root.consumers("d", 0)
    _few_edits(one_by_one.root, random.Random(seed), steps, removals)
    touched = []
    for model, few in ((spliced, rewrite._FEW_ANCHORS), (general, 0)):
        monkeypatch.setattr(rewrite, "_FEW_ANCHORS", few)
        model.root.touched.clear()
        with deferred_placement(model.graphs):
            _few_edits(model.root, random.Random(seed), steps, removals)
            model.root.touched.clear()  # a fact sync inside the block: moved nodes are touched again after it
        touched.append(set(model.root.touched))
    assert _state(spliced.root) == _state(one_by_one.root) == _state(general.root)
    assert touched[0] == touched[1]


def test_splice_is_taken_without_removals(monkeypatch: pytest.MonkeyPatch) -> None:
    taken: list[bool] = []
    real = rewrite._settle_few

    def spy(*args, **kwargs):  # type: ignore[no-untyped-def]
        out = real(*args, **kwargs)
        taken.append(out)
        return out

    monkeypatch.setattr(rewrite, "_settle_few", spy)
    m = _chain_model(10)
    with deferred_placement(m.graphs):
        _few_edits(m.root, random.Random(7), 5, removals=False)
    assert taken == [True]

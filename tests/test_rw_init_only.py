"""``RWTypes.init(init_only=True)`` (what tensor-move-delete runs: GE's InitRWConflictCheck without the rw-conflict
walk's facts) reads only :data:`anchorlog.analysis.rw_conflict.INIT_OUTPUTS` from the rules. Its facts must equal
those fields of a full evaluation, and the initialisation must edit the graph exactly as the full one does (same
ref marks, same Identities, same primed caches). On every rw_/tm_/innerid_ conformance model and a generated
decoder with subgraphs."""

from __future__ import annotations

from pathlib import Path

import pytest

from anchorlog.analysis.registry import PassContext
from anchorlog.analysis.rw_conflict import RWTypes
from anchorlog.facts.ge_io import read_model, write_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.shared_paths import SHARED

CASES = (
    sorted(
        p
        for p in (SHARED / "conformance" / "cases").glob("*/model.pbtxt")
        if p.parent.name.startswith(("rw_", "tm_", "innerid_"))
    )
    if SHARED.is_dir()
    else []
)
FIELDS = ("refs", "marked", "sub_identity", "data_error", "netout_error", "cache_t0", "cache_in")


def _text(m: Model, tmp: Path) -> str:
    p = tmp / "m.pbtxt"
    write_model(m, p)
    return p.read_text()


def assert_init_only_equal(load, tmp: Path) -> None:
    full_m, part_m = load(), load()
    full_f = RWTypes(full_m, PassContext(options={}, engine="sqlite")).evaluate()
    part_f = RWTypes(part_m, PassContext(options={}, engine="sqlite")).evaluate(init_only=True)
    for f in FIELDS:
        assert getattr(part_f, f) == getattr(full_f, f), f
    # the initialisation itself: same graph edits and caches
    full = RWTypes.init_rw_conflict_check(full_m, PassContext(options={}, engine="sqlite"))
    part = RWTypes.init_rw_conflict_check(part_m, PassContext(options={}, engine="sqlite"), init_only=True)
    assert part._cache == full._cache  # noqa: SLF001 - the primed caches are what the option changes
    assert _text(part_m, tmp) == _text(full_m, tmp)


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_init_only_equals_full_init_on_conformance_models(tmp_path: Path) -> None:
    for p in CASES:
        assert_init_only_equal(lambda p=p: read_model(p), tmp_path)


def test_init_only_equals_full_init_on_a_generated_decoder(tmp_path: Path) -> None:
    assert_init_only_equal(lambda: generate_transformer(nodes=2000, seed=1, tensor_move_share=0.06), tmp_path)

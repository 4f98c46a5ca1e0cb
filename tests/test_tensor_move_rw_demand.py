"""tensor_move.dl asks rw_types.dl's demand-driven part for the RW types it reads (rwc_ask_out / rwc_ask_in ->
rwd_out_t / rwd_in_t) instead of typing every anchor of its slice (out_rw / in_rw). The two must give the same
type for every asked anchor, primed and unprimed (the unprimed rules of the pass: no ref relations, a wrapper input
reads kReadOnly, a wrapper output goes by fan-out). Checked on every tm_/innerid_ conformance model, the real GE
dumps and generated decoders with subgraphs."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from anchorlog.analysis.rw_conflict import io_name_rows
from anchorlog.analysis.tensor_move import TM_DL
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = (
    sorted(
        p
        for p in (SHARED / "conformance" / "cases").glob("*/model.pbtxt")
        if p.parent.name.startswith(("tm_", "innerid_"))
    )
    if SHARED.is_dir()
    else []
)
REAL = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []

# the old formulation (types of every anchor, then restricted to the asked ones) next to the new one
COMPARE = """
.include "tensor_move.dl"
.decl asked_in(g: symbol, n: symbol, i: number)
.output asked_in
asked_in(G, N, I) :- rwc_ask_in(G, N, I).
.decl asked_out(g: symbol, n: symbol, o: number)
.output asked_out
asked_out(G, N, O) :- rwc_ask_out(G, N, O).
.decl new_in(g: symbol, n: symbol, i: number, t: symbol)
.output new_in
new_in(G, N, I, T) :- rwc_ask_in(G, N, I), tm_in_type(G, N, I, T).
.decl new_out(g: symbol, n: symbol, o: number, t: symbol)
.output new_out
new_out(G, N, O, T) :- rwc_ask_out(G, N, O), tm_out_type(G, N, O, T).
.decl old_in(g: symbol, n: symbol, i: number, t: symbol)
.output old_in
old_in(G, N, I, T) :- rwc_ask_in(G, N, I), in_rw(G, N, I, T), !rw_unprimed(1).
old_in(G, N, I, T) :- rwc_ask_in(G, N, I), rw_unprimed(1), base_in(G, N, I, T).
old_in(G, N, I, "kReadOnly") :- rwc_ask_in(G, N, I), rw_unprimed(1), wrapper_in(G, N, I).
.decl old_out(g: symbol, n: symbol, o: number, t: symbol)
.output old_out
old_out(G, N, O, T) :- rwc_ask_out(G, N, O), out_rw(G, N, O, T), !rw_unprimed(1).
old_out(G, N, O, T) :- rwc_ask_out(G, N, O), rw_unprimed(1), out_rw(G, N, O, T), !wrapper(G, N).
old_out(G, N, O, "kSoftRead") :- rwc_ask_out(G, N, O), rw_unprimed(1), wrapper(G, N), is_type(G, N, "while"),
                                 out_port(G, N, O).
old_out(G, N, O, "kReadOnly") :- rwc_ask_out(G, N, O), rw_unprimed(1), wrapper(G, N), node(G, N, T),
                                 !op_class(T, "while"), fanout(G, N, O, C), C > 1.
old_out(G, N, O, "kSoftRead") :- rwc_ask_out(G, N, O), rw_unprimed(1), wrapper(G, N), node(G, N, T),
                                 !op_class(T, "while"), fanout(G, N, O, C), C <= 1.
"""


@cache
def _program() -> Program:
    return Program.from_text(COMPARE, base_dir=TM_DL.parent)


def _compare(model: Model, *, primed: bool, reuse: list[int] | None = None) -> int:
    """Run both formulations over ``model``'s facts; assert they agree; returns the number of asked anchors."""
    prog = _program()
    seed = [(g.name, n.name) for g in model.graphs for n in g.nodes.values() if n.type == "TensorMove"]
    extra = {
        "tm_seed": seed,
        "io_name": io_name_rows(model) if primed else [],
        "rw_unprimed": [] if primed else [(1,)],
        "opt_reuse_pair": [],
        "opt_reuse_index": [(i,) for i in reuse or []],
    }
    res = prog.run(FactDB.from_model(model), engine="sqlite", extra=extra)
    assert sorted(res.rows("new_in")) == sorted(res.rows("old_in"))
    assert sorted(res.rows("new_out")) == sorted(res.rows("old_out"))
    # every asked anchor is typed (an input anchor fed by an edge always has a type)
    typed_in = {r[:3] for r in res.rows("new_in")}
    assert all(a in typed_in for a in res.rows("asked_in"))
    return len(res.rows("asked_in")) + len(res.rows("asked_out"))


@pytest.mark.skipif(not CASES, reason="../shared/conformance is absent")
@pytest.mark.parametrize("path", CASES, ids=lambda p: p.parent.name)
def test_asked_types_equal_full_types_on_conformance_model(path: Path) -> None:
    for primed in (True, False):
        _compare(read_model(path), primed=primed, reuse=[0, 1, 2, 3])


@pytest.mark.skipif(not REAL, reason="../shared/real-graphs is absent")
def test_asked_types_equal_full_types_on_real_dumps() -> None:
    for path in REAL:
        _compare(read_model(path), primed=True)


def test_asked_types_equal_full_types_on_generated_decoders() -> None:
    # PartitionedCall subgraphs, an If, rope tables read by many nodes (asked only with the reuse option)
    for seed in (1, 2):
        model = generate_transformer(nodes=1500, seed=seed, tensor_move_share=0.2, partition_every=2)
        for primed in (True, False):
            assert _compare(model, primed=primed, reuse=list(range(8))) > 0


def _facts_with_full_slice(model: Model, options: dict[str, str]) -> dict[str, list[tuple]]:
    """derive_facts with every path entry's readers in the slice (the slice before tm_sib_ask restricted it)."""
    from anchorlog.analysis import tensor_move as tmmod

    orig = tmmod.TMRules._closure
    tmmod.TMRules._closure = lambda self, core, readers_of=None: orig(self, core, None)
    try:
        return tmmod.derive_facts(model, options=options)
    finally:
        tmmod.TMRules._closure = orig


def _same_facts(model_of, options: dict[str, str]) -> None:
    from anchorlog.analysis.tensor_move import derive_facts

    restricted = derive_facts(model_of(), options=options)
    full = _facts_with_full_slice(model_of(), options)
    for rel in full:
        assert sorted(restricted[rel], key=repr) == sorted(full[rel], key=repr), rel


def test_slice_without_readers_of_kept_tensor_moves_gives_the_same_facts() -> None:
    # the slice holds the readers of a path entry only for TensorMoves Rules 1-2 may let through (tm_sib_ask):
    # every relation of the program is the same as with all readers in it
    for options in ({}, {"ge.exec.inputReuseMemIndexes": "0,1,2,3,4,5,6,7"}):
        _same_facts(lambda: generate_transformer(nodes=1500, seed=1, tensor_move_share=0.2, partition_every=2), options)


@pytest.mark.skipif(not CASES, reason="../shared/conformance is absent")
def test_slice_restriction_on_conformance_models() -> None:
    for path in CASES:
        _same_facts(lambda path=path: read_model(path), {"ge.exec.inputReuseMemIndexes": "0"})

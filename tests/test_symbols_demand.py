"""symbols.dl's demand-driven relations (ds_*: the founders of asked anchors, the anchors of asked founders, the
unions, GE's events and the founder count, without numbering every anchor) equal the whole-table relations
restricted to what was asked: asking for every anchor and every founder gives the whole table back, asking for
half of them gives exactly that half. On every conformance model (each graph as mapped graph) and on random
builder graphs. layout.dl reads these relations."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOLS_DL
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program

try:  # tests/ is on sys.path in pytest's default import mode
    from test_symbols_oracle import builder_graphs
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.test_symbols_oracle import builder_graphs

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []

# ask_every(k): ask for the anchors of every k-th node of GE's order (k = 1: all) and for those founders
ASKING = """
.include "symbols.dl"
.decl ask_every(k: number)
.input ask_every
sym_ask_in(G, N, I) :- ask_every(K), in_aid(G, N, I, A), (A / 1048576) % K = 0.
sym_ask_out(G, N, I) :- ask_every(K), out_aid(G, N, I, A), (A / 1048576) % K = 0.
sym_ask_members(R) :- ask_every(K), sym_root(R), (R / 1048576) % K = 0.
.decl asked(a: number)
asked(A) :- ask_every(K), in_aid(_, _, _, A), (A / 1048576) % K = 0.
asked(A) :- ask_every(K), out_aid(_, _, _, A), (A / 1048576) % K = 0.
.output asked
.decl asked_root_count(n: number)
asked_root_count(N) :- N = count : { sym_root(_) }.
.output asked_root_count
"""
WHOLE = [
    "tree_root",
    "sym_root",
    "root_reach",
    "sg_out_union",
    "merge_peer",
    "nextiter_out",
    "phantom_out",
    "late_link",
    "in_aid",
    "out_aid",
]
DEMAND = [
    "ds_tree",
    "ds_root_reach",
    "ds_sg_out_union",
    "ds_merge_peer",
    "ds_nextiter_out",
    "ds_phantom_out",
    "ds_late_link",
    "ds_member_in",
    "ds_member_out",
    "ds_root_count",
    "ds_in_aid",
    "ds_out_aid",
]


def _program() -> Program:
    return Program.from_text(ASKING, base_dir=SYMBOLS_DL.parent)


def assert_demand_equal(m: Model, prog: Program) -> None:
    db = FactDB.from_model(m)
    for g in m.graphs:
        top = None if g is m.root else g.name
        for k in (1, 2):
            extra = {"node_order": node_order_rows(m, g), "sym_top": [(top,)] if top else [], "ask_every": [(k,)]}
            res = prog.run(db, extra=extra, outputs=WHOLE + DEMAND + ["asked", "asked_root_count"])
            where = (m.name, g.name, k)
            asked = {a for (a,) in res.set("asked")}
            tree = res.set("tree_root")
            ds_tree = res.set("ds_tree")
            # every asked anchor with a symbol has its founder(s), and every founder found is the whole table's
            assert {(a, r) for a, r in tree if a in asked} == {(a, r) for a, r in ds_tree if a in asked}, where
            assert ds_tree <= tree, where
            # the anchors of the asked founders, by name
            roots = {r for (r,) in res.set("sym_root") if (r >> 20) % k == 0}
            name_in = {a: (gn, n, i) for gn, n, i, a in res.set("in_aid")}
            name_out = {a: (gn, n, i) for gn, n, i, a in res.set("out_aid")}
            assert res.set("ds_member_in") == {(r, *name_in[a], a) for a, r in tree if r in roots and a in name_in}
            assert res.set("ds_member_out") == {(r, *name_out[a], a) for a, r in tree if r in roots and a in name_out}
            assert res.set("ds_in_aid") <= res.set("in_aid") and res.set("ds_out_aid") <= res.set("out_aid"), where
            # unions, classes and GE's events: exactly the whole table's
            for whole, part in (
                ("root_reach", "ds_root_reach"),
                ("sg_out_union", "ds_sg_out_union"),
                ("merge_peer", "ds_merge_peer"),
                ("nextiter_out", "ds_nextiter_out"),
                ("phantom_out", "ds_phantom_out"),
                ("late_link", "ds_late_link"),
            ):
                assert res.set(whole) == res.set(part), (*where, whole)
            assert res.set("ds_root_count") == res.set("asked_root_count"), where


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_demand_equals_whole_table_on_conformance_models() -> None:
    prog = _program()
    for p in CASES:
        assert_demand_equal(read_model(p), prog)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder_graphs())
def test_demand_equals_whole_table_on_random_graphs(m: Model) -> None:
    assert_demand_equal(m, _program())

"""symbols.dl's founders (tree_root, sym_root), computed with the recursion restricted to chains through an xlink,
equal the plain definition: every anchor without a link founds a symbol, and every linked anchor's founder is
that of the anchor it links to (a recursion over every anchor). layout.dl reads tree_root directly, so the
relation itself is compared, on every conformance model (each graph as mapped graph) and on random graphs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOLS_DL, symbol_inputs
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

# the definition before the restriction: founders over every anchor, the recursion over every link (the whole
# table: every anchor asked, so the ds_* relations number every anchor and hold every link)
PLAIN_DEFINITION = """
.include "symbols.dl"
.decl anchor(a: number)
anchor(A) :- ds_in_aid(G, N, _, A), !special_node(G, N).
anchor(A) :- ds_special_member_in(A).
anchor(A) :- ds_out_aid(_, _, _, A).
.decl sym_link(a: number, b: number)
sym_link(A, B) :- ds_plain_link(A, B).
sym_link(A, B) :- ds_xlink(A, B).
.decl linked(a: number)
linked(A) :- sym_link(A, _).
.decl plain_sym_root(a: number)
plain_sym_root(A) :- anchor(A), !linked(A).
.output plain_sym_root
.decl plain_tree_root(a: number, r: number)
plain_tree_root(A, A) :- plain_sym_root(A).
plain_tree_root(A, R) :- sym_link(A, B), plain_tree_root(B, R).
.output plain_tree_root
.output tree_root
.output sym_root
.output tree_link
"""


def _program() -> Program:
    return Program.from_text(PLAIN_DEFINITION, base_dir=SYMBOLS_DL.parent)


def assert_founders_equal(m: Model, prog: Program) -> None:
    db = FactDB.from_model(m)
    for g in m.graphs:
        top = None if g is m.root else g.name
        extra = symbol_inputs(node_order_rows(m, g), top, whole=True)
        res = prog.run(
            db, extra=extra, outputs=["plain_sym_root", "plain_tree_root", "tree_root", "sym_root", "tree_link"]
        )
        tree = res.set("tree_root")
        assert tree == res.set("plain_tree_root"), (m.name, g.name)
        assert res.set("sym_root") == res.set("plain_sym_root"), (m.name, g.name)
        # what the table's assembly reads: tree_root without the founders' own rows
        assert res.set("tree_link") == {(a, r) for a, r in tree if a != r}, (m.name, g.name)


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_founders_equal_plain_definition_on_conformance_models() -> None:
    prog = _program()
    for p in CASES:
        assert_founders_equal(read_model(p), prog)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder_graphs())
def test_founders_equal_plain_definition_on_random_graphs(m: Model) -> None:
    assert_founders_equal(m, _program())

"""The rules' symbol table (symbols.dl + anchorlog.analysis.symbols) equals GE's procedure replayed step by step
(tests/oracles/ge_refmap.py): same symbol names, same anchor order inside each symbol, same phantom entries,
on every conformance model, every real GE dump and hypothesis-generated builder graphs."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.analysis.symbols import symbol_table_datalog, symbol_table_rules
from anchorlog.errors import AnchorlogError
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB

try:  # tests/ is on sys.path in pytest's default import mode
    from oracles.ge_refmap import oracle_table
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.oracles.ge_refmap import oracle_table

SHARED = Path(__file__).resolve().parents[2] / "shared"
CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
DUMPS = sorted((SHARED / "real-graphs").glob("*.txt")) if SHARED.is_dir() else []


def assert_rules_equal_oracle(m: Model) -> None:
    try:
        oa, os_ = oracle_table(m)
    except AnchorlogError:
        with pytest.raises(AnchorlogError):  # GE's mapping fails: so must the rules'
            symbol_table_rules(m)
        return
    st_ = symbol_table_rules(m)
    assert st_.symbol_to_anchors == os_
    assert st_.anchor_to_symbol == oa


@pytest.mark.skipif(not CASES, reason="../shared/conformance is not available")
def test_rules_equal_oracle_on_every_conformance_model() -> None:
    for p in CASES:
        assert_rules_equal_oracle(read_model(p))


@pytest.mark.skipif(not DUMPS, reason="../shared/real-graphs is not available")
def test_rules_equal_oracle_on_real_dumps() -> None:
    for p in DUMPS:
        m = read_model(p)
        assert_rules_equal_oracle(m)
        # and from a fact database alone (GE's order rebuilt from the node and edge rows)
        oa, os_ = oracle_table(m)
        st_ = symbol_table_datalog(FactDB.from_model(m))
        assert st_.symbol_to_anchors == os_


@st.composite
def builder_graphs(draw: st.DrawFn) -> Model:
    """Random DAGs of plain, pass-through (Reshape, reuse_input), RefData-aliasing, Merge and subgraph nodes,
    with fan-out, unconnected inputs and control edges (which change GE's DFS order)."""
    b = GraphBuilder("g", shape=(2,))
    names: list[str] = []
    n = draw(st.integers(2, 12))
    for i in range(n):
        kind = draw(st.sampled_from(["Data", "ReLU", "Add", "Reshape", "Reuse", "Merge", "Call", "RefData"]))
        name = f"n{i}"
        if kind == "Data" or not names:
            b.node(name, "Data", inputs=0, outputs=1)
        elif kind == "RefData":
            b.node(name, "RefData", inputs=0, outputs=1)
        elif kind in ("ReLU", "Reshape", "Reuse"):
            b.node(name, "Reshape" if kind == "Reshape" else "ReLU", inputs=1, outputs=1)
            if draw(st.booleans()):
                b.edge(draw(st.sampled_from(names)), 0, name, 0)
            if kind == "Reuse":
                b.reuse_input(name, 0, 0)
        elif kind in ("Add", "Merge"):
            b.node(name, kind, inputs=2, outputs=1)
            for k in range(2):
                if draw(st.booleans()) or kind == "Merge":
                    b.edge(draw(st.sampled_from(names)), 0, name, k)
        else:  # a PartitionedCall whose subgraph passes its input through or computes a new value
            b.node(name, "PartitionedCall", inputs=1, outputs=1)
            b.edge(draw(st.sampled_from(names)), 0, name, 0)
            sub = b.subgraph(f"sub{i}", owner=name)
            sub.data(f"{name}_d", 0)
            if draw(st.booleans()):
                sub.output(f"{name}_d", 0)
            else:
                sub.chain(f"{name}_d", f"{name}_r:ReLU")
                sub.output(f"{name}_r", 0)
        if names and draw(st.booleans()):
            b.ctrl(draw(st.sampled_from(names)), name)
        if draw(st.integers(0, 5)) == 0 and kind not in ("RefData",):
            refs = [x for x in names if b.graph.nodes[x].type == "RefData"]
            if refs:
                b.out_attr(name, 0, "ref_var_src_var_name", draw(st.sampled_from(refs)))
        names.append(name)
    return b.build()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(builder_graphs())
def test_rules_equal_oracle_on_generated_graphs(m: Model) -> None:
    assert_rules_equal_oracle(m)

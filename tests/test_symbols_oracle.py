"""The rules' symbol table (symbols.dl + anchorlog.analysis.symbols) equals GE's procedure replayed step by step
(tests/oracles/ge_refmap.py): same symbol names, same anchor order inside each symbol, same phantom entries,
on every conformance model, every real GE dump and hypothesis-generated builder graphs."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.analysis.symbols import symbol_table_datalog, symbol_table_rules
from anchorlog.errors import AnchorlogError
from anchorlog.facts.builder import Edge, GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.graph import Attr, Model
from anchorlog.facts.relations import FactDB
from tests.shared_paths import SHARED

try:  # tests/ is on sys.path in pytest's default import mode
    from oracles.ge_refmap import oracle_table
except ImportError:  # pragma: no cover - another import mode, run from the project root
    from tests.oracles.ge_refmap import oracle_table

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


def _unknown_shape_wrappers() -> Model:
    """A root PartitionedCall marked ``_is_unknown_shape`` (its subgraph's Data / NetOutput are plain nodes for
    GE, §1.4), one unmarked, and a marked one nested in a subgraph (not exempt: its owner graph is no root)."""
    b = GraphBuilder("wrappers")
    b.chain("x:Data", "pc_unknown:PartitionedCall", "pc_known:PartitionedCall", "out:NetOutput")
    b.attr("pc_unknown", "_is_unknown_shape", True)
    bodies = {}
    for owner, sub in (("pc_unknown", "unknown_body"), ("pc_known", "known_body")):
        g = bodies[sub] = b.subgraph(sub, owner=owner)
        g.data(f"{sub}_in", 0)
        g.chain(f"{sub}_in", f"{sub}_relu:ReLU")
        g.output(f"{sub}_relu", 0)
    inner = bodies["known_body"]
    inner.chain("known_body_relu", "inner_pc:PartitionedCall")
    inner.attr("inner_pc", "_is_unknown_shape", True)
    deep = inner.subgraph("deep_body", owner="inner_pc")
    deep.data("deep_in", 0)
    deep.chain("deep_in", "deep_relu:ReLU")
    deep.output("deep_relu", 0)
    return b.build()


def test_rules_equal_oracle_with_unknown_shape_wrappers() -> None:
    m = _unknown_shape_wrappers()
    assert_rules_equal_oracle(m)
    for g in m.graphs[1:]:  # mapped on each subgraph too (its own Data / NetOutput plain, nested ones joined)
        oa, os_ = oracle_table(m, g)
        st_ = symbol_table_rules(m, g)
        assert (st_.anchor_to_symbol, st_.symbol_to_anchors) == (oa, os_), g.name
    # the exemption is seen: the unknown-shape body's output has a symbol of its own, the known body's joins
    st_ = symbol_table_rules(m)
    a2s = st_.anchor_to_symbol
    assert a2s[("wrappers", "pc_unknown", "out", 0)] != a2s[("unknown_body", "unknown_body_relu", "out", 0)]
    assert a2s[("wrappers", "pc_known", "out", 0)] == a2s[("known_body", "known_body_relu", "out", 0)]


def test_rules_equal_oracle_with_merges_and_bare_data_like_ops() -> None:
    """Merge / StreamMerge (found through their types) and data-like ops without input descriptors (each keeps
    its input 0): the rules' table is GE's, on the root and mapped on a subgraph holding the same shapes."""
    b = GraphBuilder("merges")
    b.chain("aipp:AippData", "sm:StreamMerge", "relu:ReLU", "out:NetOutput")
    b.chain("ann:AnnData", Edge(0, 1), "sm")
    b.chain("ref:RefData", "m:Merge", "out")
    b.chain("x:Data", Edge(0, 1), "m")
    b.node("pc", "PartitionedCall", inputs=1, outputs=1)
    b.chain("relu", "pc")
    body = b.subgraph("body", owner="pc")
    body.data("body_in", 0)
    body.chain("body_in", "body_m:Merge", "body_relu:ReLU")
    body.chain("body_aipp:AippData", Edge(0, 1), "body_m")
    body.output("body_relu", 0)
    m = b.build()
    for g, name in (("merges", "aipp"), ("merges", "ann"), ("body", "body_aipp")):
        m.graph(g).nodes[name].input_desc = []  # bare: no input descriptor (GE still gives it input 0)
    assert_rules_equal_oracle(m)
    oa, os_ = oracle_table(m, m.graph("body"))
    st_ = symbol_table_rules(m, m.graph("body"))
    assert (st_.anchor_to_symbol, st_.symbol_to_anchors) == (oa, os_)
    # the Merges joined their inputs: one symbol for both inputs' producers
    a2s = st_.anchor_to_symbol
    assert a2s[("body", "body_in", "out", 0)] == a2s[("body", "body_aipp", "out", 0)]


def test_rules_equal_oracle_with_an_unknown_shape_wrapper_in_an_unknown_shape_subgraph() -> None:
    """A wrapper marked ``_is_unknown_shape`` inside a subgraph whose graph carries ``_graph_unknown_flag`` is
    exempt too (§1.4: its owner graph is unknown-shape): its body's Data / NetOutput stay plain nodes."""
    m = _unknown_shape_wrappers()
    m.graph("known_body").attrs["_graph_unknown_flag"] = Attr.of(True)
    assert_rules_equal_oracle(m)
    a2s = symbol_table_rules(m).anchor_to_symbol
    assert a2s[("known_body", "inner_pc", "out", 0)] != a2s[("deep_body", "deep_relu", "out", 0)]

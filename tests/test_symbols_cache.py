"""The symbol table per model state in a pass context (cached_symbol_table / cached_node_order), and the public
assembly (assemble_symbol_table) in both row shapes symbols.dl offers."""

from __future__ import annotations

from anchorlog.analysis.order import node_order_rows, topological_sorting
from anchorlog.analysis.registry import PassContext
from anchorlog.analysis.symbols import (
    SYMBOL_ROWS,
    SYMBOLS_DL,
    assemble_symbol_table,
    cached_node_order,
    cached_symbol_table,
    symbol_inputs,
    symbol_table,
    symbol_table_rules,
)
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model, Node
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program


def pass_through_model() -> Model:
    """A Reshape chain (output reuses input), fan-out, an unconnected input and a PartitionedCall whose
    subgraph passes its input through (subgraph Data and NetOutput joined to the parent: unions)."""
    b = GraphBuilder("g")
    b.chain("d:Data", "rs:Reshape", "r:ReLU")
    b.chain("rs", "r2:ReLU")
    b.node("add", "Add", inputs=2)
    b.edge("r", 0, "add", 0)
    b.node("call", "PartitionedCall", inputs=1, outputs=1)
    b.edge("add", 0, "call", 0)
    sub = b.subgraph("sub", owner="call")
    sub.data("sd", 0)
    sub.output("sd", 0)
    b.chain("call", "out:ReLU")
    return b.build()


def test_cached_table_equals_the_rules_and_is_computed_once() -> None:
    m = pass_through_model()
    ctx = PassContext()
    st = cached_symbol_table(m, ctx)
    fresh = symbol_table_rules(m)
    assert st.symbol_to_anchors == fresh.symbol_to_anchors and st.anchor_to_symbol == fresh.anchor_to_symbol
    assert cached_symbol_table(m, ctx) is st  # unchanged model: the same computation
    a2s, s2a = symbol_table(m, ctx=ctx)  # the pair form reads the same cache
    assert a2s is st.anchor_to_symbol and s2a is st.symbol_to_anchors
    assert cached_node_order(m, ctx) == node_order_rows(m)
    # a subgraph mapping is its own entry (GetRefMapping on the subgraph treats its Data/NetOutput as plain)
    sub = cached_symbol_table(m, ctx, "sub")
    assert sub is not st and sub.symbol_to_anchors == symbol_table_rules(m, "sub").symbol_to_anchors
    assert cached_symbol_table(m, ctx, "sub") is sub


def test_an_edit_means_a_new_table() -> None:
    m = pass_through_model()
    ctx = PassContext()
    st = cached_symbol_table(m, ctx)
    assert st.symbol_of(("g", "r2", "in", 0)) == "d_out_0"
    # r2 now reads r: a data edge moved, tracked by the IR
    g = m.root
    g.disconnect("r2", 0)
    g.connect("r", 0, "r2", 0)
    st2 = cached_symbol_table(m, ctx)
    assert st2 is not st
    assert st2.symbol_of(("g", "r2", "in", 0)) == "r_out_0"
    assert st2.symbol_to_anchors == symbol_table_rules(m).symbol_to_anchors
    # a new node (touched) and a new graph (structure) are edits too
    g.add_node(Node("extra", "ReLU"))
    st3 = cached_symbol_table(m, ctx)
    assert st3 is not st2 and ("g", "extra", "out", 0) not in st2.anchor_to_symbol
    assert st3.symbol_to_anchors == symbol_table_rules(m).symbol_to_anchors
    m.remove_graph("sub")
    m.root.nodes["call"].subgraph_names = []
    st4 = cached_symbol_table(m, ctx)
    assert st4 is not st3 and st4.symbol_to_anchors == symbol_table_rules(m).symbol_to_anchors


def test_a_topological_sort_renews_the_order() -> None:
    m = pass_through_model()
    ctx = PassContext()
    st = cached_symbol_table(m, ctx)
    order = cached_node_order(m, ctx)
    topological_sorting(m)  # GE's order is remembered from now on (same order for this sorted model)
    assert cached_node_order(m, ctx) is not order and cached_node_order(m, ctx) == node_order_rows(m)
    assert cached_symbol_table(m, ctx).symbol_to_anchors == st.symbol_to_anchors


def test_assembly_from_founder_pairs_and_from_named_rows_agree() -> None:
    m = pass_through_model()
    db = FactDB.from_model(m)
    order = node_order_rows(m)
    res = Program.from_file(SYMBOLS_DL).run(
        db,
        extra=symbol_inputs(order, whole=True),
        outputs=[*SYMBOL_ROWS.values(), "anchor_tree"],
    )
    by_pairs = assemble_symbol_table(res, "g", order=order)
    by_names = assemble_symbol_table(res, "g", relations={"tree": "anchor_tree"})
    assert by_pairs.symbol_to_anchors == by_names.symbol_to_anchors == symbol_table_rules(m).symbol_to_anchors
    assert by_pairs.anchor_to_symbol == by_names.anchor_to_symbol
    # the subgraph pass-through joined parent input and output: one symbol, named after the parent's producer
    assert by_pairs.same(("g", "add", "out", 0), ("g", "call", "out", 0))

"""layout-conflict on the architecture rule: rule-derived facts in the pipeline, option validators, the
environment note in the report, and the shared rewriter's multi-anchor insertion."""

from __future__ import annotations

import json

import pytest

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.layout_conflict import environment_influence, run
from anchorlog.analysis.layout_conflict.attributes import LayoutOptions
from anchorlog.analysis.layout_conflict.order import topological_sorting
from anchorlog.analysis.layout_conflict.refmap import get_ref_mapping
from anchorlog.analysis.layout_conflict.rules import run_layout_rules, table_rows
from anchorlog.analysis.layout_conflict.tables import ABSOLUTE_NO_CONFLICT_ROWS
from anchorlog.analysis.registry import PassContext
from anchorlog.cli import main
from anchorlog.facts import ge_io
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Node, TensorDesc
from anchorlog.facts.relations import ModelIndex
from anchorlog.runtime.rewrite import insert_node_before_anchors

try:  # the conflict-heavy builder of the rule tests (HCCL ops, Consts, continuous inputs, special memory types)
    from test_layout_rules import conflict_heavy_model
except ImportError:  # pragma: no cover
    from tests.test_layout_rules import conflict_heavy_model


def _const_to_netoutput():
    b = GraphBuilder("g")
    b.chain("k:Const", "out:NetOutput")
    return b.build()


def test_candidate_pairs_come_from_rules_on_shared_db():
    model = _const_to_netoutput()
    topological_sorting(model)
    ctx = PassContext()
    g = model.root
    facts, table, n_symbols = run_layout_rules(shared_facts(model, ctx), model, g, LayoutOptions())
    # the symbols come from symbols.dl in the same run; GE's table is assembled for the walked symbol only
    whole = get_ref_mapping(model, g, ModelIndex(model))
    assert n_symbols == len(whole.s2a) == 1
    assert {s: [a.name for a in v] for s, v in table.s2a.items()} == {"k_out_0": ["k_out_0", "out_in_0"]}
    assert facts.conflict_symbols == {"k_out_0"}
    assert facts.pairs["k_out_0"] == {frozenset((("g", "k", "out", 0), ("g", "out", "in", 0)))}
    assert facts.attrs[("g", "k", "out", 0)] == ["IMMUTABLE_ADDRESS_OUTPUT"]
    assert facts.attrs[("g", "out", "in", 0)] == ["USER_MEMORY_OUTPUT"]
    rep = run(model, ctx)
    assert [r["anchor"] for r in rep["identities"]] == ["out_in_0"]


def test_tables_are_one_source():
    rows = table_rows()
    assert len(rows["layout_abs_conflict_row"]) == 10
    assert len({frozenset(r[:2]) for r in rows["layout_checker_row"]}) == 55
    # the absolutely-no-conflict rows are not handed to the rules: none of them is a pair the rules look for
    # (an absolute-conflict or checker pair), so they could not remove a candidate
    assert "layout_no_conflict_row" not in rows
    active = {frozenset(r[:2]) for r in rows["layout_abs_conflict_row"] + rows["layout_checker_row"]}
    assert len(ABSOLUTE_NO_CONFLICT_ROWS) == 3
    assert not active & {frozenset((x.name, y.name)) for x, y in ABSOLUTE_NO_CONFLICT_ROWS}


def _optimize_const_to_netoutput(tmp_path, *extra: str) -> int:
    """``anchorlog optimize --passes layout-conflict`` on the Const -> NetOutput model (written to tmp_path)."""
    src = tmp_path / "m.pbtxt"
    ge_io.write_model(_const_to_netoutput(), str(src))
    out, report = str(tmp_path / "o.pbtxt"), str(tmp_path / "r.json")
    return main(["optimize", str(src), "--output", out, "--report", report, "--passes", "layout-conflict", *extra])


@pytest.mark.parametrize(
    "option",
    ["ge.featureBaseRefreshable=yes", "ge.buildGraphMode=bogus", "ge.exec.staticMemoryPolicy=7"],
)
def test_bad_layout_option_fails_before_any_pass(tmp_path, option, capsys):
    rc = _optimize_const_to_netoutput(tmp_path, "--option", option)
    assert rc == 2
    assert option.split("=")[0] in capsys.readouterr().err
    assert not (tmp_path / "o.pbtxt").exists()


def test_environment_recorded_when_it_changes_graph_info(tmp_path, monkeypatch):
    assert environment_influence({}, env={}) == {}
    note = environment_influence({}, env={"GE_USE_STATIC_MEMORY": "4"})
    assert note == {"GE_USE_STATIC_MEMORY": "4", "is_physical_memory_refreshable": True, "changed_graph_info": True}
    # the option alone already gives the same flag: the environment changed nothing
    note = environment_influence({"ge.exec.staticMemoryPolicy": "4"}, env={"GE_USE_STATIC_MEMORY": "4"})
    assert note["changed_graph_info"] is False
    monkeypatch.setenv("GE_USE_STATIC_MEMORY", "4")
    rc = _optimize_const_to_netoutput(tmp_path)
    assert rc == 0
    section = json.loads((tmp_path / "r.json").read_text())["passes"][0]
    assert section["environment"]["changed_graph_info"] is True


def test_insert_node_before_anchors_multi_input():
    b = GraphBuilder("g")
    b.chain("a:Data", "out:NetOutput")
    b.chain("c:Data", "out:NetOutput")
    model = b.build()
    g = model.root
    g.nodes["out"].set_attr("_user_stream_label", "s1")
    g.add_ctrl("a", "out")
    ident = Node("ident", "Identity", input_desc=[TensorDesc(), TensorDesc()], output_desc=[TensorDesc(), TensorDesc()])
    insert_node_before_anchors(g, ident, [("out", 0), ("out", 1)])
    assert g.nodes["out"].inputs == [("ident", 0), ("ident", 1)]
    assert g.nodes["ident"].inputs == [("a", 0), ("c", 0)]
    assert g.nodes["ident"].ctrl_inputs == ["a"] and "a" not in g.nodes["out"].ctrl_inputs
    assert g.nodes["ident"].attr("_user_stream_label") == "s1"


def test_walked_symbols_get_ge_names_and_order_across_a_subgraph_union():
    # a PartitionedCall body returning its Const: the body NetOutput's producer is unioned with the parent
    # output (GE UnionSymbolMapping), and that joined symbol meets the root NetOutput (USER_OUT x IMMUT)
    b = GraphBuilder("root")
    b.chain("d:Data", "pc:PartitionedCall", "out:NetOutput")
    body = b.subgraph("body", owner="pc")
    body.data("x", 0)
    body.chain("x", "r:ReLU")
    body.chain("k:Const", "body_out:NetOutput")
    body.output("k", 0, netoutput="body_out")
    model = b.build()
    topological_sorting(model)
    ctx = PassContext()
    facts, table, n_symbols = run_layout_rules(shared_facts(model, ctx), model, model.root, LayoutOptions())
    whole = get_ref_mapping(model, model.root, ModelIndex(model))
    assert n_symbols == len(whole.s2a)
    assert facts.conflict_symbols and facts.conflict_symbols <= set(whole.s2a)
    for s in facts.conflict_symbols:
        assert [a.name for a in table.s2a[s]] == [a.name for a in whole.s2a[s]]


# ---- checkers that cannot mark on a graph: their pairs are not walked (rules.run_layout_rules, dead_checkers)
def _graph_structure(model) -> list:
    """Every graph's nodes in stored order with their type, inputs, control inputs and id."""
    return [
        (g.name, [(n.name, n.type, list(n.inputs), list(n.ctrl_inputs), n.id) for n in g.nodes.values()])
        for g in model.graphs
    ]


def test_dead_checkers_are_the_unrefresh_checkers_without_refresh():
    from anchorlog.analysis.layout_conflict.attributes import GraphInfo
    from anchorlog.analysis.layout_conflict.checkers import dead_checkers

    assert dead_checkers(GraphInfo()) == {"unrefresh_in_checker", "unrefresh_out_checker"}
    assert dead_checkers(GraphInfo(is_feature_map_refreshable=True)) == set()
    assert dead_checkers(GraphInfo(is_physical_memory_refreshable=True)) == set()


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize(
    "options",
    [{}, {"ge.featureBaseRefreshable": "1"}, {"ge.exec.staticMemoryPolicy": "4"}],
    ids=["default", "fbr", "phys"],
)
def test_pass_without_dead_checker_pairs_equals_full_walk(seed, options, monkeypatch):
    """The pass with the dead checkers' pairs left out (its default) decides exactly as the walk over every
    candidate pair: same report (symbols_walked included) and same graph."""
    import anchorlog.analysis.layout_conflict as lc

    fast = conflict_heavy_model(30, seed)
    rep_fast = run(fast, PassContext(options=dict(options)))
    full = conflict_heavy_model(30, seed)
    monkeypatch.setattr(lc, "dead_checkers", lambda info: set())
    rep_full = run(full, PassContext(options=dict(options)))
    assert rep_fast == rep_full
    assert _graph_structure(fast) == _graph_structure(full)

"""Session 6: layout.dl's own rules, restructured for speed (no layout_marked_attr / lay_out_attr_base in the pass's
run: the members' marks, the NORMAL partners and the walked symbols' attributes are looked up per anchor from the
marks' sources; no lay_pair_try / lay_half_pair / lay_normal_member: the symbols with a pair are found without
keeping the pairs, the pairs kept are the live ones) give the same answers as the Session 5 program, kept
verbatim as the oracle (tests/oracles/layout_s5.dl, run with today's symbols.dl).

Both programs run on the same inputs (as the pass builds them) over builder graphs that carry every one of the 14
anchor attributes (inside subgraphs too, with ref-var outputs, joined symbols and cross-graph pairs), the layout /
TensorMove / RW / concat / subgraph conformance models and a generated transformer; with no dead checker, with
the unrefresh checkers dead (a graph without a refreshable feature map) and with every checker dead. The
hypothetical-table API's relations (every graph in scope; asked nodes) are compared too."""

from __future__ import annotations

import os
import random
from pathlib import Path

import pytest

from anchorlog.analysis.layout_conflict import top_static_graphs
from anchorlog.analysis.layout_conflict.attributes import AnchorAttribute, LayoutOptions, graph_info
from anchorlog.analysis.layout_conflict.checkers import CHECKERS, dead_checkers
from anchorlog.analysis.layout_conflict.order import topological_sorting
from anchorlog.analysis.layout_conflict.rules import LAYOUT_DL, PASS_OUTPUTS, TABLE_OUTPUTS, layout_inputs
from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import symbol_inputs
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from anchorlog.queries import Program
from tests.shared_paths import SHARED

ORACLE = Path(__file__).parent / "oracles" / "layout_s5.dl"
CASES = sorted((SHARED / "conformance" / "cases").glob("*/model.pbtxt")) if SHARED.is_dir() else []
FAMILIES = ("tm_", "rw_", "concat_", "subgraph_", "hccl", "ioffset_", "sameaddr_", "memcpyaddr_")
# a sample keeps the suite fast (ANCHORLOG_S6_FULL=1: every model of these families)
FULL = os.environ.get("ANCHORLOG_S6_FULL") == "1"
LAYOUT = [p for p in CASES if p.parent.name.startswith("layout_")]
OTHERS = [p for p in CASES if p.parent.name.startswith(FAMILIES)]
MODELS = LAYOUT + OTHERS if FULL else LAYOUT[::5] + OTHERS[::12]

# the pass's run, plus the relations the stand-alone form and the symbol count read
PIPELINE = [*PASS_OUTPUTS, *TABLE_OUTPUTS, "layout_conflict_symbol", "layout_marked_attr", "layout_var_ref_cand"]
API = ["layout_marked_attr", "layout_asked_attr", "layout_var_ref_cand"]


# the one rule of the Session 5 program that crashed on a model of 64 nodes or more with a ref_var_src_var_name
# output (the node table searched by name: see test_ref_var_model_of_64_nodes_runs), in its fixed form
_CRASHED = "sym_ask_out(G, V, 0) :- lay_var_name(V), within(G), node(G, V, _).\n"
_FIXED = """sym_ask_out(G, V, 0) :- lay_var_graph(G, V), node(G, V, _).
.decl lay_var_graph(g: symbol, v: symbol)
lay_var_graph(G, V) :- within(G), lay_var_name(V).
"""


def _programs() -> tuple[Program, Program]:
    text = ORACLE.read_text()
    assert text.count(_CRASHED) == 1
    old = Program.from_text(text.replace(_CRASHED, _FIXED), base_dir=LAYOUT_DL.parent)
    return old, Program.from_file(LAYOUT_DL)


def _dead_sets(info_dead: set[str], every: bool) -> list[list[str]]:
    """The dead checkers the pass would give (the unrefresh ones on a graph without a refreshable feature map),
    and, with ``every``, none and all of them."""
    if not every:
        return [sorted(info_dead)]
    names = sorted({c.name for chks in CHECKERS.values() for c in chks})
    return [[], sorted(info_dead), names]


def _check(model: Model, options: dict[str, str] | None = None, every: bool = True) -> dict[str, int]:
    """Old vs new on every top static graph of ``model``; returns how many candidate pairs were compared and how
    often each attribute was marked (``every``: with no checker and every checker dead too)."""
    old, new = _programs()
    opts = LayoutOptions.parse(dict(options or {}), env={})
    topological_sorting(model)
    db = FactDB.from_model(model)
    seen: dict[str, int] = {"pairs": 0}
    for g in top_static_graphs(model):
        base = layout_inputs(model, g, opts, db=db)
        base.update(symbol_inputs(node_order_rows(model, g), g.name))
        for dead in _dead_sets(dead_checkers(graph_info(g, opts)), every):
            extra = {**base, "layout_dead_checker": [(c,) for c in dead]}
            a = old.run(db, extra=extra, outputs=PIPELINE)
            b = new.run(db, extra=extra, outputs=PIPELINE)
            for rel in PIPELINE:
                assert a.set(rel) == b.set(rel), (model.name, g.name, dead, rel)
            # the pass's run alone (the relations it reads, nothing else asked)
            c = new.run(db, extra=extra, outputs=[*PASS_OUTPUTS, *TABLE_OUTPUTS])
            for rel in [*PASS_OUTPUTS, *TABLE_OUTPUTS]:
                assert a.set(rel) == c.set(rel), (model.name, g.name, dead, rel, "alone")
            seen["pairs"] += len(a.set("layout_candidate_pair"))
            for *_anchor, attr, _rank in a.set("layout_marked_attr") | a.set("layout_candidate_attr"):
                seen[attr] = seen.get(attr, 0) + 1
        # the hypothetical-table API: every graph in scope, no symbols; every third node asked
        api = layout_inputs(model, g, opts, scope_all=True, db=db)
        api["layout_ask_node"] = [(x.name, n) for x in model.graphs for n in list(x.nodes)[::3]]
        a = old.run(db, extra=api, outputs=API)
        b = new.run(db, extra=api, outputs=API)
        for rel in API:
            assert a.set(rel) == b.set(rel), (model.name, g.name, "api", rel)
    return seen


def every_attribute_model(blocks: int, seed: int) -> Model:
    """A root graph and If subgraphs carrying all 14 anchor attributes: user inputs / outputs, Const / Variable
    outputs, HCCL / physical-address / custom-kernel ops (unrefreshable), continuous and no-padding continuous
    inputs and outputs, special memory types on inputs and outputs, ref outputs (reuse_input, reference ops and
    ref_var_src_var_name naming a Variable), next to plain (NORMAL) anchors, in random neighbourhoods."""
    rnd = random.Random(seed)
    b = GraphBuilder("g")
    b.node("data", "Data")
    b.node("data2", "RefData")
    prev, outs = "data", ["data"]

    def op(name: str, typ: str, srcs: list[str], n_out: int = 1, **attrs: object) -> str:
        b.node(name, typ, attrs=dict(attrs) or None, outputs=n_out)
        for k, src in enumerate(srcs):
            b.edge(src, 0, name, k)
        return name

    for k in range(blocks):
        c = op(f"c{k}", rnd.choice(["Const", "Variable", "Constant", "VariableV2"]), [])
        r = op(f"r{k}", "Relu", [rnd.choice([prev, "data2"])])
        kind = k if k < 13 else rnd.randrange(13)  # every kind at least once
        if kind == 0:
            outs.append(op(f"cat{k}", "ConcatD", [r, c, prev], continuous_input=True))
        elif kind == 1:
            src = rnd.choice([c, r, prev])
            outs.append(op(f"h{k}", "HcomAllReduce", [src], _ge_attr_op_kernel_lib_name="ops_kernel_info_hccl"))
        elif kind == 2:
            outs.append(op(f"a{k}", "Assign", [c, r]))
            b.reuse_input(f"a{k}", 0, 0)
        elif kind == 3:
            op(
                f"m{k}",
                "Relu",
                [rnd.choice([c, r])],
                _input_memory_type=[rnd.choice([1, 3]) if k < 13 else rnd.choice([1, 2, 3])],
            )
        elif kind == 4:
            outs.append(
                op(
                    f"o{k}",
                    "Relu",
                    [r],
                    _output_memory_type=[rnd.choice([1, 5]) if k < 13 else rnd.choice([0, 1, 4, 5])],
                )
            )
        elif kind == 5:
            s = op(f"sp{k}", "SplitD", [r], n_out=2, continuous_output=True)
            outs.append(s)
            op(f"spr{k}", "Relu", [s])
        elif kind == 6:
            outs.append(op(f"np{k}", "ConcatV2", [r, prev], _no_padding_continuous_input=True))
        elif kind == 7:
            outs.append(op(f"nps{k}", "SplitV", [r], n_out=2, _no_padding_continuous_output=True))
        elif kind == 8:
            outs.append(
                op(f"cu{k}", "Relu", [rnd.choice([c, r])], _ge_attr_op_kernel_lib_name="DNN_VM_CUSTOM_OP_STORE")
            )
        elif kind == 9:
            v = op(f"v{k}", "Variable", [])
            a = op(f"rv{k}", "Assign", [v, r])
            b.ref_op(a)
            b.out_attr(a, 0, "ref_var_src_var_name", v)
            outs.append(a)
        elif kind == 10:
            op(f"sw{k}", "StreamSwitch", [r, rnd.choice([c, prev])])
        else:
            # an If whose branches carry their own marks (subgraph Data / NetOutput, continuous, HCCL, Const)
            name = op(f"if{k}", "If", [r, rnd.choice([c, prev])])
            for side in ("then", "else"):
                sb = b.subgraph(f"{name}_{side}", name)
                sb.data("x", parent_index=0)
                inner = rnd.choice(["Relu", "HcomAllReduce", "ConcatD", "Const"])
                attrs: dict[str, object] = {}
                if inner == "HcomAllReduce":
                    attrs["_ge_attr_op_kernel_lib_name"] = "ops_kernel_info_hccl"
                if inner == "ConcatD":
                    attrs["continuous_input"] = True
                sb.node("y", inner, attrs=attrs or None)
                if inner != "Const":
                    sb.edge("x", 0, "y", 0)
                    if inner == "ConcatD":
                        sb.edge("x", 0, "y", 1)
                sb.output(rnd.choice(["x", "y"]), parent_index=0)
            outs.append(name)
        outs.append(rnd.choice([c, r]))
        prev = r
    op("out", "NetOutput", outs)
    return b.build()


@pytest.mark.parametrize("seed", range(4))
def test_new_rules_equal_the_s5_rules_on_every_attribute_graphs(seed: int) -> None:
    options = {"ge.featureBaseRefreshable": "1"} if seed % 2 else {}
    seen = _check(every_attribute_model(40, seed), options)
    # the graphs do exercise the rules: all 14 attributes (NORMAL from the walked symbols' anchors) and pairs
    assert set(seen) - {"pairs"} == {a.name for a in AnchorAttribute}
    assert seen["pairs"] > 0


@pytest.mark.skipif(not MODELS, reason="../shared/conformance is not available")
def test_new_rules_equal_the_s5_rules_on_conformance_models() -> None:
    import json

    pairs = 0
    for p in MODELS:
        case = json.loads((p.parent / "case.json").read_text())
        pairs += _check(read_model(p), case.get("options", {}), every=FULL)["pairs"]
    assert pairs > 0  # the models do hold candidate pairs


def test_new_rules_equal_the_s5_rules_on_a_generated_graph() -> None:
    _check(generate_transformer(nodes=3000, seed=2))


def test_ref_var_model_of_64_nodes_runs() -> None:
    """A model of 64 nodes or more with outputs naming a source var (ref_var_src_var_name): the Session 5 rules
    searched the node table by the var's name alone, and SQLite failed on the index made for that lookup (the
    pass stopped with an error). Now the pass runs, and the ref map names the vars."""
    from anchorlog.analysis.layout_conflict.rules import layout_facts
    from anchorlog.analysis.registry import PassContext, run_passes

    model = every_attribute_model(40, 0)
    named = {
        (x.name, n.name, k): td.attrs["ref_var_src_var_name"].value
        for x in model.graphs
        for n in x.nodes.values()
        for k, td in enumerate(n.output_desc)
        if "ref_var_src_var_name" in td.attrs
    }
    assert named and sum(len(x.nodes) for x in model.graphs) >= 64
    facts = layout_facts(model)
    # each Assign's output 0 shares its symbol with the var's output 0 (it reuses the var input)
    assert {(g, n, i): v for (g, n, _io, i), v in facts.ref_var.items()} == named
    report = run_passes(model, ["layout-conflict"], PassContext())
    assert report["passes"][0]["pass"] == "layout-conflict"

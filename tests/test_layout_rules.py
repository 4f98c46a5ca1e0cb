"""layout.dl agrees with the pass's Python marking on every conformance model, and its tables match."""

from __future__ import annotations

import glob
import os

import pytest

from anchorlog.analysis.layout_conflict import top_static_graphs
from anchorlog.analysis.layout_conflict.attributes import REF_OUT, LayoutOptions, graph_info
from anchorlog.analysis.layout_conflict.checkers import REGISTRY, find_conflict_nodes
from anchorlog.analysis.layout_conflict.order import all_nodes, topological_sorting
from anchorlog.analysis.layout_conflict.refmap import get_ref_mapping
from anchorlog.analysis.layout_conflict.rules import layout_facts
from anchorlog.analysis.layout_conflict.tables import ABSOLUTE_CONFLICT
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.relations import ModelIndex
from tests.shared_paths import SHARED

try:  # GE's marking replayed in Python, kept as the oracle (tests/oracles/layout_marks.py)
    from oracles.layout_marks import mark_all
except ImportError:  # pragma: no cover
    from tests.oracles.layout_marks import mark_all

CASES = os.environ.get("ANCHORLOG_CASES", f"{SHARED}/conformance/cases")
# every other layout case keeps the suite fast (each run builds a fact database and runs the rules)
LAYOUT_MODELS = sorted(glob.glob(os.path.join(CASES, "layout_*", "model.pbtxt")))[::2]


def _compare(model, options):
    topological_sorting(model)
    for g in top_static_graphs(model):
        opts = LayoutOptions.parse(options, env={})
        index = ModelIndex(model)
        table = get_ref_mapping(model, g, index)
        marks = mark_all(model, g, all_nodes(model, g), opts, table, index)
        py = {(a.node.graph.name, a.node.name, a.io, a.idx): [t.name for t in ts] for a, ts in marks.types.items()}
        facts = layout_facts(model, g, options)
        # the rules list every anchor with a non-NORMAL attribute; the others are NORMAL_INPUT / NORMAL_OUTPUT
        assert facts.attrs == {k: v for k, v in py.items() if v not in (["NORMAL_INPUT"], ["NORMAL_OUTPUT"])}
        # the candidate pairs are exactly the active attribute pairs of the whole symbol table
        assert facts.pairs == _brute_force_pairs(table, marks)
        assert facts.conflict_symbols == set(facts.pairs)
        # every symbol where the ordered pair walk marks something is one the rules flag
        info = graph_info(g, opts)
        for sym, anchors in table.s2a.items():
            if find_conflict_nodes(anchors, marks, info, index):
                names = {x.name for x in anchors}
                assert any(s in names for s in facts.conflict_symbols), sym


def _brute_force_pairs(table, marks) -> dict:
    """``layout_candidate_pair`` restated over GE's whole symbol table: per symbol, the anchor pairs on two different
    nodes (or graphs) with an attribute pair that is an absolute conflict or has a checker (REFERENCE_OUTPUT takes
    part in none)."""
    out: dict = {}
    for sym, anchors in table.s2a.items():
        for i, a in enumerate(anchors):
            for b in anchors[i + 1 :]:
                if a.node is b.node:
                    continue
                if any(
                    (x, y) in ABSOLUTE_CONFLICT or (x, y) in REGISTRY
                    for x in marks.types.get(a, [])
                    for y in marks.types.get(b, [])
                    if REF_OUT not in (x, y)
                ):
                    ka = (a.node.graph.name, a.node.name, a.io, a.idx)
                    kb = (b.node.graph.name, b.node.name, b.io, b.idx)
                    out.setdefault(sym, set()).add(frozenset((ka, kb)))
    return out


def conflict_heavy_model(blocks: int, seed: int):
    """Many Const / Variable outputs (IMMUTABLE_ADDRESS_OUTPUT, which the rules reach only through the anchors of
    the other marked anchors' symbols) next to continuous inputs, user outputs, HCCL and special memory types."""
    import random

    rnd = random.Random(seed)
    b = GraphBuilder("g")
    b.node("data", "Data")
    prev, outs = "data", ["data"]

    def op(name: str, typ: str, srcs: list[str], **attrs: object) -> str:
        b.node(name, typ, attrs=dict(attrs) or None)
        for src in srcs:
            b.edge(src, 0, name)
        return name

    for k in range(blocks):
        c = op(f"c{k}", rnd.choice(["Const", "Variable", "Constant"]), [])
        r = op(f"r{k}", "Relu", [prev])
        kind = rnd.randrange(6)
        if kind == 0:
            outs.append(op(f"cat{k}", "ConcatD", [r, c], continuous_input=True))
        elif kind == 1:
            src = rnd.choice([c, r])  # an HCCL op next to an immutable output or to NORMAL anchors
            outs.append(op(f"h{k}", "HcomAllReduce", [src], _ge_attr_op_kernel_lib_name="ops_kernel_info_hccl"))
        elif kind == 2:
            outs.append(op(f"a{k}", "Assign", [c, r]))
            b.reuse_input(f"a{k}", 0, 0)
        elif kind == 3:
            op(f"m{k}", "Relu", [c], _input_memory_type=[1])
        elif kind == 4:
            op(f"s{k}", "StreamSwitch", [r])
        outs.append(rnd.choice([c, r]))
        prev = r
    op("out", "NetOutput", outs)
    return b.build()


@pytest.mark.parametrize("seed", range(4))
def test_candidate_pairs_equal_brute_force_on_conflict_heavy_graphs(seed):
    for options in ({}, {"ge.featureBaseRefreshable": "1"}):
        _compare(conflict_heavy_model(30, seed), options)


def test_rules_tables_match_python_registry():
    b = GraphBuilder("g")
    b.chain("d:Data", "out:NetOutput")
    facts = layout_facts(b.build())
    py = {(x.name, y.name): chk.name for (x, y), chk in REGISTRY.items()}
    assert facts.checkers == py
    assert len({frozenset(k) for k in facts.checkers}) == 55


@pytest.mark.skipif(not LAYOUT_MODELS, reason="conformance cases not available")
@pytest.mark.parametrize("path", LAYOUT_MODELS, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_rules_mark_like_python_on_conformance_models(path):
    import json

    from anchorlog.facts.ge_io import read_model_text

    case = json.load(open(os.path.join(os.path.dirname(path), "case.json")))
    model = read_model_text(open(path).read(), path, validate=False)
    _compare(model, case.get("options", {}))

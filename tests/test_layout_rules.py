"""layout.dl agrees with the pass's Python marking on every conformance model, and its tables match."""

from __future__ import annotations

import glob
import os

import pytest

from anchorlog.analysis.layout_conflict import top_static_graphs
from anchorlog.analysis.layout_conflict.attributes import LayoutOptions, graph_info
from anchorlog.analysis.layout_conflict.checkers import REGISTRY, find_conflict_nodes
from anchorlog.analysis.layout_conflict.order import all_nodes, topological_sorting
from anchorlog.analysis.layout_conflict.refmap import get_ref_mapping
from anchorlog.analysis.layout_conflict.rules import layout_facts
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.relations import _ModelIndex

try:  # GE's marking replayed in Python, kept as the oracle (tests/oracles/layout_marks.py)
    from oracles.layout_marks import mark_all
except ImportError:  # pragma: no cover
    from tests.oracles.layout_marks import mark_all

CASES = os.environ.get("ANCHORLOG_CASES", "/work/shared/conformance/cases")
# every other layout case keeps the suite fast (each run builds a fact database and runs the rules)
LAYOUT_MODELS = sorted(glob.glob(os.path.join(CASES, "layout_*", "model.pbtxt")))[::2]


def _compare(model, options):
    topological_sorting(model)
    for g in top_static_graphs(model):
        opts = LayoutOptions.parse(options, env={})
        index = _ModelIndex(model)
        table = get_ref_mapping(model, g, index)
        marks = mark_all(model, g, all_nodes(model, g), opts, table, index)
        py = {(a.node.graph.name, a.node.name, a.io, a.idx): [t.name for t in ts] for a, ts in marks.types.items()}
        facts = layout_facts(model, g, options)
        # the rules list every anchor with a non-NORMAL attribute; the others are NORMAL_INPUT / NORMAL_OUTPUT
        assert facts.attrs == {k: v for k, v in py.items() if v not in (["NORMAL_INPUT"], ["NORMAL_OUTPUT"])}
        # every symbol where the ordered pair walk marks something is one the rules flag
        info = graph_info(g, opts)
        for sym, anchors in table.s2a.items():
            if find_conflict_nodes(anchors, marks, info, index):
                names = {x.name for x in anchors}
                assert any(s in names for s in facts.conflict_symbols), sym


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

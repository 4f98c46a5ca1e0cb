"""``graph_has_mem_conflict_symbol``: GE ``IsGraphExistMemConflictSymbol`` on a hypothetical table, attributes
from layout.dl (cached per pass context), checked against the Python marking oracle and GE's unit-test shapes."""

from __future__ import annotations

import glob
import json
import os

import pytest

from anchorlog.analysis.layout_conflict import forget_layout_attributes, graph_has_mem_conflict_symbol
from anchorlog.analysis.layout_conflict.api import _STATE_KEY
from anchorlog.analysis.layout_conflict.attributes import LayoutOptions, Marks, graph_info
from anchorlog.analysis.layout_conflict.checkers import find_conflict_nodes
from anchorlog.analysis.layout_conflict.order import topological_sorting
from anchorlog.analysis.layout_conflict.refmap import AnchorRef, SymbolTable
from anchorlog.analysis.registry import PassContext
from anchorlog.analysis.symbols import symbol_table
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model, Node
from anchorlog.facts.relations import ModelIndex
from tests.shared_paths import SHARED

try:  # GE's marking replayed in Python, kept as the oracle (tests/oracles/layout_marks.py)
    from oracles.layout_marks import mark_node
except ImportError:  # pragma: no cover
    from tests.oracles.layout_marks import mark_node

CASES = os.environ.get("ANCHORLOG_CASES", f"{SHARED}/conformance/cases")
TM_MODELS = sorted(glob.glob(os.path.join(CASES, "tm_*", "model.pbtxt")))[::2]


def merged(model: Model, tm: str, graph: str | None = None) -> tuple[dict, dict, str]:
    """GE ``ConstructSingleNodeSymbolTable`` for deleting TensorMove ``tm``: one symbol, in-side anchors first."""
    a2s, s2a = symbol_table(model)
    g = graph or model.root.name
    si, so = a2s[(g, tm, "in", 0)], a2s[(g, tm, "out", 0)]
    anchors = list(s2a[si]) + list(s2a[so])
    return {a: si for a in anchors}, {si: anchors}, si


def merged_tensor_moves(model: Model):
    """(graph, TensorMove, a2s, s2a, symbol) of :func:`merged` for every TensorMove with a fed input and symbols."""
    for g in model.graphs:
        for n in list(g.nodes.values()):
            if n.type != "TensorMove" or not n.inputs or n.inputs[0] is None:
                continue
            try:
                a2s, s2a, s = merged(model, n.name, g.name)
            except KeyError:
                continue
            yield g, n, a2s, s2a, s


def oracle(model: Model, graph_name: str, a2s: dict, s2a: dict, options: dict[str, str]) -> bool:
    """The same question answered with the Python marking (tests only)."""
    g = model.graph(graph_name)
    opts = LayoutOptions.parse(options, env={})
    index = ModelIndex(model)
    nodes = {gr.name: gr.nodes for gr in model.graphs}
    refs = {s: [AnchorRef(nodes[a[0]][a[1]], a[2], a[3]) for a in lst if a[1] in nodes[a[0]]] for s, lst in s2a.items()}
    table = SymbolTable({r.name: s for s, lst in refs.items() for r in lst}, refs)
    marks = Marks()
    seen: set[int] = set()
    for lst in refs.values():
        for r in lst:
            if id(r.node) not in seen:
                seen.add(id(r.node))
                mark_node(r.node, g, opts, table, index, marks)
    info = graph_info(g, opts)
    return any(find_conflict_nodes(lst, marks, info, index) for lst in refs.values())


def two_vars_into_phony_concat() -> Model:
    """GE UT ``KeepTMWhenMemLayoutConflictAfterSymbolMerge``: Var1 -> TM1 -> PhonyConcat <- TM2 <- Var2, the
    PhonyConcat with no-padding continuous inputs and its output reusing input 0."""
    b = GraphBuilder("g")
    b.chain("var1:Variable", "tm1:TensorMove", "pc:PhonyConcat", "out:NetOutput")
    b.chain("var2:Variable", "tm2:TensorMove")
    b.edge("tm2", 0, "pc", 1)
    b.attr("pc", "_no_padding_continuous_input", True)
    b.reuse_input("pc", 0, 0)
    m = b.build()
    topological_sorting(m)
    return m


def test_merging_two_variables_into_one_continuous_buffer_conflicts():
    m = two_vars_into_phony_concat()
    ctx = PassContext()
    a2s, s2a, s = merged(m, "tm1")
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)
    assert oracle(m, "g", a2s, s2a, {})
    # a symbol not asked about is not checked; an unknown symbol has nothing to check
    assert not graph_has_mem_conflict_symbol(m, (a2s, s2a), set(), ctx)
    assert not graph_has_mem_conflict_symbol(m, (a2s, s2a), {"no_such_symbol"}, ctx)
    assert m.num_nodes() == 6  # nothing inserted


def test_plain_chain_merge_has_no_conflict():
    b = GraphBuilder("g")
    b.chain("d:Data", "r:ReLU", "tm:TensorMove", "e:Exp", "out:NetOutput")
    m = b.build()
    topological_sorting(m)
    a2s, s2a, s = merged(m, "tm")
    assert not graph_has_mem_conflict_symbol(m, (a2s, s2a), [s], PassContext())
    assert not oracle(m, "g", a2s, s2a, {})


def test_graph_argument_decides_user_output():
    # Const -> TM -> NetOutput inside a PartitionedCall body: only when the body is GE's graph argument is
    # its NetOutput a user output (USER_MEMORY_OUTPUT x IMMUTABLE_ADDRESS_OUTPUT fires)
    b = GraphBuilder("root")
    b.chain("d:Data", "pc:PartitionedCall", "r:ReLU", "out:NetOutput")
    body = b.subgraph("body", owner="pc")
    body.data("x", 0)
    body.chain("k:Const", "tm:TensorMove")
    body.output("tm", 0)
    body.output("x", 1)
    m = b.build()
    topological_sorting(m)
    a2s, s2a, s = merged(m, "tm", "body")
    ctx = PassContext()
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx, graph="body")
    assert not graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)  # root: the body's NetOutput is plain
    assert oracle(m, "body", a2s, s2a, {}) and not oracle(m, "root", a2s, s2a, {})


def test_attributes_are_cached_and_rederived_for_new_nodes():
    m = two_vars_into_phony_concat()
    ctx = PassContext()
    a2s, s2a, s = merged(m, "tm2")
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)
    cache = ctx.state[_STATE_KEY]
    (base,) = cache.values()
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)
    assert next(iter(ctx.state[_STATE_KEY].values())) is base  # second call: no re-derivation
    # a node inserted after the attributes were derived: its anchors get their (rule-derived) attributes
    g = m.root
    g.add_node(Node("k2", "Const"))
    m.root.nodes["k2"].output_desc.append(m.root.nodes["var1"].output_desc[0].copy())
    hyp = {("g", "k2", "out", 0): "h", ("g", "out", "in", 0): "h"}
    assert graph_has_mem_conflict_symbol(m, (hyp, {"h": list(hyp)}), {"h"}, ctx)  # IMMUT x USER_OUT
    assert next(iter(ctx.state[_STATE_KEY].values())) is not base
    forget_layout_attributes(ctx)
    assert _STATE_KEY not in ctx.state


def test_anchors_of_deleted_nodes_are_ignored():
    m = two_vars_into_phony_concat()
    ctx = PassContext()
    a2s, s2a, s = merged(m, "tm1")
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)
    # the deletion as TensorMove does it (var1 now feeds the PhonyConcat); the table still names tm1's anchors
    m.root.remove_node("tm1")
    m.root.connect("var1", 0, "pc", 0)
    assert graph_has_mem_conflict_symbol(m, (a2s, s2a), {s}, ctx)
    assert oracle(m, "g", a2s, s2a, {})


@pytest.mark.skipif(not TM_MODELS, reason="conformance cases not available")
@pytest.mark.parametrize("path", TM_MODELS, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_rules_answer_like_the_python_marking_on_tm_models(path):
    from anchorlog.facts.ge_io import read_model_text

    case = json.load(open(os.path.join(os.path.dirname(path), "case.json")))
    options = {k: str(v) for k, v in (case.get("options") or {}).items()}
    model = read_model_text(open(path).read(), path, validate=False)
    topological_sorting(model)
    ctx = PassContext(options=options)
    checked = 0
    for g, n, a2s, s2a, s in merged_tensor_moves(model):
        want = oracle(model, g.name, a2s, s2a, options)
        assert graph_has_mem_conflict_symbol(model, (a2s, s2a), {s}, ctx, graph=g) == want, n.name
        checked += 1
    assert checked or not any(n.type == "TensorMove" for g in model.graphs for n in g.nodes.values())


# ---- demand-driven attributes (asked_nodes): layout.dl's layout_asked_attr for the asked nodes equals
# layout_marked_attr (the whole model) restricted to them
REAL = os.environ.get("ANCHORLOG_REAL_GRAPHS", f"{SHARED}/real-graphs")
SCOPE_MODELS = (
    sorted(glob.glob(os.path.join(CASES, "tm_*", "model.pbtxt")))
    + sorted(glob.glob(os.path.join(CASES, "layout_*", "model.pbtxt")))[::3]
    + sorted(glob.glob(os.path.join(REAL, "*.txt")))
    + ["generated:transformer"]
)


def _scope_model(path: str) -> tuple[Model, dict[str, str]]:
    if path == "generated:transformer":
        from anchorlog.facts.generate import generate_transformer

        return generate_transformer(2, seed=1, tensor_move_share=0.06), {}
    from anchorlog.facts.ge_io import read_model_text

    case_json = os.path.join(os.path.dirname(path), "case.json")
    options = {}
    if os.path.exists(case_json):
        options = {k: str(v) for k, v in (json.load(open(case_json)).get("options") or {}).items()}
    return read_model_text(open(path).read(), path, validate=False), options


def _by_anchor(base) -> dict:
    return {a: sorted(v) for a, v in base.attrs.items()}


@pytest.mark.parametrize("path", SCOPE_MODELS, ids=lambda p: os.path.basename(os.path.dirname(p)) or p)
def test_asked_attributes_equal_the_whole_models_for_the_asked_nodes(path):
    from anchorlog.analysis.layout_conflict.api import _derive

    if path != "generated:transformer" and not os.path.exists(path):
        pytest.skip("model not available")
    model, options = _scope_model(path)
    ctx = PassContext(options=options)
    opts = LayoutOptions.parse(options)
    nodes = [(g.name, n) for g in model.graphs for n in g.nodes]
    # every other node, and every node (the scoped rows then equal the whole model's)
    for ask in ({x for i, x in enumerate(nodes) if i % 2 == 0}, set(nodes)):
        for g in model.graphs[:2]:  # the root, and a subgraph when there is one (user in/out are relative to it)
            whole = _derive(model, g, opts, ctx)
            scoped = _derive(model, g, opts, ctx, ask)
            want = {a: v for a, v in _by_anchor(whole).items() if (a[0], a[1]) in ask}
            assert _by_anchor(scoped) == want
            assert scoped.var_ref == whole.var_ref
            assert scoped.nodes == ask
    if path == "generated:transformer":  # Consts, HCCL, Assigns: the comparison is not vacuous
        assert any(whole.attrs.values()) and any(_by_anchor(scoped).values())


@pytest.mark.skipif(not TM_MODELS, reason="conformance cases not available")
@pytest.mark.parametrize("path", TM_MODELS, ids=lambda p: os.path.basename(os.path.dirname(p)))
def test_asked_nodes_give_the_same_answers_and_grow_on_demand(path):
    from anchorlog.facts.ge_io import read_model_text

    model = read_model_text(open(path).read(), path, validate=False)
    topological_sorting(model)
    whole_ctx, asked_ctx = PassContext(), PassContext()
    asked: frozenset = frozenset()  # nothing asked up front: each call's nodes are added to the derivation
    seen: dict[str, set] = {}  # processed graph -> the nodes asked so far
    for g, n, a2s, s2a, s in merged_tensor_moves(model):
        want = graph_has_mem_conflict_symbol(model, (a2s, s2a), {s}, whole_ctx, graph=g)
        got = graph_has_mem_conflict_symbol(model, (a2s, s2a), {s}, asked_ctx, graph=g, asked_nodes=asked)
        assert got == want, n.name
        seen.setdefault(g.name, set()).update((a[0], a[1]) for a in s2a[s])
        base = next(b for k, b in asked_ctx.state[_STATE_KEY].items() if k[0] == g.name and k[2])
        assert base.nodes == seen[g.name]  # grown by the nodes asked, no others

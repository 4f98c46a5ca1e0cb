"""Session 5c: the cheaper ``ModelIndex`` constructor and ``layout_inputs`` (memory types found through the fact
database's ``node_attr`` rows instead of a visit of every node) give exactly what the code of commit b9e97a1
gave. The oracles are that commit's ``relations.py`` and ``layout_conflict/rules.py``, loaded from git into
modules of their own; compared on generated transformers (with memory types added in several graphs), GE's real
dumps, every conformance model, after edits synced through the shared fact cache, and on databases whose names
do not resolve in the IR (the full visit then)."""

from __future__ import annotations

import glob
import os

import pytest

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.layout_conflict import rules as new_rules
from anchorlog.analysis.layout_conflict._ge import INPUT_MEM_TYPE_LIST, OUTPUT_MEM_TYPE_LIST
from anchorlog.analysis.layout_conflict.attributes import LayoutOptions
from anchorlog.analysis.registry import PassContext
from anchorlog.facts import relations as new_relations
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB
from tests.oracles.git_rev import git_module
from tests.shared_paths import SHARED

ORACLE_REV = "b9e97a1"
REAL_GRAPHS = sorted(glob.glob(os.path.join(SHARED, "real-graphs", "*.txt")))
CONFORMANCE_MODELS = sorted(glob.glob(os.path.join(SHARED, "conformance", "cases", "*", "model.pbtxt")))


OLD_RELATIONS = git_module(ORACLE_REV, "anchorlog/facts/relations.py", "s5c_old_relations")
OLD_RULES = git_module(
    ORACLE_REV, "anchorlog/analysis/layout_conflict/rules.py", "anchorlog.analysis.layout_conflict._s5c_old_rules"
)
pytestmark = pytest.mark.skipif(
    OLD_RELATIONS is None or OLD_RULES is None, reason=f"git show {ORACLE_REV} unavailable (not a git checkout)"
)

OPTION_SETS = [{}, {"ge.featureBaseRefreshable": "1"}]


def assert_same_index(model: Model) -> None:
    new = new_relations.ModelIndex(model)
    old = OLD_RELATIONS.ModelIndex(model)
    assert new.model is model
    assert new.root_name == old.root_name
    assert new.graph_by_name == old.graph_by_name
    # the same owners, as the same objects, inserted in the same order
    assert list(new.owner) == list(old.owner)
    for sub, (g, n, i) in old.owner.items():
        ng, nn, ni = new.owner[sub]
        assert ng is g and nn is n and ni == i
    for g in model.graphs:
        for n in list(g.nodes.values())[:200]:
            assert new.is_subgraph_input(g, n) == old.is_subgraph_input(g, n)


def assert_same_inputs(model: Model, db: object) -> None:
    """layout_inputs with and without the fact database equals the oracle's, for every graph kind of call."""
    graphs = model.graphs[:3] if model.graphs else []
    for options in OPTION_SETS:
        opts = LayoutOptions.parse(options)
        for g in graphs:
            for scope_all in (False, True):
                old = OLD_RULES.layout_inputs(model, g, opts, scope_all=scope_all)
                assert new_rules.layout_inputs(model, g, opts, scope_all=scope_all) == old
                assert new_rules.layout_inputs(model, g, opts, scope_all=scope_all, db=db) == old


def with_memory_types(model: Model) -> Model:
    """Memory type lists on nodes of several graphs (both kinds, one node with both, one with a non-int list,
    a node late in a graph before one early in the next), as GE's attributes would carry them."""
    graphs = [g for g in model.graphs if g.nodes]
    for gi, g in enumerate(reversed(graphs[:5])):
        nodes = list(g.nodes.values())
        nodes[-1].set_attr(INPUT_MEM_TYPE_LIST, [0, 2, gi + 1])
        nodes[0].set_attr(OUTPUT_MEM_TYPE_LIST, [4, 0x7FFFFFFF])
        if len(nodes) > 2:
            nodes[len(nodes) // 2].set_attr(INPUT_MEM_TYPE_LIST, [1])
            nodes[len(nodes) // 2].set_attr(OUTPUT_MEM_TYPE_LIST, [3, 3])
        if len(nodes) > 3:
            nodes[1].set_attr(OUTPUT_MEM_TYPE_LIST, ["x", "y"])  # not ints: no rows, as GetListInt fails
    return model


@pytest.mark.parametrize("nodes", [300, 2000])
def test_generated_transformer_index_and_inputs(nodes: int) -> None:
    model = generate_transformer(nodes=nodes, seed=1)
    assert any(n.subgraph_names for g in model.graphs for n in g.nodes.values())
    assert_same_index(model)
    db = FactDB.from_model(model)
    assert new_rules.mem_type_rows(model, db) == []
    assert_same_inputs(model, db)
    with_memory_types(model)
    assert_same_index(model)
    db = FactDB.from_model(model)
    holders = new_rules._mem_type_holders(model, db)
    assert holders is not None  # found through the facts, not by the fallback visit
    rows = new_rules.mem_type_rows(model, db)
    assert len({(g, n) for g, n, *_ in rows}) >= 5  # the edit landed in several graphs, found through the facts
    assert_same_inputs(model, db)


def test_edits_synced_through_the_fact_cache() -> None:
    """The pipeline's database after edits (memory types added and removed, a subgraph owner gone): the rows
    found through it are those of a visit of the edited model."""
    model = generate_transformer(nodes=600, seed=3)
    ctx = PassContext()
    shared_facts(model, ctx)
    with_memory_types(model)
    assert_same_inputs(model, shared_facts(model, ctx))
    first = next(n for n in model.graphs[0].nodes.values() if INPUT_MEM_TYPE_LIST in n.attrs)
    first.del_attr(INPUT_MEM_TYPE_LIST)
    owner = next(n for n in model.graphs[0].nodes.values() if n.subgraph_names)
    owner.graph.remove_node(owner.name)
    assert_same_inputs(model, shared_facts(model, ctx))
    assert_same_index(model)


def test_names_not_in_the_ir_fall_back_to_the_visit() -> None:
    """A database with qualified graph names cannot say which IR nodes hold the
    attributes: every node is visited, as before."""
    model = with_memory_types(generate_transformer(nodes=400, seed=2))
    qualified = FactDB.from_model(model)
    qualified.conn.execute("UPDATE node_attr SET graph = 'm/' || graph")
    assert new_rules._mem_type_holders(model, qualified) is None
    assert_same_inputs(model, qualified)
    assert new_rules._mem_type_holders(model, "not a database") is None


def test_duplicate_and_empty_subgraph_names_first_owner_wins() -> None:
    model = generate_transformer(nodes=300, seed=1)
    owners = [n for g in model.graphs for n in g.nodes.values() if n.subgraph_names]
    plain = [n for n in model.graphs[0].nodes.values() if not n.subgraph_names]
    plain[0].subgraph_names = ["", owners[-1].subgraph_names[0]]  # names a subgraph owned later in the model
    plain[1].subgraph_names = [owners[0].subgraph_names[0], "no_such_graph"]
    assert_same_index(model)


@pytest.mark.parametrize("path", REAL_GRAPHS, ids=os.path.basename)
def test_real_dumps(path: str) -> None:
    model = read_model(path)
    assert_same_index(model)
    assert_same_inputs(model, FactDB.from_model(model))


@pytest.mark.skipif(not CONFORMANCE_MODELS, reason="../shared/conformance is not beside the checkout")
def test_conformance_models() -> None:
    for path in CONFORMANCE_MODELS:
        model = read_model(path)
        assert_same_index(model)
        assert_same_inputs(model, FactDB.from_model(model))

"""The Session 5 fact derivation (flat tables, descriptor columns worked out inline, ref_io read in the walk over
the output descriptors) gives exactly the rows of the derivation it replaced: the relations.py of commit b9e97a1,
loaded from git into a temporary module, is the oracle. Compared relation by relation, in order (so the rowids
of a fresh database are the same too): on generated transformers, GE's real dumps, every conformance model,
random builder graphs with unusual descriptor attributes, relation subsets, and refreshes after edits."""

from __future__ import annotations

import glob
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.facts import relations as new
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Attr, AttrList, Model, TensorDesc
from tests.oracles.git_rev import git_module
from tests.shared_paths import SHARED
from tests.test_facts_invariants import random_models

ORACLE_REV = "b9e97a1"
REAL_GRAPHS = sorted(glob.glob(os.path.join(SHARED, "real-graphs", "*.txt")))
CONFORMANCE_MODELS = sorted(glob.glob(os.path.join(SHARED, "conformance", "cases", "*", "model.pbtxt")))


OLD = git_module(ORACLE_REV, "anchorlog/facts/relations.py", "s5_old_relations")
pytestmark = pytest.mark.skipif(OLD is None, reason=f"git show {ORACLE_REV} unavailable (not a git checkout)")


def assert_same_tables(model: Model, **kw) -> None:
    old_t = OLD.tables_from_model(model, **kw)
    new_t = new.tables_from_model(model, **kw)
    assert list(old_t) == list(new_t)
    for rel in old_t:
        assert new_t[rel] == old_t[rel], rel
        # same values with the same types (1 and True, 1 and 1.0 are equal but are different facts)
        assert [tuple(map(type, r)) for r in new_t[rel]] == [tuple(map(type, r)) for r in old_t[rel]], rel


def assert_same_db(model: Model) -> None:
    old_db = OLD.FactDB.from_model(model)
    new_db = new.FactDB.from_model(model)
    try:
        for rel in new.RELATIONS:
            assert new_db.rows(rel) == old_db.rows(rel), rel  # in rowid order
    finally:
        old_db.close()
        new_db.close()


@pytest.mark.parametrize("nodes,seed", [(600, 0), (1500, 1)])
def test_generated_transformers_give_the_old_rows(nodes, seed):
    model = generate_transformer(nodes=nodes, seed=seed)
    assert_same_tables(model)
    assert_same_db(model)


@pytest.mark.parametrize(
    "rels",
    [[r] for r in new.RELATIONS]
    + [["ref_io", "tensor_attr"], ["out_anchor", "ref_io"], ["in_anchor", "tensor_attr"], ["node", "parent_out"]],
)
def test_relation_subsets_give_the_old_rows(rels):
    """Each relation alone and a few pairs: the walk takes other paths when only some relations are wanted
    (e.g. ref_io without out_anchor reads the reuse flags in a walk of its own)."""
    model = generate_transformer(nodes=600, seed=2)
    assert_same_tables(model, relations=rels)


def test_graph_subset_and_qualified_names_give_the_old_rows():
    model = generate_transformer(nodes=600, seed=3)
    names = [g.name for g in model.graphs]
    qual = {n: f"m/{n}" for n in names}
    assert_same_tables(model, model_name="m", graph_names=qual, graphs=names[1:4], include_op_class=False)


@pytest.mark.skipif(not REAL_GRAPHS, reason="no real GE dumps next to the project")
@pytest.mark.parametrize("path", REAL_GRAPHS, ids=os.path.basename)
def test_real_ge_dumps_give_the_old_rows(path):
    model = read_model(path)
    assert_same_tables(model)
    assert_same_db(model)


@pytest.mark.skipif(not CONFORMANCE_MODELS, reason="no conformance cases next to the project")
def test_conformance_models_give_the_old_rows():
    for path in CONFORMANCE_MODELS:
        try:
            model = read_model(path)
        except Exception:  # noqa: BLE001 -- cases that test the reader's errors
            continue
        assert_same_tables(model)


# Unusual descriptor attributes: origin attrs of other kinds, lists with extra values, float/bool shape dims,
# shapes absent, extra keys, descriptors without attrs.
_ORIGIN_SHAPES = [
    None,
    "same",
    Attr("list", AttrList("i", [1, 2])),
    Attr("list", AttrList(None, [])),
    Attr("list", AttrList("f", [1.0, 2.0])),
    Attr("list", AttrList("i", [2, 3], other={"f": [1.5]})),
    Attr("s", "[2,3]"),
    Attr("i", 7),
]
_ORIGIN_FORMATS = [None, "same", Attr("s", "NCHW"), Attr("s", b"\xff\xfe"), Attr("i", 3)]
_SHAPES = [None, [], [2, 3], [1, 2], [2.0, 3.0], [True, 2], [-1, 16]]


@st.composite
def models_with_odd_descriptors(draw) -> Model:
    model = draw(random_models())
    descs = [td for g in model.graphs for n in g.nodes.values() for td in (*n.input_desc, *n.output_desc)]
    shared_oshape: dict[int, Attr] = {}
    for td in descs:
        td.shape = draw(st.sampled_from(_SHAPES))
        td.layout = draw(st.sampled_from(["ND", "NCHW", ""]))
        td.attrs = {}
        f = draw(st.sampled_from(_ORIGIN_FORMATS))
        if f == "same":
            td.attrs["origin_format"] = Attr("s", td.layout)
        elif f is not None:
            td.attrs["origin_format"] = f
        s = draw(st.sampled_from(_ORIGIN_SHAPES))
        if s == "same" and td.shape is not None:
            # readers share one Attr per distinct value: the memo by Attr identity must still be right
            key = draw(st.integers(0, 2))
            a = shared_oshape.setdefault(key, Attr("list", AttrList("i", list(td.shape))))
            td.attrs["origin_shape"] = a if a.value.items == td.shape else Attr("list", AttrList("i", list(td.shape)))
        elif isinstance(s, Attr):
            td.attrs["origin_shape"] = s
        if draw(st.booleans()):
            td.attrs["_parent_node_index"] = Attr("i", draw(st.integers(0, 2)))
        td.reuse_input = draw(st.booleans())
    return model


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models_with_odd_descriptors())
def test_random_models_with_odd_descriptors_give_the_old_rows(model):
    assert_same_tables(model)
    assert_same_tables(model, relations=["ref_io", "tensor_attr", "in_anchor"])
    assert_same_tables(model, relations=["ref_io"])


def edit_some_nodes(model: Model, data: st.DataObject) -> set[str]:
    """A drawn edit of the root graph: a few nodes get a new attribute value and output descriptor, and the last
    node goes when nothing reads it. Returns the names touched (removed ones included)."""
    g = model.root
    names = list(g.nodes)
    touched = set(data.draw(st.lists(st.sampled_from(names), min_size=1, max_size=3)))
    for n in touched:
        node = g.node(n)
        node.set_attr("reference", data.draw(st.booleans()))
        if node.output_desc:
            node.output_desc[0] = TensorDesc(dtype="DT_INT32", shape=[4], layout="ND")
    if data.draw(st.booleans()) and len(names) > 1:
        victim = names[-1]
        if not g.node(victim).subgraph_names and not any(g.consumers(victim, o) for o in range(4)):
            g.remove_node(victim)
            touched.add(victim)
    return touched


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models_with_odd_descriptors(), st.data())
def test_refresh_after_an_edit_gives_the_old_rows(model, data):
    """Both databases refreshed after the same edit (the refresh derives through the flat tables too)."""
    old_db = OLD.FactDB.from_model(model)
    new_db = new.FactDB.from_model(model)
    g = model.root
    touched = edit_some_nodes(model, data)
    try:
        old_db.refresh_nodes(g, touched, model)
        new_db.refresh_nodes(g, touched, model)
        for rel in new.RELATIONS:
            assert new_db.rows(rel) == old_db.rows(rel), rel
    finally:
        old_db.close()
        new_db.close()

"""The Session 6 bulk load (rows derived without their graph column, the graph bound once per INSERT statement as
parameter 1, see FlatTables and FactDB._insert_flat) builds exactly the database the code it replaced built: the
relations.py of commit 358f18b, loaded from git into a temporary module, is the oracle. Compared as whole
database images (``Connection.serialize``: every table's rows in rowid order with their types, every index
b-tree page for page, sqlite_stat1, the schema), and as derived row tuples, on generated transformers, GE's real
dumps, every conformance model, relation subsets, a second (qualified) model, random builder graphs with unusual
descriptors, refreshes and rebuilds after edits, and synthetic runs around the batch size."""

from __future__ import annotations

import glob
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from anchorlog.facts import relations as new
from anchorlog.facts.ge_io import read_model
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from tests.oracles.git_rev import git_module
from tests.shared_paths import SHARED
from tests.test_s5_facts import edit_some_nodes, models_with_odd_descriptors

ORACLE_REV = "358f18b"
REAL_GRAPHS = sorted(glob.glob(os.path.join(SHARED, "real-graphs", "*.txt")))
CONFORMANCE_MODELS = sorted(glob.glob(os.path.join(SHARED, "conformance", "cases", "*", "model.pbtxt")))


OLD = git_module(ORACLE_REV, "anchorlog/facts/relations.py", "s6_old_relations")
pytestmark = pytest.mark.skipif(OLD is None, reason=f"git show {ORACLE_REV} unavailable (not a git checkout)")


def assert_same_tables(model: Model, **kw) -> None:
    """Both derivations' row tuples: the same relations, rows, order and value types (1, 1.0 and True are equal
    but are different facts)."""
    tables = OLD.tables_from_model(model, **kw), new.tables_from_model(model, **kw)
    assert list(tables[0]) == list(tables[1])
    typed = [{rel: [(r, tuple(map(type, r))) for r in rows] for rel, rows in t.items()} for t in tables]
    for rel in typed[0]:
        assert typed[1][rel] == typed[0][rel], rel


def assert_same_image(old_db, new_db) -> None:
    """Byte-identical database images; on a difference, name the first relation whose rows differ."""
    old_image, new_image = old_db.conn.serialize(), new_db.conn.serialize()
    if old_image != new_image:
        for rel in new.RELATIONS:
            assert new_db.rows(rel) == old_db.rows(rel), rel
        q = "SELECT * FROM sqlite_stat1 ORDER BY tbl, idx"
        assert new_db.conn.execute(q).fetchall() == old_db.conn.execute(q).fetchall()
        assert old_image == new_image  # same rows and statistics, other pages


def assert_same_db(model: Model, **kw) -> None:
    old_db = OLD.FactDB.from_model(model, **kw)
    new_db = new.FactDB.from_model(model, **kw)
    try:
        assert_same_image(old_db, new_db)
    finally:
        old_db.close()
        new_db.close()


@pytest.mark.parametrize("nodes,seed", [(600, 0), (1500, 1), (3000, 2)])
def test_generated_transformers_build_the_old_database(nodes, seed):
    model = generate_transformer(nodes=nodes, seed=seed)
    assert_same_tables(model)
    assert_same_db(model)


@pytest.mark.parametrize(
    "rels",
    [[r] for r in new.RELATIONS if r != "graph"] + [["ref_io", "tensor_attr"], ["node", "parent_out"]],
)
def test_relation_subsets_build_the_old_database(rels):
    model = generate_transformer(nodes=600, seed=2)
    assert_same_tables(model, relations=rels)
    assert_same_db(model, relations=rels)


def test_graph_subset_and_qualified_names_give_the_old_rows():
    model = generate_transformer(nodes=600, seed=3)
    names = [g.name for g in model.graphs]
    qual = {n: f"m/{n}" for n in names}
    assert_same_tables(model, model_name="m", graph_names=qual, graphs=names[1:4], include_op_class=False)
    assert_same_tables(model, model_name="m", graph_names=qual, graphs=names[1:4])


def test_a_second_model_with_qualified_graph_names_builds_the_old_database():
    first, second = generate_transformer(nodes=500, seed=4), generate_transformer(nodes=700, seed=5)
    old_db, new_db = OLD.FactDB.from_model(first), new.FactDB.from_model(first)
    try:
        assert old_db.add_model(second) == new_db.add_model(second)
        assert any("/" in g for (g,) in new_db.conn.execute("SELECT graph FROM node"))  # qualified names
        assert_same_image(old_db, new_db)
    finally:
        old_db.close()
        new_db.close()


def test_inserting_row_tuples_builds_the_old_database():
    """``FactDB._insert`` (row tuples, as bench_import.py loads them) regroups rows by graph into runs."""
    model = generate_transformer(nodes=800, seed=6)
    tables = new.tables_from_model(model)
    old_db, new_db = OLD.FactDB(), new.FactDB()
    try:
        for db in (old_db, new_db):
            db.conn.execute("DELETE FROM op_class")  # tables_from_model brings its own op_class rows
            db._insert(tables)
        assert_same_image(old_db, new_db)
    finally:
        old_db.close()
        new_db.close()


@pytest.mark.parametrize("sizes", [[1], [49, 50, 51], [3, 100, 2, 1, 150, 49, 7], [50, 1, 50], [0, 5, 0]])
def test_runs_around_the_batch_size_insert_every_row_in_order(sizes):
    """Runs of rows per graph shorter than, equal to and longer than one INSERT batch, interleaved: the batches
    and the one-row statements between them keep the rows in derivation order."""
    flat = new.FlatTables()
    expected = []
    for gi, size in enumerate(sizes):
        graph = f"g{gi}"
        for r in range(size):
            flat["ctrl_edge"].extend((f"s{gi}_{r}", f"d{gi}_{r}"))
            flat["node_attr"].extend((f"n{gi}_{r}", "k", "i", "v" if r % 2 else r))  # value: no column affinity
            expected.append((graph, f"s{gi}_{r}", f"d{gi}_{r}"))
        flat.end_graph(graph)
    assert flat.row_tuples("ctrl_edge") == expected
    db = new.FactDB()
    try:
        db._insert_flat(flat)
        assert db.rows("ctrl_edge") == expected
        assert db.rows("node_attr") == flat.row_tuples("node_attr")
        assert [type(r[4]) for r in db.rows("node_attr")] == [type(r[4]) for r in flat.row_tuples("node_attr")]
    finally:
        db.close()


@pytest.mark.skipif(not REAL_GRAPHS, reason="no real GE dumps next to the project")
@pytest.mark.parametrize("path", REAL_GRAPHS, ids=os.path.basename)
def test_real_ge_dumps_build_the_old_database(path):
    model = read_model(path)
    assert_same_tables(model)
    assert_same_db(model)


@pytest.mark.skipif(not CONFORMANCE_MODELS, reason="no conformance cases next to the project")
def test_conformance_models_build_the_old_database():
    checked = 0
    for path in CONFORMANCE_MODELS:
        try:
            model = read_model(path)
        except Exception:  # noqa: BLE001 -- cases that test the reader's errors
            continue
        assert_same_tables(model)
        assert_same_db(model)
        checked += 1
    assert checked > 0


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models_with_odd_descriptors())
def test_random_models_with_odd_descriptors_build_the_old_database(model):
    assert_same_tables(model)
    assert_same_db(model)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(models_with_odd_descriptors(), st.data())
def test_refresh_and_rebuild_after_an_edit_give_the_old_database(model, data):
    """Both databases refreshed after the same edit (refresh_nodes inserts through the flat tables too), then
    both rebuilt (rebuild_model: emptied, bulk loaded, indexed again)."""
    old_db = OLD.FactDB.from_model(model)
    new_db = new.FactDB.from_model(model)
    g = model.root
    touched = edit_some_nodes(model, data)
    try:
        old_db.refresh_nodes(g, touched, model)
        new_db.refresh_nodes(g, touched, model)
        assert_same_image(old_db, new_db)
        old_db.rebuild_model(model)
        new_db.rebuild_model(model)
        assert_same_image(old_db, new_db)
    finally:
        old_db.close()
        new_db.close()

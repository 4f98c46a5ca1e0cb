"""``topological_resort``: after edits confined to some graphs, sorting only those gives exactly the order and ids
of a full ``topological_sorting`` (the layout pass re-sorts only the graphs its Identities landed in)."""

from __future__ import annotations

import copy

from anchorlog.analysis.order import graph_nodes, remembered_topological_order, topological_resort, topological_sorting
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.graph import Model
from anchorlog.runtime.rewrite import insert_identity_after, insert_identity_before


def _orders(model: Model) -> tuple[dict[str, list[str]], dict[str, int | None]]:
    orders = {g.name: [n.name for n in graph_nodes(model, g)] for g in model.graphs}
    ids = {f"{g.name}/{n.name}": n.id for g in model.graphs for n in g.nodes.values()}
    return orders, ids


def _edited_models() -> tuple[Model, set[str]]:
    model = generate_transformer(layers=2, seed=0)
    topological_sorting(model)
    # one Identity in the root and one in a subgraph, both in the middle of their graphs
    edited: set[str] = set()
    root = model.root
    mid = list(root.nodes.values())[len(root.nodes) // 2]
    cons = root.consumers(mid.name, 0)
    insert_identity_after(root, (mid.name, 0), cons, name=root.unique_name("ident_resort_a"))
    edited.add(root.name)
    sub = next(g for g in model.graphs[1:] if len(g.nodes) > 2)
    dst = next(n for n in sub.nodes.values() if n.inputs and n.inputs[0] is not None)
    insert_identity_before(sub, (dst.name, 0), name=sub.unique_name("ident_resort_b"))
    edited.add(sub.name)
    return model, edited


def test_resort_of_edited_graphs_equals_full_sort() -> None:
    model, edited = _edited_models()
    full = copy.deepcopy(model)
    topological_sorting(full)
    topological_resort(model, edited)
    assert _orders(model) == _orders(full)
    assert any("ident_resort_a" in name for name in _orders(model)[0][model.root.name])


def test_resort_catches_an_unnamed_graph_whose_node_count_changed() -> None:
    model, edited = _edited_models()
    full = copy.deepcopy(model)
    topological_sorting(full)
    topological_resort(model, edited - {model.root.name})  # the root's new node count still triggers its sort
    assert _orders(model) == _orders(full)


def test_resort_of_an_unsorted_model_is_a_full_sort() -> None:
    model = generate_transformer(layers=1, seed=1)
    full = copy.deepcopy(model)
    topological_sorting(full)
    assert remembered_topological_order(model) is None
    topological_resort(model, [])
    assert _orders(model) == _orders(full)

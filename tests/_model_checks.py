"""Structural checks shared by the ONNX/generator tests: the project's validate() when present, plus the
invariants these producers promise (edges resolve, parent indexes in range, graphs acyclic)."""

from __future__ import annotations

from anchorlog.facts.graph import Model


def check_model(model: Model) -> None:
    try:
        from anchorlog.facts.validate import validate
    except ImportError:  # pragma: no cover - validate lands with the I/O work
        validate = None
    if validate is not None:
        validate(model)
    check_structure(model)


def check_structure(model: Model) -> None:
    names = [g.name for g in model.graphs]
    assert len(names) == len(set(names)), "graph names repeat"
    owners: dict[str, str] = {}
    for g in model.graphs:
        for n in g.nodes.values():
            assert n.graph is g
            for s in n.subgraph_names:
                assert model.has_graph(s), f"{n.name}: missing subgraph {s}"
                assert s not in owners, f"subgraph {s} owned twice"
                owners[s] = n.name
            for i, a in enumerate(n.inputs):
                if a is None:
                    continue
                src = g.nodes.get(a[0])
                assert src is not None, f"{g.name}/{n.name} input {i}: no producer {a[0]}"
                assert 0 <= a[1] < max(1, src.num_outputs), f"{n.name} input {i}: {a} out of range"
            assert len(n.input_desc) >= len(n.inputs), f"{n.name}: fewer input descs than inputs"
            for c in n.ctrl_inputs:
                assert c in g.nodes, f"{n.name}: control input {c} missing"
    for g in model.graphs[1:]:
        assert g.name in owners, f"subgraph {g.name} has no owner"
        parent = model.find_node(owners[g.name])
        assert parent is not None
        for n in g.nodes.values():
            k = n.attr("_parent_node_index")
            if n.type == "Data" and k is not None:
                assert 0 <= k < len(parent.inputs), f"{g.name}/{n.name}: parent index {k} out of range"
                assert parent.inputs[k] is not None
            if n.type == "NetOutput":
                for d in n.input_desc:
                    k = d.attr("_parent_node_index")
                    if k is not None:
                        assert 0 <= k < parent.num_outputs, f"{g.name}: NetOutput parent index {k} out of range"
    for g in model.graphs:
        _assert_acyclic(g)


def _assert_acyclic(g) -> None:
    indeg = {n: 0 for n in g.nodes}
    succ: dict[str, list[str]] = {n: [] for n in g.nodes}
    for n in g.nodes.values():
        preds = {a[0] for a in n.inputs if a is not None} | set(n.ctrl_inputs)
        for p in preds:
            succ[p].append(n.name)
            indeg[n.name] += 1
    ready = [n for n, d in indeg.items() if d == 0]
    seen = 0
    while ready:
        x = ready.pop()
        seen += 1
        for y in succ[x]:
            indeg[y] -= 1
            if indeg[y] == 0:
                ready.append(y)
    assert seen == len(g.nodes), f"graph {g.name} has a cycle"

"""Benchmark: layout-conflict on a generated N-node graph (default 100k).

    .venv/bin/python benchmarks/bench_layout_conflict.py [N]

The graph: a Data feeding a long ReLU chain with side branches every 10 nodes, a Concat (continuous input)
every 1000 nodes fed by two neighbours, Consts feeding Adds, a StreamSwitch every 5000 nodes, and a NetOutput
collecting the branch ends. Prints the pass time and the number of Identities inserted.
"""

from __future__ import annotations

import sys
import time

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.layout_conflict import run
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc


def _desc() -> TensorDesc:
    return TensorDesc(dtype="DT_FLOAT", shape=[8, 8], layout="ND")


def make_graph(n: int) -> Model:
    g = Graph("bench")
    m = Model("bench", [g])

    def add(name: str, typ: str, inputs: list[tuple[str, int]], n_out: int = 1, **attrs: object) -> Node:
        node = Node(
            name,
            typ,
            inputs=list(inputs),
            input_desc=[_desc() for _ in inputs],
            output_desc=[_desc() for _ in range(n_out)],
        )
        for k, v in attrs.items():
            node.set_attr(k, v)
        g.add_node(node)
        return node

    add("data", "Data", [], 1)
    prev = "data"
    outs: list[tuple[str, int]] = []
    i = 0
    while g.__len__() < n - 1:
        i += 1
        name = f"relu{i}"
        if i % 1000 == 0:
            add(name, "Concat", [(prev, 0), (f"relu{i - 2}", 0)], 1, continuous_input=True)
        elif i % 5000 == 1 and i > 1:
            add(name, "StreamSwitch", [(prev, 0)], 1)
        elif i % 97 == 0:
            add(f"k{i}", "Const", [], 1)
            add(name, "Add", [(prev, 0), (f"k{i}", 0)], 1)
        else:
            add(name, "ReLU", [(prev, 0)], 1)
        if i % 10 == 0:
            add(f"side{i}", "ReLU", [(name, 0)], 1)
            outs.append((f"side{i}", 0))
        prev = name
    outs.append((prev, 0))
    add("out", "NetOutput", outs, 0)
    return m


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    m = make_graph(n)
    t0, c0 = time.perf_counter(), time.process_time()
    rep = run(m, PassContext())
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(
        f"nodes={n} layout-conflict alone (builds the fact DB) wall {dt:.2f}s cpu {dc:.2f}s identities={len(rep['identities'])}"
    )
    # In a pipeline the fact database is shared (one per run): time the pass with it already built.
    m = make_graph(n)
    ctx = PassContext()
    c0 = time.process_time()
    shared_facts(m, ctx)
    db_cpu = time.process_time() - c0
    t0, c0 = time.perf_counter(), time.process_time()
    rep = run(m, ctx)
    dt, dc = time.perf_counter() - t0, time.process_time() - c0
    print(f"nodes={n} layout-conflict with a shared fact DB (built in cpu {db_cpu:.2f}s) wall {dt:.2f}s cpu {dc:.2f}s")


if __name__ == "__main__":
    main()

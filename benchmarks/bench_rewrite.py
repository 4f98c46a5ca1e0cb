"""Benchmark: Identity insertion in the IR (``runtime.rewrite.insert_identity_before``), the edit that
rw-conflict and layout-conflict repeat once per conflict.

    .venv/bin/python benchmarks/bench_rewrite.py [--nodes 10000] [--inserts 2500]

``generate_transformer(nodes=N, seed=0)``; an Identity is inserted before the first connected input of each of the
first ``--inserts`` nodes of the root graph that have one. Prints the CPU seconds of the insertions.
"""

from __future__ import annotations

import argparse
import time

from anchorlog.facts.generate import generate_transformer
from anchorlog.runtime.rewrite import insert_identity_before


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--inserts", type=int, default=2_500)
    args = ap.parse_args()
    model = generate_transformer(nodes=args.nodes, seed=0)
    g = model.root
    targets = [n for n in g.nodes.values() if any(a is not None for a in n.inputs)][: args.inserts]
    t = time.process_time()
    for n in targets:
        i = next(k for k, a in enumerate(n.inputs) if a is not None)
        insert_identity_before(g, (n.name, i), name=f"{n.name}_id")
    cpu = time.process_time() - t
    print(
        f"nodes={model.num_nodes()} inserts={len(targets)} cpu={cpu:.2f}s per_insert={1000 * cpu / len(targets):.2f}ms"
    )


if __name__ == "__main__":
    main()

"""Benchmark of the transformer generator (anchorlog.facts.generate) and of writing its output.

For each target size, generates ``generate_transformer(nodes=N, seed=S)`` a few times and reports the best
and median wall time, plus (``--write``) the time to write the model as GE text (.pbtxt) and binary (.pb).

Run:  .venv/bin/python benchmarks/bench_generate.py --nodes 10000 100000 [--repeat 3] [--write]
Prints one line per size: nodes, graphs, TensorMoves, generate best/median seconds, nodes per second, the
median time of the first full garbage collection afterwards [, write text/binary seconds and sizes].
"""

from __future__ import annotations

import argparse
import gc
import os
import statistics
import tempfile
import time

from anchorlog.facts.generate import count_types, generate_transformer


def bench(nodes: int, seed: int, repeat: int, write: bool) -> str:
    times = []
    gc_times = []
    model = None
    for _ in range(repeat):
        model = None
        gc.collect()
        t0 = time.perf_counter()
        model = generate_transformer(None, seed, nodes=nodes)
        times.append(time.perf_counter() - t0)
        # The generator pauses the cyclic collector; its first full pass over the new objects comes later,
        # at someone else's expense. Timed here so the total is honest.
        t0 = time.perf_counter()
        gc.collect()
        gc_times.append(time.perf_counter() - t0)
    assert model is not None
    n = model.num_nodes()
    tms = count_types(model).get("TensorMove", 0)
    best, med = min(times), statistics.median(times)
    line = (
        f"target {nodes:>7}  nodes {n:>7}  graphs {len(model.graphs):>4}  TensorMoves {tms:>6} ({tms / n:.1%})  "
        f"generate best {best:6.2f}s  median {med:6.2f}s  ({n / best:,.0f} nodes/s)  "
        f"first full gc {statistics.median(gc_times):5.2f}s"
    )
    if write:
        from anchorlog.facts import ge_io

        with tempfile.TemporaryDirectory() as tmp:
            for suffix in (".pbtxt", ".pb"):
                path = os.path.join(tmp, "model" + suffix)
                t0 = time.perf_counter()
                ge_io.write_model(model, path)
                dt = time.perf_counter() - t0
                line += f"  write {suffix} {dt:5.2f}s ({os.path.getsize(path) / 2**20:.1f} MiB)"
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--write", action="store_true", help="also time writing .pbtxt and .pb")
    args = ap.parse_args()
    for n in args.nodes:
        print(bench(n, args.seed, args.repeat, args.write), flush=True)


if __name__ == "__main__":
    main()

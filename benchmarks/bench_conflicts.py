"""Benchmark: ``mem-conflict`` (rw-conflict + layout-conflict) and ``graph-lint`` on generated graphs.

    .venv/bin/python benchmarks/bench_conflicts.py --nodes 10000 100000 [--repeat 2] [--passes rw-conflict,...]

Each size: ``generate_transformer(nodes=N, seed=0)`` (a decoder with KV-cache Assigns on Variables,
HcomAllReduce, PartitionedCall/If subgraphs), then every pass on a fresh copy of the model, timed separately,
plus their sum; wall-clock and CPU time (the CPU figure is what to compare on a shared machine). The model is generated once per size and frozen out of the cyclic GC (``gc.freeze``) as a
long-lived model would be; each pass also pauses the GC itself. Pass modules are imported before timing.
"""

from __future__ import annotations

import argparse
import copy
import gc
import time

from anchorlog.analysis.registry import PASSES, PassContext, load_all
from anchorlog.facts.generate import generate_transformer

DEFAULT_PASSES = ("rw-conflict", "layout-conflict", "graph-lint")


def bench(nodes: int, passes: tuple[str, ...], repeat: int) -> dict[str, object]:
    model = generate_transformer(nodes=nodes, seed=0)
    gc.collect()
    gc.freeze()
    row: dict[str, object] = {"nodes": model.num_nodes(), "graphs": len(model.graphs)}
    total = 0.0
    for name in passes:
        times = []
        cpu = []
        section: dict = {}
        for _ in range(repeat):
            m = copy.deepcopy(model)
            gc.freeze()
            ctx = PassContext()
            t, c = time.perf_counter(), time.process_time()
            section = PASSES[name].fn(m, ctx) or {}  # type: ignore[misc]
            times.append(time.perf_counter() - t)
            cpu.append(time.process_time() - c)
        best = min(times)
        total += best
        row[name] = (best, min(cpu), _summary(name, section))
    row["total"] = total
    return row


def _summary(name: str, section: dict) -> str:
    if name == "rw-conflict":
        return f"{section.get('copies', 0)} copies"
    if name == "graph-lint":
        return f"{len(section.get('unordered', []))} unordered pairs"
    if name == "layout-conflict":
        ids = section.get("identities", [])
        return f"{len(ids) if isinstance(ids, list) else ids} identities"
    return ""


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--passes", default=",".join(DEFAULT_PASSES))
    a = ap.parse_args()
    load_all()
    passes = tuple(p for p in a.passes.split(",") if p)
    for n in a.nodes:
        row = bench(n, passes, a.repeat)
        parts = [f"nodes={row['nodes']} graphs={row['graphs']}"]
        for p in passes:
            best, cpu, what = row[p]  # type: ignore[misc]
            parts.append(f"{p}: {best:.2f}s wall, {cpu:.2f}s CPU ({what})")
        parts.append(f"total {row['total']:.2f}s")
        print(" | ".join(parts), flush=True)


if __name__ == "__main__":
    main()

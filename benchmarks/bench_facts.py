"""Benchmark of fact extraction (anchorlog.facts.relations): IR -> rows -> indexed SQLite.

For each target size, generates ``generate_transformer(nodes=N, seed=0)`` once, then times (best of
``--repeat``) ``tables_from_model`` (derivation only) and ``FactDB.from_model`` (derivation, bulk insert,
indexes, ANALYZE) in memory and, with ``--file``, into a file.

Run:  .venv/bin/python benchmarks/bench_facts.py --nodes 10000 100000 [--repeat 3] [--file] [--phases] [--frozen]
Prints one line per size: nodes, graphs, fact rows, derive seconds, load seconds (in memory [, file]),
each as best wall time and best CPU time. ``--phases``: also the CPU split of the best in-memory
``FactDB.from_model`` into derive + insert, indexes + ANALYZE, rest. ``--frozen``: the model is moved out of
the cyclic collector first (``gc.freeze``), as ``bench_conflicts.py`` and long-lived programs do.
"""

from __future__ import annotations

import argparse
import gc
import os
import tempfile
import time

from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.relations import FactDB, tables_from_model


def best_of(repeat: int, fn) -> tuple[float, float, object]:
    """Best wall time, best CPU time (process_time: less sensitive to a loaded machine), last result."""
    best, best_cpu, out = float("inf"), float("inf"), None
    for _ in range(repeat):
        gc.collect()
        t0, c0 = time.perf_counter(), time.process_time()
        out = fn()
        best = min(best, time.perf_counter() - t0)
        best_cpu = min(best_cpu, time.process_time() - c0)
    return best, best_cpu, out


def phase_split(model: object, repeat: int) -> str:
    """CPU seconds of FactDB.from_model's phases (best total of ``repeat``): derive + insert, indexes + ANALYZE."""
    spent = {"load": 0.0, "index": 0.0}

    def timed(fn, key):  # type: ignore[no-untyped-def]
        def run(*a, **k):  # type: ignore[no-untyped-def]
            c = time.process_time()
            try:
                return fn(*a, **k)
            finally:
                spent[key] += time.process_time() - c

        return run

    load, index = FactDB._derive_and_insert, FactDB.create_indexes
    best: tuple[float, float, float] | None = None
    FactDB._derive_and_insert, FactDB.create_indexes = timed(load, "load"), timed(index, "index")  # type: ignore[method-assign]
    try:
        for _ in range(repeat):
            gc.collect()
            spent.update(load=0.0, index=0.0)
            c0 = time.process_time()
            FactDB.from_model(model).close()  # type: ignore[arg-type]
            total = time.process_time() - c0
            if best is None or total < best[0]:
                best = (total, spent["load"], spent["index"])
    finally:
        FactDB._derive_and_insert, FactDB.create_indexes = load, index  # type: ignore[method-assign]
    assert best is not None
    total, load_s, index_s = best
    return f"  [cpu: derive+insert {load_s:.2f}s, indexes+ANALYZE {index_s:.2f}s, rest {total - load_s - index_s:.2f}s]"


def bench(nodes: int, repeat: int, to_file: bool, phases: bool = False, frozen: bool = False) -> str:
    model = generate_transformer(None, 0, nodes=nodes)
    if frozen:
        gc.collect()
        gc.freeze()
    t_derive, c_derive, tables = best_of(repeat, lambda: tables_from_model(model))
    n_rows = sum(len(r) for r in tables.values())  # type: ignore[union-attr]
    t_mem, c_mem, db = best_of(repeat, lambda: FactDB.from_model(model))
    db.close()  # type: ignore[union-attr]
    line = (
        f"nodes {model.num_nodes():>7}  graphs {len(model.graphs):>4}  rows {n_rows:>9,}  "
        f"derive {t_derive:5.2f}s (cpu {c_derive:5.2f}s)  FactDB in memory {t_mem:5.2f}s (cpu {c_mem:5.2f}s)"
    )
    if to_file:
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "facts.sqlite")
            t_file, c_file, db = best_of(repeat, lambda: FactDB.from_model(model, path))
            db.close()  # type: ignore[union-attr]
            line += f"  file {t_file:5.2f}s (cpu {c_file:5.2f}s, {os.path.getsize(path) / 2**20:.0f} MiB)"
    if phases:
        line += phase_split(model, repeat)
    if frozen:
        gc.unfreeze()
    return line


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--file", action="store_true", help="also time writing a database file")
    ap.add_argument("--phases", action="store_true", help="also the CPU split of FactDB.from_model")
    ap.add_argument("--frozen", action="store_true", help="gc.freeze() the model before timing")
    args = ap.parse_args()
    for n in args.nodes:
        print(bench(n, args.repeat, args.file, args.phases, args.frozen), flush=True)


if __name__ == "__main__":
    main()

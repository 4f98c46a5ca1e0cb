"""Benchmark: ``rw-conflict`` alone and inside a pipeline (fact database already shared), CPU seconds.

    nice -n 10 .venv/bin/python benchmarks/bench_rw_conflict.py --nodes 10000 30000 [--profile]
    nice -n 10 .venv/bin/python benchmarks/bench_rw_conflict.py --conflict-heavy 1500 --split-heavy 200

Each size: ``generate_transformer(nodes=N, seed=0)`` frozen out of the cyclic GC (as bench_conflicts.py). Three
figures per size, each on a fresh deep copy: the shared fact database (``shared_facts``, paid once per pipeline
run by whichever pass comes first), the pass with that database already built (what rw-conflict costs in
``mem-conflict``/``o3``), and the pass alone on a fresh context (it then builds the database itself, which is what
``bench_conflicts.py`` times). Parsing the rule file is timed apart (once per process; the first run of the pass
pays it). Also the number of rule evaluations and copies.
"""

from __future__ import annotations

import argparse
import copy
import cProfile
import gc
import pstats
import time

from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PASSES, PassContext, load_all
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.synthetic import rw_conflict_heavy, rw_split_heavy


def bench(nodes: int, profile: bool) -> str:
    model = generate_transformer(nodes=nodes, seed=0)
    gc.collect()
    gc.freeze()
    run = PASSES["rw-conflict"].fn
    from anchorlog.analysis import rw_conflict

    c = time.process_time()
    rw_conflict._program()  # parsed once per process (the first pass run pays it)
    parse_cpu = time.process_time() - c

    m = copy.deepcopy(model)
    gc.freeze()
    ctx = PassContext()
    c = time.process_time()
    shared_facts(m, ctx)
    facts_cpu = time.process_time() - c
    prof = cProfile.Profile() if profile else None
    c = time.process_time()
    if prof:
        prof.enable()
    section = run(m, ctx)  # type: ignore[misc]
    if prof:
        prof.disable()
    shared_cpu = time.process_time() - c

    m2 = copy.deepcopy(model)
    gc.freeze()
    c = time.process_time()
    run(m2, PassContext())  # type: ignore[misc]
    alone_cpu = time.process_time() - c
    if prof:
        pstats.Stats(prof).sort_stats("cumulative").print_stats(25)
    return (
        f"nodes={model.num_nodes()} graphs={len(model.graphs)} | parse rw_types.dl {parse_cpu:.2f}s CPU (once) | "
        f"shared facts {facts_cpu:.2f}s CPU | "
        f"rw-conflict with shared facts {shared_cpu:.2f}s CPU | alone {alone_cpu:.2f}s CPU | "
        f"{section.get('rule_evaluations', '?')} rule evaluation(s), {section.get('copies', 0)} copies"
    )


def bench_synthetic(kind: str, blocks: int) -> str:
    """rw-conflict with the shared fact database built, on a synthetic graph (rule parse paid beforehand)."""
    from anchorlog.analysis import rw_conflict

    rw_conflict._program()
    model = rw_conflict_heavy(blocks) if kind == "conflict" else rw_split_heavy(blocks)
    gc.collect()
    gc.freeze()
    ctx = PassContext()
    shared_facts(model, ctx)
    c = time.process_time()
    section = PASSES["rw-conflict"].fn(model, ctx)  # type: ignore[misc]
    cpu = time.process_time() - c
    return (
        f"{kind}-heavy nodes={model.num_nodes()} (before) | rw-conflict with shared facts {cpu:.2f}s CPU | "
        f"{section.get('rule_evaluations', '?')} rule evaluation(s), {section.get('copies', 0)} copies"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, nargs="*", default=[10_000, 30_000])
    ap.add_argument("--profile", action="store_true")
    ap.add_argument("--conflict-heavy", type=int, metavar="BLOCKS", help="synthetic: one Identity per 5 nodes")
    ap.add_argument("--split-heavy", type=int, metavar="BLOCKS", help="synthetic: one Identity split per 5 nodes")
    a = ap.parse_args()
    load_all()
    if a.conflict_heavy:
        print(bench_synthetic("conflict", a.conflict_heavy), flush=True)
    if a.split_heavy:
        print(bench_synthetic("split", a.split_heavy), flush=True)
    if a.conflict_heavy or a.split_heavy:
        return
    for n in a.nodes:
        print(bench(n, a.profile), flush=True)


if __name__ == "__main__":
    main()

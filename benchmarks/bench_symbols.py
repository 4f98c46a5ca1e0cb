"""Benchmark: the shared symbol table (symbols.dl + GE-order layout) on a generated N-node transformer.

    .venv/bin/python benchmarks/bench_symbols.py [N] [engine ...]     # default 100000 sqlite

Prints, per engine, CPU seconds (``time.process_time``; the machine is shared, wall clock is not comparable)
of: fact derivation (only the relations symbols.dl reads), GE's node order, the rules (``Program.run``), the
layout of the result (``assemble_symbol_table``) and the whole ``symbol_table_rules`` call, plus the number of
symbols and the load average; then the same call through the pass-context cache (``cached_symbol_table``), first
and second time on one unchanged model. ``auto`` is SQLite (see ``anchorlog.analysis.symbols.DUCKDB_FROM_NODES``).
"""

from __future__ import annotations

import gc
import os
import sys
import time

from anchorlog.analysis import symbols
from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.relations import FactDB


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    engines = sys.argv[2:] or ["sqlite"]
    model = generate_transformer(nodes=n, seed=0)
    gc.collect()
    gc.freeze()
    print(f"nodes: {model.num_nodes()}, load average {os.getloadavg()[0]:.2f}")
    c = time.process_time()
    db = FactDB.from_model(model, relations=symbols.SYMBOL_RELATIONS)
    print(f"facts:       {time.process_time() - c:7.2f} s CPU")
    c = time.process_time()
    node_order_rows(model)
    print(f"node order:  {time.process_time() - c:7.2f} s CPU")
    spent: dict[str, float] = {}
    prog = symbols._program()
    run, assemble = prog.run, symbols.assemble_symbol_table

    def timed_run(*a, **k):
        c0 = time.process_time()
        try:
            return run(*a, **k)
        finally:
            spent["rules"] = time.process_time() - c0

    def timed_assemble(*a, **k):
        c0 = time.process_time()
        try:
            return assemble(*a, **k)
        finally:
            spent["layout"] = time.process_time() - c0

    prog.run, symbols.assemble_symbol_table = timed_run, timed_assemble  # type: ignore[method-assign]
    try:
        for engine in engines:
            c = time.process_time()
            st = symbols.symbol_table_rules(model, db=db, engine=engine)
            total = time.process_time() - c
            print(
                f"table ({engine}): {total:7.2f} s CPU (rules {spent['rules']:.2f}, layout {spent['layout']:.2f}, "
                f"node order included), {len(st.symbol_to_anchors)} symbols"
            )
    finally:
        del prog.run
        symbols.assemble_symbol_table = assemble
    # in a pipeline: the pass context's cache (the shared fact database is built on the first call, not timed)
    ctx = PassContext()
    shared_facts(model, ctx)
    for call in ("first", "second"):
        c = time.process_time()
        symbols.cached_symbol_table(model, ctx)
        print(f"cached_symbol_table, {call} call: {time.process_time() - c:7.2f} s CPU")


if __name__ == "__main__":
    main()

"""Benchmark: the shared symbol table (symbols.dl + GE-order layout) on a generated N-node transformer.

    .venv/bin/python benchmarks/bench_symbols.py [N] [engine]     # default 100000 auto

Prints: fact derivation (only the relations symbols.dl reads), GE's node order, the rules + layout per engine
(``auto`` = SQLite below 3,000 nodes, DuckDB above), and the number of symbols.
"""

from __future__ import annotations

import sys
import time

from anchorlog.analysis.order import node_order_rows
from anchorlog.analysis.symbols import SYMBOL_RELATIONS, symbol_table_rules
from anchorlog.facts.generate import generate_transformer
from anchorlog.facts.relations import FactDB


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
    engine = sys.argv[2] if len(sys.argv) > 2 else "auto"
    model = generate_transformer(nodes=n, seed=0)
    print(f"nodes: {model.num_nodes()}")
    t = time.perf_counter()
    db = FactDB.from_model(model, relations=SYMBOL_RELATIONS)
    print(f"facts:       {time.perf_counter() - t:7.2f} s")
    t = time.perf_counter()
    node_order_rows(model)
    print(f"node order:  {time.perf_counter() - t:7.2f} s")
    t = time.perf_counter()
    st = symbol_table_rules(model, db=db, engine=engine)
    print(f"table ({engine}): {time.perf_counter() - t:7.2f} s, {len(st.symbol_to_anchors)} symbols")


if __name__ == "__main__":
    main()

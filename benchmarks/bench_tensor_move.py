"""Benchmark of ``tensor-move-delete`` end to end from a GE text proto, on generated transformer graphs.

For each size the transformer generator (``anchorlog.facts.generate``) builds a graph with at least 5 % of its
nodes TensorMoves (``--share``), writes it as a ``.pbtxt``; the timed part is what ``anchorlog optimize
IN --passes tensor-move-delete`` does: read the text proto, build the fact database, derive the traceback
facts with ``queries/tensor_move.dl``, walk the graph in GE's order deciding TensorMove by TensorMove
(RW types primed, symbol table built and merged after each deletion), rewrite, and write the result.

Run:  nice -n 10 .venv/bin/python benchmarks/bench_tensor_move.py --nodes 10000 100000 [--share 0.06] [--engine sqlite]
Prints one line per graph with the phase times: CPU seconds (``time.process_time``; the machine is shared, so
wall time is printed only for the whole run) and the load average at the start.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time

from anchorlog.analysis import tensor_move as tmmod
from anchorlog.facts.ge_io import read_model, write_model
from anchorlog.facts.generate import count_types, generate_transformer


def bench(nodes: int, share: float, seed: int, engine: str) -> dict:
    model = generate_transformer(nodes=nodes, seed=seed, tensor_move_share=share)
    n_nodes = model.num_nodes()
    n_tm = count_types(model).get("TensorMove", 0)
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "in.pbtxt")
        write_model(model, src)
        del model
        t0 = time.perf_counter()
        c0 = time.process_time()
        m = read_model(src)
        c1 = time.process_time()
        section = tmmod.run_tensor_move_delete(m, {}, engine=engine)
        c3 = time.process_time()
        write_model(m, os.path.join(tmp, "out.pbtxt"))
        c4 = time.process_time()
        t4 = time.perf_counter()
    tim = section["timings"]
    return {
        "nodes": n_nodes,
        "tensor_moves": n_tm,
        "deleted": section["deleted"],
        "kept_by_rule": section["kept_by_rule"],
        "pass_timings": section["timings"],
        "read_s": c1 - c0,
        "facts_s": tim.get("facts_s", 0.0),
        "rules_s": tim.get("rules_s", 0.0),
        "decide_rewrite_s": tim.get("walk_and_decide_s", 0.0),
        "rule_runs": section.get("rule_runs", 0),
        "rederived": section.get("rederived", 0),
        "looked_through": section.get("looked_through", 0),
        "pass_cpu_s": c3 - c1,  # facts + RW priming + symbols + rules + decisions + rewrite, CPU time
        "write_s": c4 - c3,
        "total_cpu_s": c4 - c0,
        "total_wall_s": t4 - t0,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10000, 100000])
    ap.add_argument("--share", type=float, default=0.06, help="TensorMove share of all nodes (default 0.06)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--engine", default="sqlite")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    for n in args.nodes:
        r = bench(n, args.share, args.seed, args.engine)
        print(
            f"nodes={r['nodes']:>7} tms={r['tensor_moves']:>6} deleted={r['deleted']:>6} "
            f"read={r['read_s']:.2f}s facts={r['facts_s']:.2f}s rules={r['rules_s']:.2f}s "
            f"decide+rewrite={r['decide_rewrite_s']:.2f}s rule_runs={r['rule_runs']} "
            f"rederived={r['rederived']} looked_through={r['looked_through']} "
            f"write={r['write_s']:.2f}s pass_cpu={r['pass_cpu_s']:.2f}s total_cpu={r['total_cpu_s']:.2f}s "
            f"(wall {r['total_wall_s']:.2f}s) kept_by={r['kept_by_rule']} pass={r['pass_timings']}",
            flush=True,
        )


if __name__ == "__main__":
    main()

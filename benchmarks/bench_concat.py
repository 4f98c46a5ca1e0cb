"""Benchmark of ``concat-notask`` on generated graphs full of Concats.

Graphs (deterministic for a seed), built directly as IR so that only the pass is timed:

* split-compute-concat blocks: x -> SplitD (axis 0) -> k element-wise branches -> ConcatD (axis 0) — the
  seed's "result merging after block computation", optimizable;
* AllGather -> Concat blocks: k HcomAllGather outputs -> ConcatV2D — the seed's distributed scenario;
* rejected variants mixed in: a Data producer, a concat whose producer output also feeds the graph output, a
  5HD concat with a non-1 leading N, and pairs of concats sharing their producers (the second loses; this
  is what forces the order-dependent re-derivation);
* optionally the project's transformer generator (``--transformer``).

Run:  .venv/bin/python benchmarks/bench_concat.py --nodes 10000 100000 [--transformer] [--engine sqlite]
Prints one line per graph: nodes, concats, marked, rule rounds, seconds: the shared fact database (built once
per pipeline run), the pass (python facts + refreshing the shared database + rules + decisions), the layout.
"""

from __future__ import annotations

import argparse
import gc
import random
import time

from anchorlog.analysis.concat_notask import ConcatNotaskAnalysis
from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.registry import PassContext
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.runtime.memory_layout import layout_facts


def _td(shape: list[int], dtype: str = "DT_FLOAT16", fmt: str = "ND", ofmt: str = "ND", oshape=None) -> TensorDesc:
    t = TensorDesc(dtype=dtype, shape=list(shape), layout=fmt)
    t.set_attr("origin_format", ofmt)
    t.set_attr("origin_shape", list(oshape if oshape is not None else shape))
    return t


class _G:
    def __init__(self) -> None:
        self.g = Graph("bench")
        self.n = 0

    def op(self, typ: str, inputs: list[tuple[str, int] | None], outs: list[TensorDesc], ins=None, **attrs) -> str:
        name = f"{typ.lower()}_{self.n}"
        self.n += 1
        node = Node(name, typ, inputs=list(inputs), id=self.n)
        node.input_desc = ins if ins is not None else [o.copy() for o in outs[:1]] * max(1, len(inputs))
        node.output_desc = outs
        for k, v in attrs.items():
            node.set_attr(k, v)
        self.g.add_node(node)
        return name


def build_concat_graph(target_nodes: int, seed: int = 0) -> Model:
    rng = random.Random(seed)
    b = _G()
    outputs: list[tuple[str, int]] = []
    while b.n < target_nodes:
        kind = rng.random()
        k = rng.choice([2, 3, 4, 8])
        rows = rng.choice([1, 2, 4]) * 16
        if kind < 0.45:  # split-compute-concat, optimizable
            x = b.op("Data", [None], [_td([rows * k, 256])])
            sp = b.op("SplitD", [(x, 0)], [_td([rows, 256]) for _ in range(k)], split_dim=0, num_split=k)
            branches = [b.op("ReLU", [(sp, i)], [_td([rows, 256])]) for i in range(k)]
            branches = [b.op("Mul", [(r, 0), (r, 0)], [_td([rows, 256])]) for r in branches]
            cat = b.op("ConcatD", [(r, 0) for r in branches], [_td([rows * k, 256])], concat_dim=0, N=k)
            outputs.append((cat, 0))
        elif kind < 0.75:  # AllGather -> Concat, optimizable
            gathers = []
            for _ in range(k):
                d = b.op("Data", [None], [_td([rows, 512])])
                gathers.append(b.op("HcomAllGather", [(d, 0)], [_td([rows * 8, 512])], rank_size=8))
            cat = b.op("ConcatV2D", [(g, 0) for g in gathers], [_td([rows * 8 * k, 512])], concat_dim=0, N=k)
            outputs.append((b.op("ReLU", [(cat, 0)], [_td([rows * 8 * k, 512])]), 0))
        elif kind < 0.82:  # Data producer: rejected
            d = [b.op("Data", [None], [_td([rows, 64])]) for _ in range(k)]
            outputs.append((b.op("ConcatD", [(x, 0) for x in d], [_td([rows * k, 64])], concat_dim=0, N=k), 0))
        elif kind < 0.88:  # producer output also a graph output: rejected
            rs = [b.op("ReLU", [(b.op("Data", [None], [_td([rows, 64])]), 0)], [_td([rows, 64])]) for _ in range(k)]
            outputs.append((rs[0], 0))
            outputs.append((b.op("ConcatD", [(r, 0) for r in rs], [_td([rows * k, 64])], concat_dim=0, N=k), 0))
        elif kind < 0.94:  # 5HD concat on C with N = 2: rejected by the axis check
            shape5 = [2, 2, 8, 8, 16]
            ins = []
            for _ in range(k):
                d = b.op("Data", [None], [_td([2, 32, 8, 8], "DT_FLOAT16", "NCHW", "NCHW")])
                ins.append(b.op("Conv2D", [(d, 0)], [_td(shape5, "DT_FLOAT16", "NC1HWC0", "NCHW", [2, 32, 8, 8])]))
            in_descs = [_td(shape5, "DT_FLOAT16", "NC1HWC0", "NCHW", [2, 32, 8, 8]) for _ in range(k)]
            cat = b.op(
                "ConcatD", [(c, 0) for c in ins], [_td([2, 2 * k, 8, 8, 16], fmt="NC1HWC0")], ins=in_descs, concat_dim=1
            )
            outputs.append((cat, 0))
        else:  # two concats over the same producers: the first takes them, the second is rejected
            rs = [b.op("Exp", [(b.op("Data", [None], [_td([rows, 64])]), 0)], [_td([rows, 64])]) for _ in range(k)]
            for _ in range(2):
                outputs.append((b.op("ConcatD", [(r, 0) for r in rs], [_td([rows * k, 64])], concat_dim=0, N=k), 0))
    net = Node("netoutput", "NetOutput", inputs=list(outputs), id=b.n + 1)
    net.input_desc = [_td([16, 64]) for _ in outputs]
    b.g.add_node(net)
    m = Model("bench_concat")
    m.add_graph(b.g)
    return m


def bench(model: Model, label: str, engine: str) -> dict:
    concats = sum(1 for n in model.all_nodes() if n.type in ("ConcatD", "ConcatV2D"))
    gc.collect()
    # In a pipeline the fact database is built once (by the first pass asking for it) and shared: time that
    # separately from the pass, which then only refreshes what earlier edits touched.
    ctx = PassContext(engine=engine)
    ts = time.perf_counter()
    shared_facts(model, ctx)
    t0 = time.perf_counter()
    an = ConcatNotaskAnalysis(model, engine=engine, ctx=ctx)
    verdicts = an.run(apply=True)
    t1 = time.perf_counter()
    ctx.state["fact_cache"]["db"].close()
    lay = layout_facts(model)
    t2 = time.perf_counter()
    row = {
        "graph": label,
        "nodes": model.num_nodes(),
        "concats": concats,
        "marked": sum(v.marked for v in verdicts),
        "rounds": an.rounds,
        "shared_fact_db_s": round(t0 - ts, 2),
        "pass_s": round(t1 - t0, 2),
        **{f"{k}_s": round(v, 2) for k, v in an.timings.items()},
        "layout_s": round(t2 - t1, 2),
        "pieces": len(lay["nopad_piece"]),
    }
    print(" ".join(f"{k}={v}" for k, v in row.items()), flush=True)
    return row


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--nodes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--engine", default="sqlite")
    ap.add_argument("--transformer", action="store_true", help="also run on the transformer generator")
    args = ap.parse_args()
    for n in args.nodes:
        bench(build_concat_graph(n, args.seed), f"concat-blocks-{n}", args.engine)
        if args.transformer:
            from anchorlog.facts.generate import generate_transformer

            bench(generate_transformer(seed=args.seed, nodes=n), f"transformer-{n}", args.engine)


if __name__ == "__main__":
    main()

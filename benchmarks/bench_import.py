"""Benchmark of model import: GE text/binary -> IR (anchorlog.facts.ge_io) -> SQLite facts (FactDB).

Inputs: the largest real GE dump (/work/shared/real-graphs, 710 ops) and generated transformer graphs
(``anchorlog generate transformer --nodes N --seed S``, written as .pbtxt and .pb). Each measurement runs in
a fresh child process so that peak RSS (ru_maxrss) is that of the measured pipeline alone:

* ``import``: read_model(.pbtxt) -> IR (validation included);
* ``import+facts``: the same, then FactDB.from_model (in-memory SQLite, indexed) — the 10 s / 2 GiB target;
* ``cli``: the command ``anchorlog -q facts IN --db OUT.sqlite`` as its own process (start-up, read, facts into a
  database file, exit), timed from outside: wall clock and the child's CPU time (user + system);
* ``binary``: read_model(.pb) -> IR;
* ``protobuf``: google.protobuf.text_format.Parse of the same text into ge_ir_pb2.ModelDef (upb message),
  skipped for files larger than --protobuf-max-mb (it runs at roughly 1-2 MB/s).

Run:  .venv/bin/python benchmarks/bench_import.py [--nodes 10000 100000] [--seed 1] [--work DIR]
Prints a Markdown table (seconds are wall clock; RSS in MiB).

``--phases FILE...`` instead times, in this process and in CPU seconds (best of ``--repeat``), the phases the
pipelines pay for a text model: ``read_model``, ``write_model`` as text (and whether the bytes equal the input),
``tables_from_model``, the SQLite insert, indexes + ANALYZE, and the whole ``FactDB.from_model``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time

REAL = "/work/shared/real-graphs/ge_proto_00017_OptimizeOriginalGraph_FeGraphFusionAfter.txt"

CHILD = r"""
import gc, json, resource, sys, time
mode, path = sys.argv[1], sys.argv[2]
out = {}
if mode == "protobuf":
    from google.protobuf import text_format
    from anchorlog.facts import ge_ir_pb2
    text = open(path, encoding="utf-8").read()
    t0, c0 = time.perf_counter(), time.process_time()
    msg = ge_ir_pb2.ModelDef()
    text_format.Parse(text, msg)
    out["parse"], out["parse_cpu"] = time.perf_counter() - t0, time.process_time() - c0
else:
    from anchorlog.facts import ge_io
    t0, c0 = time.perf_counter(), time.process_time()
    model = ge_io.read_model(path)
    out["parse"], out["parse_cpu"] = time.perf_counter() - t0, time.process_time() - c0
    out["nodes"] = model.num_nodes()
    out["graphs"] = len(model.graphs)
    if mode == "facts":
        from anchorlog.facts.relations import FactDB
        t1, c1 = time.perf_counter(), time.process_time()
        db = FactDB.from_model(model)
        out["facts"], out["facts_cpu"] = time.perf_counter() - t1, time.process_time() - c1
        out["rows"] = sum(db.conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                          for (t,) in db.conn.execute("SELECT name FROM sqlite_master WHERE type='table'"))
out["rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
print(json.dumps(out))
"""


def child(mode: str, path: str, timeout: float) -> dict:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-c", CHILD, mode, path], capture_output=True, text=True, timeout=timeout, check=False
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{mode} {path}: {proc.stderr.strip().splitlines()[-1:]}")
    res = json.loads(proc.stdout.strip().splitlines()[-1])
    res["wall"] = time.perf_counter() - t0
    return res


def cli_facts(path: str, work: str, timeout: float) -> dict:
    """``anchorlog -q facts path --db ...`` in a child process: wall clock and CPU time (user + system)."""
    cli = os.path.join(os.path.dirname(sys.executable), "anchorlog")
    db = os.path.join(work, "cli_facts.sqlite")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t0 = time.perf_counter()
    subprocess.run([cli, "-q", "facts", path, "--db", db], check=True, timeout=timeout)
    wall = time.perf_counter() - t0
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    os.remove(db)
    return {"wall": wall, "cpu": cpu}


def generate(nodes: int, seed: int, work: str) -> str:
    path = os.path.join(work, f"transformer_{nodes}_{seed}.pbtxt")
    if not os.path.exists(path):
        cli = os.path.join(os.path.dirname(sys.executable), "anchorlog")
        subprocess.run([cli, "--quiet", "generate", "transformer", "--nodes", str(nodes), "--seed", str(seed),
                        "-o", path], check=True)  # fmt: skip
    return path


def to_binary(path: str) -> str:
    pb = os.path.splitext(path)[0] + ".pb"
    if not os.path.exists(pb):
        from anchorlog.facts import ge_io

        ge_io.write_model(ge_io.read_model(path), pb)
    return pb


def phases(path: str, repeat: int, work: str) -> str:
    """One Markdown row: CPU seconds (best of ``repeat``) of each phase for the text model at ``path``."""
    import gc

    from anchorlog.facts import ge_io
    from anchorlog.facts.relations import FactDB, tables_from_model

    best: dict[str, float] = {}

    def done(name: str, c0: float) -> None:
        best[name] = min(best.get(name, float("inf")), time.process_time() - c0)

    out_path = os.path.join(work, "phases_out.pbtxt")
    identical = True
    nodes = rows = 0
    for _ in range(repeat):
        c0 = time.process_time()
        model = ge_io.read_model(path)
        done("read", c0)
        nodes = model.num_nodes()
        c0 = time.process_time()
        ge_io.write_model(model, out_path)
        done("write", c0)
        with open(path, "rb") as a, open(out_path, "rb") as b:
            identical = identical and a.read() == b.read()
        c0 = time.process_time()
        tables = tables_from_model(model)
        done("derive", c0)
        rows = sum(len(r) for r in tables.values())
        del tables["op_class"]  # a new FactDB has it already
        db = FactDB(":memory:")
        c0 = time.process_time()
        db._insert(tables)
        done("insert", c0)
        c0 = time.process_time()
        db.create_indexes()
        done("indexes", c0)
        db.close()
        del tables
        c0 = time.process_time()
        FactDB.from_model(model).close()
        done("facts", c0)
        model.release()
        del model
        gc.collect()
    os.remove(out_path)
    return (
        f"| {os.path.basename(path)} | {nodes:,} | {os.path.getsize(path) / 2**20:.1f} | {best['read']:.2f} "
        f"| {best['write']:.2f} ({'identical' if identical else 'DIFFERENT'}) | {best['derive']:.2f} "
        f"| {best['insert']:.2f} | {best['indexes']:.2f} | {best['facts']:.2f} | {rows:,} |"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--nodes", type=int, nargs="*", default=[10000, 100000])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--work", default="/tmp/anchorlog-bench-import")
    ap.add_argument("--protobuf-max-mb", type=float, default=20.0)
    ap.add_argument("--timeout", type=float, default=1800.0)
    ap.add_argument("--phases", nargs="+", metavar="FILE", help="time the phases of these text models instead")
    ap.add_argument("--repeat", type=int, default=1, help="with --phases: best of this many runs")
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    if args.phases:
        print("CPU seconds (process_time), best of", args.repeat, "\n")
        print("| input | nodes | text MiB | read | write text | derive | insert | indexes + ANALYZE "
              "| FactDB.from_model | fact rows |")  # fmt: skip
        print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
        for path in args.phases:
            print(phases(path, args.repeat, args.work), flush=True)
        return
    inputs = [("real dump 00017", REAL)] + [(f"transformer {n}", generate(n, args.seed, args.work)) for n in args.nodes]
    print("Seconds: wall clock / CPU time of the process (CPU is the steadier number on a shared machine).\n")
    print("| input | nodes | text MiB | import (ours) | protobuf text_format | ratio (CPU) | binary .pb import "
          "| import+facts | fact rows | peak RSS import+facts | `anchorlog facts` CLI |")  # fmt: skip
    print("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
    for label, path in inputs:
        mib = os.path.getsize(path) / 2**20
        imp = child("import", path, args.timeout)
        pb = child("import", to_binary(path), args.timeout)
        facts = child("facts", path, args.timeout)
        cli = cli_facts(path, args.work, args.timeout)
        if mib <= args.protobuf_max_mb:
            ref = child("protobuf", path, args.timeout)
            ref_s = f"{ref['parse']:.2f} / {ref['parse_cpu']:.2f} s"
            ratio = f"{ref['parse_cpu'] / imp['parse_cpu']:.0f}x"
        else:
            ref_s, ratio = "skipped", "-"
        total = facts["parse"] + facts["facts"]
        total_cpu = facts["parse_cpu"] + facts["facts_cpu"]
        print(
            f"| {label} | {imp['nodes']:,} | {mib:.1f} | {imp['parse']:.2f} / {imp['parse_cpu']:.2f} s | {ref_s} "
            f"| {ratio} | {pb['parse']:.2f} / {pb['parse_cpu']:.2f} s | {total:.2f} / {total_cpu:.2f} s "
            f"| {facts['rows']:,} | {facts['rss_mib']:.0f} MiB | {cli['wall']:.2f} / {cli['cpu']:.2f} s |",
            flush=True,
        )


if __name__ == "__main__":
    main()

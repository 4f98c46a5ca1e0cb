"""Benchmark of the GE text writer (``anchorlog.facts.ge_io.write_model`` as text), phase by phase.

``write_model`` to a ``.pbtxt`` is three steps with different costs: formatting the model as text
(``model_to_text``: Python work, user CPU), encoding the text to UTF-8 (one copy of ~150 MB at 100 k nodes) and
the atomic file write (``fileutil.atomic_write_bytes``: temp file, ``fsync``, rename; kernel CPU, which on this
shared machine swings between 0.03 and 1 s for the same 150 MB). The phases are timed apart, with user and
system CPU apart (``resource.getrusage``), so that a change of the formatter is not lost in the file write's
noise.

Where the checkout has ``model_to_utf8`` (what ``write_model`` uses for text: the text encoded piece by
piece into one buffer), its time is printed too, to set against model_to_text + encode.

``--after-pass tensor-move-delete`` writes the model as issue 4's benchmark does, after the pass (a process
grown by the pass's fact database and symbol table). ``--compare-with DIR`` loads ``DIR/anchorlog/facts/ge_io.py``
(e.g. an older commit from ``git archive REV anchorlog | tar -x -C DIR``) beside the working code and times both
formatters on the same model in turn, checking that their text is identical.

Run:  nice -n 10 .venv/bin/python benchmarks/bench_io_write.py MODEL.pbtxt [--after-pass tensor-move-delete]
      [--repeat 3] [--compare-with /tmp/old]
      (models: ``anchorlog generate transformer --nodes N --seed 1 -o tN.pbtxt`` or /work/shared/real-graphs/*)
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import resource
import tempfile

from anchorlog.facts import ge_io
from anchorlog.fileutil import atomic_write_bytes


def _usage() -> tuple[float, float]:
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime, r.ru_stime


def _timed(fn, *args):
    """``fn(*args)`` and its (user, system) CPU seconds."""
    u0, s0 = _usage()
    out = fn(*args)
    u1, s1 = _usage()
    return out, (u1 - u0, s1 - s0)


def _load_other(checkout: str):
    path = os.path.join(checkout, "anchorlog", "facts", "ge_io.py")
    spec = importlib.util.spec_from_file_location("ge_io_compared", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model")
    ap.add_argument("--after-pass", default=None, help="run this pass (tensor-move-delete) before writing")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--compare-with", default=None, help="checkout whose ge_io formatter is timed beside this one")
    args = ap.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    model, (u, s) = _timed(ge_io.read_model, args.model)
    print(f"read_model: user {u:.3f} s, sys {s:.3f} s, {model.num_nodes()} nodes")
    if args.after_pass:
        if args.after_pass != "tensor-move-delete":
            raise SystemExit("only --after-pass tensor-move-delete is supported")
        from anchorlog.analysis import tensor_move

        _, (u, s) = _timed(tensor_move.run_tensor_move_delete, model, {})
        print(f"{args.after_pass}: user {u:.3f} s, sys {s:.3f} s")
    writers = [("working tree", ge_io)]
    if args.compare_with:
        writers.insert(0, (args.compare_with, _load_other(args.compare_with)))
    texts = {}
    with tempfile.TemporaryDirectory() as tmp:
        out_path = os.path.join(tmp, "out.pbtxt")
        for i in range(args.repeat):
            for label, module in writers:
                text, (tu, ts) = _timed(module.model_to_text, model)
                data, (eu, es) = _timed(str.encode, text, "utf-8", "surrogateescape")
                if i == 0:
                    texts[label] = text
                del text
                _, (fu, fs) = _timed(atomic_write_bytes, out_path, data)
                del data
                line = (
                    f"{label}: model_to_text user {tu:.3f} sys {ts:.3f} | encode user {eu:.3f} sys {es:.3f} | "
                    f"file write user {fu:.3f} sys {fs:.3f} | total {tu + ts + eu + es + fu + fs:.3f} s"
                )
                if hasattr(module, "model_to_utf8"):  # what write_model does since 1 Dec 2026: encoded in pieces
                    data, (pu, ps) = _timed(module.model_to_utf8, model)
                    del data
                    line += f" | model_to_utf8 user {pu:.3f} sys {ps:.3f}"
                print(line)
    if len(texts) == 2:
        a, b = texts.values()
        print("text identical" if a == b else "TEXT DIFFERS", f"({len(b) / 2**20:.1f} MiB)")
    print(f"load average {os.getloadavg()[0]:.2f} at the end", flush=True)


if __name__ == "__main__":
    main()

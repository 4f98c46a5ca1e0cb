"""``anchorlog optimize IN --output OUT --report REPORT.json``: run GE memory passes over a model.

As the conformance contract says: passes run in the given order (default ``o3``, GE's pipeline), GE options
come as ``--option KEY=VALUE``; unknown passes or options exit 2 listing the known ones; when a pass reaches
a state where GE fails the compile (:class:`~anchorlog.errors.PassFailure`) the command exits non-zero and
writes no OUT (the report is still written, with the error). OUT and the report appear atomically; the
report always has ``"passes"`` and ``"lint"``.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from typing import Any

from anchorlog.errors import OptionError, PassFailure

ENGINES = ("sqlite", "duckdb")


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "optimize",
        help="run GE memory passes (default: the o3 pipeline) and write the optimized model + a report",
        description="Run GE memory-optimization passes over a model. Exit 0 on success; where GE would fail "
        "the compile, exit 2 and write no OUT.",
    )
    p.add_argument("input", metavar="IN", help="input model (.pbtxt/.txt/.pb/.onnx)")
    p.add_argument("--output", "-o", required=True, metavar="OUT", help="optimized model (.pbtxt/.txt/.pb)")
    p.add_argument("--report", required=True, metavar="REPORT.json", help="JSON report: passes, lint, ...")
    p.add_argument("--passes", default="o3", metavar="P1,P2,...", help="passes to run in order (default: o3)")
    p.add_argument(
        "--option",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="GE option string (repeatable), e.g. ge.exec.memoryOptimizationPolicy=...",
    )
    p.add_argument("--engine", choices=ENGINES, default="sqlite", help="rule engine backend (default sqlite)")
    p.add_argument("--list-passes", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=run)


def parse_options(items: list[str]) -> dict[str, str]:
    """``["K=V", ...]`` -> dict; a later key wins, as with GE's option map."""
    options: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        key = key.strip()
        if not sep or not key:
            raise OptionError(f"expected KEY=VALUE, got {item!r}", "--option")
        options[key] = value
    return options


def parse_passes(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    if not names:
        raise OptionError("no pass named", "--passes")
    return names


def _json_default(obj: Any) -> Any:
    if isinstance(obj, (set, frozenset)):
        return sorted(obj, key=str)
    if isinstance(obj, tuple):
        return list(obj)
    if isinstance(obj, bytes):
        return obj.decode("utf-8", "replace")
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def report_json(report: dict[str, Any]) -> str:
    report.setdefault("passes", [])
    report.setdefault("lint", [])
    return json.dumps(report, indent=2, default=_json_default, ensure_ascii=False) + "\n"


def run(args: argparse.Namespace) -> int:
    from anchorlog.analysis import registry
    from anchorlog.cli import progress_printer
    from anchorlog.facts import ge_io
    from anchorlog.fileutil import (
        atomic_write_bytes,
        atomic_write_text,
        check_outputs_distinct,
        check_writable,
        model_output_kind,
    )

    # Everything that can be refused without reading the model is refused first: options, passes, outputs.
    options = parse_options(args.option)
    registry.check_options(options)  # unknown keys and bad values, before the (possibly large) model is read
    names = parse_passes(args.passes)
    registry.expand(names)  # unknown pass -> OptionError listing the known ones
    if args.engine == "duckdb":
        try:
            import duckdb  # noqa: F401
        except ImportError:
            raise OptionError("the duckdb engine needs the duckdb package (pip install 'anchorlog[duckdb]')") from None
    binary_output = model_output_kind(args.output) == "binary"
    check_outputs_distinct([args.input], [args.output, args.report])
    check_writable(args.output)
    check_writable(args.report)

    say = progress_printer(args)
    t0 = time.perf_counter()

    def progress(msg: str) -> None:
        say(f"[{time.perf_counter() - t0:6.1f}s] {msg}")

    # (no progress line before the input is read: bad input must give exactly one line on stderr)
    model = ge_io.read_any(args.input)
    nodes_before = model.num_nodes()
    progress(f"read {args.input}: {nodes_before} nodes in {len(model.graphs)} graph(s); passes: {', '.join(names)}")
    ctx = registry.PassContext(options=options, engine=args.engine, progress=progress)
    ctx.report.setdefault("passes", [])
    ctx.report.setdefault("lint", [])
    try:
        report = registry.run_passes(model, names, ctx)
    except PassFailure as err:
        ctx.report["error"] = str(err)
        ctx.report["input"] = args.input
        atomic_write_text(args.report, report_json(ctx.report))
        raise
    report["input"] = args.input
    report["output"] = args.output
    report["nodes_before"] = nodes_before
    report["nodes_after"] = model.num_nodes()
    # Serialize both before writing either, so that a failure leaves neither file behind.
    if binary_output:
        data = ge_io.model_to_bytes(model)
    else:
        data = ge_io.model_to_text(model).encode("utf-8", "surrogateescape")
    report_text = report_json(report)
    atomic_write_bytes(args.output, data)
    try:
        atomic_write_text(args.report, report_text)
    except Exception:
        os.unlink(args.output)
        raise
    progress(f"wrote {args.output} ({model.num_nodes()} nodes) and {args.report}")
    # the model is one reference cycle (node -> graph -> nodes): cut it so that reference counting frees it,
    # instead of a full collection over its objects when the interpreter exits
    model.release()
    return 0

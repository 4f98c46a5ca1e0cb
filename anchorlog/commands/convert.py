"""``anchorlog convert IN OUT``: convert a model between GE text (.pbtxt/.txt), GE binary (.pb) and, as
input only, ONNX (.onnx). Formats follow the file suffixes."""

from __future__ import annotations

import argparse
import os


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "convert",
        help="convert a model: GE text <-> GE binary, ONNX -> GE",
        description="Convert a model; the format follows the suffix: .pbtxt/.txt GE text, .pb GE binary, "
        ".onnx ONNX (input only). The output appears atomically.",
    )
    p.add_argument("input", metavar="IN", help="input model (.pbtxt/.txt/.pb/.onnx)")
    p.add_argument("output", metavar="OUT", help="output model (.pbtxt/.txt text, .pb binary)")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from anchorlog.cli import progress_printer
    from anchorlog.facts import ge_io
    from anchorlog.fileutil import check_outputs_distinct, check_writable, model_output_kind

    model_output_kind(args.output)  # refuses suffixes that name no GE model format
    check_outputs_distinct([args.input], [args.output])
    check_writable(args.output)
    progress = progress_printer(args)
    model = ge_io.read_any(args.input)
    ge_io.write_model(model, args.output)
    progress(
        f"{args.output}: {model.num_nodes()} nodes in {len(model.graphs)} graph(s), {os.path.getsize(args.output)} bytes"
    )
    return 0

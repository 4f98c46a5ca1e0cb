"""``anchorlog draw IN -o OUT.svg``: draw a graph with Graphviz (see anchorlog.draw)."""

from __future__ import annotations

import argparse
from pathlib import Path

from anchorlog.errors import AnchorlogError, InputError, OptionError
from anchorlog.facts.graph import Model


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "draw",
        help="draw a graph (Graphviz: .svg, .png, .pdf, or .dot text)",
        description="Draw one graph of a model with its subgraphs as clusters. Data edges are labelled "
        "out:in, control edges are dashed. Large graphs are cut to --max-nodes nodes around the "
        "highlighted ones.",
    )
    p.add_argument("input", metavar="IN", help="GE model (.pbtxt/.txt/.pb) or ONNX model (.onnx)")
    p.add_argument("-o", "--output", required=True, metavar="OUT", help="drawing file: .svg, .png, .pdf or .dot")
    p.add_argument("--graph", metavar="NAME", help="graph to draw (default: the root graph)")
    p.add_argument("--highlight", nargs="+", default=[], metavar="NODE", help="node names to fill")
    p.add_argument("--highlight-type", nargs="+", default=[], metavar="TYPE", help="op types to fill")
    p.add_argument("--max-nodes", type=int, default=200, metavar="N", help="draw at most N nodes (default 200)")
    p.add_argument("--rankdir", choices=("TB", "LR"), default="TB", help="layout direction (default TB)")
    p.add_argument(
        "--diff",
        metavar="BEFORE",
        help="draw what changed from model BEFORE to IN: added nodes/edges green, removed ones as red ghosts",
    )
    p.set_defaults(func=run)


def load_model(path: str) -> Model:
    """A GE model, or an ONNX model by extension."""
    from anchorlog.facts import ge_io

    read_any = getattr(ge_io, "read_any", None)
    if read_any is not None:
        return read_any(path)
    if Path(path).suffix.lower() == ".onnx":
        from anchorlog.facts.onnx_import import read_onnx

        return read_onnx(path)
    return ge_io.read_model(path)


def run(args: argparse.Namespace) -> int:
    from anchorlog import draw

    if args.max_nodes < 1:
        raise OptionError("--max-nodes must be positive")
    if args.diff is not None and (args.highlight or args.highlight_type):
        raise OptionError("--diff draws its own highlights; leave out --highlight/--highlight-type")
    out = Path(args.output)
    fmt = draw.FORMATS.get(out.suffix.lower())
    if fmt is None:
        raise OptionError(f"{out}: unknown drawing format {out.suffix or '(none)'}; use .svg, .png, .pdf or .dot")
    if fmt != "dot" and not draw.dot_available():
        raise AnchorlogError(draw.DOT_MISSING)
    from anchorlog.fileutil import check_outputs_distinct, check_writable

    check_outputs_distinct([args.input] + ([args.diff] if args.diff is not None else []), [args.output])
    check_writable(args.output)
    model = load_model(args.input)
    names = model.all_node_names()
    missing = [n for n in args.highlight if n not in names]
    if missing:
        raise InputError(f"no node named {missing[0]!r} to highlight", args.input)
    if args.diff is not None:
        before = load_model(args.diff)
        text = draw.diff_dot(before, model, graph=args.graph, max_nodes=args.max_nodes, rankdir=args.rankdir)
    else:
        text = draw.to_dot(
            model,
            graph=args.graph,
            highlight=args.highlight,
            highlight_types=args.highlight_type,
            max_nodes=args.max_nodes,
            rankdir=args.rankdir,
        )
    draw.write_drawing(text, out)
    print(f"{out}: drawn")
    return 0

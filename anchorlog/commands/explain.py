"""``anchorlog explain IN NAME [--anchor NODE:OUT]``: why a pass did what it did to one node (or anchor).

The node's type picks the explainer (``TensorMove`` -> ``tensor-move-delete``, ...); ``--anchor`` asks the
anchor explainers instead. Explainers run their pass on the model with the given ``--option`` values and
print the derivation in words. See :mod:`anchorlog.analysis.explainers`.
"""

from __future__ import annotations

import argparse

from anchorlog.errors import OptionError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "explain",
        help="explain what a pass decided for one node (e.g. a TensorMove) or one anchor",
        description="Run the pass that decides about NAME and print its derivation: the facts it looked at, "
        "the rule that decided, the edits made.",
    )
    p.add_argument("input", metavar="IN", help="input model (.pbtxt/.txt/.pb/.onnx)")
    p.add_argument("name", metavar="NAME", help="node name (any graph)")
    p.add_argument("--anchor", metavar="NODE:OUT", help="explain an output anchor instead of a node")
    p.add_argument("--option", action="append", default=[], metavar="KEY=VALUE", help="GE option string (repeatable)")
    p.set_defaults(func=run)


def _anchor(text: str) -> tuple[str, int]:
    node, sep, idx = text.rpartition(":")
    if not sep or not node or not idx.lstrip("-").isdigit():
        raise OptionError(f"expected NODE:OUT, got {text!r}", "--anchor")
    return node, int(idx)


def run(args: argparse.Namespace) -> int:
    from anchorlog.analysis import registry
    from anchorlog.analysis.explainers import explain
    from anchorlog.commands.optimize import parse_options
    from anchorlog.facts.ge_io import read_any

    options = parse_options(args.option)
    registry.check_options(options)  # unknown keys and bad values, as optimize refuses them
    anchor = _anchor(args.anchor) if args.anchor else None
    model = read_any(args.input)
    print(explain(model, args.name, options=options, anchor=anchor))
    return 0

"""``anchorlog generate transformer``: write a synthetic GE-style decoder graph (see anchorlog.facts.generate)."""

from __future__ import annotations

import argparse
import gc

from anchorlog.errors import OptionError


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "generate",
        help="generate a synthetic GE graph",
        description="Generate a synthetic GE-style graph, deterministic for a seed.",
    )
    # Same parser class as the caller's, so usage errors below are reported the way the CLI reports them.
    kinds = p.add_subparsers(dest="kind", metavar="KIND", parser_class=type(p))
    kinds.required = True
    t = kinds.add_parser(
        "transformer",
        help="decoder-only transformer (attention, MLP, KV-cache Assigns, HCCL, TensorMoves, subgraphs)",
        description="A tensor-parallel decoder as a framework adapter hands it to GE.",
    )
    size = t.add_mutually_exclusive_group()
    # default None (not 2): argparse only sees a --layers/--nodes conflict when the value differs from the default
    size.add_argument("--layers", type=int, default=None, help="decoder layers (default 2)")
    size.add_argument("--nodes", type=int, help="add layers until the model has about this many nodes")
    t.add_argument("--seed", type=int, default=0, help="random seed (default 0)")
    t.add_argument("-o", "--output", required=True, help="output file (.pbtxt/.txt text, .pb binary)")
    t.add_argument("--tp", type=int, help="tensor-parallel ranks (1, 2, 4, 8; default from the seed)")
    t.add_argument("--hidden", type=int, help="hidden size (default from the seed)")
    t.add_argument("--heads", type=int, help="attention heads")
    t.add_argument("--seq", type=int, default=128, help="sequence length (default 128)")
    t.add_argument("--batch", type=int, default=1, help="batch size (default 1)")
    t.add_argument("--dtype", default="DT_FLOAT16", help="activation dtype (default DT_FLOAT16)")
    t.add_argument("--norm", choices=("rms", "layer", "mixed"), default="mixed", help="norm kind per layer")
    t.add_argument("--no-tensor-moves", action="store_true", help="no adapter TensorMoves at all")
    t.add_argument(
        "--tensor-move-share",
        type=float,
        default=0.0,
        metavar="F",
        help="add defensive TensorMoves until they are at least this fraction of all nodes (e.g. 0.05)",
    )
    t.add_argument(
        "--partition-every", type=int, default=4, help="MLP of every N-th layer in a PartitionedCall (0: none)"
    )
    t.add_argument("--no-if", action="store_true", help="no If around the final norm")
    # The CLI adds its global flags to each command's parser; this nested one needs them too.
    t.add_argument("--quiet", "-q", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    t.add_argument("--debug", action="store_true", default=argparse.SUPPRESS, help=argparse.SUPPRESS)
    t.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from anchorlog.facts import ge_io
    from anchorlog.facts import generate as gen
    from anchorlog.fileutil import check_writable, model_output_kind

    if args.layers is None:
        args.layers = 2
    if args.nodes is not None and args.nodes < 1:
        raise OptionError("--nodes must be positive")
    if args.nodes is None and args.layers < 1:
        raise OptionError("--layers must be positive")
    if not 0.0 <= args.tensor_move_share < 1.0:
        raise OptionError("--tensor-move-share must be in [0, 1)")
    if args.no_tensor_moves and args.tensor_move_share > 0:
        raise OptionError("--no-tensor-moves and --tensor-move-share exclude each other")
    # a bad output path is reported before a generation that may take seconds
    model_output_kind(args.output)
    check_writable(args.output)
    try:
        model = gen.generate_transformer(
            args.layers if args.nodes is None else None,
            args.seed,
            nodes=args.nodes,
            tp=args.tp,
            hidden=args.hidden,
            heads=args.heads,
            seq=args.seq,
            batch=args.batch,
            dtype=args.dtype,
            norm=args.norm,
            tensor_moves=not args.no_tensor_moves,
            tensor_move_share=args.tensor_move_share,
            partition_every=args.partition_every,
            with_if=not args.no_if,
        )
    except ValueError as err:
        raise OptionError(str(err)) from None
    # The process ends after writing: keep the cyclic collector from rescanning millions of fresh objects.
    gc.freeze()
    ge_io.write_model(model, args.output)
    print(f"{args.output}: {model.num_nodes()} nodes in {len(model.graphs)} graphs ({model.name})")
    return 0

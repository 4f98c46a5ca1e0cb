"""CLI subcommands: one module per command, each exposing ``register(subparsers)`` (see anchorlog.cli)."""

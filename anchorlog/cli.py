"""The ``anchorlog`` command line. Subcommands live one per module in :mod:`anchorlog.commands`; each module
exposes ``register(subparsers)`` adding its sub-parser with ``set_defaults(func=run)`` where
``run(args) -> int``. They are found with :mod:`pkgutil`, so adding a command is adding a module.

Errors: an :class:`~anchorlog.errors.AnchorlogError` (bad input, bad option, a pass that fails the compile)
prints one line on stderr and exits 2; any other exception prints ``internal error: ...`` and exits 1
(``--debug`` shows the traceback).
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys
import traceback
from collections.abc import Callable, Sequence
from typing import NoReturn

from anchorlog.errors import AnchorlogError, OptionError

PROG = "anchorlog"


class _Parser(argparse.ArgumentParser):
    """argparse with one-line usage errors (raised as OptionError so that main() reports them uniformly)."""

    def error(self, message: str) -> NoReturn:  # type: ignore[override]
        raise OptionError(f"{message} (see '{self.prog} --help')")


def build_parser(debug: bool = False) -> argparse.ArgumentParser:
    """The top-level parser with every command module's sub-parser."""
    parser = _Parser(
        prog=PROG,
        description="GE-faithful memory analyses of compute graphs as relational facts and Datalog rules.",
    )
    parser.add_argument("--quiet", "-q", action="store_true", help="no progress messages on stderr")
    parser.add_argument("--debug", action="store_true", help="show tracebacks of internal errors")
    parser.add_argument("--version", action="version", version=f"%(prog)s {_version()}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    import anchorlog.commands as pkg

    for mod in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda m: m.name):
        if mod.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"anchorlog.commands.{mod.name}")
            register = module.register
        except Exception as err:  # one broken command module must not take the whole CLI down
            if debug:
                print(f"warning: command module {mod.name} not loaded: {err}", file=sys.stderr)
            continue
        register(sub)
    # Accept the global flags after the command name too (`anchorlog optimize ... --quiet`).
    for sp in set(sub.choices.values()):
        for flags, helptext in (
            (("--quiet", "-q"), "no progress messages on stderr"),
            (("--debug",), argparse.SUPPRESS),
        ):
            try:
                sp.add_argument(*flags, action="store_true", default=argparse.SUPPRESS, help=helptext)
            except argparse.ArgumentError:
                pass  # the command defines the flag itself
    return parser


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("anchorlog")
    except Exception:  # not installed as a distribution (running from a source tree)
        return "unknown"


def progress_printer(args: argparse.Namespace) -> Callable[[str], None]:
    """A ``progress(msg)`` callable: one line on stderr per message, silent with ``--quiet``."""
    if getattr(args, "quiet", False):
        return lambda msg: None

    def progress(msg: str) -> None:
        print(f"{PROG}: {msg}", file=sys.stderr, flush=True)

    return progress


def _one_line(text: str) -> str:
    return " ".join(str(text).split()) or "(no message)"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 ok, 2 user error, 1 internal error)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in argv
    try:
        parser = build_parser(debug)
        args = parser.parse_args(argv)
        if args.command is None:
            parser.print_help(sys.stderr)
            return 2
        status = args.func(args)
        return 0 if status is None else int(status)
    except AnchorlogError as err:
        if debug:
            traceback.print_exc()
        print(f"error: {_one_line(str(err))}", file=sys.stderr)
        return err.exit_status
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        return 1
    except SystemExit as exc:  # --help / --version exit through argparse
        code = exc.code
        return code if isinstance(code, int) else (0 if code is None else 2)
    except MemoryError:
        print("internal error: out of memory", file=sys.stderr)
        return 1
    except Exception as err:
        if debug:
            traceback.print_exc()
        print(f"internal error: {type(err).__name__}: {_one_line(str(err))}", file=sys.stderr)
        return 1


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())

"""Jupyter cell magic ``%%datalog``.

    %load_ext anchorlog.queries.magic
    %%datalog db --output reach --engine sqlite --as res
    reach(X, Y) :- data_edge(_, X, _, Y, _).
    reach(X, Z) :- reach(X, Y), data_edge(_, Y, _, Z, _).

The first argument names a variable of the notebook holding the fact database (FactDB, sqlite3 connection
or path); omit it to run on facts/`--extra` only. The cell's value is the DataFrame of the --output relation
(or of the only/first relation kept), `--as NAME` also stores the whole Result in the namespace, `--explain`
prints strata and SQL instead, `--extra NAME` takes a dict {relation: rows} from the namespace.
"""

from __future__ import annotations

import argparse
import shlex
from typing import Any

from anchorlog.errors import AnchorlogError

from .program import Program


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="%%datalog", add_help=False, exit_on_error=False)
    p.add_argument("db", nargs="?", default=None)
    p.add_argument("--output", "-o", action="append", default=None)
    p.add_argument("--engine", "-e", default="sqlite", choices=("sqlite", "duckdb", "pydatalog"))
    p.add_argument("--as", dest="as_name", default=None)
    p.add_argument("--extra", default=None)
    p.add_argument("--explain", action="store_true")
    return p


def datalog_cell(line: str, cell: str, namespace: dict[str, Any]) -> Any:
    """The magic's work, independent of IPython (testable): returns a DataFrame, or None after --explain."""
    try:
        args = _parser().parse_args(shlex.split(line))
    except (argparse.ArgumentError, SystemExit) as e:
        raise AnchorlogError(f"%%datalog: bad arguments {line!r}: {e}") from None
    db = None
    if args.db is not None:
        if args.db not in namespace:
            raise AnchorlogError(f"%%datalog: no variable {args.db!r} in the notebook")
        db = namespace[args.db]
    extra = namespace[args.extra] if args.extra else None
    prog = Program.from_text(cell, name="<cell>")
    if args.explain:
        print(prog.explain(db, engine=args.engine))
        return None
    res = prog.run(db, engine=args.engine, extra=extra, outputs=args.output)
    if args.as_name:
        namespace[args.as_name] = res
    if not res.relations:
        return None
    return res[res.relations[0]]


def load_ipython_extension(ipython: Any) -> None:
    """Register ``%%datalog`` on an IPython shell (``%load_ext anchorlog.queries.magic``)."""

    def datalog(line: str, cell: str) -> Any:
        try:
            return datalog_cell(line, cell, ipython.user_ns)
        except AnchorlogError as e:
            # one line, like the CLI: no traceback for a mistake in the rules
            print(f"error: {e}")
            return None

    ipython.register_magic_function(datalog, magic_kind="cell", magic_name="datalog")


def unload_ipython_extension(ipython: Any) -> None:  # pragma: no cover - nothing to undo
    pass

"""``anchorlog facts IN... --db OUT.sqlite``: export models as relational facts (the schema of docs/facts.md)
into one SQLite database, ready for SQL, pandas or Datalog. Several inputs share the database; the ``graph``
table's ``model`` column tells them apart. The database appears atomically (temporary file, then rename)."""

from __future__ import annotations

import argparse
import os
import sqlite3
import tempfile


def register(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "facts",
        help="export models as relational facts into a SQLite database",
        description="Derive the fact relations (node, data_edge, ctrl_edge, graph, node_prop, node_attr, "
        "in_anchor, out_anchor, tensor_attr, subgraph, parent_in, parent_out, ref_io, op_class; see "
        "docs/facts.md) of each input model and store them in one SQLite database. Inputs: GE text "
        "(.pbtxt/.txt), GE binary (.pb) or ONNX (.onnx). Graph names already used by an earlier input are "
        "qualified as '<model>/<graph>'.",
    )
    p.add_argument("inputs", metavar="IN", nargs="+", help="input model(s) (.pbtxt/.txt/.pb/.onnx)")
    p.add_argument("--db", required=True, metavar="OUT.sqlite", help="SQLite database to write (replaced)")
    p.add_argument(
        "--name",
        action="append",
        default=None,
        metavar="NAME",
        help="model name for the facts (once per input, in order; default: the model's name, else the file stem)",
    )
    p.add_argument(
        "--relations",
        metavar="REL,REL",
        help="derive only these relations (comma-separated; the other tables exist but stay empty)",
    )
    p.set_defaults(func=run)


def _model_name(model_name: str, path: str) -> str:
    if model_name:
        return model_name
    base = os.path.basename(path)
    return base.split(".", 1)[0] or "model"


def run(args: argparse.Namespace) -> int:
    from anchorlog.cli import progress_printer
    from anchorlog.errors import AnchorlogError, InputError, OptionError
    from anchorlog.facts import ge_io
    from anchorlog.facts.relations import RELATIONS, FactDB
    from anchorlog.fileutil import check_outputs_distinct, check_writable

    names = args.name or []
    relations = None
    if args.relations:
        relations = [r.strip() for r in args.relations.split(",") if r.strip()]
        unknown = [r for r in relations if r not in RELATIONS]
        if unknown:
            raise OptionError(f"--relations: unknown relation {unknown[0]!r} (known: {', '.join(RELATIONS)})")
    if names and len(names) != len(args.inputs):
        raise OptionError(f"--name given {len(names)} time(s) for {len(args.inputs)} input(s)")
    out = args.db
    check_outputs_distinct(args.inputs, [out])
    check_writable(out)
    progress = progress_printer(args)
    parent = os.path.dirname(os.path.abspath(out))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(out) + ".", suffix=".tmp", dir=parent)
    os.close(fd)
    db: FactDB | None = None
    try:
        os.unlink(tmp)  # FactDB creates the file itself
        db = FactDB(tmp)
        for i, path in enumerate(args.inputs):
            model = ge_io.read_any(path)
            want = names[i] if names else _model_name(model.name, path)
            used = db.add_model(model, name=want, relations=relations)
            progress(f"{path}: model {used!r}, {model.num_nodes()} nodes in {len(model.graphs)} graph(s)")
            model.release()  # freed by reference counting, not by a collector pass over its objects
            del model
        counts = {rel: db.count(rel) for rel in db.relations()}
        db.close()
        db = None
        if os.path.exists(out):
            os.chmod(tmp, os.stat(out).st_mode & 0o7777)
        os.replace(tmp, out)
        progress(f"{out}: " + ", ".join(f"{rel} {n}" for rel, n in counts.items()))
    except AnchorlogError:
        raise
    except sqlite3.Error as e:
        raise InputError(f"cannot write the fact database: {e}", out) from None
    except OSError as e:
        raise InputError(f"cannot write the fact database: {e.strerror or e}", out) from None
    finally:
        if db is not None:
            db.close()
        if os.path.exists(tmp):
            os.unlink(tmp)
    return 0

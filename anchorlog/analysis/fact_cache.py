"""One fact database per pipeline run, shared by the passes and kept in step with their edits.

Deriving the facts of a 100k-node model costs seconds; a pipeline of seven passes should pay it once. The
IR records which nodes each edit touched (``Graph.touched``, ``Model.structure_version``); before handing
the database to the next pass, :func:`shared_facts` re-derives exactly those rows (``FactDB.refresh_nodes``),
or everything when subgraphs were added or removed.
"""

from __future__ import annotations

import itertools

from anchorlog.analysis.registry import PassContext
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB

_KEY = "fact_cache"
# Stamps of the fact states handed out (a rebuild or a refresh takes the next one): caches of what is derived
# from the facts (e.g. the symbol table, anchorlog.analysis.symbols.cached_symbol_table) key on it.
_STAMPS = itertools.count(1)


def shared_facts(model: Model, ctx: PassContext) -> FactDB:
    """The fact database of ``model`` for this pipeline run, up to date with every edit made so far.

    Edits made through the IR's editing methods (``connect``, ``remove_node``, ``set_attr`` ...) are tracked
    automatically; after changing a TensorDesc in place call ``node.touch()``."""
    entry = ctx.state.get(_KEY)
    if entry is None or entry["model"] is not model or entry["structure"] != model.structure_version:
        if entry is not None:
            entry["db"].close()
        for g in model.graphs:
            g.touched.clear()
        db = FactDB.from_model(model)
        ctx.state[_KEY] = {"model": model, "db": db, "structure": model.structure_version, "stamp": next(_STAMPS)}
        return db
    db: FactDB = entry["db"]
    for g in model.graphs:
        if g.touched:
            db.refresh_nodes(g, sorted(g.touched), model)
            g.touched.clear()
            entry["stamp"] = next(_STAMPS)
    return db


def facts_stamp(model: Model, ctx: PassContext) -> int:
    """The stamp of the state of ``model`` that :func:`shared_facts` now reflects (it syncs first): equal stamps
    mean no edit in between (as far as the IR tracks edits), so whatever was derived from the facts still holds."""
    shared_facts(model, ctx)
    return ctx.state[_KEY]["stamp"]


def current_facts(model: Model, ctx: PassContext) -> FactDB | None:
    """The pipeline's shared fact database of ``model`` when one exists and only needs the incremental refresh
    of :func:`shared_facts` (no full rebuild); None otherwise. For passes that can work from a cheaper
    private database when no shared one is at hand."""
    entry = ctx.state.get(_KEY)
    if entry is None or entry["model"] is not model or entry["structure"] != model.structure_version:
        return None
    return shared_facts(model, ctx)

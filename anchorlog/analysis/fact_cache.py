"""One fact database per pipeline run, shared by the passes and kept in step with their edits.

Deriving the facts of a 100k-node model costs seconds; a pipeline of seven passes should pay it once. The
IR records which nodes each edit touched (``Graph.touched``, ``Model.structure_version``); before handing
the database to the next pass, :func:`shared_facts` re-derives exactly those rows (``FactDB.refresh_nodes``),
or everything when subgraphs were added or removed (a new database) or when more than :data:`REBUILD_SHARE` of
the nodes were touched (``FactDB.rebuild_model``: the same database, laid out as a fresh build).
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
# Share of the model's nodes touched above which a sync re-derives the whole database (FactDB.rebuild_model,
# the cost of a fresh build) instead of refreshing the touched nodes (FactDB.refresh_nodes, linear in them).
# Measured on 10 k / 30 k transformers (docs/benchmarks.md, Fact extraction, Session 4b): a refresh of half the
# nodes costs about one rebuild (0.21 vs 0.20 s at 10 k, 0.67 vs 0.64 s at 30 k), of a quarter about 0.6 of one.
REBUILD_SHARE = 0.4


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
    touched = sum(len(g.touched) for g in model.graphs)
    if touched and touched > REBUILD_SHARE * model.num_nodes():
        # most rows would be deleted and re-inserted one by one through the indexes: derive them all afresh, in
        # place (the same database object: passes may hold it), exactly as a fresh build lays them out
        for g in model.graphs:
            g.touched.clear()
        db.rebuild_model(model)
        entry["stamp"] = next(_STAMPS)
        return db
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

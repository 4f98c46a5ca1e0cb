"""Composite passes: ``mem-conflict`` (GE ``GraphManager::MemConflictProc``) and ``o3`` (a whole compile's
memory passes in GE's order, reference §0).

``mem-conflict`` = ``rw-conflict`` then ``layout-conflict``. As in GE an RW failure is only a warning (the RW
pass reports it and returns), a layout failure fails the compile.

``o3`` runs, in the order GE's compile reaches them (``graph_prepare.cc`` / ``graph_manager.cc``):

====  =========================  ===================================================================
step  pass                       where GE runs it
====  =========================  ===================================================================
1     inner-identity-add         GraphPrepare::NormalizeGraph → ProcessNetOutput (InnerIdentityAddPass)
2     graph-lint                 NormalizeGraph: ``GraphLint::Verify`` (diagnostic, result ignored)
3     hccl-memcpy                PrepareOptimize (HcclMemcpyPass)
3b    common-subexpression-el.   OptimizeStage1 (CommonSubexpressionEliminationPass, an O3 pass)
4     hccl-memcpy                OptimizeStage1_3 (HcclMemcpyPass again, the "temporary" second run)
4a    engine-partition           OptimizeSubgraph (engine partition + merge: edges re-created in topo order)
4b    inner-identity-delete      OptimizeStage2 after-merge (InnerIdentityDeletePass; runs once registered)
5     hccl-continuous-memcpy     OptimizeStage2 after-merge passes
6     inplace-support-check      OptimizeStage2 GEPass (the pass itself checks the host-exec flag)
7     atomic-addr-clean          OptimizeStage2 control-attr passes
8     subgraph-isolation         OptimizeStage2 control-attr passes (SubgraphPass)
9     memcpy-addr-async          OptimizeStage2 tail, after label assignment
10    concat-notask              OptimizeStage2 tail (ConcatNotaskPass, last)
11    tensor-move-delete         OptimizeTensorMove
12    rw-conflict                MemConflictProc: HandleMemoryRWConflict
13    layout-conflict            MemConflictProc: HandleMemoryLayoutConflict
14    set-io-offset              ModelBuilder after memory assignment (SetInputOutputOffsetPass)
====  =========================  ===================================================================

``mark-same-addr`` is not in ``o3``: GE never invokes MarkSameAddrPass in its compile (reference §8.7, §11 #7);
run it by name. A pass of the list that is not registered (not built yet) is skipped and listed under
``not_available`` in the ``o3`` report section, so ``o3`` works while passes land.
"""

from __future__ import annotations

from typing import Any

from anchorlog.analysis.registry import PASSES, PassContext, load_all, register, register_pipeline
from anchorlog.facts.graph import Model
from anchorlog.gcpause import paused_gc

MEM_CONFLICT = ("rw-conflict", "layout-conflict")

O3_ORDER: tuple[str, ...] = (
    "inner-identity-add",
    "graph-lint",
    "hccl-memcpy",
    "common-subexpression-elimination",
    "hccl-memcpy",
    "engine-partition",
    "inner-identity-delete",
    "hccl-continuous-memcpy",
    "inplace-support-check",
    "atomic-addr-clean",
    "subgraph-isolation",
    "memcpy-addr-async",
    "concat-notask",
    "tensor-move-delete",
    *MEM_CONFLICT,
    "set-io-offset",
)

register_pipeline(
    "mem-conflict",
    MEM_CONFLICT,
    "GE MemConflictProc: rw-conflict (failure only warns) then layout-conflict (failure fails)",
)


def available(names: tuple[str, ...] | list[str]) -> tuple[list[str], list[str]]:
    """Split ``names`` into (registered runnable passes, names not registered), keeping order/duplicates."""
    load_all()
    ok: list[str] = []
    missing: list[str] = []
    for n in names:
        info = PASSES.get(n)
        if info is None or (info.fn is None and not info.pipeline):
            if n not in missing:
                missing.append(n)
        elif info.fn is None:
            sub_ok, sub_missing = available(list(info.pipeline))
            ok.extend(sub_ok)
            missing.extend(m for m in sub_missing if m not in missing)
        else:
            ok.append(n)
    return ok, missing


@register("o3")
def run_o3(model: Model, ctx: PassContext) -> dict:
    """The standard pipeline: every memory pass in scope in GE's compile order (unregistered ones skipped)."""
    ok, missing = available(list(O3_ORDER))
    with paused_gc():
        for name in ok:
            ctx.progress(f"pass {name}")
            section = PASSES[name].fn(model, ctx)  # type: ignore[misc]
            ctx.report["passes"].append({"pass": name, **(section or {})})
    out: dict[str, Any] = {"pipeline": list(O3_ORDER), "ran": ok}
    if missing:
        out["not_available"] = missing
    return out

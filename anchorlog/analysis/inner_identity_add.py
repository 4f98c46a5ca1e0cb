"""``inner-identity-add``: GE's InnerIdentityAddPass (graph pass, level O0; reference §5 / seed §4.6).

For every ref op (op attr ``reference`` true after ``UpdateRefAttr`` marks name-matched inputs/outputs) and
every output that reuses an input, the pass isolates the producer of that input behind an ``Identity``
(``inner_identity_<n>``, attrs ``_inner_identity``/``_cannot_be_deleted``/``no_need_constant_folding`` = true):

* skipped when the producer is a ``TensorMove`` whose output has exactly one consumer -- the copy already
  isolates the ref op (seed 000 §4.6, the TensorMove/InnerIdentity collaboration);
* skipped when, following ref outputs upward (and out of subgraphs through their Data), the real input is a
  var-like node (Variable/VariableV2/RefData) or a RefSwitch/RefMerge/ReadVariableOp;
* otherwise the Identity feeds the ref input, and every other consumer of the producer that the ref op reaches
  (data or control path) is moved behind the same Identity, so they read the value before the write.

Runs on the root graph and then on every subgraph (PassManager), each with its own reachability.
"""

from __future__ import annotations

from pathlib import Path

from anchorlog.analysis.registry import PassContext, register
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model
from anchorlog.facts.relations import OP_CLASSES, io_names
from anchorlog.runtime.rewrite import insert_identity_after, out_indices

INNER_IDENTITY_ATTR = "_inner_identity"


def update_ref_attr(model: Model) -> list[str]:
    """GE ``PassUtils::UpdateRefAttr``: set op attr ``reference`` = true where an input name equals an output
    name (and the input descriptor exists). Returns the nodes marked."""
    marked = []
    for g in model.graphs:
        for n in g.nodes.values():
            outs = io_names(n, "out")
            if any(name in outs and i < max(len(n.input_desc), len(n.inputs)) for name, i in io_names(n, "in").items()):
                n.set_attr("reference", True)
                marked.append(n.name)
    return marked


II_DL = Path(__file__).resolve().parent.parent / "queries" / "inner_identity.dl"
ADD_OUTPUTS = ("ii_cand", "ii_bad", "ii_tm_single", "ii_no_need", "ii_move")
DELETE_OUTPUTS = (
    "iid",
    "iid_src",
    "iid_out",
    "iid_out_edges",
    "iid_ref",
    "iid_sibling",
    "iid_src_fanout",
    "iid_reach",
    "iid_scope",
    "iid_out_scope",
    "iid_from_data",
)


class InnerIdentityRules:
    """``queries/inner_identity.dl`` over the shared fact database, re-run after each edit (the passes edit
    rarely: one Identity per unisolated ref input)."""

    def __init__(self, model: Model, ctx: PassContext, outputs: tuple[str, ...]) -> None:
        from anchorlog.queries import Program

        self.model, self.ctx, self.outputs = model, ctx, outputs
        self.prog = Program.cached(II_DL)
        self.runs = 0
        self.rows: dict[str, list[tuple]] = {}
        self.dirty = True

    def current(self) -> dict[str, list[tuple]]:
        if self.dirty:
            from anchorlog.analysis.fact_cache import shared_facts
            from anchorlog.analysis.graph_lint import topo_positions

            db = shared_facts(self.model, self.ctx)
            res = self.prog.run(
                db, engine=self.ctx.engine, outputs=list(self.outputs), extra={"reach_pos": topo_positions(self.model)}
            )
            self.rows = {r: res.rows(r) for r in self.outputs}
            self.runs += 1
            self.dirty = False
        return self.rows


def run_inner_identity_add(model: Model, ctx: PassContext | None = None) -> dict:
    """Apply the pass to every graph of ``model`` (root first, nodes in order); returns the report section.
    Candidates, the TensorMove skip, the real-input check and the consumers to move come from the rules."""
    ctx = ctx if ctx is not None else PassContext()
    update_ref_attr(model)
    rules = InnerIdentityRules(model, ctx, ADD_OUTPUTS)
    inserted: list[dict] = []
    skipped: list[dict] = []
    counter = 0
    for graph in list(model.graphs):
        for node in list(graph.nodes.values()):
            if node.attr("reference") is not True:
                continue
            for o in out_indices(graph, node.name):
                f = rules.current()
                key = (graph.name, node.name)
                bad = [r for r in f["ii_bad"] if (r[0], r[1]) == key and int(r[2]) == o]
                if bad:
                    k = int(bad[0][3])
                    raise PassFailure(
                        f"ref input {k} of {node.name} (reused by output {o}) does not exist or is not connected",
                        f"{graph.name}/{node.name}",
                    )
                cand = [r for r in f["ii_cand"] if (r[0], r[1]) == key and int(r[2]) == o]
                if not cand:
                    continue
                _g, _n, _o, k, p, po = cand[0]
                k, po = int(k), int(po)
                src = (p, po)
                if any((r[0], r[1], int(r[2])) == (graph.name, node.name, k) for r in f["ii_tm_single"]):
                    skipped.append(
                        {
                            "ref_node": node.name,
                            "input": k,
                            "producer": p,
                            "why": "single-output TensorMove already isolates the ref input",
                        }
                    )
                    continue
                if any((r[0], r[1], int(r[2])) == (graph.name, node.name, k) for r in f["ii_no_need"]):
                    skipped.append(
                        {
                            "ref_node": node.name,
                            "input": k,
                            "producer": p,
                            "why": "the real input is var-like or changed by a ref node",
                        }
                    )
                    continue
                moved = {
                    (d, int(i)) for g_, n_, k_, d, i in f["ii_move"] if (g_, n_, int(k_)) == (graph.name, node.name, k)
                }
                targets = [(d, i) for d, i in graph.consumers(p, po) if (d, i) in moved]  # GE's consumer order
                name = graph.unique_name(f"inner_identity_{counter}")
                counter += 1
                ident = insert_identity_after(
                    graph,
                    src,
                    [(node.name, k)],
                    name=name,
                    attrs={INNER_IDENTITY_ATTR: True, "_cannot_be_deleted": True, "no_need_constant_folding": True},
                )
                for d, i in targets:
                    graph.connect(ident, 0, d, i)
                rules.dirty = True  # later candidates see this Identity
                inserted.append(
                    {
                        "identity": ident,
                        "graph": graph.name,
                        "ref_node": node.name,
                        "input": k,
                        "producer": f"{p}:{po}",
                        "moved_consumers": [f"{d}:{i}" for d, i in targets],
                    }
                )
    return {"inserted": inserted, "skipped": skipped, "rule_runs": rules.runs}


@register("inner-identity-add")
def run(model: Model, ctx: PassContext) -> dict:
    """Isolate ref-op inputs behind an inner Identity (GE InnerIdentityAddPass)."""
    return run_inner_identity_add(model, ctx)


# --------------------------------------------------------------------------------------------------------------
# inner-identity-delete (GE InnerIdentityDeletePass, O0, OptimizeStage2 after-merge)
# --------------------------------------------------------------------------------------------------------------
OPT_TOPO_SORTING_MODE = "ge.topoSortingMode"
TENSOR_MEMORY_SCOPE = "_tensor_memory_scope"
_STABLE_RDFS = 3
_CONST_LIKE = frozenset(OP_CLASSES["const_like"])


def _stable_rdfs(options: dict[str, str]) -> bool:
    text = options.get(OPT_TOPO_SORTING_MODE, "")
    if not text:
        return False
    import re

    m = re.match(r"\s*([+-]?\d+)", text)  # strtol: leading number, 0 when none
    return (int(m.group(1)) if m else 0) == _STABLE_RDFS


class _IdentityFacts:
    """The rule rows about one inner Identity (``inner_identity.dl``); order-dependent picks (GE's
    ``FindRefNode`` = the first ref consumer) follow the graph's consumer order."""

    def __init__(self, rows: dict[str, list[tuple]], graph: Graph) -> None:
        self.graph = graph
        g = graph.name
        self.iid = {r[1] for r in rows["iid"] if r[0] == g}
        self.by: dict[str, dict[str, list[tuple]]] = {}
        for rel in DELETE_OUTPUTS:
            for r in rows[rel]:
                if r[0] == g:
                    self.by.setdefault(rel, {}).setdefault(r[1], []).append(tuple(r[2:]))
        self.reach = {(a, y[0]) for a, ys in self.by.get("iid_reach", {}).items() for y in ys}

    def get(self, rel: str, n: str) -> list[tuple]:
        return self.by.get(rel, {}).get(n, [])

    def ref(self, ident: str) -> str | None:
        refs = {r[0] for r in self.get("iid_ref", ident)}
        for o in _out_data_nodes(self.graph, ident):
            if o in refs:
                return o
        return None

    def real_out(self, name: str) -> str | None:
        return self.ref(name) if name in self.iid else name

    def connected(self, a: str | None, b: str | None) -> bool:
        return a is not None and b is not None and (a == b or (a, b) in self.reach)


def _out_data_nodes(graph: Graph, name: str) -> list[str]:
    return [d for o in out_indices(graph, name) for d, _ in graph.consumers(name, o)]


def _delete_decision(f: _IdentityFacts, ident: str, options: dict[str, str]) -> tuple[bool, str]:
    """GE ``IsCannotDelete`` + ``DeleteInnerIdentity`` over the rule rows: (delete?, why)."""
    graph = f.graph
    if f.get("iid_scope", ident):
        if not f.get("iid_from_data", ident):
            return False, f"{TENSOR_MEMORY_SCOPE} guard"
    elif f.get("iid_out_scope", ident) and f.get("iid_from_data", ident):
        return False, f"{TENSOR_MEMORY_SCOPE} guard"
    srcs = f.get("iid_src", ident)
    if len(srcs) != 1:
        raise PassFailure(f"inner identity {ident} has {len(srcs)} data inputs, expected 1", f"{graph.name}/{ident}")
    producer, _po, ptype = srcs[0]
    if ptype in _CONST_LIKE:
        return False, f"its input {producer} is a {ptype} (not writable)"
    if _stable_rdfs(options):
        return True, f"{OPT_TOPO_SORTING_MODE} is stable RDFS"
    if not f.get("iid_ref", ident):
        return True, "no consumer is a ref op"
    ref = f.ref(ident)
    outs = {r[0] for r in f.get("iid_out", ident)}
    n_out_edges = int(f.get("iid_out_edges", ident)[0][0])
    others = [o for o in sorted(outs) if o != ref]
    if int(f.get("iid_src_fanout", ident)[0][0]) == 1:
        if n_out_edges == 1:
            return True, "its input and itself each have a single consumer"
        if all(f.connected(ref, f.real_out(o)) for o in others):
            return True, f"every other consumer runs after the ref op {ref}"
        return False, f"a consumer does not depend on the ref op {ref}"
    siblings = sorted({r[0] for r in f.get("iid_sibling", ident)})
    before_ref = all(f.connected(f.real_out(s), ref) for s in siblings)
    if n_out_edges == 1:
        if before_ref:
            return True, f"every other reader of {producer} runs before the ref op {ref}"
        return False, f"another reader of {producer} is not ordered before the ref op {ref}"
    if before_ref and all(f.connected(ref, f.real_out(o)) for o in others):
        return True, f"readers of {producer} run before, its other consumers after the ref op {ref}"
    return False, f"readers around the ref op {ref} are not ordered"


def run_inner_identity_delete(model: Model, options: dict[str, str], ctx: PassContext | None = None) -> dict:
    """Apply GE's InnerIdentityDeletePass to every graph (root first, nodes in order) over the rule rows of
    ``inner_identity.dl`` (re-derived after each deletion); returns the report section."""
    from anchorlog.runtime.rewrite import isolate_and_delete

    ctx = ctx if ctx is not None else PassContext(options=dict(options))
    update_ref_attr(model)
    rules = InnerIdentityRules(model, ctx, DELETE_OUTPUTS)
    deleted: list[dict] = []
    kept: list[dict] = []
    for graph in list(model.graphs):
        for name in list(graph.nodes):
            if name not in graph.nodes:
                continue
            f = _IdentityFacts(rules.current(), graph)
            if name not in f.iid:
                continue
            ok, why = _delete_decision(f, name, options)
            if ok:
                isolate_and_delete(graph, name, {0: 0})
                rules.dirty = True
                deleted.append({"identity": name, "graph": graph.name, "why": why})
            else:
                kept.append({"identity": name, "graph": graph.name, "why": why})
    return {"deleted": deleted, "kept": kept, "rule_runs": rules.runs}


@register("inner-identity-delete", options=(OPT_TOPO_SORTING_MODE,))
def run_delete(model: Model, ctx: PassContext) -> dict:
    """Remove inner Identities whose isolation is not needed (GE InnerIdentityDeletePass)."""
    return run_inner_identity_delete(model, ctx.options, ctx)

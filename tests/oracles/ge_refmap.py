"""TEST ORACLE: a step-by-step replay of ``GraphUtils::GetRefMapping`` (reference §3) in GE's node order.

Formerly ``anchorlog/analysis/layout_conflict/refmap.py``. The package computes the table with the rules
(``anchorlog.analysis.symbols.symbol_table_rules``); tests compare the two (tests/test_symbols_oracle.py).
"""

from __future__ import annotations

from anchorlog.analysis.layout_conflict._ge import (
    PARENT_NODE_INDEX,
    REF_VAR_SRC_VAR_NAME,
    attr_bool,
    attr_int,
    attr_str,
    in_desc,
    may_ref_from_input,
    n_in,
    n_out,
)

# The anchor and table types are the package's own (the oracle differs only in how it fills the table).
from anchorlog.analysis.layout_conflict.refmap import AnchorRef, SymbolTable, anchor_name  # noqa: E402,F401
from anchorlog.analysis.order import ge_all_nodes
from anchorlog.errors import PassFailure
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex, ref_from_input


class _Mapper:
    def __init__(self, model: Model, graph: Graph, index: ModelIndex | None = None) -> None:
        self.model = model
        self.graph = graph
        self.index = index or ModelIndex(model)
        self.t = SymbolTable()

    # -- primitives (reference §3.1) ---------------------------------------------------------------------
    def new_symbol(self, a: AnchorRef) -> None:
        self.t.s2a[a.name] = [a]
        self.t.a2s.setdefault(a.name, a.name)

    def update(self, cur: AnchorRef, exist: AnchorRef) -> None:
        s = self.t.a2s.get(exist.name)
        if s is None:
            raise PassFailure(f"symbol of {exist.name} not found, maybe TopoSorting is missing", self.graph.name)
        old = self.t.a2s.get(cur.name)
        if old is not None:
            if old != s:
                raise PassFailure(f"anchor {cur.name} already maps to symbol {old}, not {s}", self.graph.name)
            return
        self.t.s2a[s].append(cur)
        self.t.a2s[cur.name] = s

    def union(self, a1: AnchorRef, a2: AnchorRef) -> str:
        s1 = self.t.a2s.get(a1.name, "")
        s2 = self.t.a2s.get(a2.name, "")
        if s1 == s2:
            return s1
        l1 = self.t.s2a.setdefault(s1, [])
        l2 = self.t.s2a.setdefault(s2, [])
        keep, drop = (s1, s2) if len(l1) > len(l2) else (s2, s1)
        moved = self.t.s2a.pop(drop)
        for a in moved:
            self.t.a2s[a.name] = keep
        self.t.s2a[keep].extend(moved)
        return keep

    # -- node handlers (reference §3.2) --------------------------------------------------------------------
    def run(self) -> SymbolTable:
        for _g, node in ge_all_nodes(self.model, self.graph):
            self.in_anchors(node)
            self.out_anchors(node)
        self.t.s2a.pop("", None)
        return self.t

    def is_subgraph_output(self, node: Node) -> bool:
        g = node.graph
        if node.type != "NetOutput" or g is None or g.name not in self.index.owner:
            return False
        parent_graph, parent, _ = self.index.owner[g.name]
        if attr_bool(parent, "_is_unknown_shape") and (
            attr_bool(parent_graph, "_graph_unknown_flag") or parent_graph.name == self.index.root_name
        ):
            return False
        return any(PARENT_NODE_INDEX in d.attrs for d in node.input_desc)

    def producer(self, node: Node, k: int) -> AnchorRef | None:
        src = node.inputs[k] if k < len(node.inputs) else None
        if src is None or node.graph is None or src[0] not in node.graph.nodes:
            return None
        return AnchorRef(node.graph.nodes[src[0]], "out", src[1])

    def in_anchors(self, node: Node) -> None:
        g = node.graph
        if g is not self.graph and g is not None:
            if self.is_subgraph_output(node):
                self.subgraph_output(node)
                return
            if self.index.is_subgraph_input(g, node):
                self.subgraph_input(node)
                return
        if node.type in ("Merge", "StreamMerge"):
            self.merge_input(node)
            return
        a2s, s2a = self.t.a2s, self.t.s2a
        nodes = g.nodes if g is not None else {}
        inputs = node.inputs
        for k in range(n_in(node)):
            cur = AnchorRef(node, "in", k)
            cname = f"{node.name}_in_{k}"
            src = inputs[k] if k < len(inputs) else None
            if src is None or src[0] not in nodes:
                s2a[cname] = [cur]
                a2s.setdefault(cname, cname)
                continue
            s = a2s.get(f"{src[0]}_out_{src[1]}")
            old = a2s.get(cname)
            if s is None or (old is not None and old != s):
                self.update(cur, AnchorRef(nodes[src[0]], "out", src[1]))  # reports GE's failure
            elif old is None:
                s2a[s].append(cur)
                a2s[cname] = s

    def parent(self, node: Node) -> Node:
        return self.index.owner[node.graph.name][1]  # type: ignore[union-attr]

    def subgraph_input(self, data: Node) -> None:
        p = attr_int(data, PARENT_NODE_INDEX)
        if p is None:
            raise PassFailure(f"subgraph data {data.name} has no {PARENT_NODE_INDEX}", data.name)
        peer = self.producer(self.parent(data), p)
        if peer is not None:
            self.update(AnchorRef(data, "in", 0), peer)

    def subgraph_output(self, net: Node) -> None:
        parent = self.parent(net)
        for k in range(n_in(net)):
            peer = self.producer(net, k)
            if peer is None:
                raise PassFailure(f"subgraph output {net.name} input {k} is not connected", net.name)
            d = in_desc(net, k)
            pidx = attr_int(d, PARENT_NODE_INDEX) if d is not None else None
            if pidx is None:
                continue
            s = self.union(peer, AnchorRef(parent, "out", pidx))
            cur = AnchorRef(net, "in", k)
            if cur.name not in self.t.a2s:
                self.t.s2a.setdefault(s, []).append(cur)
                self.t.a2s[cur.name] = s

    def merge_input(self, merge: Node) -> None:
        cur: list[AnchorRef] = []
        exist: list[AnchorRef] = []
        for k in range(n_in(merge)):
            peer = self.producer(merge, k)
            if peer is not None:
                cur.append(AnchorRef(merge, "in", k))
                exist.append(peer)
                continue
            nxt = attr_str(merge, "_next_iteration_node")
            nxt_node = self.model.find_node(nxt) if nxt else None
            if nxt_node is not None:
                cur.append(AnchorRef(merge, "in", k))
                cur.append(AnchorRef(nxt_node, "out", 0))
        if not exist:
            return
        best = max(exist, key=lambda a: len(self.t.s2a.get(self.t.a2s.get(a.name, ""), [])))
        s = self.t.a2s.get(best.name, "")
        for a in exist:
            s = self.union(best, a)
        for a in cur:
            if a.name not in self.t.a2s:
                self.t.s2a.setdefault(s, []).append(a)
                self.t.a2s[a.name] = s

    def out_anchors(self, node: Node) -> None:
        g = node.graph
        maybe_ref = may_ref_from_input(node)
        if (
            not maybe_ref
            and node.type != "RefData"
            and not any(REF_VAR_SRC_VAR_NAME in d.attrs for d in node.output_desc)
        ):
            # plain outputs: each founds its own symbol (the common case, kept cheap)
            a2s, s2a, name = self.t.a2s, self.t.s2a, node.name
            for i in range(n_out(node)):
                key = f"{name}_out_{i}"
                if key not in a2s:
                    a2s[key] = key
                    s2a[key] = [AnchorRef(node, "out", i)]
            return
        for i in range(n_out(node)):
            a = AnchorRef(node, "out", i)
            if a.name in self.t.a2s:
                continue
            refed = self.ref_from_other(node, i)
            if refed is not None and refed.name in self.t.a2s:
                self.update(a, refed)
            k = ref_from_input(self.index, g, node, i) if g is not None and maybe_ref else None
            # A subgraph Data's in_0 got its symbol from the parent input even when the dump lists no input
            # descriptor for it (GE's Data op always has that input anchor).
            if k is not None and (k < n_in(node) or anchor_name(node.name, "in", k) in self.t.a2s):
                self.update(a, AnchorRef(node, "in", k))
                continue
            # NewSymbol with emplace: an anchor already mapped via RefData keeps its symbol, but GE still
            # creates a one-anchor entry named after it (a phantom symbol).
            self.new_symbol(a)

    def ref_from_other(self, node: Node, i: int) -> AnchorRef | None:
        g = node.graph
        if g is None:
            return None
        d = node.output_desc[i] if i < len(node.output_desc) else None
        v = attr_str(d, REF_VAR_SRC_VAR_NAME) if d is not None and REF_VAR_SRC_VAR_NAME in d.attrs else None
        if v and v in g.nodes and g.nodes[v].type == "RefData":
            return AnchorRef(g.nodes[v], "out", 0)
        if node.type == "RefData" and g.name in self.index.owner:
            for c in node.ctrl_inputs:
                src = g.nodes.get(c)
                if src is not None and src.type == "Data" and PARENT_NODE_INDEX in src.attrs:
                    return AnchorRef(src, "out", 0)
            raise PassFailure(
                f"RefData {node.name} in subgraph {g.name} has no control edge from an inner Data", node.name
            )
        return None


def get_ref_mapping(model: Model, graph: Graph, index: ModelIndex | None = None) -> SymbolTable:
    """``GraphUtils::GetRefMapping(graph)``: nodes must already be in topological order."""
    return _Mapper(model, graph, index).run()


def oracle_table(model: Model, graph: Graph | None = None) -> tuple[dict, dict]:
    """The replay's table with ``(graph, node, io, idx)`` anchors: ``(a2s, s2a)`` (phantoms included)."""
    t = get_ref_mapping(model, graph or model.root)

    def key(a: AnchorRef) -> tuple:
        return (a.node.graph.name if a.node.graph is not None else "", a.node.name, a.io, a.idx)

    s2a = {s: [key(a) for a in lst] for s, lst in t.s2a.items()}
    a2s: dict = {}
    for s, lst in t.s2a.items():
        for a in lst:
            if t.a2s.get(a.name) == s:
                a2s[key(a)] = s
    return a2s, s2a

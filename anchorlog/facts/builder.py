"""A small graph DSL for tests and notebooks, in the spirit of GE's test DSL
(``DEF_GRAPH(g) { CHAIN(NODE("a", DATA)->EDGE(0, 0)->NODE("b", RELU)); }``).

Example::

    from anchorlog.facts.builder import GraphBuilder, Edge, CTRL

    b = GraphBuilder("g")
    b.chain("data:Data", "tm:TensorMove", "out:NetOutput")       # data:0 -> tm:0 -> out:0
    b.chain("c:Const", Edge(0, 1), "add:Add")                     # explicit anchors, like GE's EDGE(0, 1)
    b.chain("data", "add")                                        # known nodes by name; first free input
    b.chain("tm", CTRL, "add")                                    # control edge
    b.attr("add", "_input_mutable", True)
    b.node("x", "Add", inputs=2, outputs=1, shape=[4, 4])         # explicit anchor counts and shape
    b.reuse_input("tm", out_idx=0, in_idx=0)                      # TensorDesc.reuse_input / reuse_input_index
    b.ref_op("assign", {0: 0})                                    # attr `reference` + matching in/out names

    # subgraphs: the owner gets subgraph_names, Data gets op attr _parent_node_index, NetOutput inputs
    # get tensor attr _parent_node_index
    b.node("if", "If", inputs=2, outputs=1)
    then = b.subgraph("then", owner="if")
    then.data("t_in", 1)                                          # parent input 1
    then.chain("t_in", "t_relu:ReLU")
    then.output("t_relu", 0)                                      # feeds parent output 0 (NetOutput created)
    model = b.build()

Nodes get input/output :class:`TensorDesc` s automatically: as many as their edges use (at least the
type's default, e.g. one output for most ops, none for ``NetOutput``), with the builder's default dtype,
shape and format unless overridden per node (``node(..., dtype=, shape=, format=)``) or per anchor
(``in_desc`` / ``out_desc``). Node ids are assigned at :meth:`build` in topological order (subgraph nodes
right after their owner, as GE's root TopologicalSorting numbers them) unless set explicitly.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from anchorlog.facts.graph import Graph, Model, Node, TensorDesc

# GE type strings (base/common/types.cc), for builder code that reads like GE's tests.
DATA = "Data"
REFDATA = "RefData"
CONST = "Const"
CONSTANT = "Constant"
CONSTPLACEHOLDER = "ConstPlaceHolder"
FILECONSTANT = "FileConstant"
VARIABLE = "Variable"
NETOUTPUT = "NetOutput"
RELU = "ReLU"
ADD = "Add"
MUL = "Mul"
CAST = "Cast"
IDENTITY = "Identity"
TENSORMOVE = "TensorMove"
MEMCPYASYNC = "MemcpyAsync"
RESHAPE = "Reshape"
CONCAT = "Concat"
CONCATV2 = "ConcatV2"
SPLIT = "Split"
ASSIGN = "Assign"
IF = "If"
WHILE = "While"
CASE = "Case"
PARTITIONEDCALL = "PartitionedCall"
HCOMALLREDUCE = "HcomAllReduce"
HCOMBROADCAST = "HcomBroadcast"
MERGE = "Merge"
SWITCH = "Switch"

PARENT_NODE_INDEX = "_parent_node_index"

# Default anchor counts by type when no edge says more: (inputs, outputs).
_DEFAULT_COUNTS: dict[str, tuple[int, int]] = {
    "Data": (1, 1),
    "RefData": (1, 1),
    "AippData": (1, 1),
    "AnnData": (1, 1),
    "NetOutput": (0, 0),
    "Const": (0, 1),
    "Constant": (0, 1),
    "ConstPlaceHolder": (0, 1),
    "FileConstant": (0, 1),
    "Variable": (0, 1),
    "VariableV2": (0, 1),
    "NoOp": (0, 0),
}


@dataclass(frozen=True)
class Edge:
    """Explicit anchors between two nodes of a :meth:`GraphBuilder.chain` (GE's ``EDGE(out, in)``).

    ``dst_in=None`` means "the first unconnected input of the next node"."""

    src_out: int = 0
    dst_in: int | None = None


class _Ctrl:
    def __repr__(self) -> str:
        return "CTRL"


CTRL = _Ctrl()  # in a chain: a control edge between the neighbours


def EDGE(src_out: int, dst_in: int) -> Edge:  # noqa: N802 - mirrors GE's DSL
    return Edge(src_out, dst_in)


class ModelBuilder:
    """Builds a :class:`Model` with a root graph and any number of subgraphs.

    ``ModelBuilder("m").graph("g")`` gives the root :class:`GraphBuilder`; ``GraphBuilder("g")`` alone makes
    its own ModelBuilder. Defaults (``dtype``, ``shape``, ``format``) apply to every tensor desc created."""

    def __init__(
        self,
        name: str = "model",
        *,
        dtype: str = "DT_FLOAT",
        shape: Iterable[int] | None = (1, 1, 224, 224),
        format: str = "ND",  # noqa: A002 - GE's word
        size: int = 0,
    ) -> None:
        self.model = Model(name)
        self.dtype = dtype
        self.shape = None if shape is None else list(shape)
        self.format = format
        self.size = size
        self.builders: dict[str, GraphBuilder] = {}

    def graph(self, name: str) -> GraphBuilder:
        """The builder of graph ``name`` (created on first use; the first graph is the root)."""
        if name in self.builders:
            return self.builders[name]
        gb = GraphBuilder.__new__(GraphBuilder)
        gb._init(self, self.model.add_graph(Graph(name)))
        self.builders[name] = gb
        return gb

    @property
    def root(self) -> GraphBuilder:
        return self.builders[self.model.graphs[0].name]

    def find_node(self, name: str) -> Node:
        n = self.model.find_node(name)
        if n is None:
            raise KeyError(f"no node {name!r} in any graph")
        return n

    def build(self, *, assign_ids: bool = True) -> Model:
        """The model. Nodes without an id get one in topological order (owner, then its subgraphs)."""
        if assign_ids:
            _assign_ids(self.model)
        for g in self.model.graphs:
            g.invalidate()
        return self.model


class GraphBuilder:
    """Builds one graph of a model; see the module docstring for an example."""

    def __init__(
        self,
        name: str = "g",
        *,
        model_name: str = "model",
        dtype: str = "DT_FLOAT",
        shape: Iterable[int] | None = (1, 1, 224, 224),
        format: str = "ND",  # noqa: A002 - GE's word
        size: int = 0,
    ) -> None:
        """A root graph ``name`` in a new model ``model_name``; tensor descs default to ``dtype``/``shape``/
        ``format``/``size`` (``shape=None``: descs without a shape)."""
        mb = ModelBuilder(model_name, dtype=dtype, shape=shape, format=format, size=size)
        self._init(mb, mb.model.add_graph(Graph(name)))
        mb.builders[name] = self

    def _init(self, mb: ModelBuilder, graph: Graph) -> None:
        self.mb = mb
        self.graph = graph
        self._netoutput: str | None = None
        # per-node tensor desc defaults (dtype/shape/format) given to node(), used for anchors added later
        self._style: dict[str, dict[str, Any]] = {}

    @property
    def name(self) -> str:
        return self.graph.name

    @property
    def model(self) -> Model:
        return self.mb.model

    # -- nodes -----------------------------------------------------------------------------------------------
    def node(
        self,
        spec: str | Node,
        type: str | None = None,  # noqa: A002 - GE's word
        *,
        inputs: int | None = None,
        outputs: int | None = None,
        dtype: str | None = None,
        shape: Iterable[int] | None | str = "default",
        format: str | None = None,  # noqa: A002
        attrs: dict[str, Any] | None = None,
        id: int | None = None,  # noqa: A002
        stream_id: int | None = None,
    ) -> Node:
        """Get or create a node. ``spec`` is ``"name"``, ``"name:Type"`` or a :class:`Node` (added as is).

        ``inputs``/``outputs``: anchor counts at least this large (edges may add more); ``dtype``/``shape``/
        ``format`` replace the builder defaults for this node's tensor descs (``shape=None``: no shape)."""
        if isinstance(spec, Node):
            if spec.name not in self.graph.nodes:
                self.graph.add_node(spec)
            node = spec
        else:
            name, _, stype = spec.partition(":")
            if type is not None and stype and stype != type:
                raise ValueError(f"node {name!r}: type given twice ({stype!r} and {type!r})")
            ntype = type or stype
            node = self.graph.nodes.get(name)
            if node is None:
                if not ntype:
                    raise KeyError(f"graph {self.name}: unknown node {name!r} (write 'name:Type' to create it)")
                node = Node(name, ntype)
                self.graph.add_node(node)
                din, dout = _DEFAULT_COUNTS.get(ntype, (0, 1))
                self._desc_defaults(node, dtype, shape, format)
                self.ensure_inputs(node, din)
                self.ensure_outputs(node, dout)
            elif ntype and node.type != ntype:
                raise ValueError(f"node {name!r} is a {node.type}, not a {ntype}")
            else:
                self._desc_defaults(node, dtype, shape, format, only_given=True)
        if inputs is not None:
            self.ensure_inputs(node, inputs)
        if outputs is not None:
            self.ensure_outputs(node, outputs)
        for k, v in (attrs or {}).items():
            node.set_attr(k, v)
        if id is not None:
            node.id = id
        if stream_id is not None:
            node.stream_id = stream_id
        return node

    def _desc_defaults(self, node: Node, dtype: Any, shape: Any, fmt: Any, only_given: bool = False) -> None:
        d = self._style.setdefault(node.name, {})
        if dtype is not None:
            d["dtype"] = dtype
        if not (isinstance(shape, str) and shape == "default"):
            d["shape"] = None if shape is None else list(shape)
        if fmt is not None:
            d["format"] = fmt
        if only_given:  # restyle descs that already exist
            for td in node.input_desc + node.output_desc:
                if dtype is not None:
                    td.dtype = dtype
                if "shape" in d and not (isinstance(shape, str)):
                    td.shape = None if shape is None else list(shape)
                if fmt is not None:
                    td.layout = fmt

    def _new_desc(self, node: Node) -> TensorDesc:
        d = self._style.get(node.name, {})
        shape = d["shape"] if "shape" in d else self.mb.shape
        return TensorDesc(
            dtype=d.get("dtype", self.mb.dtype),
            shape=None if shape is None else list(shape),
            layout=d.get("format", self.mb.format),
            size=self.mb.size,
        )

    def ensure_inputs(self, node: Node | str, n: int) -> Node:
        """Give ``node`` at least ``n`` input anchors (descs and unconnected input slots)."""
        node = self._node(node)
        while len(node.input_desc) < n:
            node.input_desc.append(self._new_desc(node))
        while len(node.inputs) < n:
            node.inputs.append(None)
        return node

    def ensure_outputs(self, node: Node | str, n: int) -> Node:
        """Give ``node`` at least ``n`` output anchors."""
        node = self._node(node)
        while len(node.output_desc) < n:
            node.output_desc.append(self._new_desc(node))
        return node

    def _node(self, node: Node | str) -> Node:
        if isinstance(node, Node):
            return node
        return self.node(node)

    # -- edges -----------------------------------------------------------------------------------------------
    def edge(self, src: str | Node, src_out: int, dst: str | Node, dst_in: int | None = None) -> GraphBuilder:
        """Data edge ``src:src_out -> dst:dst_in`` (``dst_in=None``: the first unconnected input)."""
        s = self._node(src)
        d = self._node(dst)
        if dst_in is None:
            dst_in = next((i for i, a in enumerate(d.inputs) if a is None), len(d.inputs))
        self.ensure_outputs(s, src_out + 1)
        self.ensure_inputs(d, dst_in + 1)
        self.graph.connect(s.name, src_out, d.name, dst_in)
        return self

    def ctrl(self, src: str | Node, dst: str | Node) -> GraphBuilder:
        """Control edge ``src -> dst``."""
        self.graph.add_ctrl(self._node(src).name, self._node(dst).name)
        return self

    def chain(self, *items: str | Node | Edge | _Ctrl) -> GraphBuilder:
        """Connect nodes in a row: by default ``prev:0 -> next:<first free input>``; an :class:`Edge` (or
        ``(out, in)`` tuple) between two nodes picks the anchors, :data:`CTRL` makes a control edge."""
        prev: Node | None = None
        link: Edge | _Ctrl | None = None
        for it in items:
            if isinstance(it, (Edge, _Ctrl)) or isinstance(it, tuple):
                if prev is None or link is not None:
                    raise ValueError("chain: an edge spec must sit between two nodes")
                link = Edge(*it) if isinstance(it, tuple) else it
                continue
            cur = self.node(it)
            if prev is not None:
                if isinstance(link, _Ctrl):
                    self.ctrl(prev, cur)
                else:
                    e = link or Edge()
                    self.edge(prev, e.src_out, cur, e.dst_in)
            prev, link = cur, None
        if link is not None:
            raise ValueError("chain: ends with an edge spec")
        return self

    # -- attributes ------------------------------------------------------------------------------------------
    def attr(self, node: str | Node, key: str, value: Any, kind: str | None = None) -> GraphBuilder:
        """Op attribute (kind from the Python type unless given, e.g. ``kind="dt"``)."""
        self._node(node).set_attr(key, value, kind)
        return self

    def in_desc(self, node: str | Node, idx: int, **fields: Any) -> TensorDesc:
        """Input tensor desc ``idx`` (created if needed); ``fields`` set TensorDesc fields
        (``dtype``, ``shape``, ``layout``/``format``, ``size``, ``name`` ...) or, for other keys, tensor attrs."""
        n = self.ensure_inputs(node, idx + 1)
        return _apply_fields(n.input_desc[idx], fields)

    def out_desc(self, node: str | Node, idx: int, **fields: Any) -> TensorDesc:
        """Output tensor desc ``idx`` (created if needed), like :meth:`in_desc`."""
        n = self.ensure_outputs(node, idx + 1)
        return _apply_fields(n.output_desc[idx], fields)

    def in_attr(self, node: str | Node, idx: int, key: str, value: Any, kind: str | None = None) -> GraphBuilder:
        """Tensor attr on input ``idx``."""
        self.in_desc(node, idx).set_attr(key, value, kind)
        return self

    def out_attr(self, node: str | Node, idx: int, key: str, value: Any, kind: str | None = None) -> GraphBuilder:
        """Tensor attr on output ``idx``."""
        self.out_desc(node, idx).set_attr(key, value, kind)
        return self

    # -- reference ops ---------------------------------------------------------------------------------------
    def reuse_input(self, node: str | Node, out_idx: int = 0, in_idx: int = 0) -> GraphBuilder:
        """Mark output ``out_idx`` as reusing input ``in_idx`` (``TensorDescriptor.reuse_input`` + index)."""
        td = self.out_desc(node, out_idx)
        td.reuse_input = True
        td.reuse_input_index = in_idx
        return self

    def ref_op(
        self,
        node: str | Node,
        refs: dict[int, int] | None = None,
        *,
        input_names: list[str] | None = None,
        output_names: list[str] | None = None,
    ) -> GraphBuilder:
        """Make ``node`` a reference op the way GE marks one: op attr ``reference`` = true and input/output
        names (op attrs ``_input_name_key``/``_input_name_value``, ``_output_name_key``/``_output_name_value``)
        where output ``o`` has the same name as input ``i`` for each ``{o: i}`` in ``refs`` (default ``{0: 0}``).
        Other anchors are named ``x<i>`` / ``y<o>`` unless names are given."""
        n = self._node(node)
        refs = {0: 0} if refs is None else refs
        n_in = max([n.num_inputs, *(i + 1 for i in refs.values())])
        n_out = max([n.num_outputs, *(o + 1 for o in refs)])
        self.ensure_inputs(n, n_in)
        self.ensure_outputs(n, n_out)
        ins = list(input_names) if input_names else [f"x{i}" for i in range(n.num_inputs)]
        outs = list(output_names) if output_names else [f"y{o}" for o in range(n.num_outputs)]
        if not output_names:
            for o, i in refs.items():
                outs[o] = ins[i]
        n.set_attr("reference", True)
        n.set_attr("_input_name_key", ins)
        n.set_attr("_input_name_value", list(range(len(ins))))
        n.set_attr("_output_name_key", outs)
        n.set_attr("_output_name_value", list(range(len(outs))))
        return self

    # -- subgraphs -------------------------------------------------------------------------------------------
    def subgraph(self, name: str, owner: str | Node, index: int | None = None) -> GraphBuilder:
        """A new subgraph ``name`` owned by ``owner`` (a node of this graph): appended to (or placed at
        ``index`` of) the owner's ``subgraph_names``. Returns the subgraph's builder."""
        own = self._node(owner)
        if index is None:
            own.subgraph_names.append(name)
        else:
            while len(own.subgraph_names) <= index:
                own.subgraph_names.append("")
            own.subgraph_names[index] = name
        return self.mb.graph(name)

    def data(self, spec: str, parent_index: int | None = None, type: str = "Data", **kw: Any) -> Node:  # noqa: A002
        """A ``Data`` node (``"name"`` or ``"name:Type"``); in a subgraph, ``parent_index`` sets op attr
        ``_parent_node_index`` (which input of the owner feeds it)."""
        name, _, stype = spec.partition(":")
        n = self.node(name, stype or type, **kw)
        if parent_index is not None:
            n.set_attr(PARENT_NODE_INDEX, parent_index)
        return n

    def netoutput(self, name: str | None = None) -> Node:
        """This graph's NetOutput (created on first use, named ``name`` or ``<graph>_netoutput``)."""
        if self._netoutput is not None and self._netoutput in self.graph.nodes:
            return self.graph.nodes[self._netoutput]
        existing = self.graph.nodes_of_type("NetOutput")
        if name is None and existing:
            n = existing[0]
        else:
            n = self.node(name or f"{self.name}_netoutput", "NetOutput")
        self._netoutput = n.name
        return n

    def output(
        self, src: str | Node, parent_index: int | None = None, *, src_out: int = 0, netoutput: str | None = None
    ) -> GraphBuilder:
        """Feed ``src:src_out`` into the next NetOutput input; ``parent_index`` sets that input's tensor attr
        ``_parent_node_index`` (which output of the owning node it produces)."""
        net = self.netoutput(netoutput)
        self.edge(src, src_out, net, None)
        k = max(i for i, a in enumerate(net.inputs) if a == (self._node(src).name, src_out))
        if parent_index is not None:
            net.input_desc[k].set_attr(PARENT_NODE_INDEX, parent_index)
        return self

    def build(self, *, assign_ids: bool = True) -> Model:
        """The whole model (root graph first), see :meth:`ModelBuilder.build`."""
        return self.mb.build(assign_ids=assign_ids)


def _apply_fields(td: TensorDesc, fields: dict[str, Any]) -> TensorDesc:
    for k, v in fields.items():
        if k == "format":
            k = "layout"
        if k == "shape" and v is not None:
            v = list(v)
        if k in ("dtype", "shape", "layout", "name", "size", "reuse_input", "reuse_input_index"):
            setattr(td, k, v)
        else:
            td.set_attr(k, v)
    return td


def _assign_ids(model: Model) -> None:
    """Number nodes without an id in topological order, subgraph nodes right after their owner."""
    if not model.graphs:
        return
    used = {n.id for n in model.all_nodes() if n.id is not None}
    counter = [0]

    def next_id() -> int:
        while counter[0] in used:
            counter[0] += 1
        used.add(counter[0])
        return counter[0]

    seen_graphs: set[str] = set()

    def visit(g: Graph) -> None:
        seen_graphs.add(g.name)
        for n in _topo_order(g):
            if n.id is None:
                n.id = next_id()
            for s in n.subgraph_names:
                if s and s not in seen_graphs and model.has_graph(s):
                    visit(model.graph(s))

    visit(model.graphs[0])
    for g in model.graphs:  # graphs nobody owns
        if g.name not in seen_graphs:
            visit(g)


def _topo_order(g: Graph) -> list[Node]:
    """Kahn's order over data and control edges, ties broken by insertion order; insertion order on a cycle."""
    nodes = list(g.nodes.values())
    pos = {n.name: i for i, n in enumerate(nodes)}
    indeg = {n.name: 0 for n in nodes}
    succ: dict[str, list[str]] = {n.name: [] for n in nodes}
    for n in nodes:
        preds = [a[0] for a in n.inputs if a is not None] + list(n.ctrl_inputs)
        for p in preds:
            if p in succ:
                succ[p].append(n.name)
                indeg[n.name] += 1
    import heapq

    ready = [pos[n] for n, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    out: list[Node] = []
    while ready:
        i = heapq.heappop(ready)
        n = nodes[i]
        out.append(n)
        for s in succ[n.name]:
            indeg[s] -= 1
            if indeg[s] == 0:
                heapq.heappush(ready, pos[s])
    if len(out) != len(nodes):
        return nodes
    return out


__all__ = [
    "CTRL",
    "EDGE",
    "Edge",
    "GraphBuilder",
    "ModelBuilder",
]

"""The graph IR: a faithful in-memory model of GE's ComputeGraph as dumped in a ``ge.proto.ModelDef``.

A :class:`Model` holds graphs; ``graphs[0]`` is the root, the others are subgraphs owned by the node whose
``subgraph_names`` lists them. A :class:`Node` keeps its data inputs positionally (``inputs[i]`` is the
producer anchor of input ``i`` or ``None`` when unconnected) and its control inputs by source name, exactly
the information GE serialises into ``OpDef.input``. Everything the importer reads but this model does not
interpret (unknown fields, attr groups, rarely used descriptor fields) lives in ``extra`` so that writing a
model back loses nothing.

Attribute values are :class:`Attr` objects carrying the proto ``AttrDef`` oneof kind, so that an ``int``
written as ``dt`` stays ``dt`` and an empty typed list keeps its ``val_type``. Use :meth:`Node.attr` /
:meth:`Node.set_attr` for plain Python values.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

# AttrDef oneof kinds, in the order GE's proto declares them.
SCALAR_KINDS = ("s", "i", "f", "b", "bt", "dt", "expression")
ALL_KINDS = SCALAR_KINDS + ("list", "func", "td", "t", "g", "list_list_int", "list_list_float")
# ListValue element kinds and the VT_LIST_* number GE stores beside them.
LIST_VAL_TYPE = {"s": 1, "i": 2, "f": 3, "b": 4, "bt": 5, "td": 6, "t": 7, "g": 8, "na": 9, "dt": 10}


@dataclass
class AttrList:
    """A ``ListValue``: elements of one kind (``s``, ``i``, ``f``, ``b``, ``bt``, ``td``, ``t``, ``g``,
    ``na``, ``dt``) plus the ``val_type`` tag. ``kind`` is ``None`` for an empty list."""

    kind: str | None
    items: list[Any] = field(default_factory=list)
    val_type: int | None = None
    # Lists that carry more than one element kind (never written by GE, but legal proto) keep the rest here.
    other: dict[str, list[Any]] = field(default_factory=dict)


@dataclass
class NamedAttrs:
    """``NamedAttrs`` (attr kind ``func`` and list kind ``na``)."""

    name: str = ""
    attrs: dict[str, Attr] = field(default_factory=dict)
    extra: list[Any] = field(default_factory=list)


@dataclass
class TensorDef:
    """``TensorDef`` (attr kind ``t``): a descriptor and raw bytes."""

    desc: TensorDesc | None = None
    data: bytes = b""
    extra: list[Any] = field(default_factory=list)


@dataclass
class Attr:
    """One ``AttrDef``: ``kind`` is the oneof field name, ``value`` its Python form.

    ``s``/``expression`` → str (bytes when not UTF-8), ``bt`` → bytes, ``i``/``dt`` → int, ``f`` → float,
    ``b`` → bool, ``list`` → :class:`AttrList`, ``list_list_int``/``list_list_float`` → list of lists,
    ``td`` → :class:`TensorDesc`, ``t`` → :class:`TensorDef`, ``g`` → :class:`Graph`,
    ``func`` → :class:`NamedAttrs`. ``kind`` is ``None`` for an ``AttrDef`` with no value set.
    """

    kind: str | None
    value: Any = None
    extra: list[Any] = field(default_factory=list)

    def py(self) -> Any:
        """The plain Python value: lists as Python lists, scalars as they are."""
        if self.kind == "list":
            return list(self.value.items)
        return self.value

    @staticmethod
    def of(value: Any, kind: str | None = None) -> Attr:
        """Wrap a Python value, choosing the ``AttrDef`` kind GE would use for it unless ``kind`` is given."""
        if isinstance(value, Attr):
            return value
        if kind is not None and kind != "list":
            return Attr(kind, value)
        if isinstance(value, bool):
            return Attr("b", value)
        if isinstance(value, int):
            return Attr("i", value)
        if isinstance(value, float):
            return Attr("f", value)
        if isinstance(value, str):
            return Attr("s", value)
        if isinstance(value, bytes):
            return Attr("bt", value)
        if isinstance(value, TensorDesc):
            return Attr("td", value)
        if isinstance(value, Graph):
            return Attr("g", value)
        if isinstance(value, (list, tuple)):
            items = list(value)
            if items and all(isinstance(v, (list, tuple)) for v in items):
                if all(isinstance(x, int) and not isinstance(x, bool) for row in items for x in row):
                    return Attr("list_list_int", [list(r) for r in items])
                return Attr("list_list_float", [[float(x) for x in r] for r in items])
            ek = _list_kind(items)
            return Attr("list", AttrList(ek, items, LIST_VAL_TYPE.get(ek or "", 0) or None))
        raise TypeError(f"cannot store {type(value).__name__} as a GE attribute")


def _list_kind(items: list[Any]) -> str | None:
    if not items:
        return None
    first = items[0]
    if isinstance(first, bool):
        return "b"
    if isinstance(first, int):
        return "i"
    if isinstance(first, float):
        return "f"
    if isinstance(first, str):
        return "s"
    if isinstance(first, bytes):
        return "bt"
    if isinstance(first, TensorDesc):
        return "td"
    if isinstance(first, Graph):
        return "g"
    if isinstance(first, NamedAttrs):
        return "na"
    raise TypeError(f"cannot store a list of {type(first).__name__} as a GE attribute")


class _AttrMixin:
    attrs: dict[str, Attr]

    def attr(self, key: str, default: Any = None) -> Any:
        """Plain Python value of attribute ``key`` (``default`` when absent)."""
        a = self.attrs.get(key)
        return default if a is None else a.py()

    def has_attr(self, key: str) -> bool:
        return key in self.attrs

    def set_attr(self, key: str, value: Any, kind: str | None = None) -> None:
        """Set attribute ``key``; the kind follows the Python type unless given (e.g. ``kind="dt"``)."""
        self.attrs[key] = Attr.of(value, kind)

    def del_attr(self, key: str) -> None:
        self.attrs.pop(key, None)


@dataclass
class TensorDesc(_AttrMixin):
    """``TensorDescriptor``. Origin shape/format, ``_parent_node_index`` and the like are tensor ``attrs``."""

    dtype: str = "DT_FLOAT"  # DataType enum name; an unnamed number is kept as "DT_<n>"-free int string
    shape: list[int] | None = None  # None: no ShapeDef written; [] : scalar (ShapeDef present, no dims)
    layout: str = ""
    name: str = ""
    size: int = 0
    reuse_input: bool = False
    reuse_input_index: int = 0
    attrs: dict[str, Attr] = field(default_factory=dict)
    # Every other TensorDescriptor field that was set (has_out_attr, weight_size, device_type, real_dim_cnt,
    # data_offset, cmps_*, attr_groups, unknown fields ...) as read, keyed by field name, in read order.
    other: dict[str, Any] = field(default_factory=dict)
    extra: list[Any] = field(default_factory=list)

    @property
    def format(self) -> str:
        return self.layout

    @property
    def origin_format(self) -> str:
        return self.attr("origin_format", self.layout)

    @property
    def origin_shape(self) -> list[int]:
        return list(self.attr("origin_shape", self.shape or []))

    def copy(self) -> TensorDesc:
        import copy

        return copy.deepcopy(self)


Anchor = tuple[str, int]  # (node name, output index)


@dataclass(eq=False)
class Node(_AttrMixin):
    """``OpDef``. ``inputs[i]`` is the (producer name, output index) feeding data input ``i`` or ``None``;
    ``ctrl_inputs`` names the control predecessors in order. Producers live in the same graph."""

    name: str
    type: str
    inputs: list[Anchor | None] = field(default_factory=list)
    ctrl_inputs: list[str] = field(default_factory=list)
    attrs: dict[str, Attr] = field(default_factory=dict)
    input_desc: list[TensorDesc] = field(default_factory=list)
    output_desc: list[TensorDesc] = field(default_factory=list)
    subgraph_names: list[str] = field(default_factory=list)
    # GE's topological id. Once a model is sorted, anchorlog.analysis.order alone renumbers it: a resort keeps the
    # ids of the leading nodes it did not move, so an id set elsewhere in between would stay as set.
    id: int | None = None
    stream_id: int | None = None
    # Other OpDef fields that were set (input_name, src_name, workspace, is_input_const, attr_groups,
    # has_out_attr, unknown fields ...) keyed by field name, as read.
    other: dict[str, Any] = field(default_factory=dict)
    extra: list[Any] = field(default_factory=list)
    graph: Graph | None = field(default=None, repr=False)
    # OpDef.input entries read in a form GE accepts but does not write ("a:abc" read as a:0, "a:01"), keyed
    # by (data slot, anchor read) or (-1, control source); the writers emit such a text only while the slot
    # still holds that anchor, so an edit is written canonically and an untouched entry round-trips.
    input_text: dict[tuple[Any, Any], str] = field(default_factory=dict, repr=False)

    @property
    def num_outputs(self) -> int:
        return len(self.output_desc)

    @property
    def num_inputs(self) -> int:
        return max(len(self.inputs), len(self.input_desc))

    def __repr__(self) -> str:
        return f"Node({self.name!r}, {self.type!r})"

    def set_attr(self, key: str, value: Any, kind: str | None = None) -> None:
        super().set_attr(key, value, kind)
        self.touch()

    def del_attr(self, key: str) -> None:
        super().del_attr(key)
        self.touch()

    def touch(self) -> None:
        """Record that this node changed (call after editing one of its TensorDescs in place), so that
        derived facts are refreshed for it (see :attr:`Graph.touched`)."""
        if self.graph is not None:
            self.graph.touched.add(self.name)


class EdgeLog:
    """What the editing methods of a :class:`Graph` changed since the log was installed (``Graph._edge_log``):
    ``producers`` the sources of every data/control edge added or removed, ``consumers`` their destinations and
    every node added or removed, ``added`` / ``removed`` the names of nodes added / removed."""

    __slots__ = ("producers", "consumers", "added", "removed")

    def __init__(self) -> None:
        self.producers: set[str] = set()
        self.consumers: set[str] = set()
        self.added: set[str] = set()
        self.removed: set[str] = set()


class Graph(_AttrMixin):
    """``GraphDef``: ordered nodes by unique name, graph attrs, declared inputs/outputs.

    Consumer look-ups use an index rebuilt lazily after edits, so analyses may ask freely.
    """

    # Edge journal for incremental consumers (GE's order re-sorts only from the first node an edit can affect,
    # see anchorlog.analysis.order): None when off, else an EdgeLog the editing methods below keep.
    # invalidate() turns it off (unknown edits), so a holder must check it still has the same object.
    _edge_log: EdgeLog | None = None

    def __init__(self, name: str) -> None:
        self.name = name
        self.nodes: dict[str, Node] = {}
        self.attrs: dict[str, Attr] = {}
        self.input: list[str] = []  # GraphDef.input
        self.output: list[str] = []  # GraphDef.output
        self.other: dict[str, Any] = {}
        self.extra: list[Any] = []
        self.model: Model | None = None
        self._consumers: dict[Anchor, list[tuple[str, int]]] | None = None
        self._ctrl_succ: dict[str, list[str]] | None = None
        # Names of nodes edited (inputs, control inputs, attrs, added or removed) since the last fact sync;
        # the fact cache refreshes exactly these rows. Whoever syncs clears it.
        self.touched: set[str] = set()

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.nodes)} nodes)"

    def __iter__(self) -> Iterator[Node]:
        return iter(list(self.nodes.values()))

    def __len__(self) -> int:
        return len(self.nodes)

    def __contains__(self, name: object) -> bool:
        return name in self.nodes

    def node(self, name: str) -> Node:
        return self.nodes[name]

    # -- editing -----------------------------------------------------------------------------------------
    # The consumer index is kept up to date by these methods. Code that edits ``Node.inputs`` or
    # ``Node.ctrl_inputs`` directly must call :meth:`invalidate` afterwards.
    def invalidate(self) -> None:
        """Drop the consumer index after direct edits of ``Node.inputs``/``ctrl_inputs`` (and record every
        node as touched, since which ones changed is unknown)."""
        self._consumers = None
        self._ctrl_succ = None
        self._edge_log = None
        self.touched.update(self.nodes)

    def add_node(self, node: Node, *, after: str | None = None) -> Node:
        """Insert ``node`` (name must be new in this graph); at the end, or right after node ``after``."""
        if node.name in self.nodes:
            raise ValueError(f"graph {self.name}: duplicate node name {node.name!r}")
        if after is not None and after not in self.nodes:
            raise KeyError(f"graph {self.name}: no node {after!r}")
        node.graph = self
        self.touched.add(node.name)
        log = self._edge_log
        if log is not None:
            log.consumers.add(node.name)
            log.added.add(node.name)
            log.producers.update(a[0] for a in node.inputs if a is not None)
            log.producers.update(node.ctrl_inputs)
        if after is None:
            self.nodes[node.name] = node
        else:
            # A dict cannot insert in the middle: the nodes after ``after`` move behind the new one. Moving
            # allocates nothing the cyclic collector counts; rebuilding the dict from a list of pairs did, and set
            # off collections over the whole model on every insertion (20 ms each at 10 k nodes: quadratic for a
            # pass inserting many Identities).
            names = list(self.nodes)
            nodes = self.nodes
            nodes[node.name] = node
            for name in names[names.index(after) + 1 :]:
                nodes[name] = nodes.pop(name)
        if self._consumers is not None:
            for i, a in enumerate(node.inputs):
                if a is not None:
                    self._consumers.setdefault(a, []).append((node.name, i))
            for c in node.ctrl_inputs:
                self._ctrl_succ.setdefault(c, []).append(node.name)  # type: ignore[union-attr]
        return node

    def remove_node(self, name: str) -> Node:
        """Remove node ``name`` and every edge touching it."""
        node = self.nodes[name]
        for i in range(len(node.inputs)):
            self.disconnect(name, i)
        for c in list(node.ctrl_inputs):
            self.remove_ctrl(c, name)
        self._ensure_index()
        outs = range(node.num_outputs) if node.num_outputs else sorted({o for (n, o) in self._consumers if n == name})  # type: ignore[union-attr]
        for out in outs:
            for dst, di in self.consumers(name, out):
                self.disconnect(dst, di)
            self._consumers.pop((name, out), None)  # type: ignore[union-attr]
        for dst in self.ctrl_successors(name):
            self.remove_ctrl(name, dst)
        del self.nodes[name]
        node.graph = None
        self.touched.add(name)
        if self._edge_log is not None:
            self._edge_log.consumers.add(name)
            self._edge_log.removed.add(name)
        return node

    def unique_name(self, base: str) -> str:
        """A node name not used in any graph of the model (GE names are model-unique in practice)."""
        # Probe each graph's node dict rather than building the model-wide name set: a pass inserting many
        # Identities calls this once per insertion, and the set cost a pass over every node of the model.
        graphs = self.model.graphs if self.model is not None else [self]

        def taken(name: str) -> bool:
            return any(name in g.nodes for g in graphs)

        if not taken(base):
            return base
        i = 1
        while taken(f"{base}_{i}"):
            i += 1
        return f"{base}_{i}"

    def connect(self, src: str, src_out: int, dst: str, dst_in: int) -> None:
        """Make ``src:src_out`` feed ``dst`` input ``dst_in`` (replacing what fed it)."""
        if src not in self.nodes:
            raise KeyError(f"graph {self.name}: no node {src!r}")
        self.disconnect(dst, dst_in)
        d = self.nodes[dst]
        while len(d.inputs) <= dst_in:
            d.inputs.append(None)
        d.inputs[dst_in] = (src, src_out)
        self.touched.add(dst)
        if self._edge_log is not None:
            self._edge_log.producers.add(src)
            self._edge_log.consumers.add(dst)
        if self._consumers is not None:
            self._consumers.setdefault((src, src_out), []).append((dst, dst_in))

    def disconnect(self, dst: str, dst_in: int) -> Anchor | None:
        """Cut the data edge feeding ``dst`` input ``dst_in``; returns the old producer anchor."""
        d = self.nodes[dst]
        old = d.inputs[dst_in] if dst_in < len(d.inputs) else None
        if old is not None:
            d.inputs[dst_in] = None
            self.touched.add(dst)
            if self._edge_log is not None:
                self._edge_log.producers.add(old[0])
                self._edge_log.consumers.add(dst)
            if self._consumers is not None:
                users = self._consumers.get(old, [])
                if (dst, dst_in) in users:
                    users.remove((dst, dst_in))
        return old

    def add_ctrl(self, src: str, dst: str) -> bool:
        """Add control edge ``src -> dst``; False when it already existed."""
        d = self.nodes[dst]
        if src not in self.nodes:
            raise KeyError(f"graph {self.name}: no node {src!r}")
        if src in d.ctrl_inputs:
            return False
        d.ctrl_inputs.append(src)
        self.touched.add(dst)
        if self._edge_log is not None:
            self._edge_log.producers.add(src)
            self._edge_log.consumers.add(dst)
        if self._ctrl_succ is not None:
            self._ctrl_succ.setdefault(src, []).append(dst)
        return True

    def remove_ctrl(self, src: str, dst: str) -> bool:
        """Remove control edge ``src -> dst``; False when there was none."""
        d = self.nodes[dst]
        if src not in d.ctrl_inputs:
            return False
        d.ctrl_inputs.remove(src)
        self.touched.add(dst)
        if self._edge_log is not None:
            self._edge_log.producers.add(src)
            self._edge_log.consumers.add(dst)
        if self._ctrl_succ is not None and dst in self._ctrl_succ.get(src, []):
            self._ctrl_succ[src].remove(dst)
        return True

    # -- queries -----------------------------------------------------------------------------------------
    def _ensure_index(self) -> None:
        if self._consumers is not None:
            return
        cons: dict[Anchor, list[tuple[str, int]]] = {}
        succ: dict[str, list[str]] = {}
        for n in self.nodes.values():
            for i, a in enumerate(n.inputs):
                if a is not None:
                    cons.setdefault(a, []).append((n.name, i))
            for c in n.ctrl_inputs:
                succ.setdefault(c, []).append(n.name)
        self._consumers, self._ctrl_succ = cons, succ

    def consumers(self, node: str, out: int) -> list[tuple[str, int]]:
        """(consumer, input index) pairs reading ``node:out``, in insertion order."""
        self._ensure_index()
        return list(self._consumers.get((node, out), []))  # type: ignore[union-attr]

    def ctrl_successors(self, node: str) -> list[str]:
        self._ensure_index()
        return list(self._ctrl_succ.get(node, []))  # type: ignore[union-attr]

    def data_edges(self) -> Iterator[tuple[str, int, str, int]]:
        """(src, src_out, dst, dst_in) for every data edge, in node order."""
        for n in self.nodes.values():
            for i, a in enumerate(n.inputs):
                if a is not None:
                    yield (a[0], a[1], n.name, i)

    def ctrl_edges(self) -> Iterator[tuple[str, str]]:
        for n in self.nodes.values():
            for c in n.ctrl_inputs:
                yield (c, n.name)

    def nodes_of_type(self, *types: str) -> list[Node]:
        return [n for n in self.nodes.values() if n.type in types]

    @property
    def parent_node(self) -> Node | None:
        """The node owning this graph as a subgraph (None for the root or a detached graph)."""
        return self.model.parent_of(self.name) if self.model is not None else None


class Model(_AttrMixin):
    """``ModelDef``: ``graphs[0]`` is the root graph, the rest are subgraphs (any nesting depth)."""

    def __init__(self, name: str = "", graphs: Iterable[Graph] = ()) -> None:
        self.name = name
        self.version: int | None = None
        self.custom_version: str = ""
        self.graphs: list[Graph] = []
        self.attrs: dict[str, Attr] = {}
        self.other: dict[str, Any] = {}
        self.extra: list[Any] = []
        self.source: str | None = None  # file it was read from, for messages
        # Bumped when graphs are added or removed (subgraph structure changed: facts need a full re-derive). Attach or
        # detach a subgraph (a node's subgraph_names) only together with add_graph / remove_graph: the shared facts
        # and anchorlog.analysis.order's remembered GetAllNodes runs are keyed on this number.
        self.structure_version = 0
        for g in graphs:
            self.add_graph(g)

    def __repr__(self) -> str:
        return f"Model({self.name!r}, graphs={[g.name for g in self.graphs]})"

    @property
    def root(self) -> Graph:
        return self.graphs[0]

    def add_graph(self, g: Graph) -> Graph:
        if any(x.name == g.name for x in self.graphs):
            raise ValueError(f"duplicate graph name {g.name!r}")
        g.model = self
        self.graphs.append(g)
        self.structure_version += 1
        return g

    def remove_graph(self, name: str) -> Graph:
        g = self.graph(name)
        self.graphs.remove(g)
        g.model = None
        self.structure_version += 1
        return g

    def graph(self, name: str) -> Graph:
        for g in self.graphs:
            if g.name == name:
                return g
        raise KeyError(f"no graph {name!r}")

    def resolve_graph(self, graph: Graph | str | None) -> Graph:
        """A graph of this model given as an object or by name; the root graph for None."""
        if graph is None:
            return self.root
        return self.graph(graph) if isinstance(graph, str) else graph

    def has_graph(self, name: str) -> bool:
        return any(g.name == name for g in self.graphs)

    def parent_of(self, graph_name: str) -> Node | None:
        for g in self.graphs:
            for n in g.nodes.values():
                if graph_name in n.subgraph_names:
                    return n
        return None

    def subgraphs_of(self, node: Node) -> list[Graph]:
        return [self.graph(s) for s in node.subgraph_names if s and self.has_graph(s)]

    def find_node(self, name: str) -> Node | None:
        """The node called ``name`` in any graph (first match, root first)."""
        for g in self.graphs:
            n = g.nodes.get(name)
            if n is not None:
                return n
        return None

    def all_nodes(self) -> Iterator[Node]:
        for g in self.graphs:
            yield from g.nodes.values()

    def all_node_names(self) -> set[str]:
        return {n for g in self.graphs for n in g.nodes}

    def num_nodes(self) -> int:
        return sum(len(g.nodes) for g in self.graphs)

    def release(self) -> None:
        """Cut the model's back-references (node -> graph, graph -> model) when it is no longer needed.

        Those references make the whole model one reference cycle, which only the cyclic garbage collector
        frees: a full collection traversing every object (3 s of CPU for 100 k nodes, paid at interpreter
        exit by a command that just exports a model). Without them reference counting frees the model as
        soon as the last outside reference goes. The model must not be used afterwards."""
        for g in self.graphs:
            for n in g.nodes.values():
                n.graph = None
            g.model = None
            g._consumers = g._ctrl_succ = None

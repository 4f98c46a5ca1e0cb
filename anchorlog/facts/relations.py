"""Relational facts: the graph IR as tables, the input every Datalog rule in ``anchorlog/queries`` reads.

One function, :func:`tables_from_model`, derives every relation of the fact schema (:data:`SCHEMA`) from a
:class:`~anchorlog.facts.graph.Model`; :class:`FactDB` stores them in SQLite (through sqlite-utils), shows
them as pandas DataFrames and asserts them as pyDatalog facts.

Conventions (see docs/facts.md for every relation with example queries):

* ``graph`` columns hold the (sub)graph a node sits in. Several models may share one database; the
  ``graph`` table's ``model`` column tells them apart. When a graph name is already taken by another model,
  *every* graph of the new model is named ``"<model>/<graph>"`` in every relation.
* No NULLs: a missing string is ``''``, a missing number is ``-1`` (e.g. ``node_prop.id`` when the op has no
  id), booleans are ``0``/``1``.
* Attribute values: scalars native (``b`` as 0/1, ``i``/``dt`` integers, ``f`` reals, ``s`` text, ``bt``
  blobs); lists and structured values as compact JSON text (``[1,2]``, no spaces). Shapes likewise
  (``[1,16]``; ``null`` when the tensor has no shape at all).
* ``ref_io`` is GE's ``GraphUtils::IsRefFromInput`` evaluated for every output anchor (reference §1.5);
  ``op_class`` holds GE's node-type sets (reference §1.2) with their exact type strings.
"""

from __future__ import annotations

import base64
import bisect
import functools
import itertools
import json
import operator
import os
import sqlite3
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

from anchorlog.errors import AnchorlogError
from anchorlog.facts.graph import Attr, AttrList, Graph, Model, NamedAttrs, Node, TensorDef, TensorDesc
from anchorlog.gcpause import paused_gc

if TYPE_CHECKING:  # pragma: no cover
    import pandas
    import sqlite_utils

# --------------------------------------------------------------------------------------------------------------
# Schema
# --------------------------------------------------------------------------------------------------------------
# Column types: "symbol" (text), "number" (integer), "value" (any SQLite value: the attribute columns, whose
# scalars keep their native type so that `node_attr(G, N, "_parent_node_index", _, K)` joins with a number).
SCHEMA: dict[str, tuple[tuple[str, str], ...]] = {
    "graph": (
        ("graph", "symbol"),
        ("model", "symbol"),
        ("parent_graph", "symbol"),
        ("parent_node", "symbol"),
        ("is_root", "number"),
    ),
    "graph_attr": (("graph", "symbol"), ("key", "symbol"), ("kind", "symbol"), ("value", "value")),
    "node": (("graph", "symbol"), ("name", "symbol"), ("type", "symbol")),
    "node_prop": (
        ("graph", "symbol"),
        ("node", "symbol"),
        ("pos", "number"),
        ("id", "number"),
        ("stream_id", "number"),
        ("n_in", "number"),
        ("n_out", "number"),
    ),
    "node_attr": (
        ("graph", "symbol"),
        ("node", "symbol"),
        ("key", "symbol"),
        ("kind", "symbol"),
        ("value", "value"),
    ),
    "data_edge": (
        ("graph", "symbol"),
        ("src", "symbol"),
        ("src_out", "number"),
        ("dst", "symbol"),
        ("dst_in", "number"),
    ),
    "ctrl_edge": (("graph", "symbol"), ("src", "symbol"), ("dst", "symbol")),
    "in_anchor": (
        ("graph", "symbol"),
        ("node", "symbol"),
        ("idx", "number"),
        ("connected", "number"),
        ("dtype", "symbol"),
        ("format", "symbol"),
        ("shape", "symbol"),
        ("origin_format", "symbol"),
        ("origin_shape", "symbol"),
        ("size", "number"),
        ("name", "symbol"),
    ),
    "out_anchor": (
        ("graph", "symbol"),
        ("node", "symbol"),
        ("idx", "number"),
        ("dtype", "symbol"),
        ("format", "symbol"),
        ("shape", "symbol"),
        ("origin_format", "symbol"),
        ("origin_shape", "symbol"),
        ("size", "number"),
        ("reuse_input", "number"),
        ("reuse_input_index", "number"),
        ("name", "symbol"),
    ),
    "tensor_attr": (
        ("graph", "symbol"),
        ("node", "symbol"),
        ("io", "symbol"),
        ("idx", "number"),
        ("key", "symbol"),
        ("kind", "symbol"),
        ("value", "value"),
    ),
    "subgraph": (("graph", "symbol"), ("node", "symbol"), ("idx", "number"), ("subgraph", "symbol")),
    "parent_in": (
        ("subgraph", "symbol"),
        ("data_node", "symbol"),
        ("parent_graph", "symbol"),
        ("parent_node", "symbol"),
        ("parent_in", "number"),
    ),
    "parent_out": (
        ("subgraph", "symbol"),
        ("netoutput", "symbol"),
        ("net_in", "number"),
        ("parent_graph", "symbol"),
        ("parent_node", "symbol"),
        ("parent_out", "number"),
    ),
    "ref_io": (("graph", "symbol"), ("node", "symbol"), ("out_idx", "number"), ("in_idx", "number")),
    "op_class": (("type", "symbol"), ("cls", "symbol")),
}

RELATIONS: tuple[str, ...] = tuple(SCHEMA)
COLUMNS: dict[str, tuple[str, ...]] = {rel: tuple(c for c, _ in cols) for rel, cols in SCHEMA.items()}

# Relations whose rows belong to one graph, and the column naming that graph (what refresh_graph replaces).
GRAPH_COLUMN: dict[str, str] = {
    "graph": "graph",
    "graph_attr": "graph",
    "node": "graph",
    "node_prop": "graph",
    "node_attr": "graph",
    "data_edge": "graph",
    "ctrl_edge": "graph",
    "in_anchor": "graph",
    "out_anchor": "graph",
    "tensor_attr": "graph",
    "subgraph": "graph",
    "parent_in": "subgraph",
    "parent_out": "subgraph",
    "ref_io": "graph",
}

# Indexes on the join columns, created after bulk loads.
INDEXES: dict[str, tuple[tuple[str, ...], ...]] = {
    "graph": (("graph",), ("model",), ("parent_graph", "parent_node")),
    "graph_attr": (("graph", "key"),),
    "node": (("graph", "name"), ("type",)),
    "node_prop": (("graph", "node"),),
    "node_attr": (("graph", "node", "key"), ("key",)),
    "data_edge": (("graph", "src", "src_out"), ("graph", "dst", "dst_in")),
    "ctrl_edge": (("graph", "src"), ("graph", "dst")),
    "in_anchor": (("graph", "node", "idx"),),
    "out_anchor": (("graph", "node", "idx"),),
    "tensor_attr": (("graph", "node", "io", "idx", "key"), ("key",)),
    "subgraph": (("graph", "node"), ("subgraph",)),
    "parent_in": (("subgraph", "data_node"), ("parent_graph", "parent_node", "parent_in")),
    "parent_out": (("subgraph", "netoutput", "net_in"), ("parent_graph", "parent_node", "parent_out")),
    "ref_io": (("graph", "node", "out_idx"), ("graph", "node", "in_idx")),
    "op_class": (("type",), ("cls",)),
}

_SQL_TYPE = {"symbol": "TEXT", "number": "INTEGER", "value": ""}

# --------------------------------------------------------------------------------------------------------------
# GE node-type sets (reference §1.2, node_utils.cc / op_type_utils.cc / mem_layout_conflict_util.cc), as data.
# --------------------------------------------------------------------------------------------------------------
OP_CLASSES: dict[str, tuple[str, ...]] = {
    # NodeUtils type sets
    "if": ("If", "_If", "StatelessIf"),
    "while": ("While", "_While", "StatelessWhile"),
    "case": ("Case",),  # StatelessCase is not in GE's set
    "for": ("For",),
    "switch": ("Switch", "RefSwitch"),
    "merge": ("Merge", "RefMerge"),
    "enter": ("Enter", "RefEnter"),
    "next_iteration": ("NextIteration", "RefNextIteration"),
    "exit": ("Exit", "RefExit"),
    # NodeUtils::IsMultiBranchControlFlowOp: If ∪ While ∪ For ∪ Switch (Case absent)
    "multi_branch_control_flow": (
        "If",
        "_If",
        "StatelessIf",
        "While",
        "_While",
        "StatelessWhile",
        "For",
        "Switch",
        "RefSwitch",
    ),
    # kConstOpTypes / NodeUtils::IsConst
    "const": ("Const", "Constant"),
    # OpTypeUtils
    "data": ("Data", "RefData", "AippData", "AnnData"),  # IsDataNode (not QueueData)
    "variable": ("Variable", "VariableV2"),  # IsVariableNode
    "var_like": ("Variable", "VariableV2", "RefData"),  # IsVarLikeNode
    "const_like": ("Const", "Constant", "ConstPlaceHolder"),  # OpTypeUtils::IsConstNode
    "assign_like": (
        "AssignAdd",
        "Assign",
        "AssignSub",
        "AssignAddVariableOp",
        "AssignSubVariableOp",
        "AssignVariableOp",
    ),
    "identity_like": ("Identity", "ReadVariableOp"),
    # IsGraphInputNode = IsDataNode ∪ IsVarLikeNode ∪ IsConstNode
    "graph_input": (
        "Data",
        "RefData",
        "AippData",
        "AnnData",
        "Variable",
        "VariableV2",
        "Const",
        "Constant",
        "ConstPlaceHolder",
    ),
    # MemLayoutConflictUtil::IsConst
    "layout_const": ("Const", "Constant", "FileConstant", "ConstPlaceHolder"),
    # NodeUtils::GetConstOpType direct types (a Data fed by one of these is const too: rules recurse)
    "const_op_type": ("Const", "Constant", "FileConstant"),
    # GraphUtils::IsRefFromInput step 1 (pass-through types) and step 2 (output 0 reuses input 0)
    "pass_through": ("NetOutput", "While", "_While", "StatelessWhile"),
    "ge_local_ref": ("Merge", "Reshape"),
    # GE-local ops whose output 0 gets reuse_input at Build/CalcOpParam time (known-shape graphs only)
    "ge_local_reuse_at_build": (
        "Bitcast",
        "Flatten",
        "FlattenV2",
        "ExpandDims",
        "ReFormat",
        "Squeeze",
        "Unsqueeze",
        "SqueezeV2",
        "UnsqueezeV2",
        "SqueezeV3",
        "UnsqueezeV3",
    ),
    "partitioned_call": ("PartitionedCall", "StatefulPartitionedCall"),
    # MemLayoutConflictUtil::IsAddressRefreshable / IsPhysicalAddressRefreshable: never refreshable
    "physical_addr": ("StreamSwitch", "LabelSwitchByIndex"),
    # MemLayoutConflictUtil::IsSkipInsert: a copy is already there
    "layout_memcpy": ("Identity", "MemcpyAsync", "MemcpyAddrAsync"),
}

OP_CLASS_ROWS: list[tuple[str, str]] = [(t, cls) for cls, types in OP_CLASSES.items() for t in types]

# Attribute names (reference §1.4–1.5, Appendix A).
PARENT_NODE_INDEX = "_parent_node_index"
REFERENCE = "reference"
IS_UNKNOWN_SHAPE = "_is_unknown_shape"
GRAPH_UNKNOWN_FLAG = "_graph_unknown_flag"
INPUT_NAME_KEY, INPUT_NAME_VALUE = "_input_name_key", "_input_name_value"
OUTPUT_NAME_KEY, OUTPUT_NAME_VALUE = "_output_name_key", "_output_name_value"
NOPADDING_CONTINUOUS_INPUT = "_no_padding_continuous_input"
NOPADDING_CONTINUOUS_OUTPUT = "_no_padding_continuous_output"
OUTPUT_REUSE_INPUT = "_output_reuse_input"

_PASS_THROUGH_TYPES = frozenset(OP_CLASSES["pass_through"])

# --------------------------------------------------------------------------------------------------------------
# Value encoding
# --------------------------------------------------------------------------------------------------------------
_TENSOR_DATA_INLINE = 1024  # bytes of TensorDef data kept inline (hex) in JSON; larger ones give only the length


_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def to_json(value: Any) -> str:
    """Compact JSON text (no spaces) of a plain or IR value; the form every list/structured fact uses."""
    return _encode(_jsonable(value))


def _desc_fields(desc: TensorDesc) -> dict[str, Any]:
    """A descriptor's plain fields as ``to_json`` writes them (attrs are added by the caller)."""
    d: dict[str, Any] = {"dtype": desc.dtype, "shape": desc.shape, "layout": desc.layout}
    if desc.name:
        d["name"] = desc.name
    if desc.size:
        d["size"] = desc.size
    if desc.reuse_input:
        d["reuse_input"] = True
        d["reuse_input_index"] = desc.reuse_input_index
    return d


def _jsonable(v: Any) -> Any:
    if v is None or isinstance(v, (bool, int, float, str)):
        return v
    if isinstance(v, (list, tuple)):
        return [_jsonable(x) for x in v]
    if isinstance(v, bytes):
        try:
            return v.decode("utf-8")
        except UnicodeDecodeError:
            return "base64:" + base64.b64encode(v).decode("ascii")
    if isinstance(v, Attr):
        return _jsonable(v.value) if v.kind != "list" else _jsonable(v.value.items)
    if isinstance(v, AttrList):
        return _jsonable(v.items)
    if isinstance(v, TensorDesc):
        d = _desc_fields(v)
        if v.attrs:
            d["attrs"] = {k: _jsonable(a) for k, a in v.attrs.items()}
        return d
    if isinstance(v, TensorDef):
        d = {"desc": _jsonable(v.desc), "data_len": len(v.data)}
        if len(v.data) <= _TENSOR_DATA_INLINE:
            d["data"] = v.data.hex()
        return d
    if isinstance(v, NamedAttrs):
        return {"name": v.name, "attrs": {k: _jsonable(a) for k, a in v.attrs.items()}}
    if isinstance(v, Graph):
        return v.name
    if isinstance(v, dict):
        return {str(k): _jsonable(x) for k, x in v.items()}
    return str(v)


def attr_fact_value(attr: Attr) -> tuple[str, Any]:
    """``(kind, value)`` as stored in ``node_attr``/``tensor_attr``: scalars native, the rest JSON text."""
    kind = attr.kind
    v = attr.value
    if kind is None:
        return "", ""
    if kind == "b":
        return kind, 1 if v else 0
    if kind in ("i", "dt"):
        return kind, int(v)
    if kind == "f":
        return kind, float(v)
    if kind in ("s", "expression"):
        return kind, v  # str, or bytes (stored as a BLOB) when not UTF-8
    if kind == "bt":
        return kind, bytes(v)
    if kind == "list" and v.kind in _PLAIN_LIST_KINDS:
        items = v.items
        key = (v.kind, tuple(items))
        try:
            text = _LIST_JSON_CACHE.get(key)
        except TypeError:  # an unhashable element
            return kind, to_json(v)
        if text is None:
            try:
                text = _encode(items)
            except (TypeError, ValueError):  # bytes in an "s" list, NaN ...: the general path
                text = to_json(v)
            if len(_LIST_JSON_CACHE) < 100_000:
                _LIST_JSON_CACHE[key] = text
        return kind, text
    return kind, to_json(v)


# Lists of these element kinds are JSON-encodable as they are; their text is cached (shapes, name lists ...
# repeat across thousands of nodes).
_PLAIN_LIST_KINDS = frozenset(("i", "f", "b", "s", "dt"))
_LIST_JSON_CACHE: dict[tuple, str] = {}


_SHAPE_JSON_CACHE: dict[tuple, str] = {}


def _shape_json(shape: list[int] | None) -> str:
    if shape is None:
        return "null"
    key = tuple(shape)
    text = _SHAPE_JSON_CACHE.get(key)
    if text is None:
        text = "[" + ",".join(str(int(d)) for d in shape) + "]"
        if len(_SHAPE_JSON_CACHE) < 100_000:
            _SHAPE_JSON_CACHE[key] = text
    return text


# --------------------------------------------------------------------------------------------------------------
# GE semantics helpers (reference §1.4, §1.5)
# --------------------------------------------------------------------------------------------------------------
def _attr_bool(holder: Any, key: str) -> bool:
    """``AttrUtils::GetBool``: true only for a ``b`` attribute set to true."""
    a = holder.attrs.get(key)
    return a is not None and a.kind == "b" and bool(a.value)


def _attr_int(holder: Any, key: str) -> int | None:
    """``AttrUtils::GetInt``: the integer value of an ``i`` (or int-typed) attribute, else None."""
    a = holder.attrs.get(key)
    if a is None or a.kind not in ("i", "dt") or isinstance(a.value, bool):
        return None
    try:
        return int(a.value)
    except (TypeError, ValueError):
        return None


def io_names(node: Node, io: str) -> dict[str, int]:
    """Input (``io="in"``) or output (``"out"``) names of an op -> anchor index, as GE's OpDesc knows them.

    GE keeps these name maps outside the tensor descriptors and serialises them as op attrs
    ``_input_name_key``/``_input_name_value`` (and the output pair); loading a model rebuilds the maps from
    those attrs only (``TensorDescriptor.name`` plays no part), ignores a pair whose lists differ in length,
    and keeps the first index of a repeated name.
    """
    key_attr, val_attr = (INPUT_NAME_KEY, INPUT_NAME_VALUE) if io == "in" else (OUTPUT_NAME_KEY, OUTPUT_NAME_VALUE)
    keys = node.attr(key_attr)
    vals = node.attr(val_attr)
    names: dict[str, int] = {}
    if not isinstance(keys, list) or not keys:
        return names
    if not isinstance(vals, list) or len(vals) != len(keys):
        return names
    for k, v in zip(keys, vals):
        if isinstance(k, bytes):
            k = k.decode("utf-8", "replace")
        try:
            names.setdefault(str(k), int(v))
        except (TypeError, ValueError):
            continue
    return names


class ModelIndex:
    """Parent look-ups computed once per model (``Model.parent_of`` is linear per call); passes share one."""

    def __init__(self, model: Model) -> None:
        self.model = model
        self.root_name = model.graphs[0].name if model.graphs else ""
        self.graph_by_name = {g.name: g for g in model.graphs}
        # subgraph name -> (owning graph, owning node, index in the owner's subgraph_names)
        owner: dict[str, tuple[Graph, Node, int]] = {}
        self.owner = owner
        for g in model.graphs:
            # few nodes own subgraphs: one comprehension picks them (a 100 k-node model: ~2x cheaper than
            # looping over every node in Python), then the same first-owner-wins walk over those only
            for n in [n for n in g.nodes.values() if n.subgraph_names]:
                for i, s in enumerate(n.subgraph_names):
                    if s and s not in owner:
                        owner[s] = (g, n, i)

    def is_subgraph_input(self, graph: Graph, node: Node) -> bool:
        """``NodeUtils::IsSubgraphInput`` (reference §1.4)."""
        own = self.owner.get(graph.name)
        if own is None or PARENT_NODE_INDEX not in node.attrs:
            return False
        parent_graph, parent, _ = own
        if _attr_bool(parent, IS_UNKNOWN_SHAPE):
            # the parent sits in an unknown-shape graph, or in a graph no node owns (the root)
            if _attr_bool(parent_graph, GRAPH_UNKNOWN_FLAG) or parent_graph.name not in self.owner:
                return False
        return True


def ref_from_input(index: ModelIndex, graph: Graph, node: Node, out_idx: int) -> int | None:
    """GE ``GraphUtils::IsRefFromInput`` for output ``out_idx``: the reused input index, or None."""
    # 1. pass-through nodes: out[i] is in[i]
    if node.type in _PASS_THROUGH_TYPES or index.is_subgraph_input(graph, node):
        return out_idx
    # 2. GE-local ops whose output 0 is their input 0
    if node.type in ("Merge", "Reshape") and out_idx == 0:
        return 0
    # 3. reference op: the output's name equals a (non-empty) input name
    if _attr_bool(node, REFERENCE):
        out_names = io_names(node, "out")
        # GE's name maps are ordered by name: with two names on one index the smaller one is "the" name
        out_name = next((n for n, i in sorted(out_names.items()) if i == out_idx), "")
        if out_name:
            in_names = io_names(node, "in")
            if out_name in in_names:
                return in_names[out_name]
    # 4. the output tensor's reuse_input flag
    if out_idx < len(node.output_desc):
        td = node.output_desc[out_idx]
        if td.reuse_input:
            return td.reuse_input_index
    # 5. no-padding continuous ops that reuse their input: always input 0 (GE's "history reason")
    if (_attr_bool(node, NOPADDING_CONTINUOUS_INPUT) or _attr_bool(node, NOPADDING_CONTINUOUS_OUTPUT)) and _attr_bool(
        node, OUTPUT_REUSE_INPUT
    ):
        return 0
    return None


# --------------------------------------------------------------------------------------------------------------
# Derivation
# --------------------------------------------------------------------------------------------------------------
Tables = dict[str, list[tuple]]


class FlatTables(dict[str, list[Any]]):
    """The rows of the per-graph relations (all but ``op_class``) as the derivation builds them and the bulk
    insert binds them, with no row tuples made: per relation one flat list of values laid row after row in
    column order, WITHOUT the first column. That column names the (sub)graph owning the row (see
    :data:`GRAPH_COLUMN`: it is the first column of every per-graph relation), and the rows of one graph are
    derived together, so :attr:`runs` records it once per run of rows: ``(fact graph name, end offset in the
    flat list)``, in order. The insert then binds the graph name once per statement instead of once per row
    (one text bind in six, each a copy in SQLite)."""

    def __init__(self) -> None:
        super().__init__((rel, []) for rel in SCHEMA if rel != "op_class")
        self.runs: dict[str, list[tuple[str, int]]] = {rel: [] for rel in self}

    def end_graph(self, graph: str) -> None:
        """Close the runs of the rows appended since the last call: they belong to fact graph ``graph``."""
        runs = self.runs
        for rel, values in self.items():
            n = len(values)
            if n:
                done = runs[rel]
                if not done or done[-1][1] < n:
                    done.append((graph, n))

    def row_tuples(self, rel: str) -> list[tuple]:
        """The rows of relation ``rel`` as tuples, the graph column included."""
        values = self[rel]
        width = len(SCHEMA[rel]) - 1
        rows: list[tuple] = []
        start = 0
        for graph, end in self.runs[rel]:
            it = iter(values[start:end])
            rows.extend(zip(itertools.repeat(graph, (end - start) // width), *[it] * width))
            start = end
        return rows


def _graph_rows(
    index: ModelIndex,
    graph: Graph,
    model_name: str,
    qual: dict[str, str],
    t: FlatTables,
    *,
    is_root: bool,
    want: frozenset[str] = frozenset(RELATIONS),
    only_nodes: set[str] | None = None,
    all_props: bool = False,
    node_positions: dict[str, int] | None = None,
) -> None:
    """Append the rows owned by ``graph`` to the flat tables ``t`` (values row after row), for the relations in
    ``want`` (op_class is not per graph).

    The rows go without their first column (the graph), which the caller records once for them with
    ``t.end_graph``. ``only_nodes``: just the rows of those nodes (no ``graph`` row); ``all_props`` then still gives every
    node's ``node_prop`` row (positions shift when nodes come or go); ``node_positions``: the positions of the
    ``only_nodes`` present, when known (the graph's other nodes are then not visited).

    Written for speed (a 100 k-node model has 240 k descriptors): rows are extended onto flat lists through
    bound methods, the anchors' shape and origin columns are worked out inline (see :func:`_oshape_fact` for
    what they mean), and each node's counts are read from its lists directly."""
    gq = qual.get(graph.name, graph.name)
    own = index.owner.get(graph.name)
    if "graph" in want and only_nodes is None:
        if own is not None:
            pg, pn, _ = own
            t["graph"].extend((model_name, qual.get(pg.name, pg.name), pn.name, 1 if is_root else 0))
        else:
            t["graph"].extend((model_name, "", "", 1 if is_root else 0))
    if "graph_attr" in want and only_nodes is None:
        rows = t["graph_attr"]
        for key, a in graph.attrs.items():
            rows.extend((key, *attr_fact_value(a)))

    w_node, w_prop, w_attr = "node" in want, "node_prop" in want, "node_attr" in want
    w_de, w_ce, w_in, w_out = "data_edge" in want, "ctrl_edge" in want, "in_anchor" in want, "out_anchor" in want
    w_tattr, w_ref, w_sub = "tensor_attr" in want, "ref_io" in want, "subgraph" in want
    w_desc_in = w_in or w_tattr
    w_desc_out = w_out or w_tattr
    w_parent = own is not None and ("parent_in" in want or "parent_out" in want)
    node_ext = t["node"].extend
    prop_ext = t["node_prop"].extend
    attr_ext = t["node_attr"].extend
    de_ext = t["data_edge"].extend
    ce_ext = t["ctrl_edge"].extend
    in_ext = t["in_anchor"].extend
    out_ext = t["out_anchor"].extend
    tattr_rows = t["tensor_attr"]
    sub_ext = t["subgraph"].extend
    ref_ext = t["ref_io"].extend
    pin_rows = t["parent_in"]
    pout_rows = t["parent_out"]
    # origin_shape Attr (by id; readers share one per distinct value) -> _oshape_fact's tuple
    oshape_memo: dict[int, tuple[Any, ...]] = {}
    oshape_get = oshape_memo.get
    shape_get = _SHAPE_JSON_CACHE.get
    # attrs JSON of Const value descriptors by the identities of their (shared) Attrs; see _tensor_def_json
    tdesc_memo: dict[tuple, tuple[str, list[Attr]]] = {}
    pass_through = _PASS_THROUGH_TYPES

    if only_nodes is not None and node_positions is not None:
        # positions known (a refresh after a small edit of a big graph): visit just the listed nodes
        nodes_iter: Iterable[tuple[int, Node]] = (
            (node_positions[n], graph.nodes[n]) for n in sorted(only_nodes) if n in graph.nodes
        )
    elif only_nodes is not None and not w_prop:
        # no positions wanted: visit just the listed nodes
        nodes_iter = ((-1, graph.nodes[n]) for n in sorted(only_nodes) if n in graph.nodes)
    else:
        nodes_iter = enumerate(graph.nodes.values())
    for pos, node in nodes_iter:
        name = node.name
        if only_nodes is not None and name not in only_nodes:
            if all_props and w_prop:
                prop_ext(
                    (
                        name,
                        pos,
                        -1 if node.id is None else node.id,
                        -1 if node.stream_id is None else node.stream_id,
                        node.num_inputs,
                        node.num_outputs,
                    )
                )
            continue
        inputs = node.inputs
        in_desc = node.input_desc
        out_desc = node.output_desc
        n_inputs = len(inputs)
        n_in = len(in_desc)
        if n_inputs > n_in:
            n_in = n_inputs  # Node.num_inputs
        n_out = len(out_desc)
        if w_node:
            node_ext((name, node.type))
        if w_prop:
            nid = node.id
            sid = node.stream_id
            prop_ext((name, pos, -1 if nid is None else nid, -1 if sid is None else sid, n_in, n_out))
        if w_attr:
            for key, a in node.attrs.items():
                kind = a.kind
                value = a.value
                # the common scalar kinds inline (same values attr_fact_value gives, without the call)
                if kind != "s" and (kind != "i" or type(value) is not int):
                    if kind == "b":
                        value = 1 if value else 0
                    elif kind == "t" and type(value) is TensorDef:  # Const values: one per Const op
                        value = _tensor_def_json(value, tdesc_memo)
                    else:
                        kind, value = attr_fact_value(a)
                attr_ext((name, key, kind, value))
        if w_de:
            i = 0
            for src in inputs:
                if src is not None:
                    de_ext((src[0], src[1], name, i))
                i += 1
        if w_ce and node.ctrl_inputs:
            for c in node.ctrl_inputs:
                ce_ext((c, name))
        # ref_io (GE IsRefFromInput, see ref_from_input): which of its steps can apply to this node. Mostly only
        # the output descriptors' reuse_input flags (step 4), read in the walk over them below.
        ref_by_flags = False
        if w_ref and n_out:
            ntype = node.type
            attrs = node.attrs
            if ntype in pass_through or (own is not None and index.is_subgraph_input(graph, node)):
                for i in range(n_out):
                    ref_ext((name, i, i))
            elif (
                ntype in ("Merge", "Reshape")
                or REFERENCE in attrs
                or NOPADDING_CONTINUOUS_INPUT in attrs
                or NOPADDING_CONTINUOUS_OUTPUT in attrs
            ):
                for i in range(n_out):
                    r = ref_from_input(index, graph, node, i)
                    if r is not None:
                        ref_ext((name, i, r))
            else:
                ref_by_flags = True
        # One walk over each descriptor gives its anchor row, its tensor_attr rows (inputs first) and, for an
        # output, its ref_io row; the anchor columns spelled out as described at _oshape_fact (a call per
        # descriptor was a third of the derivation).
        for is_out, descs in (
            (False, in_desc if w_desc_in else ()),
            (True, out_desc if w_desc_out or ref_by_flags else ()),
        ):
            i = 0
            for td in descs:
                if is_out and not w_desc_out:  # only the ref_io rows wanted
                    if td.reuse_input:
                        ref_ext((name, i, td.reuse_input_index))
                    i += 1
                    continue
                s = td.shape
                layout = td.layout
                tattrs = td.attrs
                shape = None
                if tattrs:
                    implied = 0
                    a = tattrs.get("origin_format")
                    if a is None:
                        ofmt = layout
                    else:
                        v = a.value
                        ofmt = v if type(v) is str else _scalar_text(v)
                        if a.kind == "s" and v == layout:
                            implied = 1
                    a = tattrs.get("origin_shape")
                    if a is None:
                        oshape = None
                    else:
                        known = oshape_get(id(a))
                        if known is None:
                            known = _oshape_fact(a, oshape_memo)
                        oshape = known[1]
                        items = known[3]
                        # equal numbers give equal texts: the shape's text is the origin shape's (the usual case)
                        if items is not None and s == items:
                            shape = oshape
                            if known[2]:
                                implied += 1
                        else:
                            shape = "null" if s is None else (shape_get(tuple(s)) or _shape_json(s))
                            if known[2] and oshape == shape:
                                implied += 1
                    if shape is None:
                        shape = "null" if s is None else (shape_get(tuple(s)) or _shape_json(s))
                        oshape = shape
                    if w_tattr and implied != len(tattrs):
                        _tensor_attr_rows(tattr_rows, name, "out" if is_out else "in", i, tattrs, layout, shape)
                else:
                    shape = "null" if s is None else (shape_get(tuple(s)) or _shape_json(s))
                    ofmt = layout
                    oshape = shape
                if is_out:
                    if w_out:
                        out_ext(
                            (
                                name,
                                i,
                                td.dtype,
                                layout,
                                shape,
                                ofmt,
                                oshape,
                                td.size,
                                1 if td.reuse_input else 0,
                                td.reuse_input_index,
                                td.name,
                            )
                        )
                    if ref_by_flags and td.reuse_input:
                        ref_ext((name, i, td.reuse_input_index))
                elif w_in:
                    in_ext(
                        (
                            name,
                            i,
                            1 if i < n_inputs and inputs[i] is not None else 0,
                            td.dtype,
                            layout,
                            shape,
                            ofmt,
                            oshape,
                            td.size,
                            td.name,
                        )
                    )
                i += 1
        if w_in:
            for i in range(len(in_desc), n_in):
                connected = 1 if i < n_inputs and inputs[i] is not None else 0
                in_ext((name, i, connected, "", "", "null", "", "null", 0, ""))
        if w_sub and node.subgraph_names:
            for i, s in enumerate(node.subgraph_names):
                if s:
                    sub_ext((name, i, qual.get(s, s)))
        if w_parent:
            pg, pn, _ = own  # type: ignore[misc]
            pgq = qual.get(pg.name, pg.name)
            k = _attr_int(node, PARENT_NODE_INDEX)
            if k is not None:
                pin_rows.extend((name, pgq, pn.name, k))
            if node.type == "NetOutput":
                for i, td in enumerate(in_desc):
                    k = _attr_int(td, PARENT_NODE_INDEX)
                    if k is not None:
                        pout_rows.extend((name, i, pgq, pn.name, k))
    if "parent_in" not in want:
        pin_rows.clear()
    if "parent_out" not in want:
        pout_rows.clear()
    t.end_graph(gq)


def _tensor_def_json(t: TensorDef, memo: dict[tuple, tuple[str, list[Attr]]]) -> str:
    """``to_json(t)`` of a TensorDef attribute value (a Const's weights), spelled out: the generic encoder walks
    the descriptor and its attrs recursively (15 µs per Const). The descriptor's JSON is memoised by every
    field it is made of, numbers with their types (``1``, ``1.0`` and ``True`` are equal keys but different
    JSON), and the identities of its Attrs (readers share one Attr per distinct origin attr): a few dozen
    distinct descriptors serve thousands of Consts. ``memo`` holds those Attrs, so the ids stay theirs while it
    lives (one derivation, no edits meanwhile)."""
    desc = t.desc
    if desc is None:
        dtext = "null"
    else:
        shape = desc.shape
        attrs = desc.attrs
        size = desc.size
        ridx = desc.reuse_input_index
        try:
            key = (
                desc.dtype,
                desc.layout,
                desc.name,
                size,
                type(size),
                bool(desc.reuse_input),
                ridx,
                type(ridx),
                None if shape is None else (tuple(shape), tuple(map(type, shape))),
                tuple(attrs),
                tuple(map(id, attrs.values())),
            )
            hit = memo.get(key)
        except TypeError:  # an unhashable field or a shape that is no sequence: the general path
            return to_json(t)
        if hit is None:
            try:
                dtext = _encode(_desc_fields(desc))
            except (TypeError, ValueError):  # bytes in a field, NaN ...: the general path
                return to_json(t)
            if attrs:
                dtext = dtext[:-1] + ',"attrs":' + _encode({k: _jsonable(a) for k, a in attrs.items()}) + "}"
            hit = memo[key] = (dtext, list(attrs.values()))
        dtext = hit[0]
    data = t.data
    n = len(data)
    if n <= _TENSOR_DATA_INLINE:
        return f'{{"desc":{dtext},"data_len":{n},"data":"{data.hex()}"}}'
    return f'{{"desc":{dtext},"data_len":{n}}}'


def _scalar_text(v: Any) -> str:
    if isinstance(v, bytes):
        return v.decode("utf-8", "replace")
    return str(v)


def _tensor_attr_rows(
    rows: list[Any], name: str, io: str, idx: int, attrs: dict[str, Attr], layout: str, shape: str
) -> None:
    """The ``tensor_attr`` rows of one descriptor, appended to the flat list ``rows`` (``layout``: its format, ``shape``: its shape as JSON text).

    An ``origin_format`` equal to the descriptor's format, or an ``origin_shape`` (integer list) equal to its
    shape, gives no row: the anchor row's ``origin_format``/``origin_shape`` columns hold that value, and
    GE's dumps carry both attrs on nearly every tensor (they were 40 % of all fact rows). A differing or
    unusual (other kind) origin attr keeps its row."""
    for key, a in attrs.items():
        kind = a.kind
        value = a.value
        if kind == "s":
            if value == layout and key == "origin_format":
                continue
        elif kind != "i" or type(value) is not int:
            if (
                kind == "list"
                and key == "origin_shape"
                and value.kind in _SHAPE_LIST_KINDS
                and not value.other
                and _shape_json(value.items) == shape
            ):
                continue
            kind, value = attr_fact_value(a)
        rows.extend((name, io, idx, key, kind, value))


# Element kinds of an origin_shape list that is a plain shape (None: the empty list).
_SHAPE_LIST_KINDS = frozenset(("i", None))


def _oshape_fact(a: Attr, oshape_memo: dict[int, tuple[Any, ...]]) -> tuple[Any, ...]:
    """``(a, text, plain, items)`` for an ``origin_shape`` attr ``a``: the anchor row's ``origin_shape`` column,
    whether it is a plain integer list (only then does equality with the shape make its tensor_attr row
    implied), and the list whose :func:`_shape_json` the text is (None when it is no list of shape kinds),
    recorded in ``oshape_memo`` under ``id(a)``: valid while the model is not edited (one
    derivation); the tuple holds the Attr, so its id stays unique meanwhile.

    The anchor columns of a descriptor (worked out inline in :func:`_graph_rows`): ``shape`` its shape as JSON
    text; ``origin_format`` the ``origin_format`` attr's text, else its format; ``origin_shape`` this text, else
    its shape. A descriptor gives ``tensor_attr`` rows only when some attr of it is not an implied origin attr
    (see :func:`_tensor_attr_rows`)."""
    lst = a.value
    if a.kind == "list" and lst.kind in _SHAPE_LIST_KINDS:
        known = (a, _shape_json(lst.items), not lst.other, lst.items)
    else:  # no integer list (a foreign or hand-edited dump): its fact text, as tensor_attr holds it
        text = attr_fact_value(a)[1]
        known = (a, text if type(text) is str else _scalar_text(text), False, None)
    oshape_memo[id(a)] = known
    return known


def tables_from_model(
    model: Model,
    model_name: str | None = None,
    *,
    graph_names: dict[str, str] | None = None,
    graphs: Iterable[str] | None = None,
    relations: Iterable[str] | None = None,
    include_op_class: bool = True,
    index: ModelIndex | None = None,
) -> Tables:
    """Every relation of :data:`SCHEMA` for ``model``: ``{relation: [row tuples in column order]}``.

    ``model_name`` fills ``graph.model`` (default ``model.name`` or ``"model"``); ``graph_names`` maps IR graph
    names to the names used in the facts (for qualified names in a shared database); ``graphs`` restricts the
    derivation to those IR graphs (rows owned by them: see :data:`GRAPH_COLUMN`); ``relations`` to those
    relations (the others come back empty; a pass reading a few relations of a huge model saves time);
    ``index``: a :class:`ModelIndex` of ``model`` to use (made here when not given).
    """
    # Millions of small row tuples would trigger the cyclic collector over and over, each time rescanning
    # the whole (large) model; nothing here creates cycles, so it is paused while deriving.
    with paused_gc(settle=True):  # the row tuples go to the oldest generation unscanned
        flat = _flat_tables(
            model,
            model_name,
            graph_names=graph_names,
            graphs=graphs,
            relations=relations,
            include_op_class=include_op_class,
            index=index,
        )
        tables = {rel: flat.row_tuples(rel) if rel in flat else [] for rel in SCHEMA}
        if include_op_class and "op_class" in _wanted(relations):
            tables["op_class"] = list(OP_CLASS_ROWS)
        return tables


def _flat_tables(model: Model, model_name: str | None = None, **derive: Any) -> FlatTables:
    """:func:`tables_from_model` (``derive``: its keyword arguments; ``include_op_class`` is ignored, op_class
    rows are no graph's) as flat tables: what the bulk insert binds. The caller pauses the collector."""
    graph_names: dict[str, str] | None = derive.pop("graph_names", None)
    graphs: Iterable[str] | None = derive.pop("graphs", None)
    relations: Iterable[str] | None = derive.pop("relations", None)
    derive.pop("include_op_class", None)
    index: ModelIndex | None = derive.pop("index", None)
    if derive:
        raise TypeError(f"unexpected derivation arguments: {', '.join(sorted(derive))}")
    name = model_name if model_name is not None else (model.name or "model")
    qual = graph_names or {}
    want = _wanted(relations)
    if index is None or index.model is not model:
        index = ModelIndex(model)
    t = FlatTables()
    only = set(graphs) if graphs is not None else None
    for gi, g in enumerate(model.graphs):
        if only is not None and g.name not in only:
            continue
        _graph_rows(index, g, name, qual, t, is_root=(gi == 0), want=want)
    return t


def _wanted(relations: Iterable[str] | None) -> frozenset[str]:
    if relations is None:
        return frozenset(RELATIONS)
    want = frozenset(relations)
    unknown = sorted(want - set(RELATIONS))
    if unknown:
        raise AnchorlogError(f"unknown relation {unknown[0]!r} (known: {', '.join(RELATIONS)})")
    return want


# --------------------------------------------------------------------------------------------------------------
# FactDB
# --------------------------------------------------------------------------------------------------------------
def _chunks(items: list[str], size: int = 500) -> Iterator[list[str]]:
    """Slices of at most ``size`` items (SQLite bounds the number of ``?`` parameters per statement)."""
    for i in range(0, len(items), size):
        yield items[i : i + size]


def _quote(ident: str) -> str:
    return '"' + ident.replace('"', '""') + '"'


# Rows per INSERT statement in bulk loads: at most 50 x 12 = 600 parameters (SQLite allows 32766, or 999 before
# 3.32); more rows per statement gained nothing measurable.
_ROWS_PER_INSERT = 50

# Position steps up to which _shift_positions renumbers with one CASE expression (each row tests the branches in
# turn); more go through a keyed step table.
_CASE_STEPS = 16


@functools.cache
def _insert_sql(rel: str) -> tuple[str, str]:
    """``INSERT`` statements of per-graph relation ``rel``: one row, and ``_ROWS_PER_INSERT`` rows, each row's
    first column (the graph) being parameter 1, bound once per statement (an anonymous ``?`` after it takes the
    next free number: 2, 3, ...)."""
    row = "(?1" + ", ?" * (len(SCHEMA[rel]) - 1) + ")"
    head = f"INSERT INTO {_quote(rel)} VALUES "
    return head + row, head + ", ".join([row] * _ROWS_PER_INSERT)


def _single_rows(values: list[Any], width: int, runs: list[tuple[str, int, int]]) -> Iterator[list[Any]]:
    """The parameters of one-row inserts: per ``(graph, start, end)`` the rows of ``values[start:end]``, each
    with its graph first."""
    for graph, start, end in runs:
        for i in range(start, end, width):
            yield [graph, *values[i : i + width]]


class FactDB:
    """The fact database: SQLite (file or in-memory) holding :data:`SCHEMA` for one or more models.

    Example::

        db = FactDB.from_model(model)                     # in-memory
        db.frame("node")                                  # DataFrame of node(graph, name, type)
        db.sql("SELECT dst FROM data_edge WHERE src = ?", ["data"])
        db.add_model(other, name="m2")                    # a second model in the same database
        db.refresh_graph(model.root)                      # re-derive one graph after an edit
    """

    def __init__(self, path: str | os.PathLike[str] = ":memory:") -> None:
        self.path = str(path)
        self.conn: sqlite3.Connection = sqlite3.connect(self.path)
        self._sqlite_utils_db: sqlite_utils.Database | None = None
        # model name -> {IR graph name: fact graph name}
        self.models: dict[str, dict[str, str]] = {}
        # model name -> relations derived for it (all unless add_model was told otherwise)
        self._model_relations: dict[str, frozenset[str]] = {}
        self._indexed = False
        # (model, its structure_version, ModelIndex) kept between refreshes: see _index_for_refresh
        self._refresh_index: tuple[Model, int, ModelIndex] | None = None
        # fact graphs whose node_prop positions are known to be the dense numbering of the IR order (derived
        # whole, or kept in step since); positions=False refreshes take a graph out (see _shift_positions)
        self._dense_positions: set[str] = set()
        self._speed_pragmas()
        self._create_tables()
        self._load_existing_models()

    @property
    def db(self) -> sqlite_utils.Database:
        """The ``sqlite_utils.Database`` around :attr:`conn`, made on first use: importing sqlite_utils (and
        pandas with it) right after a large model was read costs a full garbage collection over the model's
        millions of objects (4 s at 100 k nodes), so the fact path itself never imports it."""
        if self._sqlite_utils_db is None:
            import sqlite_utils

            self._sqlite_utils_db = sqlite_utils.Database(self.conn)
        return self._sqlite_utils_db

    # -- construction ----------------------------------------------------------------------------------------
    @classmethod
    def from_model(
        cls,
        model: Model,
        path: str | os.PathLike[str] = ":memory:",
        name: str | None = None,
        *,
        relations: Iterable[str] | None = None,
    ) -> FactDB:
        """A new database holding ``model`` (a file at ``path`` is overwritten). ``relations``: derive only
        these (every table exists; the others stay empty)."""
        p = str(path)
        if p != ":memory:" and os.path.exists(p):
            os.remove(p)
        db = cls(p)
        db.add_model(model, name=name, relations=relations)
        return db

    def _speed_pragmas(self) -> None:
        c = self.conn
        # larger pages: fewer B-tree splits while bulk loading and indexing (only applies to a new database)
        c.execute("PRAGMA page_size=16384")
        c.execute("PRAGMA journal_mode=OFF" if self.path == ":memory:" else "PRAGMA journal_mode=MEMORY")
        c.execute("PRAGMA synchronous=OFF")
        c.execute("PRAGMA temp_store=MEMORY")
        c.execute("PRAGMA cache_size=-200000")

    def _create_tables(self) -> None:
        c = self.conn
        for rel, cols in SCHEMA.items():
            coldefs = ", ".join(f"{_quote(col)} {_SQL_TYPE[typ]}".rstrip() for col, typ in cols)
            c.execute(f"CREATE TABLE IF NOT EXISTS {_quote(rel)} ({coldefs})")
        if not c.execute("SELECT 1 FROM op_class LIMIT 1").fetchone():
            c.executemany("INSERT INTO op_class VALUES (?, ?)", OP_CLASS_ROWS)
        c.commit()

    def _load_existing_models(self) -> None:
        """Reopened file: recover which fact graph names belong to which model."""
        for gname, mname in self.conn.execute("SELECT graph, model FROM graph"):
            m = self.models.setdefault(mname, {})
            prefix = mname + "/"
            ir = gname[len(prefix) :] if gname.startswith(prefix) else gname
            m[ir] = gname

    def create_indexes(self) -> None:
        """Index the join columns (idempotent) and refresh the planner statistics."""
        self._create_indexes("ANALYZE")

    def _create_indexes(self, analyze: str) -> None:
        c = self.conn
        for rel, idxs in INDEXES.items():
            for cols in idxs:
                iname = f"idx_{rel}_{'_'.join(cols)}"
                c.execute(
                    f"CREATE INDEX IF NOT EXISTS {_quote(iname)} ON {_quote(rel)} ({', '.join(map(_quote, cols))})"
                )
        c.execute("PRAGMA analysis_limit=1000")
        c.execute(analyze)
        c.commit()
        self._indexed = True

    # -- models ----------------------------------------------------------------------------------------------
    def _unique_model_name(self, name: str) -> str:
        if name not in self.models:
            return name
        i = 2
        while f"{name}_{i}" in self.models:
            i += 1
        return f"{name}_{i}"

    def fact_graph_names(self, model: Model, model_name: str) -> dict[str, str]:
        """IR graph name -> fact graph name for a model about to be added as ``model_name``."""
        taken = {g for m in self.models.values() for g in m.values()}
        names = [g.name for g in model.graphs]
        if not any(n in taken for n in names):
            return {n: n for n in names}
        qual = {n: f"{model_name}/{n}" for n in names}
        clash = [q for q in qual.values() if q in taken]
        if clash:
            raise AnchorlogError(f"graph name {clash[0]!r} already in the fact database", model_name)
        return qual

    def add_model(self, model: Model, name: str | None = None, *, relations: Iterable[str] | None = None) -> str:
        """Add ``model``'s facts; returns the model name used (made unique within the database).
        ``relations``: derive only these, plus ``graph`` (remembered for :meth:`replace_model` /
        :meth:`refresh_graph`)."""
        mname = self._unique_model_name(name if name is not None else (model.name or "model"))
        qual = self.fact_graph_names(model, mname)
        # the graph table is always kept: it says which model owns which graph
        want = _wanted(relations) | {"graph"}
        index = ModelIndex(model)
        self._refresh_index = (model, model.structure_version, index)  # later refreshes reuse it
        self._derive_and_insert(model, mname, graph_names=qual, relations=want, index=index)
        self.models[mname] = qual
        self._model_relations[mname] = want
        self._dense_positions.update(qual.values())
        self.create_indexes()
        return mname

    def replace_model(self, model: Model, name: str | None = None) -> str:
        """Re-derive every fact of a model already in the database (after edits); keeps its graph naming.

        ``name`` defaults to the only model in the database, or ``model.name``."""
        mname = self._model_name_for(model, name)
        self._delete_graphs(list(self.models[mname].values()))
        qual = dict(self.models[mname])
        for g in model.graphs:  # graphs added by the edit get the same naming scheme
            if g.name not in qual:
                qual[g.name] = self._fact_name(mname, g.name)
        self.models[mname] = {g.name: qual[g.name] for g in model.graphs}
        want = self._model_relations.get(mname)
        self._derive_and_insert(model, mname, graph_names=self.models[mname], relations=want)
        self._dense_positions.update(self.models[mname].values())
        self.conn.commit()
        return mname

    def rebuild_model(self, model: Model, name: str | None = None) -> str:
        """Re-derive every fact of a model already in the database, leaving the database as
        :meth:`from_model` would make it: the same rows in the same rowid order, the same indexes and planner
        statistics. For a large edit (most nodes touched), where :meth:`refresh_nodes` would delete and re-insert
        nearly every row through the indexes: here the tables are emptied whole, the rows bulk loaded without
        indexes and the indexes built afterwards, as a fresh build does (10 k nodes: 0.2 s CPU against 0.43 s for
        a refresh of every node). A database holding other models too gets :meth:`replace_model`."""
        mname = self._model_name_for(model, name)
        if len(self.models) > 1:
            return self.replace_model(model, mname)
        c = self.conn
        for rel, idxs in INDEXES.items():
            if rel == "op_class":  # not per model: kept, like its rows
                continue
            for cols in idxs:
                iname = f"idx_{rel}_{'_'.join(cols)}"
                c.execute(f"DROP INDEX IF EXISTS {_quote(iname)}")
        for rel in SCHEMA:
            if rel != "op_class":
                c.execute(f"DELETE FROM {_quote(rel)}")  # no WHERE: SQLite empties the table whole
        qual = dict(self.models[mname])
        for g in model.graphs:  # graphs added by the edit get the same naming scheme
            if g.name not in qual:
                qual[g.name] = self._fact_name(mname, g.name)
        self.models[mname] = {g.name: qual[g.name] for g in model.graphs}
        index = ModelIndex(model)
        self._refresh_index = (model, model.structure_version, index)
        self._derive_and_insert(
            model, mname, graph_names=self.models[mname], relations=self._model_relations.get(mname), index=index
        )
        self._dense_positions = set(self.models[mname].values())
        # statistics of the fact tables only, as in a fresh database: temporary tables a rule program left on
        # the connection get none
        self._create_indexes("ANALYZE main")
        return mname

    def refresh_graph(self, graph: Graph | str, model: Model | None = None, name: str | None = None) -> None:
        """Re-derive the rows owned by one graph (see :data:`GRAPH_COLUMN`) after it was edited.

        Rows of other graphs are kept: use :meth:`replace_model` when an edit changes subgraph ownership."""
        if isinstance(graph, Graph):
            model = model or graph.model
            gname = graph.name
        else:
            gname = graph
        if model is None:
            raise AnchorlogError(f"refresh_graph({gname!r}) needs the model")
        mname = self._model_name_for(model, name)
        qual = self.models[mname]
        if gname not in qual:
            qual[gname] = self._fact_name(mname, gname)
        self._delete_graphs([qual[gname]])
        want = self._model_relations.get(mname)
        self._derive_and_insert(model, mname, graph_names=qual, graphs=[gname], relations=want)
        self._dense_positions.add(qual[gname])
        self.conn.commit()

    def refresh_nodes(
        self,
        graph: Graph | str,
        nodes: Iterable[str],
        model: Model | None = None,
        name: str | None = None,
        *,
        positions: bool = True,
        index: ModelIndex | None = None,
    ) -> None:
        """Re-derive the rows of some nodes of one graph after they were edited, inserted or removed.

        ``nodes``: every node whose op, attributes, descriptors, inputs or control inputs changed, including
        nodes added or removed (a removed node's outgoing edges go too). Rows are owned by the consuming side:
        when the consumers of a node changed, list the consumers. When nodes were added, removed or moved, the
        positions of the other nodes are shifted in place (cost proportional to the edit; the whole ``node_prop``
        of the graph is re-derived only when its stored positions were stale). Much cheaper than
        :meth:`refresh_graph` on a big graph; an edit that creates or re-parents subgraphs falls back to
        :meth:`replace_model`.

        ``positions=False`` (a pass refreshing after each of many small deletions): the cost stays proportional
        to ``nodes`` -- ``node_prop`` rows of removed nodes are dropped, those of the others are left as they
        were (positions and anchor counts are then stale until a refresh of the same nodes with
        ``positions=True``; the caller owes that refresh). Adding nodes still renumbers positions.
        ``index``: a :class:`ModelIndex` of ``model`` to reuse (valid while no subgraph is added or removed).

        The cost is linear in the listed nodes plus one pass over the graph's ``node_prop`` rows when positions
        shift. The re-derived rows are appended: the tables then hold a fresh derivation's rows, but not in its
        rowid order; :meth:`rebuild_model` re-derives everything in that order (and is cheaper once about half
        of the nodes are listed)."""
        if isinstance(graph, Graph):
            model = model or graph.model
            gname = graph.name
        else:
            gname = graph
        if model is None:
            raise AnchorlogError(f"refresh_nodes({gname!r}) needs the model")
        mname = self._model_name_for(model, name)
        qual = self.models[mname]
        g = model.graph(gname)
        if gname not in qual:
            self.refresh_graph(g, model, mname)
            return
        names = set(nodes)
        present = {n for n in names if n in g.nodes}
        for n in present:
            if any(s and s not in qual for s in g.nodes[n].subgraph_names):
                self.replace_model(model, mname)
                return
        gq = qual[gname]
        c = self.conn
        in_db: set[str] = set()
        for chunk in _chunks(sorted(names)):
            marks = ", ".join("?" for _ in chunk)
            in_db.update(
                r[0] for r in c.execute(f"SELECT name FROM node WHERE graph = ? AND name IN ({marks})", [gq, *chunk])
            )
        removed = names - present
        if removed:
            for chunk in _chunks(sorted(removed)):
                marks = ", ".join("?" for _ in chunk)
                q = f"SELECT 1 FROM subgraph WHERE graph = ? AND node IN ({marks}) LIMIT 1"
                if c.execute(q, [gq, *chunk]).fetchone():  # a removed owner orphans its subgraphs
                    self.replace_model(model, mname)
                    return
        positions = positions or bool(present - in_db)  # a new node needs its position
        # Positions: the listed nodes' rows are re-derived; the other rows are shifted in place (one UPDATE),
        # unless the stored positions are not the dense numbering of the graph before the edit (then rebuilt).
        new_positions = self._shift_positions(g, gq, names, present) if positions else None
        shifted = new_positions is not None
        per_node = {
            "node": "name",
            "node_attr": "node",
            "in_anchor": "node",
            "out_anchor": "node",
            "tensor_attr": "node",
            "ref_io": "node",
            "subgraph": "node",
            "data_edge": "dst",
            "ctrl_edge": "dst",
        }
        if shifted:
            per_node["node_prop"] = "node"
        for chunk in _chunks(sorted(names)):
            marks = ", ".join("?" for _ in chunk)
            for rel, col in per_node.items():
                c.execute(f"DELETE FROM {_quote(rel)} WHERE graph = ? AND {_quote(col)} IN ({marks})", [gq, *chunk])
            c.execute(f"DELETE FROM parent_in WHERE subgraph = ? AND data_node IN ({marks})", [gq, *chunk])
            c.execute(f"DELETE FROM parent_out WHERE subgraph = ? AND netoutput IN ({marks})", [gq, *chunk])
        for chunk in _chunks(sorted(removed)):
            marks = ", ".join("?" for _ in chunk)
            c.execute(f"DELETE FROM data_edge WHERE graph = ? AND src IN ({marks})", [gq, *chunk])
            c.execute(f"DELETE FROM ctrl_edge WHERE graph = ? AND src IN ({marks})", [gq, *chunk])
        if positions and not shifted:
            c.execute("DELETE FROM node_prop WHERE graph = ?", [gq])
            self._dense_positions.add(gq)  # every row re-derived below
        if not positions:
            self._dense_positions.discard(gq)
            for chunk in _chunks(sorted(removed)):
                marks = ", ".join("?" for _ in chunk)
                c.execute(f"DELETE FROM node_prop WHERE graph = ? AND node IN ({marks})", [gq, *chunk])
        want = self._model_relations.get(mname, frozenset(RELATIONS))
        if not positions:
            want = want - {"node_prop"}
        t = FlatTables()
        with paused_gc():
            _graph_rows(
                index if index is not None and index.model is model else self._index_for_refresh(model, g, present),
                g,
                mname,
                qual,
                t,
                is_root=g is model.graphs[0],
                want=want,
                only_nodes=present,
                all_props=positions and not shifted,
                node_positions=new_positions,
            )
        self._insert_flat(t)
        self.conn.commit()

    def _index_for_refresh(self, model: Model, g: Graph, present: set[str]) -> ModelIndex:
        """The subgraph-owner index of ``model`` for a refresh of ``present`` nodes of ``g``: the one of the last
        refresh when it still holds (no graph added or removed, every recorded owner still in its graph owning
        the same subgraph, no refreshed node owning subgraphs), else a new one -- building it visits every node
        of the model, which a refresh after a small edit should not."""
        cached = self._refresh_index
        if (
            cached is not None
            and cached[0] is model
            and cached[1] == model.structure_version
            and not any(g.nodes[n].subgraph_names for n in present)
            and all(
                n.graph is og and og.nodes.get(n.name) is n and i < len(n.subgraph_names) and n.subgraph_names[i] == sub
                for sub, (og, n, i) in cached[2].owner.items()
            )
        ):
            return cached[2]
        index = ModelIndex(model)
        self._refresh_index = (model, model.structure_version, index)
        return index

    def _shift_positions(self, g: Graph, gq: str, names: set[str], present: set[str]) -> dict[str, int] | None:
        """Renumber, in place, the ``node_prop`` positions of the nodes of ``g`` that are not in ``names`` after
        the nodes in ``names`` were inserted, removed or moved, and return the new positions of the listed nodes
        present; None (nothing done) when the stored rows are not the dense numbering 0..n-1 of the graph before
        the edit (e.g. left stale by ``positions=False``).

        The untouched nodes keep their relative order (only ``add_node``/``remove_node`` change the order, and
        both mark the node touched), so each one's new position is its rank among the untouched nodes plus the
        number of listed nodes now in front of it: a step function of its old position with one step per
        listed node."""
        c = self.conn
        old: list[int] = []
        for chunk in _chunks(sorted(names)):
            marks = ", ".join("?" for _ in chunk)
            old.extend(
                r[0]
                for r in c.execute(f"SELECT pos FROM node_prop WHERE graph = ? AND node IN ({marks})", [gq, *chunk])
            )
        n_rows = len(g.nodes) - len(present) + len(old)  # rows before the edit, were they in step
        if gq not in self._dense_positions:  # e.g. a reopened file: look (a scan of the graph's rows)
            count, lo, hi = c.execute(
                "SELECT count(*), min(pos), max(pos) FROM node_prop WHERE graph = ?", [gq]
            ).fetchone()
            if count != n_rows or (count and (lo != 0 or hi != count - 1)):
                return None
            self._dense_positions.add(gq)
        if len(present) <= 8:
            order = list(g.nodes)
            new = {n: order.index(n) for n in present}
        else:
            new = {n: i for i, n in enumerate(g.nodes) if n in present}
        old.sort()
        # listed node m (in new order) has new[m] - m untouched nodes in front of it
        fronts = [p - m for m, p in enumerate(sorted(new.values()))]
        # steps of delta(old position p) = #fronts <= rank(p) - #old < p, rank(p) = p - #old < p
        steps: set[int] = {r + 1 for r in old}  # from r + 1 on, one removed position less in front
        # the smallest untouched old position whose rank is f, i.e. the f-th position not in ``old``: f + k where
        # k counts the listed positions below it. Fronts ascend, so k only grows: one merge-like sweep over
        # ``old`` for all fronts (a search from f upwards per front was quadratic when most nodes are listed).
        k = 0
        n_old = len(old)
        for f in fronts:
            while k < n_old and old[k] <= f + k:
                k += 1
            steps.add(f + k)
        cases = []  # (first old position, delta) where delta changes; untouched rows in front keep theirs
        last = 0
        for p in sorted(steps):
            k = bisect.bisect_left(old, p)
            delta = bisect.bisect_right(fronts, p - k) - k
            if p < n_rows and delta != last:
                cases.append((p, delta))
                last = delta
        if not cases:
            return new
        # rows below the first step keep their position; each other row takes the delta of the last step at or
        # below it. A few steps: one CASE; many (a large edit): a CASE tests its branches one by one for every
        # row, so the steps go into a table keyed by position and each row looks its step up (log time).
        if len(cases) <= _CASE_STEPS:
            when = " ".join(f"WHEN pos >= {p} THEN {d}" for p, d in reversed(cases))
            c.execute(
                f"UPDATE node_prop SET pos = pos + CASE {when} ELSE 0 END WHERE graph = ? AND pos >= ?",
                [gq, cases[0][0]],
            )
            return new
        c.execute("CREATE TEMP TABLE _anchorlog_pos_step (first INTEGER PRIMARY KEY, delta INTEGER NOT NULL)")
        try:
            c.executemany("INSERT INTO temp._anchorlog_pos_step VALUES (?, ?)", cases)
            c.execute(
                "UPDATE node_prop SET pos = pos + (SELECT delta FROM temp._anchorlog_pos_step WHERE first <= node_prop.pos"
                " ORDER BY first DESC LIMIT 1) WHERE graph = ? AND pos >= ?",
                [gq, cases[0][0]],
            )
        finally:
            c.execute("DROP TABLE temp._anchorlog_pos_step")
        return new

    def _fact_name(self, mname: str, gname: str) -> str:
        """Fact name for a graph new to model ``mname``: qualified when the model's graphs are."""
        qualified = any(v != k for k, v in self.models[mname].items())
        fact = f"{mname}/{gname}" if qualified else gname
        if any(fact in m.values() for m in self.models.values()):
            raise AnchorlogError(f"graph name {fact!r} already in the fact database", mname)
        return fact

    def _model_name_for(self, model: Model, name: str | None) -> str:
        if name is not None:
            if name not in self.models:
                raise AnchorlogError(f"no model {name!r} in the fact database")
            return name
        if len(self.models) == 1:
            return next(iter(self.models))
        if model.name in self.models:
            return model.name
        raise AnchorlogError("several models in the fact database: say which one (name=...)")

    def _delete_graphs(self, fact_graphs: list[str]) -> None:
        c = self.conn
        marks = ", ".join("?" for _ in fact_graphs)
        for rel, col in GRAPH_COLUMN.items():
            c.execute(f"DELETE FROM {_quote(rel)} WHERE {_quote(col)} IN ({marks})", fact_graphs)

    def _derive_and_insert(self, model: Model, model_name: str, **derive: Any) -> None:
        """``tables_from_model(model, model_name, **derive)`` inserted, with the cyclic collector paused until
        the values are freed again. They then never meet the collector: no young collection scans them and they
        need no moving to the oldest generation either (what :func:`tables_from_model` does for rows it hands
        out, which costs a walk over every frozen object when a program froze its model -- 0.08 s per 30 k-node
        model). The derivation is the flat one: no row tuples are made only to be taken apart again."""
        with paused_gc():
            flat = _flat_tables(model, model_name, include_op_class=False, **derive)
            self._insert_flat(flat)
            del flat

    def _insert(self, tables: Tables) -> None:
        """Append the rows (tuples), in order; see :meth:`_insert_flat`."""
        flat = FlatTables()
        for rel, rows in tables.items():
            if rel == "op_class":
                self.conn.executemany("INSERT INTO op_class VALUES (?, ?)", rows)
                continue
            values = flat[rel]
            for graph, group in itertools.groupby(rows, key=operator.itemgetter(0)):
                for row in group:
                    values.extend(row[1:])
                flat.runs[rel].append((graph, len(values)))
        self._insert_flat(flat)

    def _insert_flat(self, tables: FlatTables) -> None:
        """Append the rows of flat tables, in order, ``_ROWS_PER_INSERT`` rows per statement: one ``INSERT ...
        VALUES (..), (..), ...`` binds the same values as a statement per row but steps SQLite once per batch,
        a third less CPU than ``executemany`` row by row (30 k nodes: 0.24 -> 0.16 s). Each batch binds the
        graph name of its run (parameter 1, shared by its rows) and a slice of the flat list; the rows of a run
        that fill no batch (a small subgraph's, a run's tail) go one statement each, several runs' in one
        ``executemany`` while no batch comes between them (the rows stay in order)."""
        c = self.conn
        k = _ROWS_PER_INSERT
        for rel, values in tables.items():
            if not values:
                continue
            one, batch = _insert_sql(rel)
            width = len(SCHEMA[rel]) - 1
            step = width * k
            singles: list[tuple[str, int, int]] = []  # (graph, start, end) of rows to insert one by one, in order
            start = 0
            for graph, end in tables.runs[rel]:
                full = start + (end - start) // step * step
                if full > start:
                    if singles:
                        c.executemany(one, _single_rows(values, width, singles))
                        singles.clear()
                    c.executemany(batch, ([graph, *values[i : i + step]] for i in range(start, full, step)))
                if full < end:
                    singles.append((graph, full, end))
                start = end
            if singles:
                c.executemany(one, _single_rows(values, width, singles))
        c.commit()

    # -- reading ---------------------------------------------------------------------------------------------
    def relations(self) -> tuple[str, ...]:
        return RELATIONS

    def rows(self, rel: str) -> list[tuple]:
        """All rows of relation ``rel`` in insertion order."""
        self._check_rel(rel)
        return self.conn.execute(f"SELECT * FROM {_quote(rel)} ORDER BY rowid").fetchall()

    def frame(self, rel: str) -> pandas.DataFrame:
        """Relation ``rel`` as a DataFrame (columns as in :data:`SCHEMA`)."""
        self._check_rel(rel)
        return self.sql(f"SELECT * FROM {_quote(rel)} ORDER BY rowid")

    def frames(self) -> dict[str, pandas.DataFrame]:
        return {rel: self.frame(rel) for rel in RELATIONS}

    def sql(self, query: str, params: Iterable[Any] | dict[str, Any] | None = None) -> pandas.DataFrame:
        """Run a query; the result as a DataFrame."""
        import pandas

        cur = self.conn.execute(query, params if params is not None else ())
        cols = [d[0] for d in cur.description] if cur.description else []
        return pandas.DataFrame(cur.fetchall(), columns=cols)

    def count(self, rel: str) -> int:
        self._check_rel(rel)
        return self.conn.execute(f"SELECT COUNT(*) FROM {_quote(rel)}").fetchone()[0]

    def _check_rel(self, rel: str) -> None:
        if rel not in SCHEMA:
            raise AnchorlogError(f"unknown relation {rel!r} (known: {', '.join(RELATIONS)})")

    def to_pydatalog(self, relations: Iterable[str] | None = None) -> None:
        """Assert the tables as pyDatalog facts: same relation names, same arity, same values.

        Empty relations are declared too (a fact asserted and retracted), so that asking them answers
        nothing instead of failing with "Predicate without definition"."""
        from pyDatalog import pyDatalog

        for rel in relations if relations is not None else RELATIONS:
            rows = self.rows(rel)
            if not rows:
                blank = tuple("" for _ in SCHEMA[rel])
                pyDatalog.assert_fact(rel, *blank)
                pyDatalog.retract_fact(rel, *blank)
            for row in rows:
                pyDatalog.assert_fact(rel, *row)

    def iter_rows(self, rel: str) -> Iterator[tuple]:
        self._check_rel(rel)
        yield from self.conn.execute(f"SELECT * FROM {_quote(rel)} ORDER BY rowid")

    # -- lifetime --------------------------------------------------------------------------------------------
    def save(self, path: str | os.PathLike[str]) -> None:
        """Copy the whole database to a file."""
        dest = sqlite3.connect(str(path))
        try:
            self.conn.backup(dest)
        finally:
            dest.close()

    def close(self) -> None:
        self.conn.close()
        self._refresh_index = None  # it holds the model

    def __enter__(self) -> FactDB:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"FactDB({self.path!r}, models={list(self.models)})"

"""ONNX → anchorlog IR, shaped the way GE's own parser leaves a graph.

* graph inputs (that are not initializers) → ``Data`` with op attr ``index`` = position;
* initializers and ``Constant`` nodes → ``Const`` with attr ``value`` (a :class:`TensorDef`: descriptor, and
  the bytes when the tensor is small);
* graph outputs → one ``NetOutput`` whose inputs follow the output order;
* nodes → GE op types through :data:`ONNX_TO_GE_TYPE` (``Relu`` → ``ReLU`` ...), others keep their ONNX type;
  attributes become :class:`Attr` of the matching kind;
* tensor descriptors come from ``value_info`` after ``onnx.shape_inference`` (GE dtype names, ``ND`` layout,
  ``origin_format``/``origin_shape`` attrs, GE's aligned size when the shape is static);
* graph-valued attributes (``If`` branches, ``Loop``/``Scan`` bodies, ...) become subgraphs of the model:
  the owner lists them in ``subgraph_names``, the subgraph's formal inputs are ``Data`` nodes with op attr
  ``_parent_node_index``, its outputs feed a ``NetOutput`` whose input descs carry ``_parent_node_index``.
  Tensors a body reads from an enclosing graph become explicit extra inputs of the owner node (appended after
  its ONNX inputs, shared by all of its bodies) and ``Data`` nodes in the body, the way GE makes control-flow
  data flow explicit.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Any

from anchorlog.errors import InputError
from anchorlog.facts.generate import GE_DATATYPE_NUMBER, ge_memory_size
from anchorlog.facts.graph import Attr, AttrList, Graph, Model, NamedAttrs, Node, TensorDef, TensorDesc

# ONNX op types whose GE spelling differs or that GE represents by another op; the rest keep their name.
ONNX_TO_GE_TYPE: dict[str, str] = {
    "Relu": "ReLU",
    "Relu6": "ReLU6",
    "PRelu": "PReLU",
    "Tanh": "TanH",
    "Identity": "Identity",
    "MatMul": "MatMul",
    "Gemm": "MatMulV2",
    "Constant": "Const",
    "Concat": "ConcatV2D",
    "Sum": "AddN",
    "Div": "RealDiv",
    "Gather": "GatherV2",
    "Unsqueeze": "Unsqueeze",
    "Squeeze": "Squeeze",
    "Conv": "Conv2D",
    "MaxPool": "MaxPool",
    "AveragePool": "AvgPool",
    "GlobalAveragePool": "GlobalAveragePool",
    "BatchNormalization": "BatchNorm",
    "ReduceMean": "ReduceMean",
    "ReduceSum": "ReduceSum",
    "ReduceMax": "ReduceMax",
    "ReduceMin": "ReduceMin",
    "Softmax": "SoftmaxV2",
    "LayerNormalization": "LayerNorm",
    "Flatten": "Flatten",
    "Reshape": "Reshape",
    "Transpose": "TransposeD",
    "Cast": "Cast",
    "Split": "SplitD",  # SplitVD when the sizes are known (see _adapt)
    "Slice": "Slice",
    "Pad": "PadV3",
    "Expand": "Expand",
    "Where": "Select",
    "Not": "LogicalNot",
    "And": "LogicalAnd",
    "Or": "LogicalOr",
    "Neg": "Neg",
    "Abs": "Abs",
    "Exp": "Exp",
    "Log": "Log",
    "Sqrt": "Sqrt",
    "Reciprocal": "Reciprocal",
    "Max": "Maximum",
    "Min": "Minimum",
    "Equal": "Equal",
    "Greater": "Greater",
    "Less": "Less",
    "Shape": "Shape",
    "Size": "Size",
    "Tile": "Tile",
    "If": "If",
    "Loop": "Loop",
    "Scan": "Scan",
    "Dropout": "Dropout",
    "LeakyRelu": "LeakyRelu",
    "Sigmoid": "Sigmoid",
    "Add": "Add",
    "Sub": "Sub",
    "Mul": "Mul",
    "Pow": "Pow",
    "Range": "Range",
}

# ONNX TensorProto.DataType number → GE DataType name (unknown ones become DT_UNDEFINED).
ONNX_TO_GE_DTYPE: dict[int, str] = {
    1: "DT_FLOAT",
    2: "DT_UINT8",
    3: "DT_INT8",
    4: "DT_UINT16",
    5: "DT_INT16",
    6: "DT_INT32",
    7: "DT_INT64",
    8: "DT_STRING",
    9: "DT_BOOL",
    10: "DT_FLOAT16",
    11: "DT_DOUBLE",
    12: "DT_UINT32",
    13: "DT_UINT64",
    14: "DT_COMPLEX64",
    15: "DT_COMPLEX128",
    16: "DT_BF16",
    17: "DT_FLOAT8_E4M3FN",
    19: "DT_FLOAT8_E5M2",
    22: "DT_INT4",
    23: "DT_FLOAT4_E2M1",
    24: "DT_FLOAT8_E8M0",
}

DEFAULT_MAX_CONST_BYTES = 1 << 20  # keep initializer data up to 1 MiB; larger ones keep only their desc


def ge_dtype(onnx_elem_type: int) -> str:
    return ONNX_TO_GE_DTYPE.get(int(onnx_elem_type), "DT_UNDEFINED")


def _load(source: Any):
    import onnx

    if isinstance(source, onnx.ModelProto):
        return source, "<ModelProto>"
    path = os.fspath(source)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise InputError(f"cannot read ONNX file: {err.strerror or err}", path) from None
    try:
        model = onnx.ModelProto()
        model.ParseFromString(data)
    except Exception as err:  # protobuf raises DecodeError and friends
        first = (str(err).splitlines() or [type(err).__name__])[0]
        raise InputError(f"not an ONNX model ({first})", path) from None
    if not model.HasField("graph"):
        raise InputError("not an ONNX model (no graph)", path)
    # Tensors stored as external data are not loaded: their Const keeps the descriptor only (big weights
    # would be dropped by max_const_bytes anyway, and nothing outside the given file is opened).
    return model, path


def read_onnx(
    source: str | os.PathLike[str] | Any,
    *,
    max_const_bytes: int = DEFAULT_MAX_CONST_BYTES,
    infer_shapes: bool = True,
) -> Model:
    """Import an ONNX model (a path or an ``onnx.ModelProto``) as a :class:`Model`; see the module doc."""
    import onnx

    proto, place = _load(source)
    if infer_shapes:
        try:
            proto = onnx.shape_inference.infer_shapes(proto)
        except Exception:
            pass  # shape inference is a bonus: descs fall back to what the file declares
    imp = _Importer(proto, max_const_bytes, place)
    try:
        model = imp.run()
        if place != "<ModelProto>":
            model.source = place
        return model
    except InputError:
        raise
    except (ValueError, KeyError, IndexError, TypeError) as err:
        raise InputError(f"cannot import ONNX model: {err}", place) from None


@dataclass
class _Scope:
    """One graph being imported: where each tensor name comes from, and the outer tensors it reads."""

    graph: Graph
    producers: dict[str, tuple[str, int]] = field(default_factory=dict)
    types: dict[str, Any] = field(default_factory=dict)  # tensor name -> onnx TypeProto
    parent: _Scope | None = None
    outer_refs: list[str] = field(default_factory=list)  # names read from enclosing graphs, first use order
    outer_data: dict[str, Node] = field(default_factory=dict)
    data_count: int = 0


class _Importer:
    def __init__(self, proto: Any, max_const_bytes: int, place: str) -> None:
        self.proto = proto
        self.max_const_bytes = max_const_bytes
        self.place = place
        self.taken: set[str] = set()
        self.graph_names: set[str] = set()
        self.model = Model(proto.graph.name or "onnx_model")
        self.opset = {o.domain: o.version for o in proto.opset_import}
        # Model-local functions: a call becomes a PartitionedCall owning a copy of the function body.
        self.functions = {(f.domain, f.name, getattr(f, "overload", "")): f for f in proto.functions}
        self.calling: list[tuple[str, str, str]] = []  # functions being expanded (ONNX forbids recursion)

    def unique(self, base: str) -> str:
        base = base or "node"
        name, i = base, 1
        while name in self.taken:
            name = f"{base}_{i}"
            i += 1
        self.taken.add(name)
        return name

    def unique_graph(self, base: str) -> str:
        name, i = base, 1
        while name in self.graph_names:
            name = f"{base}_{i}"
            i += 1
        self.graph_names.add(name)
        return name

    def run(self) -> Model:
        g = self.proto.graph
        if self.proto.producer_name:
            self.model.set_attr("onnx_producer_name", self.proto.producer_name)
        self.model.set_attr("onnx_ir_version", int(self.proto.ir_version))
        self.model.set_attr("onnx_opset_import", [f"{d or 'ai.onnx'}:{v}" for d, v in self.opset.items()])
        self.convert_graph(g, self.unique_graph(g.name or "main"), None, formal_parent_index=None)
        return self.model

    # -- descriptors ---------------------------------------------------------------------------------------
    def desc_of(self, scope: _Scope, name: str) -> TensorDesc:
        s: _Scope | None = scope
        tp = None
        while s is not None and tp is None:
            tp = s.types.get(name)
            s = s.parent
        return self.desc_from_type(tp)

    def desc_from_type(self, tp: Any) -> TensorDesc:
        td = TensorDesc(dtype="DT_UNDEFINED", shape=None, layout="ND")
        if tp is not None and tp.HasField("tensor_type"):
            tt = tp.tensor_type
            td.dtype = ge_dtype(tt.elem_type)
            if tt.HasField("shape"):
                td.shape = [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim]
            else:
                td.shape = [-2]  # GE's "unknown rank"
        elif tp is not None:
            td.shape = [-2]
            td.set_attr("onnx_type", tp.WhichOneof("value") or "")
        if td.shape is not None:
            td.set_attr("origin_format", "ND")
            td.set_attr("origin_shape", list(td.shape), kind="list")
            td.size = ge_memory_size(td.dtype, td.shape)
        return td

    def desc_of_tensor(self, t: Any) -> TensorDesc:
        td = TensorDesc(dtype=ge_dtype(t.data_type), shape=list(t.dims), layout="ND")
        td.set_attr("origin_format", "ND")
        td.set_attr("origin_shape", list(t.dims), kind="list")
        td.size = ge_memory_size(td.dtype, td.shape)
        return td

    def tensor_def(self, t: Any) -> TensorDef:
        from onnx import numpy_helper

        desc = self.desc_of_tensor(t)
        data = b""
        external = t.data_location == 1 and not t.raw_data
        if not external and t.data_type != 8:  # strings have no fixed-width bytes
            try:
                arr = numpy_helper.to_array(t)
                if arr.nbytes <= self.max_const_bytes:
                    data = arr.tobytes()
            except Exception:
                data = b""
        return TensorDef(desc=desc, data=data)

    # -- attributes ----------------------------------------------------------------------------------------
    def convert_attr(self, a: Any) -> Attr | None:
        from onnx import AttributeProto as AP

        k = a.type
        if k == AP.FLOAT:
            return Attr("f", float(a.f))
        if k == AP.INT:
            return Attr("i", int(a.i))
        if k == AP.STRING:
            try:
                return Attr("s", a.s.decode("utf-8"))
            except UnicodeDecodeError:
                return Attr("s", bytes(a.s))
        if k == AP.TENSOR:
            return Attr("t", self.tensor_def(a.t))
        if k == AP.FLOATS:
            return Attr("list", AttrList("f" if a.floats else None, [float(x) for x in a.floats], 3))
        if k == AP.INTS:
            return Attr("list", AttrList("i" if a.ints else None, [int(x) for x in a.ints], 2))
        if k == AP.STRINGS:
            items = []
            for x in a.strings:
                try:
                    items.append(x.decode("utf-8"))
                except UnicodeDecodeError:
                    items.append(bytes(x))
            return Attr("list", AttrList("s" if items else None, items, 1))
        if k == AP.TENSORS:
            return Attr("list", AttrList("t" if a.tensors else None, [self.tensor_def(t) for t in a.tensors], 7))
        if k in (AP.SPARSE_TENSOR, AP.SPARSE_TENSORS, AP.TYPE_PROTO, AP.TYPE_PROTOS):
            # No GE counterpart: keep the serialized proto so nothing is lost.
            payload = a.SerializeToString()
            return Attr("bt", payload)
        if k in (AP.GRAPH, AP.GRAPHS):
            return None  # handled as subgraphs
        if a.ref_attr_name:
            return Attr("s", f"@{a.ref_attr_name}")
        return None

    # -- graphs --------------------------------------------------------------------------------------------
    def convert_graph(
        self, gp: Any, gname: str, parent: _Scope | None, formal_parent_index: list[int | None] | None
    ) -> _Scope:
        """Import GraphProto ``gp`` as graph ``gname``. For a body, ``formal_parent_index[j]`` is the owner
        input that feeds formal input ``j`` (None: no owner input)."""
        g = Graph(gname)
        self.model.add_graph(g)
        scope = _Scope(graph=g, parent=parent)
        init_names = {t.name for t in gp.initializer}
        for vi in list(gp.input) + list(gp.value_info) + list(gp.output):
            if vi.name and vi.HasField("type"):
                scope.types[vi.name] = vi.type

        # Formal inputs → Data. At the root, initializers listed as inputs (old IR versions) are constants.
        position = 0
        for j, vi in enumerate(gp.input):
            if vi.name in init_names and parent is None:
                continue
            node = self.add(
                g, self.unique(vi.name), "Data", [], [], [self.desc_from_type(vi.type if vi.HasField("type") else None)]
            )
            node.input_desc = [node.output_desc[0].copy()]
            node.set_attr("index", position)
            if parent is not None and formal_parent_index is not None:
                k = formal_parent_index[j] if j < len(formal_parent_index) else None
                if k is not None:
                    node.set_attr("_parent_node_index", k)
            position += 1
            scope.producers[vi.name] = (node.name, 0)
        scope.data_count = position
        for t in gp.initializer:
            if t.name in scope.producers:
                continue  # a graph input with a default value stays an input
            node = self.add(g, self.unique(t.name), "Const", [], [], [self.desc_of_tensor(t)])
            node.attrs["value"] = Attr("t", self.tensor_def(t))
            scope.producers[t.name] = (node.name, 0)
            scope.types.setdefault(t.name, None)
        for st in gp.sparse_initializer:
            raise InputError(f"graph {gname}: sparse initializer {st.values.name!r} is not supported", self.place)

        # Name every node and register its outputs first, so producers can be found in any order.
        planned = []
        for idx, np_ in enumerate(gp.node):
            base = np_.name or (
                f"{np_.op_type}_{np_.output[0]}" if np_.output and np_.output[0] else f"{np_.op_type}_{idx}"
            )
            name = self.unique(base)
            planned.append((name, np_))
            for o, out in enumerate(np_.output):
                if out:
                    scope.producers[out] = (name, o)
        for name, np_ in planned:
            self.convert_node(scope, name, np_)

        # Outputs → one NetOutput.
        if gp.output:
            net_name = self.unique("NetOutput" if parent is None else f"{gname}/NetOutput")
            net = self.add(g, net_name, "NetOutput", [], [], [])
            for vi in gp.output:
                src = self.resolve(scope, vi.name)
                net.inputs.append(src)
                net.input_desc.append(self.desc_of(scope, vi.name))
                net.output_desc.append(self.desc_of(scope, vi.name))
        if scope.outer_data:
            # Data nodes made for outer tensors were appended on first use: move them to the front so the
            # node list stays in topological order.
            first = {n: g.nodes[n] for n in g.nodes if g.nodes[n].type == "Data"}
            g.nodes = {**first, **{n: x for n, x in g.nodes.items() if n not in first}}
        g.invalidate()
        return scope

    def add(self, g: Graph, name: str, op_type: str, inputs: list, ctrl: list, outs: list[TensorDesc]) -> Node:
        node = Node(name=name, type=op_type, inputs=list(inputs), ctrl_inputs=list(ctrl), output_desc=outs)
        g.add_node(node)
        return node

    def resolve(self, scope: _Scope, name: str) -> tuple[str, int]:
        """The anchor producing tensor ``name`` in ``scope``; an outer tensor gets a Data node here."""
        if name in scope.producers:
            return scope.producers[name]
        if name in scope.outer_data:
            return (scope.outer_data[name].name, 0)
        if scope.parent is None or not self.visible(scope.parent, name):
            raise InputError(f"graph {scope.graph.name}: tensor {name!r} is used but never produced", self.place)
        node = self.add(
            scope.graph, self.unique(f"{scope.graph.name}/{name}"), "Data", [], [], [self.desc_of(scope, name)]
        )
        node.input_desc = [node.output_desc[0].copy()]
        node.set_attr("index", scope.data_count)
        scope.data_count += 1
        scope.outer_refs.append(name)
        scope.outer_data[name] = node
        return (node.name, 0)

    def visible(self, scope: _Scope | None, name: str) -> bool:
        while scope is not None:
            if name in scope.producers or name in scope.outer_data:
                return True
            scope = scope.parent
        return False

    def convert_node(self, scope: _Scope, name: str, np_: Any) -> None:
        from onnx import AttributeProto as AP

        g = scope.graph
        op_type = np_.op_type
        ge_type = ONNX_TO_GE_TYPE.get(op_type, op_type) if np_.domain in ("", "ai.onnx") else op_type
        inputs: list[tuple[str, int] | None] = []
        in_desc: list[TensorDesc] = []
        for t in np_.input:
            if not t:
                inputs.append(None)
                in_desc.append(TensorDesc(dtype="DT_UNDEFINED", shape=None, layout="ND"))
                continue
            inputs.append(self.resolve(scope, t))
            in_desc.append(self.desc_of(scope, t))
        outs = [self.desc_of(scope, o) if o else TensorDesc(dtype="DT_UNDEFINED", layout="ND") for o in np_.output]
        node = self.add(g, name, ge_type, inputs, [], outs)
        node.input_desc = in_desc
        if np_.domain not in ("", "ai.onnx"):
            node.set_attr("_onnx_domain", np_.domain)
        if ge_type != op_type:
            node.set_attr("_onnx_op_type", op_type)
        bodies: list[tuple[str, Any]] = []
        for a in np_.attribute:
            if a.type == AP.GRAPH:
                bodies.append((a.name, a.g))
            elif a.type == AP.GRAPHS:
                bodies.extend((f"{a.name}_{i}", sub) for i, sub in enumerate(a.graphs))
            else:
                conv = self.convert_attr(a)
                if conv is not None:
                    node.attrs[a.name] = conv
        fkey = (np_.domain, op_type, getattr(np_, "overload", ""))
        function = self.functions.get(fkey) if fkey not in self.calling else None
        if function is not None:
            node.type = "PartitionedCall"
            node.set_attr("_onnx_op_type", op_type)
            node.set_attr("_onnx_domain", np_.domain)
            bodies.append(("function", self.function_graph(function)))
        if op_type == "If":
            # GE's If convention: subgraph 0 is the then-branch, 1 the else-branch (ONNX stores attributes
            # sorted by name, so else_branch usually comes first).
            order = {"then_branch": 0, "else_branch": 1}
            bodies.sort(key=lambda b: order.get(b[0], 2))
        if op_type == "Constant" and np_.domain in ("", "ai.onnx"):
            self.constant_value(node)
        elif np_.domain in ("", "ai.onnx"):
            self.adapt(scope, node, op_type)
        if function is not None:
            self.calling.append(fkey)
            try:
                self.convert_bodies(scope, node, "PartitionedCall", bodies)
            finally:
                self.calling.pop()
        elif bodies:
            self.convert_bodies(scope, node, op_type, bodies)

    def function_graph(self, function: Any) -> Any:
        """A FunctionProto as a GraphProto: formal inputs/outputs by name (types unknown unless declared)."""
        from onnx import helper

        declared = {vi.name: vi for vi in getattr(function, "value_info", [])}

        def vi(name: str):
            return declared.get(name) or helper.make_empty_tensor_value_info(name)

        return helper.make_graph(
            list(function.node),
            function.name,
            [vi(n) for n in function.input],
            [vi(n) for n in function.output],
            value_info=[v for n, v in declared.items() if n not in function.input and n not in function.output],
        )

    def default_opset(self) -> int:
        return self.opset.get("", self.opset.get("ai.onnx", 0))

    def const_ints(self, scope: _Scope, anchor: tuple[str, int] | None) -> list[int] | None:
        """The integer values of a Const feeding an input, when known."""
        if anchor is None:
            return None
        src = scope.graph.nodes.get(anchor[0])
        if src is None or src.type != "Const" or "value" not in src.attrs or src.attrs["value"].kind != "t":
            return None
        tdef = src.attrs["value"].value
        width = {"DT_INT64": 8, "DT_INT32": 4}.get(tdef.desc.dtype if tdef.desc else "")
        if width is None or len(tdef.data) % width:
            return None
        return [
            int.from_bytes(tdef.data[i : i + width], "little", signed=True) for i in range(0, len(tdef.data), width)
        ]

    def adapt(self, scope: _Scope, node: Node, op_type: str) -> None:
        """Attributes the GE op carries where ONNX has other names or inputs (as GE's parser folds them)."""
        if op_type == "Concat" and "axis" in node.attrs:
            node.set_attr("concat_dim", node.attr("axis"))
            node.set_attr("N", sum(1 for x in node.inputs if x is not None))
        elif op_type == "Split":
            node.set_attr("split_dim", node.attr("axis", 0))
            node.set_attr("num_split", node.num_outputs)
            sizes = node.attr("split")
            if sizes is None and len(node.inputs) > 1:
                sizes = self.const_ints(scope, node.inputs[1])
                if sizes is not None:  # folded into the attr: the sizes input goes, as for GE's SplitVD
                    del node.inputs[1:]
                    del node.input_desc[1:]
            if sizes is not None:
                node.type = "SplitVD"
                node.set_attr("size_splits", [int(x) for x in sizes])
        elif op_type == "Softmax":
            default = -1 if self.default_opset() >= 13 else 1
            node.set_attr("axes", [int(node.attr("axis", default))])
        elif op_type == "Gemm":
            node.set_attr("transpose_x1", bool(node.attr("transA", 0)))
            node.set_attr("transpose_x2", bool(node.attr("transB", 0)))
        elif op_type == "Cast" and "to" in node.attrs:
            number = GE_DATATYPE_NUMBER.get(ge_dtype(node.attr("to")))
            if number is not None:
                node.set_attr("dst_type", number)

    def constant_value(self, node: Node) -> None:
        """ONNX ``Constant``'s value attr variants → GE ``Const`` attr ``value`` (a TensorDef)."""
        if "value" in node.attrs and node.attrs["value"].kind == "t":
            return
        for key, dtype in (("value_float", "DT_FLOAT"), ("value_int", "DT_INT64")):
            if key in node.attrs:
                import struct

                v = node.attr(key)
                data = struct.pack("<f", v) if dtype == "DT_FLOAT" else struct.pack("<q", v)
                desc = TensorDesc(dtype=dtype, shape=[], layout="ND", size=ge_memory_size(dtype, []))
                node.attrs["value"] = Attr("t", TensorDef(desc=desc, data=data))
                return
        for key, dtype, fmt in (("value_floats", "DT_FLOAT", "<f"), ("value_ints", "DT_INT64", "<q")):
            if key in node.attrs:
                import struct

                vals = node.attr(key)
                data = b"".join(struct.pack(fmt, v) for v in vals)
                desc = TensorDesc(dtype=dtype, shape=[len(vals)], layout="ND", size=ge_memory_size(dtype, [len(vals)]))
                node.attrs["value"] = Attr("t", TensorDef(desc=desc, data=data))
                return

    def body_parent_indexes(
        self, op_type: str, node: Node, body: Any, n_explicit: int
    ) -> tuple[list[int | None], list[int | None]]:
        """(formal input j → owner input, body output k → owner output) for a body of ``op_type``."""
        n_in, n_out = len(body.input), len(body.output)
        if op_type == "Loop":
            # Body (iter, cond, v...) ↔ Loop inputs (M, cond, v...); body outputs (cond, v..., scan...) →
            # Loop outputs (v..., scan...): the condition output has no owner output.
            return [j if j < n_explicit else None for j in range(n_in)], [None] + list(range(n_out - 1))
        if op_type == "Scan":
            # Scan-8 has a leading sequence_lens input the body does not see.
            offset = max(0, n_explicit - n_in) if self.opset.get("", self.opset.get("ai.onnx", 0)) < 9 else 0
            return [j + offset if j + offset < n_explicit else None for j in range(n_in)], list(range(n_out))
        if op_type == "If":
            return [j + 1 if j + 1 < n_explicit else None for j in range(n_in)], list(range(n_out))
        return [j if j < n_explicit else None for j in range(n_in)], list(range(n_out))

    def convert_bodies(self, scope: _Scope, node: Node, op_type: str, bodies: list[tuple[str, Any]]) -> None:
        n_explicit = len(node.inputs)
        subs: list[tuple[_Scope, list[int | None]]] = []
        for attr_name, body in bodies:
            gname = self.unique_graph(f"{node.name}_{attr_name}")
            formal, outputs = self.body_parent_indexes(op_type, node, body, n_explicit)
            # An optional owner input left empty feeds nothing: its formal input gets no parent index.
            formal = [k if k is not None and node.inputs[k] is not None else None for k in formal]
            sub = self.convert_graph(body, gname, scope, formal)
            node.subgraph_names.append(gname)
            subs.append((sub, outputs))
            net = next((n for n in sub.graph.nodes.values() if n.type == "NetOutput"), None)
            if net is not None:
                for k, desc in enumerate(net.input_desc):
                    if k < len(outputs) and outputs[k] is not None:
                        desc.set_attr("_parent_node_index", outputs[k])
        # Outer tensors read by any body become shared extra inputs of the owner, after its ONNX inputs.
        extra: list[str] = []
        for sub, _ in subs:
            for name in sub.outer_refs:
                if name not in extra:
                    extra.append(name)
        for pos, name in enumerate(extra):
            k = n_explicit + pos
            node.inputs.append(self.resolve(scope, name))
            node.input_desc.append(self.desc_of(scope, name))
            for sub, _ in subs:
                data = sub.outer_data.get(name)
                if data is not None:
                    data.set_attr("_parent_node_index", k)
        scope.graph.invalidate()


def onnx_op_type(ge_type: str) -> str:
    """The ONNX op type a GE type came from under :data:`ONNX_TO_GE_TYPE` (itself when unmapped)."""
    for k, v in ONNX_TO_GE_TYPE.items():
        if v == ge_type:
            return k
    return ge_type


__all__ = ["read_onnx", "ONNX_TO_GE_TYPE", "ONNX_TO_GE_DTYPE", "ge_dtype", "NamedAttrs", "onnx_op_type"]

"""Synthetic GE-style graphs: a decoder-only transformer as GE sees it after a framework adapter.

:func:`generate_transformer` builds, deterministically for a seed, the kind of graph torchair/TF adapters hand
to GE for a tensor-parallel decoder: RmsNorm/LayerNorm, MatMul projections, SplitD/SplitVD of fused QKV and
gate/up weights, Reshape/Transpose of heads, rotary Mul/Add, BatchMatMul attention with Cast around Softmax,
heads merged either by Transpose+Reshape or by SplitD + ConcatD/ConcatV2D, HcomAllReduce (or HcomReduceScatter +
HcomAllGather) after row-parallel projections and HcomAllGather of vocabulary-parallel logits, KV-cache writes by ``Assign`` on ``Variable``
nodes, some MLPs wrapped in ``PartitionedCall`` subgraphs and the final norm chosen by an ``If``.

TensorMove nodes sit where an adapter inserts them: after graph inputs it does not own, before in-place
updates (the value fed to ``Assign``, the buffer HCCL reduces in place) and before graph outputs that alias an
input (an updated cache returned to the caller). Tensor descriptors carry GE's dtype names, shapes, formats
(``ND`` or ``FRACTAL_NZ`` for weights), the ``origin_format``/``origin_shape`` tensor attrs and GE's memory
size (bytes rounded up to 32 plus 32 bytes of padding, as ``TensorUtils::GetTensorMemorySizeInBytes``).

The generator only builds the IR; writing it out is :func:`anchorlog.facts.ge_io.write_model`'s job.
"""

from __future__ import annotations

import functools
import math
import random
from dataclasses import dataclass
from typing import Any

from anchorlog.facts.graph import Attr, AttrList, Graph, Model, Node, TensorDef, TensorDesc
from anchorlog.gcpause import paused_gc

# Bytes per element for GE's DataType names; sub-byte types are rounded the way GE's GetSizeInBytes does
# (element count times bits, divided by 8, rounded up).
DTYPE_BITS: dict[str, int] = {
    "DT_FLOAT": 32,
    "DT_FLOAT16": 16,
    "DT_BF16": 16,
    "DT_INT8": 8,
    "DT_UINT8": 8,
    "DT_INT16": 16,
    "DT_UINT16": 16,
    "DT_INT32": 32,
    "DT_UINT32": 32,
    "DT_INT64": 64,
    "DT_UINT64": 64,
    "DT_BOOL": 8,
    "DT_DOUBLE": 64,
    "DT_COMPLEX32": 32,
    "DT_COMPLEX64": 64,
    "DT_COMPLEX128": 128,
    "DT_QINT8": 8,
    "DT_QUINT8": 8,
    "DT_QINT16": 16,
    "DT_QUINT16": 16,
    "DT_QINT32": 32,
    "DT_INT4": 4,
    "DT_UINT1": 1,
    "DT_INT2": 2,
    "DT_UINT2": 2,
    "DT_HIFLOAT8": 8,
    "DT_FLOAT8_E5M2": 8,
    "DT_FLOAT8_E4M3FN": 8,
    "DT_FLOAT8_E8M0": 8,
    "DT_FLOAT6_E3M2": 6,
    "DT_FLOAT6_E2M3": 6,
    "DT_FLOAT4_E2M1": 4,
    "DT_FLOAT4_E1M2": 4,
}

# GE's in-memory ge::DataType numbers (what a Cast's dst_type attr holds; differs from the proto enum).
GE_DATATYPE_NUMBER = {
    "DT_FLOAT": 0,
    "DT_FLOAT16": 1,
    "DT_INT8": 2,
    "DT_INT32": 3,
    "DT_UINT8": 4,
    "DT_INT16": 6,
    "DT_UINT16": 7,
    "DT_UINT32": 8,
    "DT_INT64": 9,
    "DT_UINT64": 10,
    "DT_DOUBLE": 11,
    "DT_BOOL": 12,
    "DT_STRING": 13,
    "DT_COMPLEX64": 16,
    "DT_COMPLEX128": 17,
    "DT_BF16": 27,
}

HCCL_KERNEL_LIB = "ops_kernel_info_hccl"
HCCL_WORLD_GROUP = "hccl_world_group"
_ALIGN = 32


def ge_memory_size(dtype: str, shape: list[int] | None) -> int:
    """GE's tensor memory size: data bytes, plus 32, rounded up to a multiple of 32. 0 when not static."""
    if shape is None:
        return 0
    return _memory_size(dtype, tuple(shape))


@functools.lru_cache(maxsize=4096)
def _memory_size(dtype: str, shape: tuple[int, ...]) -> int:
    if any(d < 0 for d in shape):
        return 0
    bits = DTYPE_BITS.get(dtype)
    if bits is None:
        return 0
    elements = 1
    for d in shape:
        elements *= d
    nbytes = (elements * bits + 7) // 8
    return ((nbytes + 2 * _ALIGN - 1) // _ALIGN) * _ALIGN


def nz_shape(shape: list[int], cube: int = 16) -> list[int]:
    """FRACTAL_NZ storage shape of an ND matrix ``[..., k, n]``: ``[..., ceil(n/16), ceil(k/16), 16, 16]``."""
    *batch, k, n = shape
    return [*batch, -(-n // cube), -(-k // cube), cube, cube]


class AttrPool:
    """Shares the ``origin_format``/``origin_shape`` Attr objects of equal values between descriptors.

    A 100k-node graph has about a million of them but only a few hundred distinct values; sharing cuts the
    object count (and the garbage collector's work) by about a third. Attrs are values: code changes a
    descriptor's attr with ``set_attr`` (which replaces the object), never by mutating an Attr in place."""

    def __init__(self) -> None:
        self._formats: dict[str, Attr] = {}
        self._shapes: dict[tuple[int, ...], Attr] = {}

    def origin_format(self, fmt: str) -> Attr:
        a = self._formats.get(fmt)
        if a is None:
            a = self._formats[fmt] = Attr("s", fmt)
        return a

    def origin_shape(self, shape: list[int]) -> Attr:
        key = tuple(shape)
        a = self._shapes.get(key)
        if a is None:
            a = self._shapes[key] = Attr("list", AttrList("i", list(shape), 2))
        return a


def make_desc(
    dtype: str,
    shape: list[int],
    fmt: str = "ND",
    origin_shape: list[int] | None = None,
    pool: AttrPool | None = None,
) -> TensorDesc:
    """A tensor descriptor as GE writes it after format selection: ``origin_format``/``origin_shape`` attrs
    (the framework's view) beside the storage ``layout``/``shape``, and GE's aligned memory ``size``.
    With ``pool``, equal attr values share one Attr object (see :class:`AttrPool`)."""
    origin = list(shape if origin_shape is None else origin_shape)
    origin_fmt = "ND" if fmt == "FRACTAL_NZ" else fmt
    td = TensorDesc(dtype=dtype, shape=list(shape), layout=fmt, size=_memory_size(dtype, tuple(shape)))
    if pool is None:
        td.attrs["origin_format"] = Attr("s", origin_fmt)
        td.attrs["origin_shape"] = Attr("list", AttrList("i", origin, 2))
    else:
        td.attrs["origin_format"] = pool.origin_format(origin_fmt)
        td.attrs["origin_shape"] = pool.origin_shape(origin)
    return td


def copy_desc(td: TensorDesc, pool: AttrPool | None = None) -> TensorDesc:
    """A cheap copy of a descriptor made by :func:`make_desc`: new descriptor and shape list; attrs rebuilt,
    or, with ``pool``, shared (they are values, see :class:`AttrPool`)."""
    out = TensorDesc(dtype=td.dtype, shape=None if td.shape is None else list(td.shape), layout=td.layout)
    out.size = td.size
    if pool is not None:
        out.attrs = dict(td.attrs)
        return out
    for k, a in td.attrs.items():
        if a.kind == "list":
            out.attrs[k] = Attr("list", AttrList(a.value.kind, list(a.value.items), a.value.val_type))
        else:
            out.attrs[k] = Attr(a.kind, a.value)
    return out


def _name_attrs(inputs: list[str], outputs: list[str]) -> dict[str, Attr]:
    """Input/output names as GE serialises them (``_input_name_key``/``_value`` ...)."""
    return {
        "_input_name_key": Attr("list", AttrList("s", list(inputs), 1)),
        "_input_name_value": Attr("list", AttrList("i", list(range(len(inputs))), 2)),
        "_output_name_key": Attr("list", AttrList("s", list(outputs), 1)),
        "_output_name_value": Attr("list", AttrList("i", list(range(len(outputs))), 2)),
    }


Out = tuple[Node, int]  # a producer anchor while building


class _Builder:
    """Appends nodes to one graph; inputs are (node, out) anchors, input descs copy the producer's output."""

    def __init__(self, graph: Graph, ids: list[int], pool: AttrPool | None = None) -> None:
        self.graph = graph
        self.ids = ids  # shared one-element counter: GE topological ids cover all graphs
        self.pool = pool

    def op(
        self,
        name: str,
        op_type: str,
        inputs: list[Out],
        outputs: list[TensorDesc],
        attrs: dict[str, Any] | None = None,
        ctrl: list[Node] | None = None,
    ) -> Node:
        node = Node(name=name, type=op_type)
        node.inputs = [(src.name, idx) for src, idx in inputs]
        node.input_desc = [copy_desc(src.output_desc[idx], self.pool) for src, idx in inputs]
        node.output_desc = outputs
        if ctrl:
            node.ctrl_inputs = [c.name for c in ctrl]
        if attrs:
            for k, v in attrs.items():
                node.attrs[k] = v if isinstance(v, Attr) else Attr.of(v)
        node.id = self.ids[0]
        self.ids[0] += 1
        self.graph.nodes[name] = node  # names are unique by construction; skip add_node's index upkeep
        node.graph = self.graph
        return node

    def const(self, name: str, dtype: str, shape: list[int], values: list[int] | None = None, **kw: Any) -> Node:
        """A ``Const`` whose ``value`` attr holds the descriptor and, for small int tensors, the data."""
        fmt = kw.get("fmt", "ND")
        storage = nz_shape(shape) if fmt == "FRACTAL_NZ" else shape
        desc = make_desc(dtype, storage, fmt, origin_shape=shape, pool=self.pool)
        data = b""
        if values is not None:
            width = DTYPE_BITS[dtype] // 8
            data = b"".join(int(v).to_bytes(width, "little", signed=True) for v in values)
        node = self.op(
            name, "Const", [], [desc], {"value": Attr("t", TensorDef(desc=copy_desc(desc, self.pool), data=data))}
        )
        return node


@dataclass
class TransformerConfig:
    """Shape and structure choices; defaults are filled from the seed where left ``None``."""

    layers: int = 2
    batch: int = 1
    seq: int = 128
    hidden: int | None = None
    heads: int | None = None
    intermediate: int | None = None
    vocab: int = 32000
    tp: int | None = None  # tensor-parallel ranks (HCCL collectives when > 1)
    dtype: str = "DT_FLOAT16"
    norm: str = "mixed"  # "rms", "layer" or "mixed" (chosen per layer from the seed)
    tensor_moves: bool = True  # let the adapter insert its TensorMoves
    tensor_move_share: float = 0.0  # extra defensive TensorMoves until this fraction of all nodes is reached
    partition_every: int = 4  # MLP of every n-th layer in a PartitionedCall (0: never)
    with_if: bool = True  # final norm chosen by an If on a bool graph input
    return_cache: bool = True  # return every updated KV cache (outputs aliasing Variables)


def generate_transformer(
    layers: int | None = 2,
    seed: int = 0,
    *,
    nodes: int | None = None,
    **options: Any,
) -> Model:
    """A GE-style decoder graph with ``layers`` layers (or about ``nodes`` nodes when given), reproducible
    for a ``seed``. ``options`` are :class:`TransformerConfig` fields (``tp``, ``hidden``, ``heads``,
    ``tensor_moves``, ``tensor_move_share``, ``partition_every``, ``with_if``, ``norm`` ...)."""
    unknown = set(options) - set(TransformerConfig.__dataclass_fields__)
    if unknown:
        raise TypeError(f"unknown generator option(s): {', '.join(sorted(unknown))}")
    if nodes is None and (layers is None or layers < 1):
        raise ValueError("layers must be at least 1 (or give nodes)")
    cfg = TransformerConfig(layers=layers or 1, **options)
    if cfg.dtype not in DTYPE_BITS:
        raise ValueError(f"unknown dtype {cfg.dtype!r} (GE names such as DT_FLOAT16, DT_BF16, DT_FLOAT)")
    if min(cfg.seq, cfg.batch, cfg.vocab) < 1 or (cfg.tp is not None and cfg.tp < 1):
        raise ValueError("seq, batch, vocab and tp must be positive")
    rng = random.Random(seed)
    if cfg.hidden is None:
        cfg.hidden = rng.choice([1024, 2048, 4096])
    if cfg.heads is None:
        cfg.heads = cfg.hidden // 128 if cfg.hidden >= 2048 else 16
    if cfg.intermediate is None:
        cfg.intermediate = (cfg.hidden * 8 // 3 + 255) // 256 * 256
    if cfg.tp is None:
        cfg.tp = rng.choice([1, 2, 4, 8])
    if cfg.hidden % cfg.heads or cfg.heads % cfg.tp or cfg.intermediate % cfg.tp or cfg.vocab % cfg.tp:
        raise ValueError("hidden must divide by heads; heads, intermediate and vocab by tp")
    # Hundreds of thousands of small objects: the cyclic collector would rescan them over and over.
    with paused_gc():
        return _TransformerGen(cfg, rng, target_nodes=nodes).build()


class _TransformerGen:
    def __init__(self, cfg: TransformerConfig, rng: random.Random, target_nodes: int | None) -> None:
        self.cfg = cfg
        self.rng = rng
        self.target = target_nodes
        self.ids = [0]
        tp = cfg.tp or 1
        self.B, self.S, self.H = cfg.batch, cfg.seq, cfg.hidden or 1024
        self.nh = (cfg.heads or 16) // tp  # heads per rank
        self.D = self.H // (cfg.heads or 16)
        self.I = (cfg.intermediate or 2816) // tp
        self.V = cfg.vocab // tp
        self.dt = cfg.dtype
        self.model = Model(f"transformer_{cfg.layers}l")
        self.root = Graph("transformer")
        self.model.add_graph(self.root)
        self.pool = AttrPool()
        self.b = _Builder(self.root, self.ids, self.pool)
        self.outputs: list[Out] = []
        self.last_cache_write: Node | None = None

    # -- small helpers -----------------------------------------------------------------------------------
    def d(self, shape: list[int], dtype: str | None = None) -> TensorDesc:
        return make_desc(dtype or self.dt, shape, pool=self.pool)

    def tm(self, b: _Builder, name: str, src: Out) -> Out:
        """A TensorMove the adapter inserts (or ``src`` itself when TensorMoves are switched off)."""
        if not self.cfg.tensor_moves:
            return src
        desc = copy_desc(src[0].output_desc[src[1]], self.pool)
        return (b.op(name, "TensorMove", [src], [desc]), 0)

    def reshape(self, b: _Builder, name: str, src: Out, shape: list[int]) -> Out:
        c = b.const(f"{name}/shape", "DT_INT64", [len(shape)], values=shape)
        return (
            b.op(
                name,
                "Reshape",
                [src, (c, 0)],
                [self.d(shape, src[0].output_desc[src[1]].dtype)],
                {"axis": 0, "num_axes": -1},
            ),
            0,
        )

    def transpose(self, b: _Builder, name: str, src: Out, perm_const: Node, shape: list[int]) -> Out:
        return (b.op(name, "Transpose", [src, (perm_const, 0)], [self.d(shape)]), 0)

    def matmul(self, b: _Builder, name: str, x: Out, k: int, n: int) -> Out:
        nz = self.rng.random() < 0.5
        w = b.const(f"{name}/weight", self.dt, [k, n], fmt="FRACTAL_NZ" if nz else "ND")
        m = self.B * self.S
        attrs = {"transpose_x1": False, "transpose_x2": False, "offset_x": 0}
        return (b.op(name, "MatMul", [x, (w, 0)], [self.d([m, n])], attrs), 0)

    def norm(self, b: _Builder, name: str, x: Out, kind: str) -> Out:
        H = self.H
        shape = list(x[0].output_desc[x[1]].shape or [])
        stat = shape[:-1] + [1]
        gamma = b.const(f"{name}/gamma", self.dt, [H])
        if kind == "rms":
            outs = [self.d(shape), self.d(stat, "DT_FLOAT")]
            n = b.op(name, "RmsNorm", [x, (gamma, 0)], outs, {"epsilon": 1e-6})
        else:
            beta = b.const(f"{name}/beta", self.dt, [H])
            outs = [self.d(shape), self.d(stat, "DT_FLOAT"), self.d(stat, "DT_FLOAT")]
            attrs = {"begin_norm_axis": -1, "begin_params_axis": -1, "epsilon": 1e-5}
            n = b.op(name, "LayerNorm", [x, (gamma, 0), (beta, 0)], outs, attrs)
        return (n, 0)

    def split(self, b: _Builder, name: str, x: Out, dim: int, parts: list[int]) -> Node:
        """SplitD (equal parts) or SplitVD (explicit sizes), as frameworks lower torch.split/chunk."""
        shape = list(x[0].output_desc[x[1]].shape or [])
        outs = []
        for p in parts:
            s = list(shape)
            s[dim] = p
            outs.append(self.d(s))
        if len(set(parts)) == 1 and self.rng.random() < 0.5:
            attrs: dict[str, Any] = {"split_dim": dim, "num_split": len(parts)}
            return b.op(name, "SplitD", [x], outs, attrs)
        attrs = {"size_splits": list(parts), "split_dim": dim, "num_split": len(parts)}
        return b.op(name, "SplitVD", [x], outs, attrs)

    def allreduce(self, b: _Builder, name: str, x: Out) -> Out:
        """Sum over the tensor-parallel ranks: one HcomAllReduce, or (sequence-parallel style, about one
        site in four) HcomReduceScatter followed by HcomAllGather. HCCL writes its input in place, so the
        adapter copies it first."""
        tp = self.cfg.tp or 1
        if tp <= 1:
            return x
        x = self.tm(b, f"{name}/tensor_move", x)
        shape = list(x[0].output_desc[x[1]].shape or [])
        common = {"group": HCCL_WORLD_GROUP, "_ge_attr_op_kernel_lib_name": HCCL_KERNEL_LIB}
        if self.rng.random() < 0.25 and shape and shape[0] % tp == 0:
            part = [shape[0] // tp] + shape[1:]
            rs_attrs = {"reduction": "sum", "rank_size": tp, "fusion": 0, **common}
            rs = b.op(f"{name}/reduce_scatter", "HcomReduceScatter", [x], [self.d(part)], rs_attrs)
            ag_attrs = {"rank_size": tp, "fusion": 0, **common}
            return (b.op(f"{name}/all_gather", "HcomAllGather", [(rs, 0)], [self.d(shape)], ag_attrs), 0)
        desc = copy_desc(x[0].output_desc[x[1]], self.pool)
        attrs = {"reduction": "sum", "fusion": 1, "fusion_id": -1, **common}
        return (b.op(name, "HcomAllReduce", [x], [desc], attrs), 0)

    # -- structure ---------------------------------------------------------------------------------------
    def build(self) -> Model:
        B, S, H, D = self.B, self.S, self.H, self.D
        b = self.b
        cfg = self.cfg
        hidden = b.op("hidden_states", "Data", [], [self.d([B, S, H])], {"index": 0})
        hidden.input_desc = [self.d([B, S, H])]
        mask = b.op("attention_mask", "Data", [], [self.d([B, 1, S, S])], {"index": 1})
        mask.input_desc = [self.d([B, 1, S, S])]
        cos = b.op("rope_cos", "Data", [], [self.d([1, 1, S, D])], {"index": 2})
        cos.input_desc = [self.d([1, 1, S, D])]
        sin = b.op("rope_sin", "Data", [], [self.d([1, 1, S, D])], {"index": 3})
        sin.input_desc = [self.d([1, 1, S, D])]
        self.inputs = {"mask": (mask, 0), "cos": (cos, 0), "sin": (sin, 0)}
        # The adapter copies the caller's activations before the graph may write them.
        x = self.tm(b, "hidden_states/tensor_move", (hidden, 0))
        use_rms: Node | None = None
        if cfg.with_if:
            use_rms = b.op("use_rms_norm", "Data", [], [self.d([], "DT_BOOL")], {"index": 4})
            use_rms.input_desc = [self.d([], "DT_BOOL")]

        layer = 0
        while True:
            x = self.layer(layer, x)
            layer += 1
            if self.target is None:
                if layer >= cfg.layers:
                    break
            elif self.model.num_nodes() + self._tail_size(layer) >= self.target:
                break
        self.model.name = f"transformer_{layer}l"
        self.n_layers = layer

        if use_rms is not None:
            x = self.final_norm_if(x, (use_rms, 0))
        else:
            x = self.norm(b, "final_norm", x, "rms")
        x2 = self.reshape(b, "lm_head/reshape", x, [B * S, H])
        logits = self.matmul(b, "lm_head", x2, H, self.V)
        if (cfg.tp or 1) > 1:
            desc = self.d([B * S * (cfg.tp or 1), self.V])
            attrs = {
                "rank_size": cfg.tp,
                "group": HCCL_WORLD_GROUP,
                "fusion": 0,
                "_ge_attr_op_kernel_lib_name": HCCL_KERNEL_LIB,
            }
            logits = (b.op("lm_head/all_gather", "HcomAllGather", [logits], [desc], attrs), 0)
        outs = [logits] + self.outputs
        net = b.op("NetOutput", "NetOutput", outs, [copy_desc(s.output_desc[i], self.pool) for s, i in outs])
        net.output_desc = [copy_desc(d, self.pool) for d in net.input_desc]
        if cfg.tensor_move_share > 0:
            self.add_defensive_tensor_moves(cfg.tensor_move_share)
        self.renumber()
        for g in self.model.graphs:  # nodes were appended directly: drop any consumer index built on the way
            g.invalidate()
        return self.model

    def renumber(self) -> None:
        """GE-style topological ids: pre-order over graphs, a wrapper's subgraph nodes right after it."""
        counter = 0

        def walk(g: Graph) -> None:
            nonlocal counter
            for n in g.nodes.values():
                n.id = counter
                counter += 1
                for s in n.subgraph_names:
                    walk(self.model.graph(s))

        walk(self.root)

    def _tail_size(self, layers: int) -> int:
        # Nodes added after the last layer: final norm (+If branches), lm_head, gather, NetOutput.
        return 16

    def layer(self, i: int, x: Out) -> Out:
        b = self.b
        B, S, H, D, nh = self.B, self.S, self.H, self.D, self.nh
        p = f"layer{i}"
        cfg = self.cfg
        kind = cfg.norm if cfg.norm in ("rms", "layer") else self.rng.choice(["rms", "rms", "layer"])
        y = self.norm(b, f"{p}/input_norm", x, kind)
        y2 = self.reshape(b, f"{p}/attn/reshape_in", y, [B * S, H])
        qkv = self.matmul(b, f"{p}/attn/qkv_proj", y2, H, 3 * nh * D)
        sp = self.split(b, f"{p}/attn/split_qkv", qkv, 1, [nh * D] * 3)
        perm = b.const(f"{p}/attn/perm", "DT_INT64", [4], values=[0, 2, 1, 3])
        heads = []
        for j, t in enumerate("qkv"):
            r = self.reshape(b, f"{p}/attn/{t}_reshape", (sp, j), [B, S, nh, D])
            heads.append(self.transpose(b, f"{p}/attn/{t}_transpose", r, perm, [B, nh, S, D]))
        q, k, v = heads
        for t in ("q", "k"):
            src = q if t == "q" else k
            c = b.op(f"{p}/attn/{t}_rope_cos", "Mul", [src, self.inputs["cos"]], [self.d([B, nh, S, D])])
            s = b.op(f"{p}/attn/{t}_rope_sin", "Mul", [src, self.inputs["sin"]], [self.d([B, nh, S, D])])
            r = (b.op(f"{p}/attn/{t}_rope", "Add", [(c, 0), (s, 0)], [self.d([B, nh, S, D])]), 0)
            if t == "q":
                q = r
            else:
                k = r
        # KV cache: Variables updated in place by Assign; attention reads the written cache back.
        cached = []
        writes = []
        for t, val in (("k", k), ("v", v)):
            var = b.op(f"{p}/attn/{t}_cache", "Variable", [], [self.d([B, nh, S, D])])
            val = self.tm(b, f"{p}/attn/{t}_cache_update/tensor_move", val)
            ctrl = [self.last_cache_write] if self.last_cache_write is not None else None
            attrs: dict[str, Any] = _name_attrs(["ref", "value"], ["ref"])
            attrs["reference"] = Attr("b", True)
            w = b.op(f"{p}/attn/{t}_cache_update", "Assign", [(var, 0), val], [self.d([B, nh, S, D])], attrs, ctrl)
            self.last_cache_write = w
            writes.append(w)
            cached.append((w, 0))
            if cfg.return_cache:
                self.outputs.append(self.tm(b, f"{p}/attn/{t}_cache_out/tensor_move", (w, 0)))
        kc, vc = cached
        scores = b.op(
            f"{p}/attn/scores", "BatchMatMul", [q, kc], [self.d([B, nh, S, S])], {"adj_x1": False, "adj_x2": True}
        )
        scale = b.const(f"{p}/attn/scale", self.dt, [])
        sc = b.op(f"{p}/attn/scale_mul", "Mul", [(scores, 0), (scale, 0)], [self.d([B, nh, S, S])])
        masked = b.op(f"{p}/attn/mask_add", "Add", [(sc, 0), self.inputs["mask"]], [self.d([B, nh, S, S])])
        up = b.op(
            f"{p}/attn/cast_fp32",
            "Cast",
            [(masked, 0)],
            [self.d([B, nh, S, S], "DT_FLOAT")],
            {"dst_type": GE_DATATYPE_NUMBER["DT_FLOAT"], "truncate": False},
        )
        probs = b.op(f"{p}/attn/softmax", "Softmax", [(up, 0)], [self.d([B, nh, S, S], "DT_FLOAT")], {"axes": [-1]})
        down = b.op(
            f"{p}/attn/cast_back",
            "Cast",
            [(probs, 0)],
            [self.d([B, nh, S, S])],
            {"dst_type": GE_DATATYPE_NUMBER.get(self.dt, 1), "truncate": False},
        )
        ctx = b.op(
            f"{p}/attn/context",
            "BatchMatMul",
            [(down, 0), vc],
            [self.d([B, nh, S, D])],
            {"adj_x1": False, "adj_x2": False},
        )
        if self.rng.random() < 0.5:
            t = self.transpose(b, f"{p}/attn/merge_transpose", (ctx, 0), perm, [B, S, nh, D])
            merged = self.reshape(b, f"{p}/attn/merge_reshape", t, [B * S, nh * D])
        else:
            # Per-head gating (heads split apart, scaled one by one) and the heads concatenated back along
            # the head axis before the usual transpose/reshape merge.
            parts = self.split(b, f"{p}/attn/split_heads", (ctx, 0), 1, [1] * nh)
            gated = []
            for j in range(nh):
                scale = round(0.5 + self.rng.random(), 3)
                gate = b.op(f"{p}/attn/head{j}_gate", "Muls", [(parts, j)], [self.d([B, 1, S, D])], {"value": scale})
                gated.append((gate, 0))
            ctype = self.rng.choice(["ConcatD", "ConcatV2D"])
            cat = b.op(f"{p}/attn/concat_heads", ctype, gated, [self.d([B, nh, S, D])], {"concat_dim": 1, "N": nh})
            t = self.transpose(b, f"{p}/attn/merge_transpose", (cat, 0), perm, [B, S, nh, D])
            merged = self.reshape(b, f"{p}/attn/merge_reshape", t, [B * S, nh * D])
        o = self.matmul(b, f"{p}/attn/o_proj", merged, nh * D, H)
        o = self.allreduce(b, f"{p}/attn/all_reduce", o)
        o3 = self.reshape(b, f"{p}/attn/reshape_out", o, [B, S, H])
        h = (b.op(f"{p}/attn/residual", "Add", [x, o3], [self.d([B, S, H])]), 0)

        y = self.norm(b, f"{p}/post_norm", h, kind)
        y2 = self.reshape(b, f"{p}/mlp/reshape_in", y, [B * S, H])
        if cfg.partition_every and i % cfg.partition_every == cfg.partition_every - 1:
            m = self.mlp_partitioned_call(f"{p}/mlp", y2)
        else:
            m = self.mlp(b, f"{p}/mlp", y2)
        m = self.allreduce(b, f"{p}/mlp/all_reduce", m)
        m3 = self.reshape(b, f"{p}/mlp/reshape_out", m, [B, S, H])
        return (b.op(f"{p}/mlp/residual", "Add", [h, m3], [self.d([B, S, H])]), 0)

    def mlp(self, b: _Builder, p: str, y2: Out) -> Out:
        M, H, inter = self.B * self.S, self.H, self.I
        gu = self.matmul(b, f"{p}/gate_up_proj", y2, H, 2 * inter)
        sp = self.split(b, f"{p}/split_gate_up", gu, 1, [inter, inter])
        sig = b.op(f"{p}/sigmoid", "Sigmoid", [(sp, 0)], [self.d([M, inter])])
        silu = b.op(f"{p}/silu", "Mul", [(sp, 0), (sig, 0)], [self.d([M, inter])])
        prod = b.op(f"{p}/gate_mul", "Mul", [(silu, 0), (sp, 1)], [self.d([M, inter])])
        return self.matmul(b, f"{p}/down_proj", (prod, 0), inter, H)

    def mlp_partitioned_call(self, p: str, y2: Out) -> Out:
        """The MLP body in a subgraph owned by a PartitionedCall (input 0 -> Data, NetOutput -> output 0)."""
        M, H = self.B * self.S, self.H
        call_name = f"{p}/partitioned_call"
        sub = Graph(f"{p.replace('/', '_')}_partition")
        self.model.add_graph(sub)
        call = self.b.op(call_name, "PartitionedCall", [y2], [self.d([M, H])])
        call.subgraph_names = [sub.name]
        sb = _Builder(sub, self.ids, self.pool)
        data = sb.op(f"{p}/sub/input0", "Data", [], [self.d([M, H])], {"index": 0, "_parent_node_index": 0})
        data.input_desc = [self.d([M, H])]
        out = self.mlp(sb, f"{p}/sub", (data, 0))
        net = sb.op(f"{p}/sub/NetOutput", "NetOutput", [out], [copy_desc(out[0].output_desc[out[1]], self.pool)])
        net.input_desc[0].attrs["_parent_node_index"] = Attr("i", 0)
        return (call, 0)

    def final_norm_if(self, x: Out, cond: Out) -> Out:
        """``If(cond, x)``: then-branch RmsNorm, else-branch LayerNorm; branch Data read parent input 1."""
        shape = list(x[0].output_desc[x[1]].shape or [])
        names = ("final_norm_then", "final_norm_else")
        node = self.b.op("final_norm/if", "If", [cond, x], [self.d(shape)])
        node.subgraph_names = list(names)
        for gname, kind in zip(names, ("rms", "layer")):
            g = Graph(gname)
            self.model.add_graph(g)
            sb = _Builder(g, self.ids, self.pool)
            data = sb.op(f"{gname}/input1", "Data", [], [self.d(shape)], {"index": 0, "_parent_node_index": 1})
            data.input_desc = [self.d(shape)]
            y = self.norm(sb, f"{gname}/norm", (data, 0), kind)
            net = sb.op(f"{gname}/NetOutput", "NetOutput", [y], [copy_desc(y[0].output_desc[y[1]], self.pool)])
            net.input_desc[0].attrs["_parent_node_index"] = Attr("i", 0)
        return (node, 0)

    def add_defensive_tensor_moves(self, share: float) -> None:
        """Insert TensorMoves on random root data edges until they make up ``share`` of all nodes."""
        g = self.root
        total = self.model.num_nodes()
        have = sum(1 for n in self.model.all_nodes() if n.type == "TensorMove")
        # n_tm / (total + extra) >= share  <=>  extra >= (share * total - n_tm) / (1 - share)
        need = max(0, math.ceil((share * total - have) / (1.0 - share)))
        if need == 0:
            return
        edges = [
            (n.name, i)
            for n in g.nodes.values()
            if n.type not in ("TensorMove", "NetOutput")
            for i, a in enumerate(n.inputs)
            if a is not None and g.nodes[a[0]].type not in ("Const", "Variable")
        ]
        chosen = sorted(self.rng.sample(range(len(edges)), min(need, len(edges))))
        after: dict[str, list[Node]] = {}
        for k, e in enumerate(chosen):
            dst, di = edges[e]
            node = g.nodes[dst]
            src = node.inputs[di]
            assert src is not None
            tm = Node(name=f"{dst}/input{di}/defensive_tensor_move_{k}", type="TensorMove")
            tm.inputs = [src]
            tm.input_desc = [copy_desc(node.input_desc[di], self.pool)]
            tm.output_desc = [copy_desc(node.input_desc[di], self.pool)]
            tm.id = self.ids[0]
            self.ids[0] += 1
            tm.graph = g
            node.inputs[di] = (tm.name, 0)
            after.setdefault(src[0], []).append(tm)
        # Rebuild the node order once: each TensorMove right after its producer keeps the list topological.
        order: dict[str, Node] = {}
        for name, node in g.nodes.items():
            order[name] = node
            for tm in after.get(name, ()):
                order[tm.name] = tm
        g.nodes = order
        g.invalidate()


def count_types(model: Model) -> dict[str, int]:
    """Node count per op type over all graphs (handy for reports and tests)."""
    counts: dict[str, int] = {}
    for n in model.all_nodes():
        counts[n.type] = counts.get(n.type, 0) + 1
    return counts

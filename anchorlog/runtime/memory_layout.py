"""Where no-padding continuous memory puts each tensor — GE's memory-assigner side of the no-task passes.

A Concat marked no-task (``_no_padding_continuous_input`` + ``_output_reuse_input``, continuous type
``kTypeInputNoPadding``) owns no output buffer: its inputs are laid end to end, without padding, in one block
that starts at input 0's producer buffer, and its output *is* that block. The Split-like counterpart
(``_no_padding_continuous_output`` + ``_output_reuse_input``, ``kTypeOutputNoPadding``) cuts its input 0's
buffer into consecutive outputs. This module computes, as GraphMemAssigner does:

* per input (output) of such a node: its offset inside the block, its no-padding size (the bytes actually
  holding data, dims before ``_reuse_input_on_dim_index`` folded to 1) and its full tensor size;
* the block's size (no-padding sizes + the padding the pieces' own sizes would have needed, 512-aligned);
* the cascaded lifetime start of continuous inputs (BlockMemAssigner's GetContinuousNodeLifeTimeBegin):
  producers feeding a chain of no-padding concats live from the earliest producer of the whole cascade.

:func:`layout_facts` returns these as relations; :func:`add_layout_facts` loads them into a fact database so
the memory simulator and the sanitizer can place real buffers.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from anchorlog.analysis.formats import bytes_of, element_count
from anchorlog.facts.graph import Graph, Model, Node, TensorDesc

# GE attribute strings (reference appendix A).
ATTR_NOTASK = "_no_task"
ATTR_NOPADDING_CONTINUOUS_INPUT = "_no_padding_continuous_input"
ATTR_NOPADDING_CONTINUOUS_OUTPUT = "_no_padding_continuous_output"
ATTR_OUTPUT_REUSE_INPUT = "_output_reuse_input"
ATTR_REUSE_INPUT_ON_DIM_INDEX = "_reuse_input_on_dim_index"
ATTR_CONTINUOUS_INPUT = "continuous_input"
ATTR_CONTINUOUS_OUTPUT = "continuous_output"

# GraphMemAssigner's ContinuousType bits.
TYPE_INPUT = 1
TYPE_INPUT_NOPADDING = 2
TYPE_OUTPUT = 4
TYPE_OUTPUT_NOPADDING = 8

MEM_ALIGN_SIZE = 512  # GE's MEM_ALIGN_SIZE: the granule every block offset is rounded to
TENSOR_ALIGN = 32  # GE's MEMORY_ALIGN_SIZE for tensor sizes
MAX_CASCADE_DEPTH = 100  # BlockMemAssigner's kMaxDepthNum guard


def _true(node: Node, key: str) -> bool:
    return bool(node.attr(key, False))


def continuous_type(node: Node) -> int:
    """GE's GetContinuousMemoryType: padded continuity wins over the no-padding flavour on each side, and a
    no-padding side counts only together with ``_output_reuse_input``."""
    t = 0
    if _true(node, ATTR_CONTINUOUS_INPUT):
        t |= TYPE_INPUT
    elif _true(node, ATTR_NOPADDING_CONTINUOUS_INPUT) and _true(node, ATTR_OUTPUT_REUSE_INPUT):
        t |= TYPE_INPUT_NOPADDING
    if _true(node, ATTR_CONTINUOUS_OUTPUT):
        t |= TYPE_OUTPUT
    elif _true(node, ATTR_NOPADDING_CONTINUOUS_OUTPUT) and _true(node, ATTR_OUTPUT_REUSE_INPUT):
        t |= TYPE_OUTPUT_NOPADDING
    return t


def raw_size(shape: list[int] | None, dtype: str) -> int:
    """``TensorUtils::CalcTensorMemSize`` for a dense tensor: elements × element size (storage shape)."""
    return bytes_of(element_count(shape), dtype)


def tensor_size(desc: TensorDesc) -> int:
    """The tensor's memory size: the descriptor's ``size`` when the compile set it, else GE's default op
    output size (data size rounded up to 32 bytes plus one 32-byte guard)."""
    if desc.size and desc.size > 0:
        return desc.size
    raw = raw_size(desc.shape, desc.dtype)
    if raw < 0:
        return -1
    return (raw + 2 * TENSOR_ALIGN - 1) // TENSOR_ALIGN * TENSOR_ALIGN


def nopadding_size(desc: TensorDesc, dim_index: int) -> int:
    """GE's CalculateTensorRealSizeAndOutSize: the data bytes of one piece when the pieces are cut along
    ``dim_index`` (dims in front of it folded to 1). -1 when ``dim_index`` is out of range or a dim unknown."""
    dims = list(desc.shape or [])
    if dim_index != 0 and dim_index >= len(dims):
        return -1
    for i in range(dim_index):
        dims[i] = 1
    return raw_size(dims, desc.dtype)


def _align(v: int, granule: int) -> int:
    return (v + granule - 1) // granule * granule if v > 0 else v


@dataclass
class Piece:
    """One tensor inside a no-padding block: input (or output) ``index`` of the continuous node, the
    producer anchor whose buffer it is, its byte offset from the block start and its sizes."""

    index: int
    src: str
    src_out: int
    offset: int
    nopadding_size: int
    tensor_size: int


@dataclass
class NoPaddingBlock:
    """The block of a no-padding continuous node (inputs for a no-task Concat, outputs for a no-task Split)."""

    graph: str
    node: str
    kind: str  # "input" (kTypeInputNoPadding) or "output" (kTypeOutputNoPadding)
    dim_index: int
    pieces: list[Piece]
    nopadding_total: int  # bytes holding data
    block_size: int  # what the assigner reserves: data + the pieces' own padding, 512-aligned

    def as_dict(self) -> dict[str, Any]:
        return {
            "graph": self.graph,
            "node": self.node,
            "kind": self.kind,
            "dim_index": self.dim_index,
            "nopadding_total": self.nopadding_total,
            "block_size": self.block_size,
            "pieces": [vars(p) for p in self.pieces],
        }


def _dim_index(node: Node) -> int | None:
    v = node.attr(ATTR_REUSE_INPUT_ON_DIM_INDEX)
    return int(v) if v is not None else None


def nopadding_input_block(graph: Graph, node: Node) -> NoPaddingBlock | None:
    """Offsets of each connected input of a kTypeInputNoPadding node (AssignContinuousInputMemory): input 0's
    producer buffer starts the block, every next input follows the previous one's no-padding size; the
    node's output reuses input 0, i.e. offset 0. None for other nodes, or when GE would fail (no dim index)."""
    if not continuous_type(node) & TYPE_INPUT_NOPADDING:
        return None
    dim = _dim_index(node)
    if dim is None:
        return None
    pieces: list[Piece] = []
    offset = extra = 0
    for i, src in enumerate(node.inputs):
        if src is None or src[0] not in graph.nodes:
            continue
        producer = graph.nodes[src[0]]
        desc = producer.output_desc[src[1]] if src[1] < len(producer.output_desc) else TensorDesc()
        nop, full = nopadding_size(desc, dim), tensor_size(desc)
        if nop < 0 or full < 0:
            return None
        pieces.append(Piece(i, src[0], src[1], offset, nop, full))
        offset += nop
        extra += full - nop
    return NoPaddingBlock(graph.name, node.name, "input", dim, pieces, offset, _align(offset + extra, MEM_ALIGN_SIZE))


def nopadding_output_block(graph: Graph, node: Node) -> NoPaddingBlock | None:
    """Offsets of each output of a kTypeOutputNoPadding node (AssignContinuousOutputMemory): the outputs cut
    input 0's producer buffer one after another, each advancing by its no-padding size."""
    if not continuous_type(node) & TYPE_OUTPUT_NOPADDING:
        return None
    dim = _dim_index(node)
    if dim is None:
        return None
    src = node.inputs[0] if node.inputs else None
    pieces: list[Piece] = []
    offset = 0
    for k, desc in enumerate(node.output_desc):
        nop, full = nopadding_size(desc, dim), tensor_size(desc)
        if nop < 0 or full < 0:
            return None
        pieces.append(Piece(k, src[0] if src else "", src[1] if src else -1, offset, nop, full))
        offset += nop
    return NoPaddingBlock(graph.name, node.name, "output", dim, pieces, offset, _align(offset, MEM_ALIGN_SIZE))


def all_nopadding_blocks(model: Model) -> Iterator[NoPaddingBlock]:
    for g in model.graphs:
        for n in g.nodes.values():
            for blk in (nopadding_input_block(g, n), nopadding_output_block(g, n)):
                if blk is not None:
                    yield blk


# ------------------------------------------------------------------------ cascaded lifetime beginnings


def all_nodes_order(model: Model) -> list[tuple[Graph, Node]]:
    """GE's ``ComputeGraph::GetAllNodes`` order: a node, then (recursively) its subgraphs' nodes, then the next."""
    out: list[tuple[Graph, Node]] = []
    seen: set[str] = set()

    def walk(g: Graph) -> None:
        if g.name in seen:
            return
        seen.add(g.name)
        for n in list(g.nodes.values()):
            out.append((g, n))
            for sg in model.subgraphs_of(n):
                walk(sg)

    if model.graphs:
        walk(model.root)
    for g in model.graphs:  # graphs no node owns still get visited, after the reachable ones
        walk(g)
    return out


def _topo_id(node: Node, fallback: dict[str, int]) -> int:
    return node.id if node.id is not None else fallback[node.name]


def continuous_lifetime_begin(model: Model) -> dict[tuple[str, str], int]:
    """BlockMemAssigner's cascade_min_life_time_: (graph, node) → the topological id its memory must be
    considered alive from. For a no-padding concat j the entry is the smallest id among the non-continuous
    producers reachable through its chain of no-padding continuous inputs; each such producer feeding an
    input 0 somewhere in the chain inherits j's value (its buffer *is* the block's start). Order-sensitive
    exactly as GE: nodes are visited in GetAllNodes order and later visits overwrite."""
    order = all_nodes_order(model)
    fallback = {n.name: i for i, (_, n) in enumerate(order)}
    life: dict[tuple[str, str], int] = {}

    def producers(g: Graph, node: Node) -> Iterator[tuple[int, Node]]:
        for i, a in enumerate(node.inputs):
            if a is not None and a[0] in g.nodes:
                yield i, g.nodes[a[0]]

    def collect(g: Graph, org: Node, node: Node, index: int, depth: int) -> None:
        depth += 1
        if depth > MAX_CASCADE_DEPTH:
            return
        if _true(node, ATTR_NOPADDING_CONTINUOUS_INPUT):
            for i, p in producers(g, node):
                collect(g, org, p, i, depth)
            if org is node:
                spread(g, node, node, 0)
            return
        if depth < 2:  # org itself is not a continuous-input node
            return
        nid = _topo_id(node, fallback)
        key = (g.name, org.name)
        if key not in life or nid < life[key]:
            life[key] = nid
        if index == 0:
            life[(g.name, node.name)] = nid

    def spread(g: Graph, org: Node, node: Node, depth: int) -> None:
        depth += 1
        if depth > MAX_CASCADE_DEPTH:
            return
        if _true(node, ATTR_NOPADDING_CONTINUOUS_INPUT):
            for _, p in producers(g, node):
                spread(g, org, p, depth)
            return
        key = (g.name, node.name)
        if key in life and (g.name, org.name) in life:
            life[key] = life[(g.name, org.name)]

    for g, n in order:
        collect(g, n, n, 0, 0)
    return life


# ------------------------------------------------------------------------------------------------ facts

LAYOUT_RELATIONS: dict[str, tuple[str, ...]] = {
    # one row per tensor placed inside a no-padding block
    "nopad_piece": ("graph", "node", "kind", "idx", "src", "src_out", "offset", "nopadding_size", "tensor_size"),
    # one row per no-padding continuous node
    "nopad_block": ("graph", "node", "kind", "dim_index", "nopadding_total", "block_size"),
    # cascaded lifetime start (topological id) of continuous-input producers and of the concats themselves
    "cont_life_begin": ("graph", "node", "begin"),
}


def layout_facts(model: Model) -> dict[str, list[tuple]]:
    """The layout of every no-padding continuous node in ``model`` as rows of :data:`LAYOUT_RELATIONS`."""
    pieces, blocks = [], []
    for b in all_nopadding_blocks(model):
        blocks.append((b.graph, b.node, b.kind, b.dim_index, b.nopadding_total, b.block_size))
        for p in b.pieces:
            pieces.append(
                (b.graph, b.node, b.kind, p.index, p.src, p.src_out, p.offset, p.nopadding_size, p.tensor_size)
            )
    life = [(g, n, v) for (g, n), v in sorted(continuous_lifetime_begin(model).items())]
    return {"nopad_piece": pieces, "nopad_block": blocks, "cont_life_begin": life}


def add_layout_facts(conn: Any, model: Model) -> dict[str, int]:
    """(Re)create the layout relations in the sqlite connection ``conn`` (e.g. ``FactDB.conn``); returns row
    counts per relation."""
    facts = layout_facts(model)
    counts = {}
    for rel, cols in LAYOUT_RELATIONS.items():
        conn.execute(f'DROP TABLE IF EXISTS "{rel}"')
        conn.execute(f'CREATE TABLE "{rel}" ({", ".join(cols)})')
        rows = facts[rel]
        if rows:
            conn.executemany(f'INSERT INTO "{rel}" VALUES ({", ".join("?" * len(cols))})', rows)
        counts[rel] = len(rows)
    return counts

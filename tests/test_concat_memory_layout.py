"""Memory linkage of no-task concats: offsets inside the no-padding block, sizes, cascaded lifetime begin."""

from __future__ import annotations

from anchorlog.analysis.concat_notask import ConcatNotaskAnalysis
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Node, TensorDesc
from anchorlog.facts.relations import FactDB
from anchorlog.runtime import memory_layout as ML


def td(shape, dtype="DT_FLOAT16", size=0) -> TensorDesc:
    t = TensorDesc(dtype=dtype, shape=list(shape), layout="ND", size=size)
    t.set_attr("origin_format", "ND")
    t.set_attr("origin_shape", list(shape))
    return t


def mark(node: Node, dim: int = 0) -> None:
    node.set_attr("_no_padding_continuous_input", True)
    node.set_attr("_output_reuse_input", True)
    node.set_attr("_reuse_input_on_dim_index", dim)


def concat_of(b: GraphBuilder, name: str, srcs: list[str], shapes: list[list[int]]) -> Node:
    n = b.node(f"{name}:ConcatD", inputs=len(srcs))
    for i, (s, shp) in enumerate(zip(srcs, shapes)):
        b.graph.nodes[s].output_desc[0] = td(shp)
        b.edge(s, 0, name, i)
    n.input_desc = [td(s) for s in shapes]
    return n


def test_sizes():
    d = td([2, 16])
    assert ML.raw_size(d.shape, d.dtype) == 64
    assert ML.tensor_size(d) == 96  # 32-aligned data + one 32-byte guard
    assert ML.tensor_size(td([3, 5])) == 64  # 30 -> 32 + 32
    assert ML.tensor_size(td([2, 16], size=512)) == 512  # the compile's size wins
    assert ML.nopadding_size(td([4, 3, 8]), 1) == 3 * 8 * 2  # dims in front of the cut are one piece
    assert ML.nopadding_size(td([4, 3]), 5) == -1


def test_continuous_type():
    n = Node("c", "ConcatD")
    assert ML.continuous_type(n) == 0
    n.set_attr("_no_padding_continuous_input", True)
    assert ML.continuous_type(n) == 0  # needs _output_reuse_input too
    n.set_attr("_output_reuse_input", True)
    assert ML.continuous_type(n) == ML.TYPE_INPUT_NOPADDING
    n.set_attr("continuous_input", True)  # padded continuity wins
    assert ML.continuous_type(n) == ML.TYPE_INPUT
    s = Node("s", "SplitD")
    s.set_attr("_no_padding_continuous_output", True)
    s.set_attr("_output_reuse_input", True)
    assert ML.continuous_type(s) == ML.TYPE_OUTPUT_NOPADDING


def test_input_block_offsets_follow_nopadding_sizes():
    b = GraphBuilder("g")
    for i in range(3):
        b.chain(f"d{i}:Data", f"r{i}:ReLU")
    c = concat_of(b, "cat", ["r0", "r1", "r2"], [[1, 16], [3, 16], [2, 16]])
    mark(c)
    blk = ML.nopadding_input_block(b.graph, c)
    assert [(p.src, p.offset, p.nopadding_size, p.tensor_size) for p in blk.pieces] == [
        ("r0", 0, 32, 64),
        ("r1", 32, 96, 128),
        ("r2", 128, 64, 96),
    ]
    assert blk.nopadding_total == 192
    assert blk.block_size == 512  # 192 data + 96 padding of the pieces, 512-aligned


def test_unconnected_inputs_take_no_room_and_unmarked_nodes_have_no_block():
    b = GraphBuilder("g")
    b.chain("d0:Data", "r0:ReLU")
    b.chain("d1:Data", "r1:ReLU")
    c = concat_of(b, "cat", ["r0", "r1"], [[1, 16], [1, 16]])
    assert ML.nopadding_input_block(b.graph, c) is None
    mark(c)
    b.graph.disconnect("cat", 0)
    blk = ML.nopadding_input_block(b.graph, c)
    assert [(p.index, p.offset) for p in blk.pieces] == [(1, 0)]


def test_missing_dim_index_means_no_layout():
    b = GraphBuilder("g")
    b.chain("d0:Data", "r0:ReLU")
    c = concat_of(b, "cat", ["r0"], [[1, 16]])
    c.set_attr("_no_padding_continuous_input", True)
    c.set_attr("_output_reuse_input", True)
    assert ML.nopadding_input_block(b.graph, c) is None


def test_output_block_of_nopadding_split():
    b = GraphBuilder("g")
    b.chain("d0:Data", "r0:ReLU")
    s = b.node("split:SplitD", inputs=1, outputs=3)
    b.edge("r0", 0, "split", 0)
    s.output_desc = [td([2, 8]), td([1, 8]), td([1, 8])]
    s.set_attr("_no_padding_continuous_output", True)
    s.set_attr("_output_reuse_input", True)
    s.set_attr("_reuse_input_on_dim_index", 0)
    blk = ML.nopadding_output_block(b.graph, s)
    assert blk.kind == "output"
    assert [(p.index, p.src, p.offset, p.nopadding_size) for p in blk.pieces] == [
        (0, "r0", 0, 32),
        (1, "r0", 32, 16),
        (2, "r0", 48, 16),
    ]


def test_cascaded_lifetime_begin_follows_ge_example():
    """a b c -> d e f -> h (no-padding concat) ; g h i -> j (no-padding concat): g's memory must live from
    the earliest of d/e/f, because d/e/f's memory is replaced by the cascade's block."""
    b = GraphBuilder("g")
    for name in ["a", "b", "c", "g", "i"]:
        b.chain(f"{name}:Data")
    for src, name in [("a", "d"), ("b", "e"), ("c", "f")]:
        b.chain(src, f"{name}:ReLU")
    h = concat_of(b, "h", ["d", "e", "f"], [[1, 16]] * 3)
    b.chain("g", "g_r:ReLU")
    b.chain("i", "i_r:ReLU")
    j = concat_of(b, "j", ["g_r", "h", "i_r"], [[1, 16], [3, 16], [1, 16]])
    mark(h)
    mark(j)
    m = b.build()
    ids = {n.name: n.id for n in m.root.nodes.values()}
    life = ML.continuous_lifetime_begin(m)
    earliest = min(ids["d"], ids["e"], ids["f"], ids["g_r"], ids["i_r"])
    assert life[("g", "j")] == earliest
    assert life[("g", "g_r")] == earliest  # input 0 of the outer concat: the block's start
    assert life[("g", "d")] == earliest  # input 0 of the inner concat
    assert ("g", "e") not in life  # only first inputs get an entry
    assert life[("g", "h")] == min(ids["d"], ids["e"], ids["f"])


def test_layout_facts_in_the_fact_database():
    b = GraphBuilder("g")
    b.chain("d0:Data", "r0:ReLU")
    b.chain("d1:Data", "r1:ReLU")
    concat_of(b, "cat", ["r0", "r1"], [[1, 16], [1, 16]])
    b.node("cat").output_desc = [td([2, 16])]
    m = b.build()
    ConcatNotaskAnalysis(m).run()
    db = FactDB.from_model(m)
    counts = ML.add_layout_facts(db.conn, m)
    assert counts["nopad_block"] == 1
    rows = db.conn.execute("SELECT src, offset, nopadding_size FROM nopad_piece ORDER BY idx").fetchall()
    assert rows == [("r0", 0, 32), ("r1", 32, 32)]
    life = dict(((n, v) for _, n, v in db.conn.execute("SELECT * FROM cont_life_begin")))
    assert life["cat"] == life["r0"] == min(m.root.nodes["r0"].id, m.root.nodes["r1"].id)

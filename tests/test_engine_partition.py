"""engine-partition (GE EnginePartitioner partition + merge): every consumer list comes back in topological order,
and what that does to the order-sensitive layout decisions of a whole compile (o3)."""

from __future__ import annotations

from anchorlog.analysis import engine_partition, pipelines
from anchorlog.analysis.fact_cache import shared_facts
from anchorlog.analysis.layout_conflict import run as run_layout
from anchorlog.analysis.order import dfs_topo_order, ge_graph_nodes, topological_sorting
from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model
from anchorlog.facts.relations import FactDB

P2P = 17  # RT_MEMORY_P2P_DDR
TS = 64  # RT_MEMORY_TS


def rts_in_pair() -> Model:
    """GE ST BuildRtsSpecialInAndOtherTypeGraph: op1 feeds a P2P-input hcom (linked first) and a TS-input
    MemcpyAsync (linked second)."""
    b = GraphBuilder("g1")
    b.chain("op1:ReLU", "hcom:HcomBroadcast")
    b.chain("op1", "rtMemCpyAsync:MemcpyAsync")
    b.attr("hcom", "_input_memory_type", [P2P])
    b.attr("rtMemCpyAsync", "_input_memory_type", [TS])
    return b.build()


def continuous_mix() -> Model:
    """GE ST BuildContinuousInAndNoPaddingContinuousInMixGraph: a and b feed a continuous-input hcom (linked
    first) and a no-padding PhonyConcat (linked second) whose output feeds a continuous Concat."""
    b = GraphBuilder("g1", shape=(1, 1, 112, 448))
    b.chain("a:ReLU", "hcom:HcomAllGather")
    b.chain("b:ReLU", "hcom")
    b.chain("hcom", "e:ReLU", "netoutput:NetOutput")
    b.chain("a", "phonyconcat:PhonyConcat")
    b.chain("b", "phonyconcat")
    b.chain("c:ReLU", "concat3:Concat")
    b.chain("phonyconcat", "concat3")
    b.chain("d:ReLU", "concat3", "netoutput")
    b.attr("hcom", "continuous_input", True)
    b.attr("phonyconcat", "_no_padding_continuous_input", True)
    b.reuse_input("phonyconcat", 0, 0)
    b.out_desc("phonyconcat", 0, shape=[1, 1, 224, 448])
    b.attr("concat3", "continuous_input", True)
    return b.build()


def copy_before(m: Model, node: str, idx: int) -> bool:
    n = m.find_node(node)
    src = n.inputs[idx]
    return src is not None and n.graph.nodes[src[0]].type == "Identity"


def test_consumers_follow_the_topological_order_after_the_merge() -> None:
    m = rts_in_pair()
    g = m.root
    assert [d for d, _ in g.consumers("op1", 0)] == ["hcom", "rtMemCpyAsync"]
    # GE's DFS pops the last-linked consumer first: the cut re-creates the edges in that order
    assert [n.name for n in dfs_topo_order(g)] == ["op1", "rtMemCpyAsync", "hcom"]
    rep = engine_partition.run(m, PassContext())
    assert rep == {"relinked": ["g1"]}
    assert [d for d, _ in g.consumers("op1", 0)] == ["rtMemCpyAsync", "hcom"]
    # so the next sort (the one the layout pass makes) swaps the siblings back
    assert [n.name for n in dfs_topo_order(g)] == ["op1", "hcom", "rtMemCpyAsync"]


def test_a_sort_remembered_before_the_cut_is_forgotten() -> None:
    m = rts_in_pair()
    topological_sorting(m)  # remembered, as a pass before the cut leaves it
    assert [n.name for n in ge_graph_nodes(m, m.root)] == ["op1", "rtMemCpyAsync", "hcom"]
    engine_partition.run(m, PassContext())
    # the order GE walks next is the sort of the new links, not the one remembered from the old links
    assert [n.name for n in ge_graph_nodes(m, m.root)] == ["op1", "hcom", "rtMemCpyAsync"]


def test_a_graph_already_in_topological_order_is_left_alone() -> None:
    b = GraphBuilder("g")
    b.chain("a:ReLU", "b:ReLU", "c:ReLU")
    m = b.build()
    assert engine_partition.run(m, PassContext()) == {"relinked": []}
    assert list(m.root.nodes) == ["a", "b", "c"]


def test_rts_in_pair_identity_goes_where_the_whole_compile_puts_it() -> None:
    # layout-conflict alone: the lower topological id gets the Identity (GE's UT RtsSpecailInAndRtsSpecailInNotSame);
    # on the graph as linked, DFS numbers the last-linked MemcpyAsync first
    alone = rts_in_pair()
    run_layout(alone, PassContext())
    assert copy_before(alone, "rtMemCpyAsync", 0) and not copy_before(alone, "hcom", 0)
    # after the partition/merge of a whole compile the order is swapped: GE ST
    # RtsSpecialInputAndRtsSpecialInputOutputAndNormalOut_InsertIdentity_Success expects it before hcom
    m = rts_in_pair()
    run_passes(m, ["engine-partition", "layout-conflict"], PassContext())
    assert copy_before(m, "hcom", 0) and not copy_before(m, "rtMemCpyAsync", 0)


def test_continuous_mix_second_continuous_consumer_is_the_hcom_after_the_merge() -> None:
    alone = continuous_mix()
    run_layout(alone, PassContext())
    assert copy_before(alone, "phonyconcat", 0) and copy_before(alone, "phonyconcat", 1)
    # GE ST ContinuousInAndNoPaddingContinuousIn_InsertIdentity: Identities before hcom:0, hcom:1, concat3:1
    m = continuous_mix()
    run_passes(m, ["engine-partition", "layout-conflict"], PassContext())
    assert copy_before(m, "hcom", 0) and copy_before(m, "hcom", 1) and copy_before(m, "concat3", 1)
    assert not copy_before(m, "phonyconcat", 0) and not copy_before(m, "phonyconcat", 1)
    assert sum(n.type == "Identity" for n in m.root.nodes.values()) == 3
    assert m.find_node("concat3").inputs[0] == ("c", 0) and m.find_node("concat3").inputs[2] == ("d", 0)


def pass_through_subgraph(mark: str | None = None) -> Model:
    """A PartitionedCall whose body Data feeds two ReLUs; ``mark`` names a graph attr set true on the body."""
    b = GraphBuilder("root")
    b.chain("x:ReLU", "p:PartitionedCall")
    sub = b.subgraph("sub", "p")
    sub.data("d", parent_index=0)
    sub.chain("d", "u:ReLU")
    sub.chain("d", "v:ReLU")
    sub.chain("u", "n:NetOutput")
    m = b.build()
    if mark:
        m.graph("sub").set_attr(mark, True)
    return m


def test_subgraphs_are_cut_unless_marked() -> None:
    m = pass_through_subgraph()
    g = m.graph("sub")
    assert [d for d, _ in g.consumers("d", 0)] == ["u", "v"]
    assert engine_partition.run(m, PassContext()) == {"relinked": ["sub"]}
    assert [d for d, _ in g.consumers("d", 0)] == ["v", "u"]
    for mark in engine_partition.NO_PARTITION_ATTRS:
        m = pass_through_subgraph(mark)
        assert engine_partition.run(m, PassContext()) == {"relinked": []}
        assert [d for d, _ in m.graph("sub").consumers("d", 0)] == ["u", "v"]


def test_a_cycle_is_left_for_the_sort_to_report() -> None:
    b = GraphBuilder("g")
    b.chain("a:ReLU", "b:ReLU")
    b.chain("b", "a")
    m = b.build()
    before = list(m.root.nodes)
    assert engine_partition.run(m, PassContext()) == {"relinked": []}
    assert list(m.root.nodes) == before


def test_shared_facts_follow_the_new_order() -> None:
    m = continuous_mix()
    ctx = PassContext()
    shared_facts(m, ctx)  # built before the cut, as in a pipeline
    engine_partition.run(m, ctx)
    db = shared_facts(m, ctx)
    fresh = FactDB.from_model(m)
    for table in ("node_prop", "data_edge", "ctrl_edge", "node", "in_anchor", "out_anchor"):
        q = f"select * from {table}"
        assert sorted(db.sql(q).values.tolist()) == sorted(fresh.sql(q).values.tolist()), table


def test_o3_cuts_between_stage1_and_stage2() -> None:
    order = list(pipelines.O3_ORDER)
    assert order.count("engine-partition") == 1
    last_hccl = len(order) - 1 - order[::-1].index("hccl-memcpy")
    assert last_hccl < order.index("engine-partition") < order.index("inner-identity-delete")
    assert order.index("engine-partition") < order.index("rw-conflict")

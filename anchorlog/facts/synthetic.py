"""Synthetic stress graphs for the memory-conflict passes, shared by benchmarks and tests.

Each is a chain of identical blocks, so the size scales with ``blocks`` and every block exercises the same
decision: what a benchmark times is that decision repeated, and a test can check every block alike.
"""

from __future__ import annotations

from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model


def rw_conflict_heavy(blocks: int) -> Model:
    """Every block: Data/ReLU/Mul chain step, a Const read by a ReLU and by an ``_input_mutable`` HcomAllReduce
    (kReadOnlyConst -> kScopeWriteable: one Identity per block), 5 nodes per block."""
    b = GraphBuilder("g")
    b.chain("d:Data")
    last = "d"
    for i in range(blocks):
        b.chain(last, f"r{i}:ReLU", f"m{i}:Mul")
        b.chain(f"c{i}:Const", f"hc{i}:HcomAllReduce")
        b.attr(f"hc{i}", "_input_mutable", True)
        b.edge(f"hc{i}", 0, f"m{i}", 1)
        b.chain(f"c{i}", f"x{i}:ReLU")
        last = f"m{i}"
    b.chain(last, "out:NetOutput")
    return b.build()


def rw_split_heavy(blocks: int) -> Model:
    """Every block: an Identity read by a ReLU and scope-written by an HcomAllReduce (GE splits it, then judges
    its removal on the fan-out after the split), 5 nodes per block."""
    b = GraphBuilder("g")
    b.chain("d:Data")
    last = "d"
    for i in range(blocks):
        b.chain(last, f"a{i}:ReLU", f"id{i}:Identity", f"r{i}:ReLU")
        b.chain(f"id{i}", f"hc{i}:HcomAllReduce")
        b.attr(f"hc{i}", "_input_mutable", True)
        b.chain(f"hc{i}", f"m{i}:Mul")
        b.edge(f"r{i}", 0, f"m{i}", 1)
        last = f"m{i}"
    b.chain(last, "out:NetOutput")
    return b.build()

"""common-subexpression-elimination: GE's CSE key, candidates, queue order, repeated rounds."""

from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.builder import CTRL, Edge, GraphBuilder


def _run(model, **options):
    report = run_passes(model, ["common-subexpression-elimination"], PassContext(options=options))
    return report["passes"][0]


def _two_adds():
    b = GraphBuilder("g")
    b.node("x:Data")
    b.node("y:Data")
    for name in ("add1", "add2"):
        b.chain("x", Edge(0, 0), f"{name}:Add")
        b.chain("y", Edge(0, 1), name)
    b.node("out:NetOutput")
    b.chain("add1", Edge(0, 0), "out")
    b.chain("add2", Edge(0, 1), "out")
    return b


def test_equal_adds_are_merged_into_the_first():
    model = _two_adds().build()
    section = _run(model)
    g = model.root
    assert "add2" not in g.nodes and "add1" in g.nodes
    assert g.nodes["out"].inputs == [("add1", 0), ("add1", 0)]
    assert section["merged"][0]["kept"] == "add1" and section["merged"][0]["removed"] == "add2"


def test_different_attrs_keep_both():
    b = _two_adds()
    b.attr("add2", "alpha", 2)
    model = b.build()
    assert not _run(model)["changed"]
    assert {"add1", "add2"} <= set(model.root.nodes)


def test_swapped_inputs_are_a_different_key():
    b = GraphBuilder("g")
    b.node("x:Data")
    b.node("y:Data")
    b.chain("x", Edge(0, 0), "add1:Add")
    b.chain("y", Edge(0, 1), "add1")
    b.chain("y", Edge(0, 0), "add2:Add")
    b.chain("x", Edge(0, 1), "add2")
    model = b.build()
    assert not _run(model)["changed"]


def test_ops_without_a_folding_kernel_are_never_merged():
    b = GraphBuilder("g")
    b.node("x:Data")
    b.chain("x", "r1:ReLU")
    b.chain("x", "r2:ReLU")
    model = b.build()
    assert not _run(model)["changed"]


def test_nodes_ge_inserted_are_skipped():
    b = _two_adds()
    b.attr("add2", "no_need_constant_folding", False)
    model = b.build()
    assert not _run(model)["changed"]


def test_control_predecessors_are_part_of_the_key():
    b = _two_adds()
    b.node("c:Data")
    b.chain("c", CTRL, "add2")
    model = b.build()
    assert not _run(model)["changed"]


def test_input_shapes_are_part_of_the_key():
    b = _two_adds()
    b.in_desc("add2", 0, shape=[8, 8])
    model = b.build()
    assert not _run(model)["changed"]


def test_merging_exposes_the_next_level():
    # add1/add2 equal; then mul1(add1) and mul2(add2) become equal once add2 is merged into add1
    b = _two_adds()
    b.chain("add1", "mul1:Mul")
    b.chain("add2", "mul2:Mul")
    model = b.build()
    section = _run(model)
    g = model.root
    assert "add2" not in g.nodes and "mul2" not in g.nodes
    assert section["rounds"] >= 2


def test_control_successors_move_to_the_kept_node():
    b = _two_adds()
    b.node("z:Data")
    b.chain("add2", CTRL, "z")
    model = b.build()
    _run(model)
    assert "add1" in model.root.nodes["z"].ctrl_inputs


def test_not_an_o3_level():
    model = _two_adds().build()
    section = _run(model, **{"ge.oo.level": "O1"})
    assert "skipped" in section and "add2" in model.root.nodes


def test_subgraphs_are_processed_too():
    b = GraphBuilder("root")
    b.node("d:Data")
    b.node("pc", "PartitionedCall", inputs=1, outputs=1)
    b.chain("d", "pc")
    sub = b.subgraph("body", owner="pc")
    sub.data("in0", 0)
    sub.chain("in0", "s1:Cast")
    sub.chain("in0", "s2:Cast")
    sub.node("n:NetOutput")
    sub.chain("s1", Edge(0, 0), "n")
    sub.chain("s2", Edge(0, 1), "n")
    model = b.build()
    _run(model)
    body = model.graph("body")
    assert len([n for n in body.nodes.values() if n.type == "Cast"]) == 1


def _random_readers(seed: int):
    """Many same-type readers of a few producers, differing in the other input, input order, attributes and
    control predecessors: some keys equal, most not (hub outputs like a rope table read by many Muls)."""
    import random

    rnd = random.Random(seed)
    b = GraphBuilder("g")
    sources = [f"d{k}" for k in range(4)]
    for s in sources:
        b.node(f"{s}:Data")
    for k in range(rnd.randint(6, 30)):
        name = f"n{k}"
        b.node(f"{name}:{rnd.choice(('Add', 'Mul', 'Mul', 'Sub'))}")
        for i in range(rnd.choice((1, 2, 2, 3))):
            b.chain(rnd.choice(sources[:2] if i == 0 else sources), Edge(0, i), name)
        if rnd.random() < 0.3:
            b.attr(name, "alpha", rnd.choice((1, 2)))
        if rnd.random() < 0.2:
            b.chain(rnd.choice(sources), CTRL, name)
    return b.build()


def test_equal_key_pairs_match_the_key_definition_on_random_graphs():
    """cse.dl's pair pre-filter (first and last connected input) never loses a pair whose GE CSE key is equal:
    the rules' equal pairs are exactly the candidate pairs with equal (type, inputs, control set, attrs)."""
    from anchorlog.analysis.cse import CSE_DL, FOLDING_KERNEL_TYPES
    from anchorlog.facts.relations import FactDB
    from anchorlog.queries import Program

    prog = Program.from_file(CSE_DL)
    foldable = [(t,) for t in sorted(FOLDING_KERNEL_TYPES)]
    equal_seen = 0
    for seed in range(40):
        model = _random_readers(seed)
        res = prog.run(FactDB.from_model(model), extra={"cse_foldable": foldable})
        g = model.root
        cands = sorted({n for _g, _s, _o, n, _t in res.rows("cse_candidate")})

        def key(name: str, g=g):
            n = g.nodes[name]
            attrs = frozenset((k, repr(n.attr(k))) for k in n.attrs)
            return (n.type, tuple(n.inputs), frozenset(n.ctrl_inputs), attrs)

        expected = {("g", a, b) for a in cands for b in cands if a != b and key(a) == key(b)}
        assert set(res.rows("cse_same")) == expected, seed
        equal_seen += len(expected)
    assert equal_seen > 0  # the generator does produce equal keys

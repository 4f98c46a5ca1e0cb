"""GraphLint (reference §7): each checker outcome, wrapper propagation, GE's first-finding report."""

from __future__ import annotations

from anchorlog.analysis.graph_lint import verify
from anchorlog.analysis.registry import PassContext, run_passes
from anchorlog.facts.builder import GraphBuilder
from anchorlog.facts.graph import Model


def var_graph(ctrl: tuple[str, str] | None = None) -> Model:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r:ReLU")
    if ctrl:
        b.ctrl(*ctrl)
    return b.build()


def test_write_read_unordered_warns() -> None:
    res = verify(var_graph())
    assert res["first"]["nodes"] == ["asg", "r"]
    assert res["first"]["code"] == "W18888" and res["first"]["kind"] == "write-read"


def test_write_read_direct_ctrl_clean() -> None:
    assert verify(var_graph(("r", "asg")))["first"] is None


def test_write_read_indirect_path_clean() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign", "r2:ReLU")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r:ReLU")
    b.ctrl("r2", "r")
    assert verify(b.build())["first"] is None


def test_two_writers_unordered_warns_and_ordered_clean() -> None:
    def build(order: bool) -> Model:
        b = GraphBuilder("g")
        for a in ("a1", "a2"):
            b.chain("v:Variable", f"{a}:Assign")
            b.chain(f"c_{a}:Const", a)
            b.ref_op(a, {0: 0})
        if order:
            b.ctrl("a1", "a2")
        return b.build()

    assert verify(build(False))["first"]["kind"] == "write-write"
    assert verify(build(True))["first"] is None


def test_readers_only_clean() -> None:
    b = GraphBuilder("g")
    b.chain("d:Data", "a:ReLU")
    b.chain("d", "b2:ReLU")
    assert verify(b.build())["unordered"] == []


def test_cmo_input_ignored() -> None:
    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "cmo:Cmo")
    assert verify(b.build())["first"] is None


def test_wrapper_takes_subgraph_writer_type() -> None:
    b = GraphBuilder("g")
    b.node("if", "If", inputs=2, outputs=1)
    b.chain("p:Data", "if")
    b.chain("v:Variable", "if")
    b.chain("v", "r:ReLU")
    then = b.subgraph("then", owner="if")
    then.data("td", 1)
    then.chain("td", "asg:Assign")
    then.node("k", "Const")
    then.edge("k", 0, "asg", 1)
    then.ref_op("asg", {0: 0})
    then.output("asg", 0)
    els = b.subgraph("else", owner="if")
    els.data("ed", 1)
    els.output("ed", 0)
    res = verify(b.build())
    assert res["first"]["nodes"] == ["if", "r"]


def test_only_first_finding_reported_as_lint() -> None:
    b = GraphBuilder("g")
    for i in range(2):
        b.chain(f"v{i}:Variable", f"asg{i}:Assign")
        b.chain(f"c{i}:Const", f"asg{i}")
        b.ref_op(f"asg{i}", {0: 0})
        b.chain(f"v{i}", f"r{i}:ReLU")
    m = b.build()
    rep = run_passes(m, ["graph-lint"], PassContext())
    assert len(rep["lint"]) == 1
    sec = rep["passes"][0]
    assert len(sec["unordered"]) == 2
    assert [u["reported_by_ge"] for u in sec["unordered"]] == [True, False]


def test_lint_changes_nothing() -> None:
    m = var_graph()
    before = [(n.name, list(n.inputs), list(n.ctrl_inputs)) for n in m.all_nodes()]
    run_passes(m, ["graph-lint"], PassContext())
    assert before == [(n.name, list(n.inputs), list(n.ctrl_inputs)) for n in m.all_nodes()]


def test_pipeline_fact_database_gives_the_same_findings() -> None:
    # in a pipeline graph-lint reads the shared fact database (refreshed after edits) instead of a lean one
    from anchorlog.analysis.fact_cache import shared_facts
    from anchorlog.facts.relations import FactDB

    for model in (var_graph(), var_graph(("r", "asg"))):
        alone = verify(model)
        assert verify(model, db=FactDB.from_model(model)) == alone
        ctx = PassContext()
        db = shared_facts(model, ctx)
        tables = {r[0] for r in db.conn.execute("SELECT name FROM main.sqlite_master")}
        section = run_passes(model, ["graph-lint"], ctx)["passes"][0]
        assert section["unordered"] == alone["unordered"]
        # the shared database is only read: no auxiliary tables left in it
        assert {r[0] for r in db.conn.execute("SELECT name FROM main.sqlite_master")} == tables


def test_io_name_rows_named_and_default() -> None:
    """An op's name maps give its rows (first index of a repeated name kept); an op without them, or with
    lists of different lengths, gets GE's default names for each of its anchors."""
    from anchorlog.analysis.graph_lint import lint_io_name_rows

    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")
    b.chain("c:Const", "asg")
    b.chain("v", "r:ReLU")
    b.chain("c", "bad:Add")
    m = b.build()
    g = m.root
    asg = g.node("asg")
    asg.set_attr("_input_name_key", ["ref", "value", "ref"])
    asg.set_attr("_input_name_value", [0, 1, 1])
    asg.set_attr("_output_name_key", ["ref"])
    asg.set_attr("_output_name_value", [0])
    g.node("bad").set_attr("_input_name_key", ["x", "y"])
    g.node("bad").set_attr("_input_name_value", [0])  # lengths differ: GE ignores the pair
    rows = {(r[1], r[2], r[3], r[4]) for r in lint_io_name_rows(m)}
    assert {r for r in rows if r[0] == "asg"} == {
        ("asg", "in", 0, "ref"),
        ("asg", "in", 1, "value"),
        ("asg", "out", 0, "ref"),
    }
    assert {r for r in rows if r[0] == "r"} == {("r", "in", 0, "__input0"), ("r", "out", 0, "__output0")}
    assert {r for r in rows if r[0] == "bad"} == {("bad", "in", 0, "__input0"), ("bad", "out", 0, "__output0")}
    assert {r for r in rows if r[0] == "v"} == {("v", "out", 0, "__output0")}
    only = lint_io_name_rows(m, {("g", "r")})
    assert sorted(only) == [("g", "r", "in", 0, "__input0"), ("g", "r", "out", 0, "__output0")]


# --------------------------------------------------------------------------------------------------------------
# Demand-driven rules vs an oracle: every op typed from its full name rows, every shared output's consumers
# checked pairwise with a breadth-first search (what the rules computed before they became demand-driven).
# --------------------------------------------------------------------------------------------------------------


def lint_heavy_graph(blocks: int, seed: int) -> Model:
    """Shared Variable outputs read and written by Assigns, ordered or not by control edges and data paths,
    with Cmo / FrameworkOp(Cmo) consumers, named ops lacking a name for their input (untyped), an op whose output
    is named like a default input name, mismatched name lists, and wrappers whose subgraph writes, reads or
    ignores the input (or has no Data at all), one level of blocks nested inside subgraphs."""
    import random

    rng = random.Random(seed)

    def block(b: GraphBuilder, p: str, nested: bool) -> None:
        v = f"{p}v"
        b.node(v, "Variable")
        users: list[str] = []
        for i in range(rng.randint(0, 3)):
            b.chain(v, f"{p}r{i}:ReLU")
            users.append(f"{p}r{i}")
        readers = list(users)
        for i in range(rng.randint(0, 2)):
            w = f"{p}w{i}"
            b.node(w, "Assign", inputs=2, outputs=1)
            b.edge(v, 0, w, 0)
            b.node(f"{p}c{i}", "Const")
            b.edge(f"{p}c{i}", 0, w, 1)
            b.ref_op(w, {0: 0})
            users.append(w)
        x = rng.random()
        if x < 0.3:
            n = f"{p}x"
            kind = rng.choice(["cmo", "fw", "untyped", "odd", "bad"])
            b.node(n, {"cmo": "Cmo", "fw": "FrameworkOp"}.get(kind, "Add"), inputs=2, outputs=1)
            b.edge(v, 0, n, 1 if kind == "untyped" else 0)
            if kind == "fw":
                b.attr(n, "original_type", "Cmo")
            elif kind == "untyped":
                b.attr(n, "_input_name_key", ["a"])
                b.attr(n, "_input_name_value", [0])
            elif kind == "odd":  # an output named like GE's default name of input 0: a writer
                b.attr(n, "_output_name_key", ["__input0"])
                b.attr(n, "_output_name_value", [0])
            elif kind == "bad":  # lists of different lengths: GE ignores them
                b.attr(n, "_input_name_key", ["x", "y"])
                b.attr(n, "_input_name_value", [0])
            users.append(n)
        if not nested and rng.random() < 0.3:
            wr = f"{p}call"
            is_if = rng.random() < 0.5
            b.node(wr, "If" if is_if else "PartitionedCall", inputs=1, outputs=1)
            b.edge(v, 0, wr, 0)
            users.append(wr)
            sg = b.subgraph(f"{p}sub", owner=wr)
            if is_if:
                els = b.subgraph(f"{p}else", owner=wr)
                els.data(f"{p}ed", 0)
                els.output(f"{p}ed", 0)
            if rng.random() < 0.7:
                sg.data(f"{p}sd", 0)
                inner = rng.choice(["Assign", "ReLU", "Cmo"])
                if inner == "Assign":
                    sg.node(f"{p}sa", "Assign", inputs=2, outputs=1)
                    sg.edge(f"{p}sd", 0, f"{p}sa", 0)
                    sg.node(f"{p}sk", "Const")
                    sg.edge(f"{p}sk", 0, f"{p}sa", 1)
                    sg.ref_op(f"{p}sa", {0: 0})
                    if rng.random() < 0.5:
                        sg.chain(f"{p}sd", f"{p}sr:ReLU")
                    sg.output(f"{p}sa", 0)
                else:
                    sg.chain(f"{p}sd", f"{p}si:{inner}")
                    sg.output(f"{p}sd", 0)
            else:
                sg.node(f"{p}sk", "Const")
                sg.output(f"{p}sk", 0)
                if rng.random() < 0.5:
                    block(sg, p + "in_", True)
        for _ in range(rng.randint(0, 3)):  # control edges, always from an earlier consumer to a later one
            if len(users) >= 2:
                a, c = sorted(rng.sample(range(len(users)), 2))
                b.ctrl(users[a], users[c])
        if readers and f"{p}w0" in users and rng.random() < 0.3:  # a data path reader -> Add -> (ctrl) writer
            b.node(f"{p}val", "Add", inputs=2, outputs=1)
            b.edge(readers[0], 0, f"{p}val", 0)
            b.ctrl(f"{p}val", f"{p}w0")

    b = GraphBuilder("g")
    for i in range(blocks):
        block(b, f"b{i}_", False)
    return b.build()


def oracle_unordered(model: Model) -> tuple[set[tuple[str, str, str, str, str]], int]:
    """(graph, anchor, writer, other, kind) of every unordered pair, and the number of untyped consumers of
    shared outputs, from full name rows for every op and a search per pair."""
    from anchorlog.analysis.graph_lint import lint_io_name_rows
    from anchorlog.runtime.rewrite import reaches

    names: dict[tuple[str, str], dict[str, dict]] = {}
    for g, n, io, i, x in lint_io_name_rows(model):
        d = names.setdefault((g, n), {"in": {}, "out": {}})
        d[io][i] = x
    owner = {s: (g.name, n.name) for g in model.graphs for n in g.nodes.values() for s in n.subgraph_names if s}

    def single(g: str, n) -> dict[int, str]:
        d = names.get((g, n.name), {"in": {}, "out": {}})
        cmo = n.type == "Cmo" or (n.type == "FrameworkOp" and n.attr("original_type") == "Cmo")
        outs = set(d["out"].values())
        return {i: "I" if cmo else ("W" if x in outs else "R") for i, x in d["in"].items()}

    def types(g, n) -> dict[int, str] | None:
        if not any(n.subgraph_names):
            return single(g.name, n)
        cand: dict[int, set[str]] = {}
        for sg in model.graphs:
            if owner.get(sg.name) != (g.name, n.name):
                continue
            for d in sg.nodes.values():
                p = d.attr("_parent_node_index")
                if d.type != "Data" or p is None:
                    continue
                for c, k in sg.consumers(d.name, 0):
                    cn = sg.nodes[c]
                    if not any(cn.subgraph_names) and k in single(sg.name, cn):
                        cand.setdefault(p, set()).add(single(sg.name, cn)[k])
        if not cand:
            return None
        return {
            i: "W" if "W" in cand.get(i, ()) else "I" if "I" in cand.get(i, ()) else "R" for i in range(len(n.inputs))
        }

    found: set[tuple[str, str, str, str, str]] = set()
    untyped = 0
    for g in model.graphs:
        outs = {a for n in g.nodes.values() for a in n.inputs if a is not None}
        for s, o in outs:
            cons = g.consumers(s, o)
            if len(cons) < 2:
                continue
            ws, rs = set(), set()
            for c, k in cons:
                t = types(g, g.nodes[c])
                if t is None or k not in t:
                    untyped += 1
                elif t[k] == "W":
                    ws.add(c)
                elif t[k] == "R":
                    rs.add(c)
            for w in ws:
                for x, kind in [(x, "write") for x in ws] + [(x, "read") for x in rs]:
                    if x != w and not reaches(g, w, x) and not reaches(g, x, w):
                        found.add((g.name, f"{s}:{o}", w, x, f"write-{kind}"))
    return found, untyped


def test_demand_driven_rules_match_the_oracle_on_lint_heavy_graphs() -> None:
    from anchorlog.facts.relations import FactDB

    seen_pairs = seen_untyped = seen_sub = 0
    for seed in range(8):
        m = lint_heavy_graph(40, seed)
        expected, untyped = oracle_unordered(m)
        for res in (verify(m), verify(m, db=FactDB.from_model(m))):
            got = {(u["graph"], u["anchor"], *u["nodes"], u["kind"]) for u in res["unordered"]}
            assert got == expected
            if not untyped:
                assert res["aborted"] is None
        seen_pairs += len(expected)
        seen_untyped += untyped
        seen_sub += sum(1 for e in expected if e[0] != "g")
    # the graphs exercise what they are for
    assert seen_pairs > 50 and seen_untyped > 0 and seen_sub > 0


def test_named_demand_is_the_named_consumers_of_shared_outputs_and_of_subgraph_data() -> None:
    from anchorlog.analysis.graph_lint import lean_fact_db, lint_named_demand

    b = GraphBuilder("g")
    b.chain("v:Variable", "asg:Assign")  # named, shares v:0 with r
    b.chain("c:Const", "asg")
    b.ref_op("asg", {0: 0})
    b.chain("v", "r:ReLU")
    b.chain("u:Variable", "alone:Assign")  # named, sole consumer of u:0 and of k:0
    b.chain("k:Const", "alone")
    b.ref_op("alone", {0: 0})
    b.node("call", "PartitionedCall", inputs=1, outputs=1)
    b.chain("r", "call")
    sub = b.subgraph("sub", owner="call")
    sub.data("sd", 0)
    sub.chain("sd", "sa:Assign")  # named, fed by a subgraph Data
    sub.chain("sk:Const", "sa")
    sub.ref_op("sa", {0: 0})
    sub.output("sa", 0)
    m = b.build()
    assert lint_named_demand(m, lean_fact_db(m)) == {("g", "asg"), ("sub", "sa")}


def test_untyped_consumer_of_a_shared_output_stops_ge_silently() -> None:
    """A named op without a name for the input it reads a shared output on, or a wrapper whose subgraphs type
    none of its inputs, has no read/write type: GE's Verify stops there without W18888."""
    b = GraphBuilder("g")
    b.chain("v:Variable", "r:ReLU")
    b.node("x", "Add", inputs=2, outputs=1)
    b.edge("v", 0, "x", 1)
    b.attr("x", "_input_name_key", ["a"])
    b.attr("x", "_input_name_value", [0])
    res = verify(b.build())
    assert res["first"] is None and res["aborted"].startswith("x input 1 ")

    b = GraphBuilder("g")
    b.chain("v:Variable", "r:ReLU")
    b.node("call", "PartitionedCall", inputs=1, outputs=1)
    b.edge("v", 0, "call", 0)
    sub = b.subgraph("sub", owner="call")
    sub.node("k", "Const")
    sub.output("k", 0)
    res = verify(b.build())
    assert res["first"] is None and res["aborted"].startswith("call input 0 ")
    # a consumer with a name for its input is typed: no stop
    b = GraphBuilder("g")
    b.chain("v:Variable", "r:ReLU")
    b.chain("v", "y:Add")
    b.attr("y", "_input_name_key", ["a"])
    b.attr("y", "_input_name_value", [0])
    assert verify(b.build())["aborted"] is None

"""Oracle: GE's attribute marking (``MarkInTypes`` / ``MarkOutTypes``) replayed in Python over the IR.

The layout pass takes its attributes from ``anchorlog/queries/layout.dl``; this replay is kept only to test the
rules against (tests/test_layout_rules.py, tests/test_layout_api.py)."""

from __future__ import annotations

from anchorlog.analysis.layout_conflict._ge import (
    CONTINUOUS_INPUT,
    CONTINUOUS_OUTPUT,
    CUSTOM_OP_KERNEL_LIB,
    DATA_TYPES,
    HCCL_KERNEL_LIB,
    INPUT_MEM_TYPE_LIST,
    KERNEL_LIB_NAME,
    LAYOUT_CONST_TYPES,
    NOPADDING_CONTINUOUS_INPUT,
    NOPADDING_CONTINUOUS_OUTPUT,
    OUTPUT_MEM_TYPE_LIST,
    PHYSICAL_ADDR_TYPES,
    REF_VAR_SRC_VAR_NAME,
    VARIABLE_TYPES,
    attr_int_list,
    attr_str,
    kernel_lib,
    may_ref_from_input,
    memory_type_special,
    n_in,
    n_out,
    out_desc,
)
from anchorlog.analysis.layout_conflict.attributes import (
    CONT_IN,
    CONT_OUT,
    IMMUT_OUT,
    NOPAD_IN,
    NOPAD_OUT,
    NORMAL_IN,
    NORMAL_OUT,
    REF_OUT,
    RTS_IN,
    RTS_OUT,
    UNSUP_IN,
    UNSUP_OUT,
    USER_IN,
    USER_OUT,
    AnchorAttribute,
    LayoutOptions,
    Marks,
    is_continuous_input,
    is_continuous_output,
    is_graph_feature_map_refreshable,
    is_nopadding_continuous_input,
    is_nopadding_continuous_output,
)
from anchorlog.analysis.layout_conflict.refmap import AnchorRef, SymbolTable, anchor_name
from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import ModelIndex, ref_from_input


def is_address_refreshable(node: Node, opts: LayoutOptions) -> bool:
    """``MemLayoutConflictUtil::IsAddressRefreshable``."""
    if node.type in PHYSICAL_ADDR_TYPES:
        return False
    lib = kernel_lib(node)
    if lib == HCCL_KERNEL_LIB and node.graph is not None and not is_graph_feature_map_refreshable(node.graph, opts):
        return False
    # Custom ops: no custom-op factory is registered here, so none declares itself refreshable.
    return lib != CUSTOM_OP_KERNEL_LIB


def is_physical_address_refreshable(node: Node) -> bool:
    return node.type not in PHYSICAL_ADDR_TYPES


def node_input_types(node: Node, g: Graph, opts: LayoutOptions) -> list[AnchorAttribute]:
    t: list[AnchorAttribute] = []
    if node.type == "NetOutput" and node.graph is g:
        t.append(USER_OUT)
    if not is_address_refreshable(node, opts):
        t.append(UNSUP_IN)
    if is_nopadding_continuous_input(node):
        t.append(NOPAD_IN)
    if is_continuous_input(node):
        t.append(CONT_IN)
    return t


def mark_in_types(node: Node, g: Graph, opts: LayoutOptions, marks: Marks) -> None:
    """``MarkInTypes``: node-level marks, then the per-anchor special memory type, else NORMAL_INPUT."""
    mem_types = attr_int_list(node, INPUT_MEM_TYPE_LIST)
    base = node_input_types(node, g, opts)
    for k in range(n_in(node)):
        types = list(base)
        if k < len(mem_types) and memory_type_special(mem_types[k]):
            types.append(RTS_IN)
        marks.types[AnchorRef(node, "in", k)] = types or [NORMAL_IN]


def node_output_types(node: Node, g: Graph, opts: LayoutOptions) -> list[AnchorAttribute]:
    t: list[AnchorAttribute] = []
    if node.type in DATA_TYPES and node.graph is g:
        t.append(USER_IN)
    if node.type in LAYOUT_CONST_TYPES or node.type in VARIABLE_TYPES:
        t.append(IMMUT_OUT)
    if not is_address_refreshable(node, opts):
        t.append(UNSUP_OUT)
    if is_nopadding_continuous_output(node):
        t.append(NOPAD_OUT)
    if is_continuous_output(node):
        t.append(CONT_OUT)
    return t


def ref_from_var(a: AnchorRef, table: SymbolTable) -> Node | None:
    """``IsRefFromVar``: the output names a source var (``ref_var_src_var_name``) whose ``out_0`` shares the
    anchor's symbol; returns that var node."""
    s = table.a2s.get(a.name)
    if s is None:
        return None
    d = out_desc(a.node, a.idx)
    if d is None or REF_VAR_SRC_VAR_NAME not in d.attrs:
        return None
    v = attr_str(d, REF_VAR_SRC_VAR_NAME)
    if v is None:
        return None
    src = anchor_name(v, "out", 0)
    if table.a2s.get(src) != s:
        return None
    for x in table.s2a.get(s, []):
        if x.name == src:
            return x.node
    return None


def mark_out_types(
    node: Node, g: Graph, opts: LayoutOptions, table: SymbolTable, index: ModelIndex, marks: Marks
) -> None:
    """``MarkOutTypes``: node-level marks, REFERENCE_OUTPUT (not for user inputs), special memory type."""
    mem_types = attr_int_list(node, OUTPUT_MEM_TYPE_LIST)
    is_user_input = node.type in DATA_TYPES and node.graph is g
    base = node_output_types(node, g, opts)
    maybe_ref = may_ref_from_input(node)
    for i in range(n_out(node)):
        a = AnchorRef(node, "out", i)
        types = list(base)
        if not is_user_input:
            var = ref_from_var(a, table)
            if var is not None:
                types.append(REF_OUT)
                marks.ref_map[a] = var
            elif maybe_ref and node.graph is not None and ref_from_input(index, node.graph, node, i) is not None:
                types.append(REF_OUT)
        if i < len(mem_types) and memory_type_special(mem_types[i]):
            types.append(RTS_OUT)
        marks.types[a] = types or [NORMAL_OUT]


def mark_node(node: Node, g: Graph, opts: LayoutOptions, table: SymbolTable, index: ModelIndex, marks: Marks) -> None:
    mark_in_types(node, g, opts, marks)
    mark_out_types(node, g, opts, table, index, marks)


_SPECIAL_TYPES = DATA_TYPES | LAYOUT_CONST_TYPES | VARIABLE_TYPES | PHYSICAL_ADDR_TYPES | {"NetOutput"}
_SPECIAL_ATTRS = (
    CONTINUOUS_INPUT,
    CONTINUOUS_OUTPUT,
    NOPADDING_CONTINUOUS_INPUT,
    NOPADDING_CONTINUOUS_OUTPUT,
    INPUT_MEM_TYPE_LIST,
    OUTPUT_MEM_TYPE_LIST,
    KERNEL_LIB_NAME,
)


def may_carry_special_marks(node: Node) -> bool:
    """False when every anchor of ``node`` can only be NORMAL_INPUT / NORMAL_OUTPUT / REFERENCE_OUTPUT, marks
    that never take part in a conflict with each other (cheap pre-check, no GE counterpart)."""
    if node.type in _SPECIAL_TYPES:
        return True
    attrs = node.attrs
    for k in _SPECIAL_ATTRS:
        if k in attrs:
            return True
    return False


def mark_all(
    model: Model,
    g: Graph,
    nodes: list[Node],
    opts: LayoutOptions,
    table: SymbolTable,
    index: ModelIndex,
    *,
    lazy: bool = False,
) -> Marks:
    """``MarkAllAttribute``: every node of ``GetAllNodes(g)``. With ``lazy`` only nodes that may carry other
    than NORMAL/REFERENCE marks are marked now (``Marks.special``), the rest on first use: the marks are the
    same, a symbol without special node simply never asks."""
    marks = Marks()
    if lazy:
        marks.marker = lambda n: mark_node(n, g, opts, table, index, marks)
    for n in nodes:
        if not lazy or may_carry_special_marks(n):
            marks.special.add(id(n))
            marks._asked.add(id(n))
            mark_node(n, g, opts, table, index, marks)
    return marks

"""The 14 anchor attributes and exactly how GE marks them (reference §4.1 GraphInfo, §4.2).

Every data anchor of the processed graph gets an ordered list of attributes; the order is GE's append order
(it decides which checker of a pair fires first). ``REFERENCE_OUTPUT`` never takes part in a conflict, it
only keeps ``NORMAL_OUTPUT`` off and feeds ``IsSkip`` through the ref map.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from anchorlog.facts.graph import Graph, Model, Node
from anchorlog.facts.relations import _ModelIndex, ref_from_input

from ._ge import (
    CONTINUOUS_INPUT,
    CONTINUOUS_OUTPUT,
    CUSTOM_OP_KERNEL_LIB,
    DATA_TYPES,
    ENV_STATIC_MEMORY,
    HCCL_KERNEL_LIB,
    INPUT_MEM_TYPE_LIST,
    KERNEL_LIB_NAME,
    LAYOUT_CONST_TYPES,
    NOPADDING_CONTINUOUS_INPUT,
    NOPADDING_CONTINUOUS_OUTPUT,
    OPT_BUILD_GRAPH_MODE,
    OPT_FEATURE_BASE_REFRESHABLE,
    OPT_STATIC_MEMORY_POLICY,
    OUTPUT_MEM_TYPE_LIST,
    PHYSICAL_ADDR_TYPES,
    REF_VAR_SRC_VAR_NAME,
    SINGLE_OP_SCENE,
    VARIABLE_TYPES,
    attr_bool,
    attr_int_list,
    attr_str,
    graph_unknown,
    is_static_graph,
    kernel_lib,
    may_ref_from_input,
    memory_type_special,
    n_in,
    n_out,
    out_desc,
    root_of,
)
from .refmap import AnchorRef, SymbolTable, anchor_name


class AnchorAttribute(IntEnum):
    """GE's ``AnchorAttribute`` enum; the value order indexes GE's tables."""

    USER_MEMORY_INPUT = 0
    USER_MEMORY_OUTPUT = 1
    IMMUTABLE_ADDRESS_OUTPUT = 2
    UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT = 3
    UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT = 4
    CONTINUOUS_INPUT = 5
    CONTINUOUS_OUTPUT = 6
    NOPADDING_CONTINUOUS_INPUT = 7
    NOPADDING_CONTINUOUS_OUTPUT = 8
    RTS_SPECIAL_TYPE_INPUT = 9
    RTS_SPECIAL_TYPE_OUTPUT = 10
    REFERENCE_OUTPUT = 11
    NORMAL_INPUT = 12
    NORMAL_OUTPUT = 13

    def __str__(self) -> str:  # GE's log string: the name without ANCHOR_ATTR_
        return self.name


A = AnchorAttribute
# Short aliases used by the tables and checkers (GE's attribute families).
USER_IN, USER_OUT = A.USER_MEMORY_INPUT, A.USER_MEMORY_OUTPUT
IMMUT_OUT = A.IMMUTABLE_ADDRESS_OUTPUT
UNSUP_OUT, UNSUP_IN = A.UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_OUTPUT, A.UNSUPPORTED_ADDRESS_REFRESH_OPERATOR_INPUT
CONT_IN, CONT_OUT = A.CONTINUOUS_INPUT, A.CONTINUOUS_OUTPUT
NOPAD_IN, NOPAD_OUT = A.NOPADDING_CONTINUOUS_INPUT, A.NOPADDING_CONTINUOUS_OUTPUT
RTS_IN, RTS_OUT = A.RTS_SPECIAL_TYPE_INPUT, A.RTS_SPECIAL_TYPE_OUTPUT
REF_OUT = A.REFERENCE_OUTPUT
NORMAL_IN, NORMAL_OUT = A.NORMAL_INPUT, A.NORMAL_OUTPUT


@dataclass
class LayoutOptions:
    """The GE options the layout pass reads, parsed as GE does (reference §4.1, Appendix A)."""

    feature_base_refreshable: bool = False  # ge.featureBaseRefreshable == "1"
    build_graph_offline: bool = False  # ge.buildGraphMode == "offline"
    physical_memory_refreshable: bool = False  # VarManager::IsGeUseExtendSizeMemoryFull()
    heterogeneous: bool = False  # ExecutionRuntimeUtils::IsHeterogeneous() (no option: always false here)

    @staticmethod
    def parse(options: dict[str, str], env: dict[str, str] | None = None) -> LayoutOptions:
        env = os.environ if env is None else env
        policy_opt = options.get(OPT_STATIC_MEMORY_POLICY, "")
        policy_env = env.get(ENV_STATIC_MEMORY, "")
        # Static "extend" memory: env or option in {1,2,4}; dynamic "extend": env or option in {3,4}; GE
        # treats the physical memory as refreshable only when both are on.
        static_extend = policy_env in ("1", "2", "4") or policy_opt in ("1", "2", "4")
        dynamic_extend = policy_env in ("3", "4") or policy_opt in ("3", "4")
        return LayoutOptions(
            feature_base_refreshable=options.get(OPT_FEATURE_BASE_REFRESHABLE, "") == "1",
            build_graph_offline=options.get(OPT_BUILD_GRAPH_MODE, "") == "offline",
            physical_memory_refreshable=static_extend and dynamic_extend,
        )


@dataclass
class GraphInfo:
    """GE's ``GraphInfo`` for one processed (top static) graph."""

    is_root_graph_static: bool = True
    is_feature_map_refreshable: bool = False
    is_support_user_input_nopadding_continuous_output: bool = True
    is_physical_memory_refreshable: bool = False

    def as_dict(self) -> dict[str, bool]:
        return dict(self.__dict__)


def is_graph_feature_map_refreshable(g: Graph, opts: LayoutOptions) -> bool:
    """``IsGraphFeatureMapRefreshable``: the option, or a known-shape graph under an unknown-shape root."""
    if opts.feature_base_refreshable:
        return True
    return graph_unknown(root_of(g)) and not graph_unknown(g)


def graph_info(g: Graph, opts: LayoutOptions) -> GraphInfo:
    return GraphInfo(
        is_root_graph_static=is_static_graph(root_of(g)),
        is_feature_map_refreshable=is_graph_feature_map_refreshable(g, opts),
        is_support_user_input_nopadding_continuous_output=not (
            opts.build_graph_offline or attr_bool(g, SINGLE_OP_SCENE) or opts.heterogeneous
        ),
        is_physical_memory_refreshable=opts.physical_memory_refreshable,
    )


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


def is_continuous_input(node: Node) -> bool:
    return attr_bool(node, CONTINUOUS_INPUT) and n_in(node) > 1


def is_nopadding_continuous_input(node: Node) -> bool:
    return attr_bool(node, NOPADDING_CONTINUOUS_INPUT) and n_in(node) > 1


def is_continuous_output(node: Node) -> bool:
    return attr_bool(node, CONTINUOUS_OUTPUT) and n_out(node) > 1


def is_nopadding_continuous_output(node: Node) -> bool:
    return attr_bool(node, NOPADDING_CONTINUOUS_OUTPUT) and n_out(node) > 1


def anchor_mem_type(a: AnchorRef) -> int:
    """``GetAnchorMemType``: ``_input_memory_type``/``_output_memory_type`` at the index, default 0."""
    lst = attr_int_list(a.node, INPUT_MEM_TYPE_LIST if a.is_in else OUTPUT_MEM_TYPE_LIST)
    return lst[a.idx] if a.idx < len(lst) else 0


@dataclass
class Marks:
    """The checker's saved state: attributes per anchor and the ref map (anchor -> referenced var node)."""

    types: dict[AnchorRef, list[AnchorAttribute]] = field(default_factory=dict)
    ref_map: dict[AnchorRef, Node] = field(default_factory=dict)
    # Lazy marking: nodes that can only carry NORMAL / REFERENCE marks are marked when first asked for.
    marker: Callable[[Node], None] | None = None
    special: set[int] = field(default_factory=set)  # id() of the nodes marked eagerly (may carry others)
    _asked: set[int] = field(default_factory=set)

    def of(self, a: AnchorRef) -> list[AnchorAttribute]:
        t = self.types.get(a)
        if t is None and self.marker is not None and id(a.node) not in self._asked:
            self._asked.add(id(a.node))
            self.marker(a.node)
            t = self.types.get(a)
        return t or []


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
    node: Node, g: Graph, opts: LayoutOptions, table: SymbolTable, index: _ModelIndex, marks: Marks
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


def mark_node(node: Node, g: Graph, opts: LayoutOptions, table: SymbolTable, index: _ModelIndex, marks: Marks) -> None:
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
    index: _ModelIndex,
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

"""The 14 anchor attributes (reference §4.1 GraphInfo, §4.2): the enum in GE's table order, the options and
graph flags, and the node-local predicates the checkers share.

The marking itself (which anchor carries which attributes, in GE's append order) is rules:
``anchorlog/queries/layout.dl`` (``layout_marked_attr``). A Python replay of GE's ``MarkInTypes`` /
``MarkOutTypes`` is kept only as a test oracle (tests/oracles/layout_marks.py). ``REFERENCE_OUTPUT`` never takes
part in a conflict, it only keeps ``NORMAL_OUTPUT`` off and feeds ``IsSkip`` through the ref map.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

from anchorlog.facts.graph import Graph, Node

from ._ge import (
    CONTINUOUS_INPUT,
    CONTINUOUS_OUTPUT,
    ENV_STATIC_MEMORY,
    INPUT_MEM_TYPE_LIST,
    NOPADDING_CONTINUOUS_INPUT,
    NOPADDING_CONTINUOUS_OUTPUT,
    OPT_BUILD_GRAPH_MODE,
    OPT_FEATURE_BASE_REFRESHABLE,
    OPT_STATIC_MEMORY_POLICY,
    OUTPUT_MEM_TYPE_LIST,
    SINGLE_OP_SCENE,
    attr_bool,
    attr_int_list,
    graph_unknown,
    is_static_graph,
    n_in,
    n_out,
    root_of,
)
from .refmap import AnchorRef


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

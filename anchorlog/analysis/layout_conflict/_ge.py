"""GE predicates the layout pass shares (reference §1.2, §1.4, §4.2): node-type sets, attribute readers,
graph flags. Small pure functions over the IR so that checkers read like GE's conditions."""

from __future__ import annotations

from typing import Any

from anchorlog.facts.graph import Graph, Model, Node, TensorDesc
from anchorlog.facts.relations import OP_CLASSES

# Node-type sets (reference §1.2): GE's exact sets are data in ``relations.OP_CLASSES`` (the ``op_class`` facts
# the rules read); the Python side reads the same table.
DATA_TYPES = frozenset(OP_CLASSES["data"])  # OpTypeUtils::IsDataNode
VARIABLE_TYPES = frozenset(OP_CLASSES["variable"])  # OpTypeUtils::IsVariableNode
VAR_LIKE_TYPES = frozenset(OP_CLASSES["var_like"])  # OpTypeUtils::IsVarLikeNode
LAYOUT_CONST_TYPES = frozenset(OP_CLASSES["layout_const"])  # MemLayoutConflictUtil::IsConst
ASSIGN_LIKE_TYPES = frozenset(OP_CLASSES["assign_like"])
MEMCPY_TYPES = frozenset(OP_CLASSES["layout_memcpy"])  # IsSkipInsert peers
PHYSICAL_ADDR_TYPES = frozenset(OP_CLASSES["physical_addr"])  # never address-refreshable

# Attribute / option strings (reference Appendix A).
PARENT_NODE_INDEX = "_parent_node_index"
CONTINUOUS_INPUT = "continuous_input"
CONTINUOUS_OUTPUT = "continuous_output"
NOPADDING_CONTINUOUS_INPUT = "_no_padding_continuous_input"
NOPADDING_CONTINUOUS_OUTPUT = "_no_padding_continuous_output"
INPUT_MEM_TYPE_LIST = "_input_memory_type"
OUTPUT_MEM_TYPE_LIST = "_output_memory_type"
REF_VAR_SRC_VAR_NAME = "ref_var_src_var_name"
KERNEL_LIB_NAME = "_ge_attr_op_kernel_lib_name"
HCCL_KERNEL_LIB = "ops_kernel_info_hccl"
CUSTOM_OP_KERNEL_LIB = "DNN_VM_CUSTOM_OP_STORE"
GRAPH_UNKNOWN_FLAG = "_graph_unknown_flag"
DYNAMIC_SHAPE_PARTITIONED = "_dynamic_shape_partitioned"
SINGLE_OP_SCENE = "_single_op_scene"
IS_UNKNOWN_SHAPE = "_is_unknown_shape"
CANNOT_BE_DELETED = "_cannot_be_deleted"
NO_NEED_CONSTANT_FOLDING = "no_need_constant_folding"

OPT_FEATURE_BASE_REFRESHABLE = "ge.featureBaseRefreshable"
OPT_BUILD_GRAPH_MODE = "ge.buildGraphMode"
OPT_STATIC_MEMORY_POLICY = "ge.exec.staticMemoryPolicy"
ENV_STATIC_MEMORY = "GE_USE_STATIC_MEMORY"

# Memory types that are not "special" (MemTypeUtils::IsMemoryTypeSpecial): default, HBM, DDR.
PLAIN_MEMORY_TYPES = frozenset({0x0, 0x2, 0x4})


def attr_bool(holder: Any, key: str) -> bool:
    """``AttrUtils::GetBool`` read as a flag: true only for a bool attribute set to true."""
    a = holder.attrs.get(key)
    return a is not None and a.kind == "b" and bool(a.value)


def attr_int(holder: Any, key: str) -> int | None:
    """``AttrUtils::GetInt``: the integer of an int-kind attribute, else None."""
    a = holder.attrs.get(key)
    if a is None or a.kind not in ("i", "dt") or isinstance(a.value, bool):
        return None
    return int(a.value)


def attr_int_list(holder: Any, key: str) -> list[int]:
    """``AttrUtils::GetListInt``: the ints of a list attribute (empty when absent or not ints)."""
    a = holder.attrs.get(key)
    if a is None or a.kind != "list" or a.value.kind not in ("i", None):
        return []
    return [int(x) for x in a.value.items]


def attr_str(holder: Any, key: str) -> str | None:
    a = holder.attrs.get(key)
    if a is None or a.kind != "s":
        return None
    v = a.value
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def n_in(node: Node) -> int:
    """Number of in-data anchors (``GetAllInDataAnchorsSize``). A data-like op always has its input anchor
    (GE's Data IR declares input ``x``), even when a dump lists no input descriptor for it."""
    n = node.num_inputs
    return 1 if n == 0 and node.type in DATA_TYPES else n


def n_out(node: Node) -> int:
    """Number of out-data anchors (GE creates one per output descriptor)."""
    return node.num_outputs


def out_desc(node: Node, idx: int) -> TensorDesc | None:
    return node.output_desc[idx] if idx < len(node.output_desc) else None


def in_desc(node: Node, idx: int) -> TensorDesc | None:
    return node.input_desc[idx] if idx < len(node.input_desc) else None


def shape_unknown(desc: TensorDesc | None) -> bool:
    """``GeShape::IsUnknownShape``: some dimension is negative (-1 unknown dim, -2 unknown rank)."""
    return desc is not None and desc.shape is not None and any(int(d) < 0 for d in desc.shape)


def graph_unknown(g: Graph) -> bool:
    """``ComputeGraph::GetGraphUnknownFlag`` (stored as graph attr ``_graph_unknown_flag``)."""
    return attr_bool(g, GRAPH_UNKNOWN_FLAG)


def is_static_graph(g: Graph) -> bool:
    """``MemLayoutConflictUtil::IsStaticGraph``."""
    return not (attr_bool(g, DYNAMIC_SHAPE_PARTITIONED) or graph_unknown(g))


def root_of(g: Graph) -> Graph:
    return g.model.root if g.model is not None else g


def memory_type_special(t: int) -> bool:
    return (int(t) & 0xFFFFFFFFFFFFFFFF) not in PLAIN_MEMORY_TYPES


def subgraph(model: Model, node: Node, index: int) -> Graph | None:
    """``NodeUtils::GetSubgraph(node, index)``."""
    if index >= len(node.subgraph_names):
        return None
    name = node.subgraph_names[index]
    return model.graph(name) if name and model.has_graph(name) else None


def kernel_lib(node: Node) -> str:
    if KERNEL_LIB_NAME not in node.attrs:
        return ""
    return attr_str(node, KERNEL_LIB_NAME) or ""


_MAYBE_REF_TYPES = frozenset(OP_CLASSES["pass_through"] + OP_CLASSES["ge_local_ref"])
_MAYBE_REF_ATTRS = ("_parent_node_index", "reference", "_output_reuse_input")


def may_ref_from_input(node: Node) -> bool:
    """Cheap necessary condition for ``GraphUtils::IsRefFromInput`` on any output of ``node`` (reference
    §1.5): lets the common node skip the full check."""
    if node.type in _MAYBE_REF_TYPES:
        return True
    attrs = node.attrs
    for k in _MAYBE_REF_ATTRS:
        if k in attrs:
            return True
    for d in node.output_desc:
        if d.reuse_input:
            return True
    return False

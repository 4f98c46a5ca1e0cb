"""GE's tensor-format knowledge as data: axis layouts, split/concat axis maps, transfer classification, the
origin-format → runtime-format axis mapping and aligned shapes (GE's ``transformer::TransferShapeUtils`` /
``AxisUtil`` as used by the no-task passes), and dtype sizes.

Everything here is a pure function of its arguments; the tables are plain dicts so that rule files can load
them as facts (:func:`format_facts`).

Vocabulary (GE's): the *origin* format/shape is what the framework wrote (``origin_format`` /
``origin_shape`` tensor attrs); the *runtime* (storage) format/shape is the tensor descriptor's ``layout`` /
``shape``. ``src_to_dst[i]`` lists the runtime axes origin axis ``i`` lands on (two when an axis is split,
e.g. C → C1, C0); ``dst_to_src[j]`` lists the origin axes runtime axis ``j`` is made of (several when axes
are merged, e.g. FRACTAL_Z's C1HW ← C, H, W); ``-1`` marks "no such axis".
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

# --------------------------------------------------------------------------------------------- formats

# Axis vector of every format GE's transformer knows axis-by-axis (kFormatAxisVec).
FORMAT_AXES: dict[str, tuple[str, ...]] = {
    "NCHW": ("N", "C", "H", "W"),
    "HWCN": ("H", "W", "C", "N"),
    "NHWC": ("N", "H", "W", "C"),
    "CHWN": ("C", "H", "W", "N"),
    "NDHWC": ("N", "D", "H", "W", "C"),
    "NCDHW": ("N", "C", "D", "H", "W"),
    "DHWCN": ("D", "H", "W", "C", "N"),
    "DHWNC": ("D", "H", "W", "N", "C"),
    "NC1HWC0": ("N", "C1", "H", "W", "C0"),
    "NDC1HWC0": ("N", "D", "C1", "H", "W", "C0"),
    "FRACTAL_Z": ("C1HW", "N1", "N0", "C0"),
}

# Axes a runtime format splits or merges (kFormatSplitOrConcatAxisMap): origin axis → runtime axes it is cut
# into, and runtime axis → origin axes it is made of.
SPLIT_CONCAT_AXES: dict[str, dict[str, tuple[str, ...]]] = {
    "NC1HWC0": {"C": ("C1", "C0"), "C1": ("C",), "C0": ("C",)},
    "NDC1HWC0": {"C": ("C1", "C0"), "C1": ("C",), "C0": ("C",)},
    "FRACTAL_Z": {
        "N": ("N1", "N0"),
        "C": ("C1HW", "C0"),
        "H": ("C1HW",),
        "W": ("C1HW",),
        "C1HW": ("C", "H", "W"),
        "N1": ("N",),
        "N0": ("N",),
        "C0": ("C",),
    },
}

# Rank of a "full size" origin shape per origin format (ExpandDimension::GetFormatFullSize).
FULL_SIZE: dict[str, int] = {
    "NCHW": 4,
    "NHWC": 4,
    "HWCN": 4,
    "CHWN": 4,
    "NDHWC": 5,
    "NCDHW": 5,
    "DHWCN": 5,
    "DHWNC": 5,
    "ND": 4,
}

# The fractal-NZ family (kFormatNZSet): ND-like origins map onto these by swapping the last two axes.
NZ_FORMATS: frozenset[str] = frozenset(
    {"FRACTAL_NZ", "FRACTAL_NZ_C0_2", "FRACTAL_NZ_C0_4", "FRACTAL_NZ_C0_8", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32"}
)

# Every format name GE serialises (TypeUtils), so that an unknown string can be told apart from a known
# format the transformer simply has no axis mapping for (those make the dim check fail, as in GE).
KNOWN_FORMATS: frozenset[str] = frozenset(
    {
        "NCHW", "NHWC", "ND", "NC1HWC0", "FRACTAL_Z", "NC1C0HWPAD", "NHWC1C0", "FSR_NCHW", "FRACTAL_DECONV",
        "C1HWNC0", "FRACTAL_DECONV_TRANSPOSE", "FRACTAL_DECONV_SP_STRIDE_TRANS", "NC1HWC0_C04", "FRACTAL_Z_C04",
        "CHWN", "FRACTAL_DECONV_SP_STRIDE8_TRANS", "HWCN", "NC1KHKWHWC0", "BN_WEIGHT", "FILTER_HWCK",
        "HASHTABLE_LOOKUP_LOOKUPS", "HASHTABLE_LOOKUP_KEYS", "HASHTABLE_LOOKUP_VALUE", "HASHTABLE_LOOKUP_OUTPUT",
        "HASHTABLE_LOOKUP_HITS", "C1HWNCoC0", "MD", "NDHWC", "FRACTAL_ZZ", "FRACTAL_NZ", "NCDHW", "DHWCN",
        "NDC1HWC0", "FRACTAL_Z_3D", "CN", "NC", "DHWNC", "FRACTAL_Z_3D_TRANSPOSE", "FRACTAL_ZN_LSTM",
        "FRACTAL_Z_G", "RESERVED", "ALL", "NULL", "ND_RNN_BIAS", "FRACTAL_ZN_RNN", "NYUV", "NYUV_A", "NCL",
        "FRACTAL_Z_WINO", "C1HWC0", "FRACTAL_NZ_C0_16", "FRACTAL_NZ_C0_32", "FRACTAL_NZ_C0_2",
        "FRACTAL_NZ_C0_4", "FRACTAL_NZ_C0_8",
    }
)  # fmt: skip


@functools.lru_cache(maxsize=4096)
def primary_format(fmt: str | None) -> str:
    """The primary format of a format string: ``FORMAT_`` prefix and ``:sub-format[:c0]`` suffix dropped.

    GE packs a sub-format (e.g. the group count of FRACTAL_Z) and a C0 code into the high bits of a format
    value; every axis rule looks at the primary format only. An empty string is GE's default, ND."""
    if not fmt:
        return "ND"
    name = str(fmt).split(":", 1)[0].strip()
    if name.startswith("FORMAT_"):
        name = name[len("FORMAT_") :]
    return name or "ND"


# ---------------------------------------------------------------------------------------------- dtypes

# Bits per element (GE's GetSizeByDataType; sub-byte types are GE's "bit offset" kinds).
DTYPE_BITS: dict[str, int] = {
    "DT_FLOAT": 32, "DT_FLOAT16": 16, "DT_BF16": 16, "DT_INT8": 8, "DT_UINT8": 8, "DT_INT16": 16,
    "DT_UINT16": 16, "DT_INT32": 32, "DT_UINT32": 32, "DT_INT64": 64, "DT_UINT64": 64, "DT_BOOL": 8,
    "DT_DOUBLE": 64, "DT_COMPLEX32": 32, "DT_COMPLEX64": 64, "DT_COMPLEX128": 128, "DT_QINT8": 8,
    "DT_QINT16": 16, "DT_QINT32": 32, "DT_QUINT8": 8, "DT_QUINT16": 16, "DT_DUAL": 40, "DT_DUAL_SUB_INT8": 8,
    "DT_DUAL_SUB_UINT8": 8, "DT_INT4": 4, "DT_UINT1": 1, "DT_INT2": 2, "DT_UINT2": 2, "DT_HIFLOAT8": 8,
    "DT_FLOAT8_E5M2": 8, "DT_FLOAT8_E4M3FN": 8, "DT_FLOAT8_E8M0": 8, "DT_FLOAT6_E3M2": 6, "DT_FLOAT6_E2M3": 6,
    "DT_FLOAT4_E2M1": 4, "DT_FLOAT4_E1M2": 4, "DT_STRING": 128, "DT_STRING_REF": 128, "DT_RESOURCE": 64,
    "DT_VARIANT": 64,
}  # fmt: skip


def dtype_bits(dtype: str) -> int:
    """Bits per element; -1 for a type GE has no size for (DT_UNDEFINED and unknown names)."""
    return DTYPE_BITS.get(dtype, -1)


def shape_size(shape: list[int] | None) -> int:
    """GE's ``GeShape::GetShapeSize``: 0 for a scalar (no dims) or any 0 dim, -1 for an unknown dim."""
    if not shape:
        return 0
    n = 1
    for d in shape:
        if d < 0:
            return -1
        if d == 0:
            return 0
        n *= d
    return n


def element_count(shape: list[int] | None) -> int:
    """Elements a tensor really holds (a scalar holds one); -1 when a dim is unknown."""
    if not shape:
        return 1
    return shape_size(shape)


def bytes_of(count: int, dtype: str) -> int:
    """GE's ``GetSizeInBytes(count, dtype)``: sub-byte types round up to whole bytes; -1 when unknown."""
    bits = dtype_bits(dtype)
    if bits < 0 or count < 0:
        return -1
    if bits % 8:
        return (count * bits + 7) // 8
    return count * (bits // 8)


# ------------------------------------------------------------------------------------ platform: M0/K0/N0


@dataclass(frozen=True)
class CubeSizes:
    """Per-dtype fractal sizes (platform key ``DtypeMKN``): C0 is K0. GE pre-fills 16 for every dtype and keeps
    16 when no platform info is available, which is what the conformance environment runs with."""

    default: tuple[int, int, int] = (16, 16, 16)
    per_dtype: dict[str, tuple[int, int, int]] = field(default_factory=dict)

    def m0(self, dtype: str) -> int:
        return self.per_dtype.get(dtype, self.default)[0]

    def c0(self, dtype: str) -> int:
        return self.per_dtype.get(dtype, self.default)[1]

    def n0(self, dtype: str) -> int:
        return self.per_dtype.get(dtype, self.default)[2]

    @staticmethod
    def parse(text: str) -> CubeSizes:
        """Parse ``Default:16,16,16;DT_INT8:16,32,16`` (the platform file's ``DtypeMKN`` section, one line).

        Every entry is ``KEY:m0,k0,n0`` with KEY ``Default`` or a dtype name (``DT_...``) and three positive
        integers; anything else raises ValueError saying which entry is wrong."""
        default = (16, 16, 16)
        per: dict[str, tuple[int, int, int]] = {}
        entries = [p.strip() for p in str(text).split(";") if p.strip()]
        if not entries:
            raise ValueError("expected entries KEY:m0,k0,n0 separated by ';', e.g. Default:16,16,16;DT_INT8:16,32,16")
        for part in entries:
            key, sep, value = part.partition(":")
            key = key.strip()
            if not sep or not key:
                raise ValueError(f"entry {part!r} is not KEY:m0,k0,n0 (KEY is Default or a dtype such as DT_INT8)")
            if key != "Default" and key not in DTYPE_BITS:
                raise ValueError(f"entry {part!r}: unknown dtype {key!r} (use Default or a dtype such as DT_INT8)")
            fields = [x.strip() for x in value.split(",")]
            if len(fields) != 3 or not all(x.isdigit() for x in fields):
                raise ValueError(f"entry {part!r} needs three positive integers m0,k0,n0")
            nums = (int(fields[0]), int(fields[1]), int(fields[2]))
            if min(nums) <= 0:
                raise ValueError(f"entry {part!r} needs three positive integers m0,k0,n0")
            if key == "Default":
                default = nums
            else:
                per[key] = nums
        return CubeSizes(default, per)


DEFAULT_CUBE = CubeSizes()

# ------------------------------------------------------------------------------ transfer classification

ND_TO_ND = "ND_TO_ND"
ND_TO_NZ = "ND_TO_NZ"
FULL_SIZE_T = "FULL_SIZE"
NOT_FULL_SIZE = "NOT_FULL_SIZE"
INVALID = "INVALID"


def transfer_type(src_format: str, dst_format: str, src_rank: int) -> str:
    """GE's ``GetTransferShapeType`` on primary formats."""
    src, dst = primary_format(src_format), primary_format(dst_format)
    if src == dst:
        return ND_TO_ND
    if src == "ND" or dst in NZ_FORMATS:
        return ND_TO_NZ
    full = FULL_SIZE.get(src)
    if full is None:
        return INVALID
    if src_rank == full:
        return FULL_SIZE_T
    if src_rank < full:
        return NOT_FULL_SIZE
    return INVALID


def _split_of(dst: str, axis: str) -> tuple[str, ...]:
    return SPLIT_CONCAT_AXES.get(dst, {}).get(axis, ())


def _index_in(fmt: str, axis: str) -> int:
    axes = FORMAT_AXES.get(fmt)
    if axes is None or axis not in axes:
        return -1
    return axes.index(axis)


def reshape_type_axes(fmt: str, mask: int) -> list[str]:
    """The origin axes actually present when ``_reshape_type_mask`` bit ``i`` marks axis ``i`` as expanded."""
    axes = FORMAT_AXES.get(primary_format(fmt), ())
    return [a for i, a in enumerate(axes) if not (mask >> i) & 1]


def aligned_shape(
    src_format: str, dst_format: str, src_shape: list[int], dtype: str, mask: int = 0, cube: CubeSizes = DEFAULT_CUBE
) -> list[int] | None:
    """GE's ``GetAlignedShape``: per origin axis, the granule its size must be a multiple of so that a cut
    along it needs no padding in the runtime format. None when GE does not support the pair."""
    t = transfer_type(src_format, dst_format, len(src_shape))
    src, dst = primary_format(src_format), primary_format(dst_format)
    if t == ND_TO_ND:
        return [1] * len(src_shape)
    if t == ND_TO_NZ:
        if len(src_shape) < 2 or dst not in NZ_FORMATS:
            return None
        return [1] * (len(src_shape) - 2) + [cube.m0(dtype), cube.c0(dtype)]
    if t == FULL_SIZE_T:
        axes = list(FORMAT_AXES.get(src, ()))
        if not axes:
            return None
    elif t == NOT_FULL_SIZE:
        if mask <= 0:
            return None
        axes = reshape_type_axes(src, mask)
        if not axes:
            return None
    else:
        return None
    out = []
    for a in axes:
        if len(_split_of(dst, a)) > 1 and a == "N":
            out.append(cube.n0(dtype))
        elif len(_split_of(dst, a)) > 1 and a == "C":
            out.append(cube.c0(dtype))
        else:
            out.append(1)
    return out


@dataclass
class AxisMapping:
    src_to_dst: list[list[int]]
    dst_to_src: list[list[int]]


def transfer_dims(src_format: str, dst_format: str, src_shape: list[int], mask: int = 0) -> AxisMapping | None:
    """GE's ``TransferDims``: the origin ↔ runtime axis mapping; None when GE does not support the pair."""
    rank = len(src_shape)
    t = transfer_type(src_format, dst_format, rank)
    src, dst = primary_format(src_format), primary_format(dst_format)
    if t == ND_TO_ND:
        s2d = [[i] for i in range(rank)]
        return AxisMapping(s2d, [list(x) for x in s2d])
    if t == ND_TO_NZ:
        if rank < 2 or dst not in NZ_FORMATS:
            return None
        target = rank - 2
        s2d = [[i] for i in range(target)] + [[target + 1], [target]]
        return AxisMapping(s2d, [list(x) for x in s2d] + [[-1], [-1]])
    if t == FULL_SIZE_T:
        src_axes = list(FORMAT_AXES.get(src, ()))
        if not src_axes:
            return None
        offsets: dict[str, int] | None = None
    elif t == NOT_FULL_SIZE:
        if mask <= 0:
            return None
        src_axes = reshape_type_axes(src, mask)
        if not src_axes:
            return None
        # Position shift of each kept axis: the expanded axes before it are absent from the origin shape.
        offsets, expanded = {}, 0
        for i, a in enumerate(FORMAT_AXES.get(src, ())):
            if (mask >> i) & 1:
                expanded += 1
            else:
                offsets[a] = expanded
    else:
        return None
    s2d = []
    for a in src_axes:
        parts = _split_of(dst, a) or (a,)
        s2d.append([_index_in(dst, p) for p in parts])
    dst_axes = FORMAT_AXES.get(dst)
    if not dst_axes:
        return None
    d2s = []
    for b in dst_axes:
        parts = _split_of(dst, b) or (b,)
        row = []
        for p in parts:
            idx = _index_in(src, p)
            if offsets is not None:
                idx = -1 if (idx == -1 or p not in offsets) else idx - offsets[p]
            row.append(idx)
        d2s.append(row)
    return AxisMapping(s2d, d2s)


# ------------------------------------------------------------------------------------ the concat dim check


@dataclass
class DimCheck:
    """Outcome of GE's per-input concat-axis check, with the facts that decided it."""

    ok: bool
    reason: str  # "ok" or the first failing step
    detail: dict[str, Any] = field(default_factory=dict)


def check_concat_dim(
    src_format: str,
    dst_format: str,
    origin_shape: list[int],
    storage_shape: list[int],
    dtype: str,
    dim: int,
    mask: int = 0,
    cube: CubeSizes = DEFAULT_CUBE,
) -> DimCheck:
    """GE's ``CheckDimForInput`` for an already normalised, in-range concat axis ``dim`` of the origin shape.

    Steps: aligned shape, axis mapping (rank asserts), the real (runtime) concat axis with every runtime axis
    before it equal to 1 (and, when that axis merges several origin axes, the origin axes merged in front of
    the concat axis trivial too), then the origin size on the concat axis a multiple of its alignment."""
    detail: dict[str, Any] = {
        "origin_format": primary_format(src_format),
        "format": primary_format(dst_format),
        "origin_shape": list(origin_shape),
        "shape": list(storage_shape),
        "dim": dim,
        "transfer": transfer_type(src_format, dst_format, len(origin_shape)),
    }
    align = aligned_shape(src_format, dst_format, origin_shape, dtype, mask, cube)
    if align is None:
        return DimCheck(False, "aligned_shape_unsupported", detail)
    detail["aligned_shape"] = align
    if len(align) != len(origin_shape):
        return DimCheck(False, "aligned_shape_rank", detail)
    m = transfer_dims(src_format, dst_format, origin_shape, mask)
    if m is None:
        return DimCheck(False, "transfer_dims_unsupported", detail)
    detail["src_to_dst"], detail["dst_to_src"] = m.src_to_dst, m.dst_to_src
    if len(m.src_to_dst) != len(origin_shape) or len(m.dst_to_src) != len(storage_shape):
        return DimCheck(False, "transfer_dims_rank", detail)
    if not m.src_to_dst[dim]:
        return DimCheck(False, "real_dim_missing", detail)
    real = m.src_to_dst[dim][0]
    detail["real_dim"] = real
    if not 0 <= real < len(storage_shape):
        return DimCheck(False, "real_dim_out_of_range", detail)
    front = [a for a in range(real) if storage_shape[a] != 1]
    if front:
        detail["front_dims_not_one"] = front
        return DimCheck(False, "front_dims_not_one", detail)
    merged = m.dst_to_src[real]
    if len(merged) > 1:
        if dim not in merged:
            return DimCheck(False, "merged_axis_missing_dim", detail)
        for f in merged[: merged.index(dim)]:
            if f < 0 or f >= len(origin_shape) or f >= len(m.src_to_dst):
                return DimCheck(False, "merged_axis_invalid", detail)
            if len(m.src_to_dst[f]) > 1:
                ok_f = origin_shape[f] <= align[f] if m.src_to_dst[f][0] == real else align[f] == 1
            else:
                ok_f = origin_shape[f] == 1
            if not ok_f:
                detail["merged_front_axis"] = f
                return DimCheck(False, "merged_front_axis_not_trivial", detail)
    if align[dim] <= 0:
        return DimCheck(False, "alignment_invalid", detail)
    if origin_shape[dim] % align[dim] != 0:
        detail["alignment"] = align[dim]
        return DimCheck(False, "dim_not_aligned", detail)
    return DimCheck(True, "ok", detail)


def normalise_concat_dim(concat_dim: int, first_rank: int) -> int:
    """GE normalises a negative ``concat_dim`` once, against the rank it meets first."""
    return first_rank + concat_dim if concat_dim < 0 else concat_dim


# ------------------------------------------------------------------------------------------- as facts


def format_facts() -> dict[str, list[tuple]]:
    """The tables above as relations for rule files:
    ``format_axis(format, idx, axis)``, ``format_split(format, axis, pos, part)``, ``format_full_size(format, n)``,
    ``format_nz(format)``, ``dtype_bits(dtype, bits)``."""
    return {
        "format_axis": [(f, i, a) for f, axes in FORMAT_AXES.items() for i, a in enumerate(axes)],
        "format_split": [
            (f, a, i, p) for f, m in SPLIT_CONCAT_AXES.items() for a, parts in m.items() for i, p in enumerate(parts)
        ],
        "format_full_size": sorted(FULL_SIZE.items()),
        "format_nz": [(f,) for f in sorted(NZ_FORMATS)],
        "dtype_bits": sorted(DTYPE_BITS.items()),
    }

"""GE's format tables and transfer helpers (transformer::TransferShapeUtils / AxisUtil) as anchorlog models them."""

from __future__ import annotations

import pytest

from anchorlog.analysis import formats as F


@pytest.mark.parametrize(
    ("fmt", "primary"),
    [("NCHW", "NCHW"), ("FORMAT_NC1HWC0", "NC1HWC0"), ("FRACTAL_Z:1", "FRACTAL_Z"), ("", "ND"), (None, "ND")],
)
def test_primary_format(fmt, primary):
    assert F.primary_format(fmt) == primary


@pytest.mark.parametrize(
    ("src", "dst", "rank", "kind"),
    [
        ("NCHW", "NCHW", 4, F.ND_TO_ND),
        ("ND", "ND", 3, F.ND_TO_ND),
        ("ND", "FRACTAL_NZ", 2, F.ND_TO_NZ),
        ("ND", "NC1HWC0", 4, F.ND_TO_NZ),  # ND origin always takes the NZ route (and fails on a non-NZ dst)
        ("NCHW", "FRACTAL_NZ_C0_16", 4, F.ND_TO_NZ),
        ("NCHW", "NC1HWC0", 4, F.FULL_SIZE_T),
        ("HWCN", "FRACTAL_Z", 4, F.FULL_SIZE_T),
        ("NDHWC", "NDC1HWC0", 5, F.FULL_SIZE_T),
        ("NCHW", "NC1HWC0", 2, F.NOT_FULL_SIZE),
        ("NCHW", "NC1HWC0", 5, F.INVALID),
        ("NC1HWC0", "NCHW", 5, F.INVALID),  # a runtime format is no origin format
    ],
)
def test_transfer_type(src, dst, rank, kind):
    assert F.transfer_type(src, dst, rank) == kind


def test_nchw_to_5hd_mapping_matches_seed_example():
    m = F.transfer_dims("NCHW", "NC1HWC0", [1, 32, 16, 16])
    assert m.src_to_dst == [[0], [1, 4], [2], [3]]
    assert m.dst_to_src == [[0], [1], [2], [3], [1]]
    assert F.aligned_shape("NCHW", "NC1HWC0", [1, 32, 16, 16], "DT_FLOAT16") == [1, 16, 1, 1]


def test_nhwc_to_5hd_mapping():
    m = F.transfer_dims("NHWC", "NC1HWC0", [1, 4, 4, 32])
    assert m.src_to_dst == [[0], [2], [3], [1, 4]]
    assert m.dst_to_src == [[0], [3], [1], [2], [3]]
    assert F.aligned_shape("NHWC", "NC1HWC0", [1, 4, 4, 32], "DT_FLOAT") == [1, 1, 1, 16]


def test_hwcn_to_fractal_z_mapping_merges_c_h_w():
    m = F.transfer_dims("HWCN", "FRACTAL_Z", [1, 2, 3, 16])
    assert m.src_to_dst == [[0], [0], [0, 3], [1, 2]]
    assert m.dst_to_src == [[2, 0, 1], [3], [3], [2]]
    assert F.aligned_shape("HWCN", "FRACTAL_Z", [1, 2, 3, 16], "DT_FLOAT16") == [1, 1, 16, 16]


def test_nchw_to_fractal_z_mapping():
    m = F.transfer_dims("NCHW", "FRACTAL_Z", [32, 16, 3, 3])
    assert m.src_to_dst == [[1, 2], [0, 3], [0], [0]]
    assert m.dst_to_src == [[1, 2, 3], [0], [0], [1]]


def test_ndhwc_to_ndc1hwc0_mapping():
    m = F.transfer_dims("NDHWC", "NDC1HWC0", [1, 2, 4, 4, 32])
    assert m.src_to_dst == [[0], [1], [3], [4], [2, 5]]
    assert m.dst_to_src == [[0], [1], [4], [2], [3], [4]]


def test_ncdhw_to_ndc1hwc0_mapping():
    m = F.transfer_dims("NCDHW", "NDC1HWC0", [1, 32, 2, 4, 4])
    assert m.src_to_dst == [[0], [2, 5], [1], [3], [4]]
    assert F.aligned_shape("NCDHW", "NDC1HWC0", [1, 32, 2, 4, 4], "DT_FLOAT16") == [1, 16, 1, 1, 1]


def test_full_size_between_plain_formats_permutes():
    m = F.transfer_dims("NCHW", "HWCN", [2, 3, 4, 5])
    assert m.src_to_dst == [[3], [2], [0], [1]]
    assert m.dst_to_src == [[2], [3], [1], [0]]
    assert F.aligned_shape("NCHW", "HWCN", [2, 3, 4, 5], "DT_FLOAT") == [1, 1, 1, 1]


def test_chwn_to_5hd():
    m = F.transfer_dims("CHWN", "NC1HWC0", [32, 4, 4, 1])
    assert m.src_to_dst == [[1, 4], [2], [3], [0]]
    assert m.dst_to_src == [[3], [0], [1], [2], [0]]


def test_nd_to_nz_swaps_last_two_axes():
    m = F.transfer_dims("ND", "FRACTAL_NZ", [8, 32, 64])
    assert m.src_to_dst == [[0], [2], [1]]
    assert m.dst_to_src == [[0], [2], [1], [-1], [-1]]
    assert F.aligned_shape("ND", "FRACTAL_NZ", [8, 32, 64], "DT_FLOAT16") == [1, 16, 16]
    cube = F.CubeSizes.parse("Default:16,16,16;DT_INT8:16,32,16")
    assert F.aligned_shape("ND", "FRACTAL_NZ", [8, 32, 64], "DT_INT8", cube=cube) == [1, 16, 32]


def test_nd_to_nz_needs_rank_two_and_an_nz_dst():
    assert F.transfer_dims("ND", "FRACTAL_NZ", [8]) is None
    assert F.aligned_shape("ND", "FRACTAL_NZ", [8], "DT_FLOAT16") is None
    assert F.transfer_dims("ND", "NC1HWC0", [1, 2, 3, 4]) is None
    assert F.aligned_shape("ND", "NCHW", [1, 2, 3, 4], "DT_FLOAT16") is None


def test_not_full_size_uses_reshape_type_mask():
    # NCHW with N and H expanded (mask bits 0 and 2): the origin shape is (C, W)
    assert F.reshape_type_axes("NCHW", 0b0101) == ["C", "W"]
    m = F.transfer_dims("NCHW", "NC1HWC0", [32, 7], mask=0b0101)
    assert m.src_to_dst == [[1, 4], [3]]
    assert m.dst_to_src == [[-1], [0], [-1], [1], [0]]
    assert F.aligned_shape("NCHW", "NC1HWC0", [32, 7], "DT_FLOAT16", mask=0b0101) == [16, 1]
    # without a mask GE refuses the not-full-size case
    assert F.transfer_dims("NCHW", "NC1HWC0", [32, 7]) is None
    assert F.aligned_shape("NCHW", "NC1HWC0", [32, 7], "DT_FLOAT16") is None


def test_formats_without_axis_tables_are_unsupported():
    assert F.transfer_dims("NCHW", "NC1HWC0_C04", [1, 4, 2, 2]) is None
    assert F.transfer_dims("NCHW", "FRACTAL_Z_3D", [1, 4, 2, 2]) is None


def test_dtype_sizes():
    assert F.bytes_of(10, "DT_FLOAT16") == 20
    assert F.bytes_of(3, "DT_INT4") == 2  # sub-byte types round up
    assert F.bytes_of(5, "DT_UNDEFINED") == -1
    assert F.shape_size([]) == 0 and F.shape_size([2, 0]) == 0 and F.shape_size([2, -1]) == -1
    assert F.element_count([]) == 1


def test_cube_sizes_parse():
    c = F.CubeSizes.parse("Default:16,16,16;DT_INT8:16,32,16")
    assert (c.m0("DT_INT8"), c.c0("DT_INT8"), c.n0("DT_INT8")) == (16, 32, 16)
    assert c.c0("DT_FLOAT") == 16
    with pytest.raises(ValueError):
        F.CubeSizes.parse("DT_INT8:16,32")


# ---------------------------------------------------------------------------- the per-input concat check


def test_check_concat_dim_worked_examples_from_reference():
    # NCHW -> NC1HWC0 concat on C: N must be 1 and C a multiple of c0
    ok = F.check_concat_dim("NCHW", "NC1HWC0", [1, 32, 4, 4], [1, 2, 4, 4, 16], "DT_FLOAT16", 1)
    assert ok.ok and ok.detail["real_dim"] == 1
    assert (
        F.check_concat_dim("NCHW", "NC1HWC0", [2, 32, 4, 4], [2, 2, 4, 4, 16], "DT_FLOAT16", 1).reason
        == "front_dims_not_one"
    )
    assert (
        F.check_concat_dim("NCHW", "NC1HWC0", [1, 24, 4, 4], [1, 2, 4, 4, 16], "DT_FLOAT16", 1).reason
        == "dim_not_aligned"
    )
    # NHWC -> NC1HWC0 concat on H: real axis 2, needs N == 1 and C1 == 1
    assert F.check_concat_dim("NHWC", "NC1HWC0", [1, 4, 4, 16], [1, 1, 4, 4, 16], "DT_FLOAT16", 1).ok
    bad = F.check_concat_dim("NHWC", "NC1HWC0", [1, 4, 4, 32], [1, 2, 4, 4, 16], "DT_FLOAT16", 1)
    assert bad.reason == "front_dims_not_one" and bad.detail["front_dims_not_one"] == [1]
    # NCHW -> FRACTAL_Z concat on H: C1HW merges C, H, W; origin C must fit in one c0 block
    assert F.check_concat_dim("NCHW", "FRACTAL_Z", [16, 8, 3, 3], [9, 1, 16, 16], "DT_FLOAT16", 2).ok
    big_c = F.check_concat_dim("NCHW", "FRACTAL_Z", [16, 32, 3, 3], [18, 1, 16, 16], "DT_FLOAT16", 2)
    assert big_c.reason == "merged_front_axis_not_trivial"
    # ND -> ND: only the front dims matter
    assert F.check_concat_dim("ND", "ND", [1, 3, 5], [1, 3, 5], "DT_FLOAT16", 1).ok
    assert not F.check_concat_dim("ND", "ND", [2, 3, 5], [2, 3, 5], "DT_FLOAT16", 1).ok


def test_check_concat_dim_merged_axis_with_split_front_not_on_real_axis():
    # FRACTAL_Z concat on W: C (split onto C1HW and C0) sits in front of W inside C1HW
    r = F.check_concat_dim("HWCN", "FRACTAL_Z", [1, 2, 17, 16], [4, 1, 16, 16], "DT_FLOAT16", 1)
    assert r.reason == "merged_front_axis_not_trivial" and r.detail["merged_front_axis"] == 2


def test_check_concat_dim_rank_mismatch_of_storage():
    r = F.check_concat_dim("NCHW", "NC1HWC0", [1, 32, 4, 4], [1, 2, 4, 4], "DT_FLOAT16", 1)
    assert r.reason == "transfer_dims_rank"


def test_format_facts_tables():
    facts = F.format_facts()
    assert ("NC1HWC0", 1, "C1") in facts["format_axis"]
    assert ("FRACTAL_Z", "C1HW", 2, "W") in facts["format_split"]
    assert ("ND", 4) in facts["format_full_size"]
    assert ("FRACTAL_NZ",) in facts["format_nz"]

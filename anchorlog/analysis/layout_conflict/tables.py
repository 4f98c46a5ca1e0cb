"""GE's absolutely-no-conflict and absolutely-conflict attribute pairs (reference §4.3). Both are symmetric;
each row has a name so the report can say which row fired. The absolutely-conflict rows are also the rules' input
relation ``layout_abs_conflict_row`` of ``anchorlog/queries/layout.dl`` (supplied by ``rules.table_rows``)."""

from __future__ import annotations

from .attributes import (
    CONT_IN,
    CONT_OUT,
    IMMUT_OUT,
    NOPAD_IN,
    NOPAD_OUT,
    NORMAL_OUT,
    REF_OUT,
    RTS_IN,
    RTS_OUT,
    UNSUP_IN,
    USER_IN,
    USER_OUT,
    AnchorAttribute,
)

ABSOLUTE_NO_CONFLICT_ROWS: tuple[tuple[AnchorAttribute, AnchorAttribute], ...] = (
    (RTS_IN, NORMAL_OUT),
    (USER_OUT, USER_OUT),
    (USER_IN, USER_OUT),
)

ABSOLUTE_CONFLICT_ROWS: tuple[tuple[AnchorAttribute, AnchorAttribute], ...] = (
    (USER_IN, UNSUP_IN),
    (USER_IN, RTS_IN),
    (USER_OUT, RTS_IN),
    (USER_OUT, RTS_OUT),
    (USER_OUT, CONT_OUT),
    (USER_OUT, NOPAD_OUT),
    (IMMUT_OUT, RTS_IN),
    (IMMUT_OUT, CONT_IN),
    (CONT_IN, NOPAD_OUT),
    (CONT_OUT, NOPAD_IN),
)


def row_name(x: AnchorAttribute, y: AnchorAttribute) -> str:
    return f"{x.name} x {y.name}"


def _symmetric(rows: tuple[tuple[AnchorAttribute, AnchorAttribute], ...]) -> dict[tuple[int, int], str]:
    out: dict[tuple[int, int], str] = {}
    for x, y in rows:
        out[(x, y)] = out[(y, x)] = row_name(x, y)
    return out


ABSOLUTE_NO_CONFLICT: dict[tuple[int, int], str] = _symmetric(ABSOLUTE_NO_CONFLICT_ROWS)
ABSOLUTE_CONFLICT: dict[tuple[int, int], str] = _symmetric(ABSOLUTE_CONFLICT_ROWS)


def is_absolute_no_conflict(x: AnchorAttribute, y: AnchorAttribute) -> bool:
    """Anything paired with REFERENCE_OUTPUT, or a row of the no-conflict table."""
    return x == REF_OUT or y == REF_OUT or (x, y) in ABSOLUTE_NO_CONFLICT


def is_absolute_conflict(x: AnchorAttribute, y: AnchorAttribute) -> bool:
    return (x, y) in ABSOLUTE_CONFLICT

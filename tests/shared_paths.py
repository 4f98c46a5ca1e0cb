"""Where the tests find the shared conformance material: ``../shared`` beside the checkout (the layout of the
development machine), or the folder named by ``$ANCHORLOG_SHARED``. Tests that need it skip when it is absent,
so a clone elsewhere still runs the rest."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

SHARED = Path(os.environ.get("ANCHORLOG_SHARED") or Path(__file__).resolve().parents[2] / "shared")

# the mark for a test that reads it
requires_shared = pytest.mark.skipif(not SHARED.is_dir(), reason=f"{SHARED} (cases, real GE dumps) not available")

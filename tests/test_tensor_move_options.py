"""Option validators of tensor-move-delete: bad values are refused by the CLI before any pass runs."""

from __future__ import annotations

import json

import pytest

from anchorlog.cli import main
from tests.shared_paths import SHARED, requires_shared

CASE = f"{SHARED}/conformance/cases/tm_st_both_writers_kept/model.pbtxt"


@requires_shared
@pytest.mark.parametrize(
    ("option", "passes"),
    [
        ("ge.exec.outputReuseInputMemIndexes=abc", "rw-conflict"),
        ("ge.exec.outputReuseInputMemIndexes=abc", "o3"),
        ("ge.exec.inputReuseMemIndexes=x,y", "rw-conflict"),
        ("ge.oo.level=O9", "rw-conflict"),
        ("anchorlog.tensor_move.init=bogus", "tensor-move-delete"),
    ],
)
def test_bad_option_value_fails_before_any_pass(tmp_path, capsys, option, passes):
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    rc = main(["optimize", CASE, "-o", str(out), "--report", str(rep), "--passes", passes, "--option", option])
    assert rc == 2
    err = capsys.readouterr().err
    assert "bad value" in err and option.split("=", 1)[0] in err
    assert "pass " not in err  # no pass started
    assert not out.exists() and not rep.exists()


@requires_shared
@pytest.mark.parametrize(
    "option",
    [
        "ge.exec.inputReuseMemIndexes=12abc",  # GE-valid: the token does not parse, nothing is reused
        "ge.exec.outputReuseInputMemIndexes=1,1|0,0",
        "ge.exec.inputReuseMemIndexes=",
        "ge.oo.level=o3",
        "anchorlog.tensor_move.init=none",
    ],
)
def test_good_option_values_are_accepted(tmp_path, option):
    out, rep = tmp_path / "o.pbtxt", tmp_path / "r.json"
    rc = main(
        ["optimize", CASE, "-o", str(out), "--report", str(rep), "--passes", "tensor-move-delete", "--option", option]
    )
    assert rc == 0
    section = json.loads(rep.read_text())["passes"][0]
    assert section["pass"] == "tensor-move-delete"

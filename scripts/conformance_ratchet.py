#!/usr/bin/env python3
"""Run GE's conformance cases (../shared/conformance) through our CLI and hold the ratchet.

``conformance/passing.txt`` lists the case ids that passed when it was last updated; every one of them must
still pass. Run with ``--update`` after an improvement to record the new set (ids are only ever added by
hand-reviewed updates; a case that stops passing fails this script).

usage: conformance_ratchet.py [--cases DIR] [--update] [--filter TEXT]
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
RATCHET = ROOT / "conformance" / "passing.txt"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cases", default=str(ROOT.parent / "shared" / "conformance" / "cases"))
    ap.add_argument("--update", action="store_true", help="rewrite conformance/passing.txt with today's passing set")
    ap.add_argument("--filter", default="")
    a = ap.parse_args()
    cases = Path(a.cases)
    runner = cases.parent / "run_cases.py"
    if not runner.exists():
        print(f"conformance: runner not found at {runner}; skipping", file=sys.stderr)
        return 0
    cli = str(ROOT / ".venv" / "bin" / "anchorlog")
    proc = subprocess.run(
        [sys.executable, str(runner), str(cases), "--cli", cli, "--filter", a.filter, "--timeout", "120"],
        capture_output=True,
        text=True,
    )
    if not re.search(r"^\d+ passed, \d+ failed$", proc.stdout, re.M):
        # the runner did not finish: never read a crash as "nothing failed"
        print(proc.stdout[-2000:] + proc.stderr[-2000:], file=sys.stderr)
        print(f"conformance: the runner did not complete (exit {proc.returncode})", file=sys.stderr)
        return 1
    failing = set(re.findall(r"^FAIL (\S+?):", proc.stdout, re.M))
    all_ids = sorted(p.name for p in cases.iterdir() if (p / "case.json").exists() and a.filter in p.name)
    passing = [i for i in all_ids if i not in failing]
    for line in proc.stdout.splitlines():
        if line.startswith("  ") or line.startswith("conformance"):
            print(line)
    print(f"conformance: {len(passing)} of {len(all_ids)} cases pass")
    if a.update:
        RATCHET.parent.mkdir(exist_ok=True)
        RATCHET.write_text("".join(f"{i}\n" for i in passing))
        print(f"conformance: recorded {len(passing)} passing ids in {RATCHET.relative_to(ROOT)}")
        return 0
    expected = [s.strip() for s in RATCHET.read_text().splitlines() if s.strip()] if RATCHET.exists() else []
    lost = [i for i in expected if i in failing]
    for line in proc.stdout.splitlines():
        m = re.match(r"^FAIL (\S+?):", line)
        if m and m.group(1) in lost:
            print("REGRESSION " + line[5:])
    new = [i for i in passing if i not in set(expected)]
    if new:
        print(f"conformance: {len(new)} case(s) pass that the ratchet does not list yet (run with --update)")
    if lost:
        print(f"conformance: {len(lost)} case(s) of the ratchet no longer pass")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""A behaviour sweep: every finding and every fixed text of a checkout over real files.

Runs ``kerasfit check --select ALL --output-format json`` (or the rules ``--select`` names) over
the given directories, then
``--fix --unsafe-fixes`` on a copy of them, and writes one JSON record: per file the sorted
findings (code, line, column, end line, end column, message, fix applicability and edits) and
the SHA-256 of the fixed text. Run it with two checkouts' interpreters over the same inputs
and diff the two records (``--compare A B`` prints the differences and their count) — a
refactor that holds behaviour yields zero.

Usage:
  python benchmarks/sweep.py --out base.json DIR...       # with the checkout's python
  python benchmarks/sweep.py --compare base.json new.json
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any


def _run(args: list[str], cwd: Path) -> str:
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", *args],
        cwd=cwd, capture_output=True, text=True, check=False,
    )
    if proc.returncode not in (0, 1):
        raise SystemExit(f"kerasfit {' '.join(args)} exited {proc.returncode}: {proc.stderr[-2000:]}")
    return proc.stdout


def _findings(root: Path, names: list[str], select: str) -> dict[str, list[Any]]:
    out = _run(["check", "--isolated", "--no-cache", "--select", select, "--exit-zero",
                "--output-format", "json", *names], root)
    per_file: dict[str, list[Any]] = {}
    for d in json.loads(out or "[]"):
        fix = d.get("fix")
        row = [
            d["code"], d["location"]["row"], d["location"]["column"],
            d["end_location"]["row"], d["end_location"]["column"], d["message"],
            None if fix is None else [
                fix["applicability"],
                [[e["location"]["row"], e["location"]["column"], e["end_location"]["row"],
                  e["end_location"]["column"], e["content"]] for e in fix["edits"]],
            ],
        ]
        per_file.setdefault(d["filename"], []).append(row)
    for rows in per_file.values():
        rows.sort(key=lambda r: (r[1], r[2], r[0], r[3], r[4]))
    return per_file


def _fixed(root: Path, names: list[str], select: str) -> dict[str, str]:
    with tempfile.TemporaryDirectory(prefix="kf-sweep-") as tmp:
        work = Path(tmp)
        for name in names:
            shutil.copytree(root / name, work / name)
        _run(["check", "--isolated", "--no-cache", "--select", select, "--exit-zero", "--quiet",
              "--fix", "--unsafe-fixes", *names], work)
        hashes = {}
        for path in sorted(work.rglob("*.py")):
            original = (root / path.relative_to(work)).read_bytes()
            fixed = path.read_bytes()
            if fixed != original:
                hashes[str(path.relative_to(work))] = hashlib.sha256(fixed).hexdigest()
        return hashes


def sweep(root: Path, names: list[str], select: str = "ALL") -> dict[str, Any]:
    files = sorted(str(p.relative_to(root)) for n in names for p in (root / n).rglob("*.py"))
    return {"files": len(files), "findings": _findings(root, names, select), "fixed": _fixed(root, names, select)}


def compare(a: dict[str, Any], b: dict[str, Any]) -> int:
    diffs = 0
    for key in ("findings", "fixed"):
        left, right = a[key], b[key]
        for name in sorted(set(left) | set(right)):
            if left.get(name) != right.get(name):
                diffs += 1
                print(f"{key}: {name}\n  before: {left.get(name)}\n  after:  {right.get(name)}")
    print(f"{diffs} differing file record(s); files {a['files']} vs {b['files']}")
    return diffs


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="*", help="directories to sweep (relative to --root)")
    ap.add_argument("--root", type=Path, default=Path.cwd(), help="the directory the paths are under")
    ap.add_argument("--out", type=Path, help="write the record here")
    ap.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    ap.add_argument("--select", default="ALL", help="the rules to run (kerasfit check's --select; default ALL)")
    ns = ap.parse_args()
    if ns.compare:
        a, b = (json.loads(p.read_text()) for p in ns.compare)
        return 1 if compare(a, b) else 0
    if not ns.dirs or not ns.out:
        ap.error("give directories and --out, or --compare BEFORE AFTER")
    record = sweep(ns.root.resolve(), ns.dirs, ns.select)
    ns.out.write_text(json.dumps(record, indent=1, sort_keys=True))
    n = sum(len(v) for v in record["findings"].values())
    print(f"{record['files']} files, {n} findings, {len(record['fixed'])} fixed files -> {ns.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

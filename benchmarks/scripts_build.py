"""How many example scripts build unmodified: ``kerasfit report`` on each, one at a time.

    python benchmarks/scripts_build.py DIR_OR_FILES... [--timeout 300]

Prints one line per script (built / failed, seconds, entry or error) and the count.
A script "trained" when its report notes a refused ``Model.fit`` or download: the
slicer should never let one through.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("paths", nargs="+")
    p.add_argument("--timeout", type=float, default=300)
    args = p.parse_args()
    files = []
    for path in map(Path, args.paths):
        files += sorted(path.glob("*.py")) if path.is_dir() else [path]
    built = 0
    for f in files:
        t0 = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "kerasfit", "report", str(f), "--no-cache",
                               "--output-format", "json", "--build-timeout", str(args.timeout)],
                              capture_output=True, text=True)
        dt = time.perf_counter() - t0
        if proc.returncode == 0:
            data = json.loads(proc.stdout)
            refused = [n for n in data.get("notes", []) if n.startswith("refused")]
            built += 1
            print(f"built   {dt:6.1f}s  {f.name}: {data.get('entry')}"
                  + (f"  REFUSED: {refused}" if refused else ""))
        else:
            err = (proc.stderr.strip().splitlines() or ["?"])[-1]
            print(f"failed  {dt:6.1f}s  {f.name}: {err[:400]}")
        sys.stdout.flush()
    print(f"{built} of {len(files)} built")
    return 0


if __name__ == "__main__":
    sys.exit(main())

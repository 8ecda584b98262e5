#!/usr/bin/env python3
"""How long ``kerasfit report`` takes on ResNet-50: cold (empty cache) and cached.

    python benchmarks/report_speed.py [MODEL.py] [--cached-runs 3]

Needs the ``build`` extra (TensorFlow). Each figure is printed with the load average
seen just before it and the CPU seconds the run used (the CLI, the keeper and the build
child), because on a shared machine the wall-clock time mostly measures the others.
The cold run also prints the child's own phases: TensorFlow's import, the model's
construction, tracing forward and backward, XLA's lowering to HLO, reading the HLO.
Like ``run.py``, it measures an installed package: bytecode compiled, not compiling.
Goals (issue 10): cold < 60 s, cached < 1 s.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
RESNET = ROOT / "fixtures" / "crosscheck" / "resnet50.py"


def cpu_of_children() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run(cmd: list[str], env: dict[str, str]) -> tuple[float, float, float, subprocess.CompletedProcess]:
    """(wall s, CPU s, load average before, process) of one run."""
    load = os.getloadavg()[0]
    cpu = cpu_of_children()
    t = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    return time.perf_counter() - t, cpu_of_children() - cpu, load, proc


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("model", nargs="?", default=str(RESNET))
    ap.add_argument("--cached-runs", type=int, default=3)
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kerasfit-report-bench-") as tmp:
        # Bytecode goes to the temporary directory, not into the source tree.
        env = dict(os.environ, KERASFIT_CACHE_DIR=tmp, PYTHONPYCACHEPREFIX=str(Path(tmp) / "pyc"))
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        subprocess.run([sys.executable, "-m", "compileall", "-q", str(ROOT / "kerasfit")],
                       env=env, capture_output=True)
        kf = [sys.executable, "-m", "kerasfit", "report", args.model]
        print(f"{os.cpu_count()} cores; {Path(args.model).name}")
        wall, cpu, load, proc = run([*kf, "--output-format", "json"], env)
        if proc.returncode != 0:
            print(proc.stderr.strip()[-2000:])
            return 2
        phases = json.loads(proc.stdout).get("timings", {})
        shown = ", ".join(f"{k} {v:.1f} s" for k, v in phases.items())
        print(f"cold:   {wall:6.2f} s wall, {cpu:5.2f} s CPU, load {load:.1f} (goal < 60 s)")
        print(f"        child phases (wall): {shown}")
        for _ in range(args.cached_runs):
            wall, cpu, load, proc = run(kf, env)
            if proc.returncode != 0:
                print(proc.stderr.strip()[-2000:])
                return 2
            print(f"cached: {wall:6.2f} s wall, {cpu:5.2f} s CPU, load {load:.1f} (goal < 1 s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

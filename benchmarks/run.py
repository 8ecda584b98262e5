#!/usr/bin/env python3
"""kerasfit's speed benchmark: prints ratios measured in one run on one corpus.

The corpus is gathered from Keras/TF source that pip-installed packages ship
(keras, tf_keras: applications, layers, models, losses, optimizers) plus kerasfit's own
fixtures, copied into a temporary directory. Measured, each once, on this machine:

- libcst parse-only of every file (1 process)          -- the floor
- kerasfit cold ``check`` of the corpus (CLI, empty cache, all default rules)
- kerasfit warm re-run (unchanged files, cache hit)
- kerasfit one-file ``check`` end to end (pre-commit's case)
- Fixit 2.2 with its built-in rules (``fixit lint``), when installed (``--fixit PATH``)
- peak memory of the cold check and whether TensorFlow was imported

Usage: python benchmarks/run.py [--max-files N] [--fixit /path/to/fixit] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
PACKAGE_DIRS = (
    "keras/src/applications",
    "tf_keras/src/applications",
    "keras/src/layers",
    "keras/src/models",
    "keras/src/losses",
    "keras/src/optimizers",
)


def gather(dest: Path, max_files: int) -> list[Path]:
    import sysconfig

    site = Path(sysconfig.get_paths()["purelib"])
    sources: list[Path] = []
    for d in PACKAGE_DIRS:
        base = site / d
        if base.is_dir():
            sources.extend(sorted(p for p in base.rglob("*.py") if not p.name.endswith("_test.py")))
    sources.extend(sorted(p for p in (ROOT / "fixtures").rglob("*.py")))
    files = []
    for i, src in enumerate(sources[:max_files]):
        text = src.read_text(encoding="utf-8", errors="replace")
        if "keras" not in text and "tensorflow" not in text:
            continue
        out = dest / f"{i:04d}_{src.name}"
        out.write_text(text, encoding="utf-8")
        files.append(out)
    return files


def compile_installed_package(env: dict) -> None:
    import importlib.util

    dirs = []
    for pkg in ("kerasfit", "kerasfit.rules"):
        spec = importlib.util.find_spec(pkg)
        if spec is not None and spec.submodule_search_locations:
            dirs.extend(spec.submodule_search_locations)
    subprocess.run([sys.executable, "-m", "compileall", "-q", *dirs], env=env, capture_output=True)


def timed(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, subprocess.CompletedProcess]:
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    return time.perf_counter() - t, proc


def parse_only(files: list[Path]) -> float:
    code = (
        "import sys, time, libcst\n"
        "paths = sys.argv[1:]\n"
        "srcs = [open(p, encoding='utf-8').read() for p in paths]\n"
        "t = time.perf_counter()\n"
        "for s in srcs:\n"
        "    libcst.parse_module(s)\n"
        "print(time.perf_counter() - t)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *map(str, files)], capture_output=True, text=True, check=True)
    return float(proc.stdout.strip())


def kerasfit_cmd() -> list[str]:
    exe = Path(sys.executable).with_name("kerasfit")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "kerasfit"]


def peak_rss_mb_of(cmd: list[str], cwd: Path, env: dict) -> tuple[float, str]:
    """Run cmd in a fresh process tree and report the largest RSS of any process."""
    wrapper = (
        "import resource, subprocess, sys\n"
        "p = subprocess.run(sys.argv[1:], capture_output=True, text=True)\n"
        "r = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss\n"
        "print(r / 1024.0)\n"
    )
    proc = subprocess.run([sys.executable, "-c", wrapper, *cmd], cwd=cwd, env=env, capture_output=True, text=True)
    return float(proc.stdout.strip().splitlines()[-1]), proc.stderr


def tensorflow_imported(cwd: Path, files: list[Path]) -> bool:
    code = (
        "import sys\n"
        "from kerasfit.api import CheckOptions, check_paths\n"
        "check_paths(sys.argv[1:], CheckOptions(use_cache=False, jobs=1))\n"
        "print(any(m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras') for m in sys.modules))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, *map(str, files[:20])], cwd=cwd, capture_output=True, text=True)
    return proc.stdout.strip().endswith("True")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--max-files", type=int, default=260)
    ap.add_argument("--fixit", default=shutil.which("fixit"), help="path to a fixit 2.x executable")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kerasfit-bench-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        corpus.mkdir()
        files = gather(corpus, args.max_files)
        lines = sum(p.read_text(encoding="utf-8").count("\n") for p in files)
        env = dict(os.environ, KERASFIT_CACHE_DIR=str(work / "cache"))
        # An installed package has its bytecode compiled; measure that, not compilation.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        compile_installed_package(env)
        kf = kerasfit_cmd()
        print(f"corpus: {len(files)} files, {lines} lines; {os.cpu_count()} cores")

        parse = parse_only(files)
        cold, proc = timed([*kf, "check", "corpus", "--exit-zero", "--statistics"], work, env)
        if proc.returncode not in (0, 1):
            print(proc.stdout[-2000:], proc.stderr[-2000:])
            return 2
        findings = proc.stdout.count(": KF")
        cold_all, _ = timed([*kf, "check", "corpus", "--exit-zero", "--no-cache", "--select", "ALL"], work, env)
        warm, _ = timed([*kf, "check", "corpus", "--exit-zero"], work, env)
        one = min(files, key=lambda p: abs(p.stat().st_size - 6000))
        single, _ = timed([*kf, "check", str(one.relative_to(work)), "--exit-zero", "--no-cache"], work, env)
        floor, _ = timed([sys.executable, "-c", "import libcst"], work, env)
        rss, _ = peak_rss_mb_of([*kf, "check", "corpus", "--exit-zero", "--no-cache"], work, env)
        tf_loaded = tensorflow_imported(work, files)

        fixit = None
        if args.fixit:
            fx_env = dict(os.environ)
            fixit, fproc = timed([args.fixit, "lint", "corpus"], work, fx_env)
            if fproc.returncode not in (0, 1, 255) and "Traceback" in fproc.stderr:
                fixit = None

        figures = {
            "files": len(files),
            "lines": lines,
            "findings": findings,
            "libcst_parse_s": round(parse, 3),
            "kerasfit_cold_s": round(cold, 3),
            "kerasfit_cold_all_rules_s": round(cold_all, 3),
            "kerasfit_warm_s": round(warm, 3),
            "kerasfit_one_file_s": round(single, 3),
            "python_import_libcst_s": round(floor, 3),
            "fixit_s": round(fixit, 3) if fixit is not None else None,
            "peak_rss_mb": round(rss, 1),
            "tensorflow_imported": tf_loaded,
        }
        print(f"libcst parse only (1 process): {parse:7.2f} s")
        print(f"kerasfit check, cold:         {cold:7.2f} s   = {cold / parse:.2f}x parse   (goal <= 2x)")
        print(f"kerasfit check, --select ALL: {cold_all:7.2f} s   = {cold_all / parse:.2f}x parse")
        if fixit is not None:
            print(f"fixit lint (built-in rules):  {fixit:7.2f} s   = kerasfit is {fixit / cold:.1f}x faster (goal >= 7x)")
        else:
            print("fixit: not measured (pass --fixit PATH to a fixit 2.x executable)")
        print(f"kerasfit check, warm (cache): {warm:7.2f} s   (goal < 0.5 s)")
        print(f"kerasfit check, one file:     {single:7.2f} s   (goal < 0.4 s; `python -c 'import libcst'` alone: {floor:.2f} s)")
        print(f"peak memory (largest process): {rss:6.1f} MB  (goal < 150 MB)")
        print(f"TensorFlow imported by static checking: {tf_loaded}")
        print(f"findings on the corpus: {findings}")
        lsp = HERE / "lsp_latency.py"
        if lsp.exists():
            proc = subprocess.run([sys.executable, str(lsp)], capture_output=True, text=True)
            print(proc.stdout.strip() or proc.stderr.strip()[-500:])
        if args.json:
            print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""kerasfit's speed benchmark: prints ratios measured in one run on one corpus.

The corpus is gathered from Keras/TF source that pip-installed packages ship
(keras, tf_keras: applications, layers, models, losses, optimizers) plus kerasfit's own
fixtures, or (``--corpus DIR``) every ``.py`` file under DIR, copied into a temporary
directory. Measured, each once, on this machine:

- libcst parse-only of every file, in as many processes as kerasfit uses  -- the floor
- kerasfit cold ``check`` of the corpus (CLI, empty cache, all default rules)
- kerasfit warm re-run (unchanged files, cache hit), and the same as a second ``--diff``, and
  as ``--fix`` once the tree is as ``--fix`` leaves it (fix runs answered from the cache)
- kerasfit one-file ``check`` end to end (pre-commit's case), and with ``--compare-with`` another
  kerasfit's (an earlier commit's) on the same file, interleaved, for the "within 10%" goal
- Fixit 2.2 with its built-in rules (``fixit lint``), when installed (``--fixit PATH``)
- peak memory of the cold check and whether TensorFlow was imported

A ratio compares the same work: the floor parses the same files with the same number of
processes (``--jobs``, default the CPU count; one below kerasfit's parallel threshold).

Usage: python benchmarks/run.py [--corpus DIR] [--max-files N] [--jobs N] [--repeat N] [--fixit /path/to/fixit]
       [--kerasfit /path/to/kerasfit] [--compare-with /path/to/other/kerasfit] [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from kerasfit.project.check import PARALLEL_MIN_FILES, deal

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

    # this interpreter's site-packages, then any other on its path (a venv that shares
    # another's packages through a .pth file)
    sites = [Path(sysconfig.get_paths()["purelib"]), *(Path(p) for p in sys.path if p.endswith("site-packages"))]
    sources: list[Path] = []
    for d in PACKAGE_DIRS:
        base = next((site / d for site in sites if (site / d).is_dir()), None)
        if base is not None:
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


def copy_tree(src: Path, dest: Path, max_files: int) -> list[Path]:
    """Every .py file under src (sorted, at most max_files), at its relative path."""
    files = []
    for p in sorted(src.rglob("*.py"))[:max_files]:
        out = dest / p.relative_to(src)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(p.read_bytes())
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
    wall, _, proc = measured(cmd, cwd, env)
    return wall, proc


def measured(cmd: list[str], cwd: Path, env: dict | None = None) -> tuple[float, float, subprocess.CompletedProcess]:
    """Wall seconds, and CPU seconds of the whole process tree (steadier on a busy machine)."""
    r0 = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True)
    wall = time.perf_counter() - t
    r1 = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (r1.ru_utime + r1.ru_stime) - (r0.ru_utime + r0.ru_stime), proc


def parse_only(files: list[Path], processes: int) -> tuple[float, float]:
    """Wall and CPU seconds to libcst-parse every file in ``processes`` forked workers, the
    files dealt out in chunks as kerasfit deals them (kerasfit.project.check.deal)."""
    srcs = [p.read_text(encoding="utf-8", errors="replace") for p in files]
    chunks = [[str(files[i]) for i in c] for c in deal([len(s) for s in srcs], processes)]
    code = (
        "import json, multiprocessing as mp, resource, sys, time, libcst\n"
        "def cpu():\n"
        "    a, b = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)\n"
        "    return a.ru_utime + a.ru_stime + b.ru_utime + b.ru_stime\n"
        "n, chunks = int(sys.argv[1]), json.loads(sys.stdin.read())\n"
        "srcs = {p: open(p, encoding='utf-8', errors='replace').read() for c in chunks for p in c}\n"
        "def parse(chunk):\n"
        "    for p in chunk:\n"
        "        try:\n"
        "            libcst.parse_module(srcs[p])\n"
        "        except Exception:\n"
        "            pass\n"
        "    return len(chunk)\n"
        "t, c = time.perf_counter(), cpu()\n"
        "if n == 1:\n"
        "    parse([p for c in chunks for p in c])\n"
        "else:\n"
        "    pool = mp.get_context('fork').Pool(n)\n"
        "    list(pool.imap_unordered(parse, chunks, chunksize=1))  # each worker takes the next chunk when done\n"
        "    pool.close()\n"
        "    pool.join()\n"
        "print(time.perf_counter() - t, cpu() - c)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, str(processes)], input=json.dumps(chunks), capture_output=True,
                          text=True, check=True)
    wall, cpu = proc.stdout.split()
    return float(wall), float(cpu)


def kerasfit_cmd(given: str | None = None) -> list[str]:
    if given:
        return [given]
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


def tensorflow_imported(cwd: Path, files: list[Path], python: str = sys.executable) -> bool:
    code = (
        "import sys\n"
        "from kerasfit.project.check import CheckOptions, check_paths\n"
        "check_paths(sys.argv[1:], CheckOptions(use_cache=False, jobs=1))\n"
        "print(any(m.split('.')[0] in ('tensorflow', 'keras', 'tf_keras') for m in sys.modules))\n"
    )
    proc = subprocess.run([python, "-c", code, *map(str, files[:20])], cwd=cwd, capture_output=True, text=True)
    return proc.stdout.strip().endswith("True")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--corpus", type=Path, help="check every .py file under this directory instead")
    ap.add_argument("--max-files", type=int, default=260)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="processes for kerasfit and the floor")
    ap.add_argument("--fixit", default=shutil.which("fixit"), help="path to a fixit 2.x executable")
    ap.add_argument("--repeat", type=int, default=1, help="take the best of N runs of the floor, cold check and Fixit")
    ap.add_argument("--json", action="store_true", help="print the figures as JSON too")
    ap.add_argument("--no-lsp", action="store_true", help="skip the language server's latencies")
    ap.add_argument("--kerasfit", metavar="KERASFIT",
                    help="the kerasfit executable to measure (default: the one beside this interpreter); the floor "
                         "is this script's, so checkouts measured in turn share it")
    ap.add_argument("--compare-with", metavar="KERASFIT",
                    help="another kerasfit executable (an earlier commit's): its one-file check is timed in "
                         "the same run, interleaved with this one's, and the ratio printed")
    args = ap.parse_args()

    with tempfile.TemporaryDirectory(prefix="kerasfit-bench-") as tmp:
        work = Path(tmp)
        corpus = work / "corpus"
        corpus.mkdir()
        files = copy_tree(args.corpus, corpus, args.max_files) if args.corpus else gather(corpus, args.max_files)
        lines = sum(p.read_text(encoding="utf-8").count("\n") for p in files)
        env = dict(os.environ, KERASFIT_CACHE_DIR=str(work / "cache"))
        # An installed package has its bytecode compiled; measure that, not compilation.
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env.pop("KERASFIT_NO_PARALLEL", None)  # kerasfit's process count is --jobs, as the floor's
        compile_installed_package(env)
        kf = kerasfit_cmd(args.kerasfit)
        # kerasfit checks in one process below its threshold, else in --jobs processes
        processes = args.jobs if len(files) >= PARALLEL_MIN_FILES else 1
        print(f"corpus: {len(files)} files, {lines} lines; {os.cpu_count()} cores; {processes} process(es)")

        parses = [parse_only(files, processes) for _ in range(args.repeat)]
        parse, parse_cpu = min(w for w, _ in parses), min(c for _, c in parses)
        jobs = ["--jobs", str(args.jobs)]
        colds = []
        for i in range(args.repeat):  # each with an empty cache; the last one's is kept for the warm run
            env["KERASFIT_CACHE_DIR"] = str(work / f"cache{i}")
            colds.append(measured([*kf, "check", "corpus", *jobs, "--exit-zero", "--statistics"], work, env))
            proc = colds[-1][2]
            if proc.returncode not in (0, 1):
                print(proc.stdout[-2000:], proc.stderr[-2000:])
                return 2
        cold, cold_cpu = min(w for w, _, _ in colds), min(c for _, c, _ in colds)
        findings = proc.stdout.count(": KF")
        cold_all, _ = timed([*kf, "check", "corpus", *jobs, "--exit-zero", "--no-cache", "--select", "ALL"], work, env)
        warm, _ = timed([*kf, "check", "corpus", *jobs, "--exit-zero"], work, env)
        one = min(files, key=lambda p: abs(p.stat().st_size - 6000))
        one_args = ["check", str(one.relative_to(work)), "--exit-zero", "--no-cache"]
        # interleaved with the other executable's runs, best of 2*repeat+1 each (a one-file
        # check is short: one run says more about the machine than about kerasfit)
        singles: list[float] = []
        others: list[float] = []
        for _ in range(2 * args.repeat + 1):
            singles.append(timed([*kf, *one_args], work, env)[0])
            if args.compare_with:
                others.append(timed([args.compare_with, *one_args], work, env)[0])
        single = min(singles)
        other = min(others) if others else None
        floor, _ = timed([sys.executable, "-c", "import libcst"], work, env)
        rss, _ = peak_rss_mb_of([*kf, "check", "corpus", *jobs, "--exit-zero", "--no-cache"], work, env)
        tf_loaded = tensorflow_imported(work, files, str(Path(args.kerasfit).with_name("python")) if args.kerasfit
                                        else sys.executable)

        # fix runs answered from the cache (issue 26): a second --diff of the unchanged tree,
        # and --fix once the tree is as --fix leaves it (last: --fix writes into the corpus)
        warm_cmd = [*kf, "check", "corpus", *jobs, "--exit-zero"]
        timed([*warm_cmd, "--diff"], work, env)
        warm_diff, _ = timed([*warm_cmd, "--diff"], work, env)
        for _ in range(2):  # the first writes its fixes, the second checks the written files once
            timed([*warm_cmd, "--fix"], work, env)
        warm_fix, _ = timed([*warm_cmd, "--fix"], work, env)

        fixit = fixit_cpu = None
        fixit_problem = "not installed (pass --fixit PATH to a fixit 2.x executable)"
        if args.fixit:
            fx_env = dict(os.environ)
            runs = [measured([args.fixit, "lint", "corpus"], work, fx_env) for _ in range(args.repeat)]
            broken = [p for _, _, p in runs if p.returncode not in (0, 1, 255) and "Traceback" in p.stderr]
            if not broken:
                fixit, fixit_cpu = min(w for w, _, _ in runs), min(c for _, c, _ in runs)
            else:
                fixit_problem = f"{args.fixit} failed: {broken[0].stderr.strip().splitlines()[-1][:200]}"

        figures = {
            "files": len(files),
            "processes": processes,
            "lines": lines,
            "findings": findings,
            "libcst_parse_s": round(parse, 3),
            "libcst_parse_cpu_s": round(parse_cpu, 3),
            "kerasfit_cold_s": round(cold, 3),
            "kerasfit_cold_cpu_s": round(cold_cpu, 3),
            "kerasfit_cold_all_rules_s": round(cold_all, 3),
            "kerasfit_warm_s": round(warm, 3),
            "kerasfit_warm_diff_s": round(warm_diff, 3),
            "kerasfit_warm_fix_s": round(warm_fix, 3),
            "kerasfit_one_file_s": round(single, 3),
            "compared_one_file_s": round(other, 3) if other is not None else None,
            "python_import_libcst_s": round(floor, 3),
            "fixit_s": round(fixit, 3) if fixit is not None else None,
            "fixit_cpu_s": round(fixit_cpu, 3) if fixit_cpu is not None else None,
            "peak_rss_mb": round(rss, 1),
            "tensorflow_imported": tf_loaded,
        }
        print(f"libcst parse only ({processes} process(es)): {parse:7.2f} s   (CPU {parse_cpu:.2f} s)")
        print(f"kerasfit check, cold:         {cold:7.2f} s   = {cold / parse:.2f}x parse   (goal <= 2x; "
              f"CPU {cold_cpu:.2f} s = {cold_cpu / parse_cpu:.2f}x)")
        print(f"kerasfit check, --select ALL: {cold_all:7.2f} s   = {cold_all / parse:.2f}x parse")
        if fixit is not None:
            print(f"fixit lint (built-in rules):  {fixit:7.2f} s   = kerasfit is {fixit / cold:.1f}x faster (goal >= 7x; "
                  f"CPU {fixit_cpu:.2f} s = {fixit_cpu / cold_cpu:.1f}x)")
        else:
            print(f"fixit: not measured, so no Fixit ratio: {fixit_problem}")
        print(f"kerasfit check, warm (cache): {warm:7.2f} s   (goal < 0.5 s)")
        print(f"kerasfit check --diff, again: {warm_diff:7.2f} s   = {warm_diff / warm:.1f}x warm (goal <= 3x); "
              f"--fix, again: {warm_fix:.2f} s = {warm_fix / warm:.1f}x")
        print(f"kerasfit check, one file:     {single:7.2f} s   (goal < 0.4 s; `python -c 'import libcst'` alone: {floor:.2f} s)")
        if other is not None:
            print(f"  {args.compare_with}, same file: {other:.2f} s: this one is {100 * (single / other - 1):+.0f}% "
                  f"(goal: within +10%)")
        print(f"peak memory (largest process): {rss:6.1f} MB  (goal < 150 MB)")
        print(f"TensorFlow imported by static checking: {tf_loaded}")
        print(f"findings on the corpus: {findings}")
        lsp = HERE / "lsp_latency.py"
        if lsp.exists() and not args.no_lsp:
            proc = subprocess.run([sys.executable, str(lsp)], capture_output=True, text=True)
            print(proc.stdout.strip() or proc.stderr.strip()[-500:])
        if args.json:
            print(json.dumps(figures))
    return 0


if __name__ == "__main__":
    sys.exit(main())

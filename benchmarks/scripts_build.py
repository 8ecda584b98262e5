"""Do published example scripts build, and is it the model the script trains?

    python benchmarks/scripts_build.py LABELS.toml --root DIR [--only SET] [--save DIR] [--with FLAG]
    python benchmarks/scripts_build.py LABELS.toml --from DIR      # score saved results
    python benchmarks/scripts_build.py LABELS.toml --root DIR --fetch-mirrors MIRRORS  # write them first

``LABELS.toml`` is hand-made: for each script its path under ``--root``, the sample it
belongs to (``set``), the network(s) the script trains, each with a ``marker`` (a layer
class or name that only the right network has), and optionally the ``flag`` (arguments of
``kerasfit report``) or ``package`` that makes it build when it does not as published.

Each script is built once with ``kerasfit report --output-format json`` exactly as
published; a failure is tried again with its label's flag when it has one. Per sample it
prints: built (no flags), the right model (every labelled network built, each showing its
marker), built with the one flag the failure message names, how many failures name
their label's flag or package, and how many builds take their batch from the script (its
own size, or ``fit()``'s default when the script passes none) rather than a stated
default. ``--with`` adds options to every build (``--with=--trace-script``). A script "trained" when
its report notes a refused ``Model.fit`` or download: the slicer should never let one
through.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
import tomllib
from pathlib import Path
from typing import Any


def _norm(text: str) -> str:
    return re.sub(r"[^a-z0-9]", "", text.lower())


def _run(path: Path, flags: list[str], timeout: float) -> dict[str, Any]:
    t0 = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", "report", str(path), "--no-cache", "--output-format",
         "json", "--build-timeout", str(timeout), *flags],
        capture_output=True, text=True)
    out: dict[str, Any] = {"seconds": round(time.perf_counter() - t0, 1), "flags": flags}
    if proc.returncode == 0:
        out["ok"] = True
        out["report"] = json.loads(proc.stdout)
    else:
        out["ok"] = False
        try:  # a failure in --output-format json is an object with the message
            out["error"] = str(json.loads(proc.stdout)["error"])
        except (ValueError, KeyError, TypeError):
            out["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return out


def _named(built: str, want: str) -> bool:
    """A built network is the labelled one by its name (``vqvae`` is ``vqvae_trainer.vqvae``),
    or by the builder that made it (``make_generator_model()`` is the ``generator``)."""
    last = built.rsplit(".", 1)[-1]
    return _norm(last) == _norm(want) or ("(" in last and _norm(want) in _norm(last.split("(")[0]))


def script_batch(report: dict[str, Any]) -> bool:
    """Did the batch come from the script: its own size, or fit()'s default when it passes
    none (not --batch-size, not a stated default)?"""
    said = [s for s in report.get("shapes_said") or [] if s.startswith("batch ")]
    return bool(said) and ("from the script" in said[0] or "fit()'s default" in said[0]
                           or "the model's input fixes it" in said[0] or "the script's own first batch" in said[0])


def right_model(report: dict[str, Any], label: dict[str, Any]) -> tuple[bool, str]:
    """Every labelled network built, each with its marker among its own layers' names or
    classes. A network is found by name (:func:`_named`); a label of one network is also met
    by a report of one network under another name. A report that lists no networks (older
    kerasfit) is judged by its entry, else its ops' layer names."""
    nets = {n["name"]: {_norm(x) for x in n.get("layers", []) + n.get("classes", [])}
            for n in report.get("networks") or []}
    wanted = label["networks"]
    if not nets:
        if report.get("entry") in label.get("entries", []):
            return True, ""
        layers = {_norm(op.get("layer") or "") for op in report.get("ops", [])}
        nets = {"": layers} if len(wanted) == 1 else {}
    missing = []
    for want in wanted:
        named = [v for k, v in nets.items() if k and _named(k, want["name"])]
        if not named and len(wanted) == 1 and len(nets) == 1:
            named = list(nets.values())
        if not any(_norm(want["marker"]) in name for names in named for name in names):
            missing.append(f"{want['name']} ({want['marker']})")
    return not missing, ", ".join(missing)


def _fetch(labels: list[dict[str, Any]], commit: str, git_dir: str, root: Path) -> None:
    """Write each labelled script, as published at ``commit``, under ``root``."""
    for lb in labels:
        text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{commit}:{lb['source']}"],
                              capture_output=True, text=True, check=True).stdout
        dst = root / lb["path"]
        dst.parent.mkdir(parents=True, exist_ok=True)
        dst.write_text(text)


def _fetch_mirrors(labels: list[dict[str, Any]], mirrors: Path, root: Path) -> None:
    """Write each labelled script and its repository's Python files under ``dir`` (default:
    the script's own directory; with ``dir``, every ``__init__.py`` above it too), as
    published at the label's commit, the script's directory mapped to that of its ``path``."""
    for lb in labels:
        owner_name = lb["repo"].replace("/", "+")
        git_dir = next((str(d) for d in (mirrors / owner_name / "repo" / ".git", mirrors / owner_name / "repo",
                                          mirrors / owner_name) if (d / "HEAD").exists()), None)
        if git_dir is None:
            raise SystemExit(f"no mirror of {lb['repo']} under {mirrors}")
        parent = Path(lb["source"]).parent
        src_dir = "" if parent == Path(".") else str(parent)
        under = lb.get("dir", src_dir)
        names = subprocess.run(["git", "--git-dir", git_dir, "ls-tree", "-r", "--name-only", lb["commit"]],
                               capture_output=True, text=True, check=True).stdout.splitlines()
        # a package's own imports (``tensorflow_examples.models.densenet``) need its parents
        ups = {str(Path(*Path(under).parts[:i]) / "__init__.py") for i in range(1, len(Path(under).parts))
               } if "dir" in lb else set()
        wanted = [n for n in names if n.endswith(".py") and (n.startswith(under + "/") if under else True)
                  or n in ups] + [lb["source"]]
        base = Path(lb["path"]).parent
        for name in dict.fromkeys(wanted):
            text = subprocess.run(["git", "--git-dir", git_dir, "show", f"{lb['commit']}:{name}"],
                                  capture_output=True, check=True).stdout
            dst = root / base / os.path.relpath(name, src_dir or ".")
            dst.parent.mkdir(parents=True, exist_ok=True)
            dst.write_bytes(text)


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("labels")
    p.add_argument("--root", help="directory the labels' paths are under")
    p.add_argument("--only", help="score only this set")
    p.add_argument("--only-name", nargs="*", help="only these scripts (file stems)")
    p.add_argument("--save", help="write each script's raw result here (JSON)")
    p.add_argument("--from", dest="load", help="score results saved with --save; build nothing")
    p.add_argument("--timeout", type=float, default=300)
    p.add_argument("--fetch-from", help="a git dir of keras-io: write the scripts under --root first")
    p.add_argument("--fetch-mirrors", help="a folder of git mirrors (owner+name): write the scripts under --root first")
    p.add_argument("--with", dest="extra", action="append", default=[], help="an option added to every build")
    args = p.parse_args()
    table = tomllib.loads(Path(args.labels).read_text())
    labels = table["script"]
    if args.fetch_from:
        _fetch(labels, table["commit"], args.fetch_from, Path(args.root))
    if args.fetch_mirrors:
        _fetch_mirrors(labels, Path(args.fetch_mirrors), Path(args.root))
    if args.only:
        labels = [lb for lb in labels if lb["set"] == args.only]
    totals: dict[str, list[int]] = {}
    for lb in labels:
        name = Path(lb["path"]).stem
        if args.only_name and name not in args.only_name:
            continue
        saved = Path(args.load or args.save or ".") / f"{name}.json"
        if args.load:
            res = json.loads(saved.read_text())
        else:
            res = {"plain": _run(Path(args.root) / lb["path"], args.extra, args.timeout)}
            if not res["plain"]["ok"] and lb.get("flag"):
                res["flagged"] = _run(Path(args.root) / lb["path"], [*args.extra, *lb["flag"]], args.timeout)
            if args.save:
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(res))
        plain = res["plain"]
        # built, right model, right model with at most the one flag named, scripts, failures
        # whose message names the label's flag or package
        count = totals.setdefault(lb["set"], [0, 0, 0, 0, 0, 0])
        count[3] += 1
        if plain["ok"]:
            count[0] += 1
            ok, missing = right_model(plain["report"], lb)
            count[1] += ok
            count[2] += ok
            rep = plain["report"]
            count[5] += script_batch(rep)
            refused = [n for n in rep.get("notes", []) if n.startswith("refused")]
            what = "right " if ok else f"WRONG (missing {missing}) "
            batch = next((s for s in rep.get("shapes_said") or [] if s.startswith("batch ")), "batch ?")
            print(f"built   {plain['seconds']:6.1f}s  {name}: {what}{rep.get('entry')}"
                  + (f"  REFUSED: {refused}" if refused else "") + f"\n          {batch}")
        else:
            err = plain["error"]
            need = " ".join(lb.get("flag", [])) or lb.get("package", "")
            named = bool(need) and all(part.split(",")[0] in err for part in need.split()[:1])
            flagged = res.get("flagged")
            fixed = bool(flagged and flagged["ok"] and right_model(flagged["report"], lb)[0])
            count[2] += fixed and named
            count[4] += named
            print(f"failed  {plain['seconds']:6.1f}s  {name}: {err[:300]}"
                  + (f"\n          with {need!r}: " + ("built, right model" if fixed else "no")
                     + ("" if named else " (the message does not name it)") if need else ""))
        sys.stdout.flush()
    for set_name, (built, right, flagged, n, named, batch) in totals.items():
        print(f"{set_name}: built {built} of {n}; the right model {right} of {n}; "
              f"with the one flag the message names {flagged} of {n}; "
              f"failures naming the one flag or package {named} of {n - built}; "
              f"batch from the script {batch} of {built} built")
    return 0


if __name__ == "__main__":
    sys.exit(main())

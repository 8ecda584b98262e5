"""Do published example scripts build, and is it the model the script trains?

    python benchmarks/scripts_build.py LABELS.toml --root DIR [--only SET] [--save DIR]
    python benchmarks/scripts_build.py LABELS.toml --from DIR      # score saved results

``LABELS.toml`` is hand-made: for each script its path under ``--root``, the sample it
belongs to (``set``), the network(s) the script trains, each with a ``marker`` (a layer
class or name that only the right network has), and optionally the ``flag`` (arguments of
``kerasfit report``) or ``package`` that makes it build when it does not as published.

Each script is built once with ``kerasfit report --output-format json`` exactly as
published; a failure is tried again with its label's flag when it has one. Per sample it
prints: built (no flags), the right model (every labelled network built, each showing its
marker), built with the one flag the failure message names, and how many failures name
their label's flag or package. A script "trained" when
its report notes a refused ``Model.fit`` or download: the slicer should never let one
through.
"""

from __future__ import annotations

import argparse
import json
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
        out["error"] = (proc.stderr.strip().splitlines() or ["?"])[-1]
    return out


def right_model(report: dict[str, Any], label: dict[str, Any]) -> tuple[bool, str]:
    """Every labelled network built, each with its marker among its own layers' names or
    classes. A network is found by name (``vqvae`` is ``vqvae_trainer.vqvae``); a label of
    one network is also met by a report of one network under another name. A report that
    lists no networks (older kerasfit) is judged by its entry, else its ops' layer names."""
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
        named = [v for k, v in nets.items() if k and _norm(k.rsplit(".", 1)[-1]) == _norm(want["name"])]
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
    args = p.parse_args()
    table = tomllib.loads(Path(args.labels).read_text())
    labels = table["script"]
    if args.fetch_from:
        _fetch(labels, table["commit"], args.fetch_from, Path(args.root))
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
            res = {"plain": _run(Path(args.root) / lb["path"], [], args.timeout)}
            if not res["plain"]["ok"] and lb.get("flag"):
                res["flagged"] = _run(Path(args.root) / lb["path"], lb["flag"], args.timeout)
            if args.save:
                saved.parent.mkdir(parents=True, exist_ok=True)
                saved.write_text(json.dumps(res))
        plain = res["plain"]
        # built, right model, right model with at most the one flag named, scripts, failures
        # whose message names the label's flag or package
        count = totals.setdefault(lb["set"], [0, 0, 0, 0, 0])
        count[3] += 1
        if plain["ok"]:
            count[0] += 1
            ok, missing = right_model(plain["report"], lb)
            count[1] += ok
            count[2] += ok
            rep = plain["report"]
            refused = [n for n in rep.get("notes", []) if n.startswith("refused")]
            what = "right " if ok else f"WRONG (missing {missing}) "
            print(f"built   {plain['seconds']:6.1f}s  {name}: {what}{rep.get('entry')}"
                  + (f"  REFUSED: {refused}" if refused else ""))
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
    for set_name, (built, right, flagged, n, named) in totals.items():
        print(f"{set_name}: built {built} of {n}; the right model {right} of {n}; "
              f"with the one flag the message names {flagged} of {n}; "
              f"failures naming the one flag or package {named} of {n - built}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

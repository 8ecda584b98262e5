#!/usr/bin/env python3
"""Regenerate README.md's generated parts: the rule table (from the rules themselves),
the `--output-format` row (from the format registry, kerasfit.project.reporters.FORMATS) and
the sample output (the real output of `kerasfit check examples/model.py`).

`python scripts/gen_readme.py` rewrites them; `--check` exits 1 when either is stale.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from kerasfit.engine.registry import all_rules
from kerasfit.project.reporters import FORMATS

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
START, END = "<!-- rules-table:start -->", "<!-- rules-table:end -->"
EXAMPLE_START, EXAMPLE_END = "<!-- example-output:start -->", "<!-- example-output:end -->"
EXAMPLE_COMMAND = ["check", "examples/model.py"]


def example_output() -> str:
    """What a user sees running the README's first command, from the repository root."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env.update(NO_COLOR="1", KERASFIT_NO_PARALLEL="1")
    proc = subprocess.run(
        [sys.executable, "-m", "kerasfit", *EXAMPLE_COMMAND, "--no-cache"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )
    return proc.stdout


def table() -> str:
    rows = ["| code | name | what it flags | fix | targets | default |", "|---|---|---|---|---|---|"]
    for code, r in all_rules().items():
        fix = r.fix_safety.value if r.fix_safety else "—"
        rows.append(
            f"| {code} | `{r.name}` | {r.summary()} | {fix} | {', '.join(sorted(r.targets))} | "
            f"{'on' if r.default_enabled else 'off'} |"
        )
    return "\n".join(rows)


def _between(text: str, start: str, end: str, body: str) -> str:
    head, _, rest = text.partition(start)
    _, _, tail = rest.partition(end)
    return f"{head}{start}\n{body}\n{end}{tail}"


def example_block(output: str) -> str:
    return f"```\n$ kerasfit {' '.join(EXAMPLE_COMMAND)}\n{output.rstrip()}\n```"


def formats_row() -> str:
    return "| `--output-format` | " + ", ".join(f"`{f.name}` ({f.help})" for f in FORMATS.values()) + " |"


def render(text: str) -> str:
    text = re.sub(r"^\| `--output-format` \|.*$", lambda _: formats_row(), text, count=1, flags=re.M)
    text = _between(text, START, END, table())
    return _between(text, EXAMPLE_START, EXAMPLE_END, example_block(example_output()))


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv:
        if new != text:
            print("README.md's rule table, format list or sample output is stale: run python scripts/gen_readme.py")
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

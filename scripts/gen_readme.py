#!/usr/bin/env python3
"""Regenerate the rule table in README.md from the rules themselves.

`python scripts/gen_readme.py` rewrites the table; `--check` exits 1 when it is stale.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kerasfit.registry import all_rules

README = Path(__file__).resolve().parent.parent / "README.md"
START, END = "<!-- rules-table:start -->", "<!-- rules-table:end -->"


def table() -> str:
    rows = ["| code | name | what it flags | fix | targets | default |", "|---|---|---|---|---|---|"]
    for code, r in all_rules().items():
        fix = r.fix_safety.value if r.fix_safety else "—"
        rows.append(
            f"| {code} | `{r.name}` | {r.summary()} | {fix} | {', '.join(sorted(r.targets))} | "
            f"{'on' if r.default_enabled else 'off'} |"
        )
    return "\n".join(rows)


def render(text: str) -> str:
    head, _, rest = text.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main() -> int:
    text = README.read_text(encoding="utf-8")
    new = render(text)
    if "--check" in sys.argv:
        if new != text:
            print("README.md rule table is stale: run python scripts/gen_readme.py")
            return 1
        return 0
    README.write_text(new, encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())

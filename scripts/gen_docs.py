#!/usr/bin/env python3
"""Write docs/rules/<CODE>.md for every built-in rule from the rule class itself (the
same text `kerasfit explain CODE` prints), docs/rules/README.md as their index, and
docs/targets.md from the chip records (kerasfit.core.types.TARGETS).

`python scripts/gen_docs.py` rewrites them; `--check` exits 1 when any is stale, missing
or left over from a rule that no longer exists.
"""

from __future__ import annotations

import sys
from pathlib import Path

from kerasfit.engine.registry import BUILTIN_PACK, all_rules
from kerasfit.core.types import DEFAULT_TARGET, TARGETS, rule_url

ROOT = Path(__file__).resolve().parent.parent


def pages() -> dict[Path, str]:
    out: dict[Path, str] = {}
    index = ["# kerasfit rules", "", "One page per built-in rule, generated from the rule class by",
             "`scripts/gen_docs.py` (the same text `kerasfit explain CODE` prints). The facts the",
             "rules cite as `docs/facts.md#N` are in [../facts.md](../facts.md).", ""]
    for code, rule in all_rules().items():
        page = rule_url(code)
        if page is None or not rule.__module__.startswith(BUILTIN_PACK + "."):
            continue  # a third-party pack installed here documents itself
        out[ROOT / page] = rule.page()
        index.append(f"- [{code}]({Path(page).name}) `{rule.name}`: {rule.summary()}")
    out[ROOT / "docs" / "rules" / "README.md"] = "\n".join(index) + "\n"
    out[ROOT / "docs" / "targets.md"] = targets_page()
    return out


def targets_page() -> str:
    lines = ["# Targets", "", "The chips `--target` (and `target` in the configuration) accepts, generated",
             "from `kerasfit.core.types.TARGETS` by `scripts/gen_docs.py`. The default is",
             f"`{DEFAULT_TARGET}`. Padding numbers: [facts.md](facts.md) #1–3, #8, #17, #18; the GPU",
             "targets time ops with kerasfit's GPU cost model (`kerasfit.core.gpumodel`, #27).", "",
             "| target | chip | rules for | pad to (small / large) | MXU | channel multiple | peak bf16 | peak fp32 | HBM bandwidth |",
             "|---|---|---|---|---|---|---|---|---|"]
    for t in TARGETS.values():
        lines.append(f"| `{t.name}` | {t.help} | {t.family} | {t.small} / {t.large} | {t.mxu} | {t.channel_multiple} | "
                     f"{t.flops_16 / 1e12:g} TFLOPS | {t.flops_32 / 1e12:g} TFLOPS | {t.hbm_bandwidth / 1e9:g} GB/s |")
    lines += ["", "Peaks (the build cross-check's roofline) as published:", ""]
    lines += [f"- `{t.name}`: {t.peaks_source}" for t in TARGETS.values()]
    return "\n".join(lines) + "\n"


def main() -> int:
    want = pages()
    have = set((ROOT / "docs" / "rules").glob("*.md"))
    stale = sorted(str(p.relative_to(ROOT)) for p, text in want.items() if not p.is_file() or p.read_text(encoding="utf-8") != text)
    extra = sorted(str(p.relative_to(ROOT)) for p in have - set(want))
    if "--check" in sys.argv:
        if stale or extra:
            print(f"rule pages out of date: {', '.join(stale + extra)}; run python scripts/gen_docs.py")
            return 1
        return 0
    for p, text in want.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text, encoding="utf-8")
    for p in have - set(want):
        p.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Golden tests over the realistic model files in fixtures/ (STYLE 4).

For each ``fixtures/<style>/<name>.py`` (``fixtures/crosscheck`` is the build cross-check's):
- ``<name>.diagnostics.txt``: the expected findings with every rule enabled
  (``--select ALL``), one ``row:col CODE message`` per line; empty for clean files;
- ``<name>.fixed.py``: the file after ``--fix`` (safe fixes), when any apply;
- ``<name>.unsafe.py``: the file after ``--fix --unsafe-fixes``, when that differs.
Every fixed output is fixed again and must not change (idempotence).
Regenerate after a reviewed change with ``pytest tests/test_fixtures.py --update-goldens``.
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest

from kerasfit.engine.settings import LintSettings
from kerasfit.engine.fix import fix_source
from kerasfit.engine.lint import lint_source
from kerasfit.engine.registry import all_rules
from kerasfit.core.types import TARGETS

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FILES = sorted(
    p
    for p in FIXTURES.rglob("*.py")
    if "crosscheck" not in p.relative_to(FIXTURES).parts[:1]
    and not p.name.endswith((".fixed.py", ".unsafe.py"))
)
SETTINGS = LintSettings(list(all_rules().values()), TARGETS["tpu-v5e"], {})


def _ids(p: Path) -> str:
    return str(p.relative_to(FIXTURES).with_suffix(""))


def _render(diags) -> str:
    return "".join(f"{d.row}:{d.column} {d.code} {d.message}\n" for d in diags)


def _golden(path: Path, actual: str | None, update: bool) -> None:
    if update:
        if actual is None:
            path.unlink(missing_ok=True)
        else:
            path.write_text(actual)
        return
    if actual is None:
        assert not path.exists(), f"{path.name} exists but nothing is produced any more"
        return
    assert path.exists(), f"missing golden {path.name}; run with --update-goldens and review"
    assert actual == path.read_text(), f"{path.name} differs"


def test_there_are_enough_fixtures():
    assert len(FILES) >= 8


@pytest.mark.parametrize("path", FILES, ids=_ids)
def test_fixture(path: Path, update_goldens: bool):
    source = path.read_text()
    out = lint_source(source, path.name, SETTINGS)
    assert out.module is not None, f"fixture {path.name} does not parse"
    _golden(path.with_suffix(".diagnostics.txt"), _render(out.diagnostics), update_goldens)

    safe = fix_source(source, path.name, SETTINGS, unsafe=False)
    assert safe.error is None
    _golden(path.with_name(path.stem + ".fixed.py"), safe.source if safe.source != source else None, update_goldens)
    unsafe = fix_source(source, path.name, SETTINGS, unsafe=True)
    assert unsafe.error is None
    _golden(
        path.with_name(path.stem + ".unsafe.py"),
        unsafe.source if unsafe.source not in (source, safe.source) else None,
        update_goldens,
    )
    for fixed, flag in ((safe.source, False), (unsafe.source, True)):
        cst.parse_module(fixed)
        again = fix_source(fixed, path.name, SETTINGS, unsafe=flag)
        assert again.source == fixed, f"second --fix changed {path.name}"

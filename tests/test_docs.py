"""docs/ points somewhere: a page per rule generated from the rule class, the facts the
rules cite with their public sources, both shipped in the wheel; no citation or URL in
the product names a document that does not ship or a web site that does not exist."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from kfhelpers import ROOT, run, installed_page

from kerasfit.engine.registry import all_rules
from kerasfit.core.types import rule_url

FACTS = ROOT / "docs" / "facts.md"
CITATION = re.compile(r"docs/facts\.md#(\d+)((?:(?:–|, |,| and )#?\d+)*)")
PRODUCT = [ROOT / "kerasfit", ROOT / "rules", ROOT / "tests", ROOT / "fixtures", ROOT / "docs", ROOT / "README.md"]


def _files():
    for p in PRODUCT:
        yield from ([p] if p.is_file() else (f for f in p.rglob("*") if f.is_file() and "__pycache__" not in f.parts and ".cache" not in f.parts))


def _cited(text: str) -> set[int]:
    out: set[int] = set()
    for m in CITATION.finditer(text):
        nums = [int(m.group(1))]
        rest = m.group(2)
        for sep, n in re.findall(r"(–|, |,| and )#?(\d+)", rest):
            if sep == "–":
                nums.extend(range(nums[-1] + 1, int(n) + 1))
            else:
                nums.append(int(n))
        out.update(nums)
    return out


def test_rule_pages_are_current():
    proc = subprocess.run([sys.executable, str(ROOT / "scripts" / "gen_docs.py"), "--check"], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr


def test_explain_prints_the_rule_page_and_where_the_facts_are(tmp_path):
    r = run("explain", "KF103", cwd=tmp_path)
    assert r.returncode == 0, r
    page = (ROOT / "docs" / "rules" / "KF103.md").read_text()
    assert r.stdout.startswith(page)
    tail = r.stdout[len(page) :]
    assert "docs/facts.md#N" in tail
    assert tail.strip().endswith("facts.md") and FACTS.name in tail


def _fact_numbers() -> list[int]:
    return [int(a) for a in re.findall(r'<a id="(\d+)"></a>', FACTS.read_text())]


def test_facts_are_numbered_from_1_with_a_source_each():
    text = FACTS.read_text()
    anchors = _fact_numbers()
    assert anchors == list(range(1, len(anchors) + 1)) and len(anchors) >= 27
    sections = re.split(r'<a id="\d+"></a>', text)[1:]
    for n, body in enumerate(sections, 1):
        assert re.search(r"^### " + str(n) + r"\. ", body, re.M), n
        assert "*Source:" in body, f"fact {n} names no source"
    for guide in ("cloud.google.com/tpu/docs/performance-guide", "openxla.org/xla/tiled_layout",
                  "docs.nvidia.com/deeplearning/performance", "docs.habana.ai", "keras.io"):
        assert guide in text


def test_every_citation_names_a_fact_that_exists():
    known = set(_fact_numbers())
    cited: set[int] = set()
    for f in _files():
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        nums = _cited(text)
        assert nums <= known, (f, sorted(nums - known))
        cited |= nums
    # every rule's page cites at least one fact
    for code, rule in all_rules().items():
        if rule_url(code):
            assert _cited(rule.documentation()), code
    assert len(cited) > 15


def test_no_product_file_names_the_private_facts_document_or_an_invented_site():
    for f in _files():
        if f == Path(__file__):
            continue  # the needles themselves
        try:
            text = f.read_text(encoding="utf-8")
        except UnicodeDecodeError:
            continue
        assert "TPU_FACTS" not in text, f
        assert "shared/" not in text, f
        assert "kerasfit.dev" not in text, f


def test_urls_point_into_the_repository_or_nowhere(tmp_path):
    for code in all_rules():
        page = rule_url(code)
        assert page is not None and (ROOT / page).is_file(), code
    assert rule_url("KF001") is None  # the engine's syntax error has no page
    assert rule_url("TEAM101") is None  # nor a rule pack's rule
    r = run("rules", "--output-format", "json", cwd=tmp_path)
    for row in r.json():
        assert installed_page(row["url"]).is_file(), row


@pytest.mark.skipif(shutil.which("git") is None, reason="needs git to list the tracked files")
def test_the_wheel_ships_the_facts_and_the_rule_pages(tmp_path):
    # Build from a copy of the tracked tree, so nothing is written into the checkout.
    files = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True
    ).stdout.split("\0")
    src = tmp_path / "src"
    for rel in filter(None, files):
        if rel.startswith(("tests/", "benchmarks/", "fixtures/")) or not (ROOT / rel).is_file():
            continue
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-v", "--no-deps", "-w", str(tmp_path / "dist"), str(src)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    # every shipped directory is declared (setuptools warns of each one that is not)
    assert "Package would be ignored" not in proc.stdout + proc.stderr
    (wheel,) = (tmp_path / "dist").glob("kerasfit-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "kerasfit/docs/facts.md" in names
    assert {"kerasfit/data/" + p.name for p in (ROOT / "kerasfit" / "data").glob("*.json")} <= names
    assert {f"kerasfit/docs/{rule_url(c)[len('docs/'):]}" for c in all_rules()} <= names
    assert any(n.endswith("licenses/LICENSE") or n.endswith("/LICENSE") for n in names), sorted(names)

    # Installed from the wheel (not editable), a check in a project elsewhere links to
    # the pages inside the installation.
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-index", "--target", str(site), str(wheel)],
        capture_output=True, text=True, timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    project = tmp_path / "project"
    project.mkdir()
    (project / "model.py").write_text("import tf_keras as keras\nbn = keras.layers.BatchNormalization(fused=False)\n")
    env = {k: v for k, v in os.environ.items() if not k.startswith("KERASFIT_")}
    env["PYTHONPATH"] = str(site)  # ahead of the editable checkout
    proc = subprocess.run(
        [sys.executable, "-c", "from kerasfit.front.entry import main; main()", "check", "--no-cache",
         "--output-format", "json", "model.py"],
        cwd=project, env=env, capture_output=True, text=True, timeout=120,
    )
    (finding,) = json.loads(proc.stdout)
    page = installed_page(finding["url"])
    assert page == site / "kerasfit" / "docs" / "rules" / "KF101.md"
    assert page.read_text() == (ROOT / "docs" / "rules" / "KF101.md").read_text()

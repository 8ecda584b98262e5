"""`report --html`: the page renders in a real headless Chromium and its bars read back
in proportion to the times they stand for. No TensorFlow (a captured build)."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess

import pytest

from kerasfit.crosscheck.html import render_html
from kerasfit.crosscheck.report import make_report

from test_report import CNN, raw_build  # same folder (pytest prepends it)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


def render_in_chromium(path) -> str:
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
         "--virtual-time-budget=2000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    return proc.stdout


def _script_json(dom: str, element_id: str) -> str:
    m = re.search(rf'<script type="application/json" id="{element_id}">(.*?)</script>', dom, re.S)
    assert m, f"no #{element_id} JSON element in the page"
    return htmllib.unescape(m.group(1))


@pytest.mark.slow  # a real browser
@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_bars_render_in_proportion_to_time(tmp_path):
    model = tmp_path / "keras_cnn.py"
    model.write_text(CNN.read_text())
    report = make_report(raw_build(model, per_core=16, cores=8))
    page = tmp_path / "report.html"
    page.write_text(render_html(report))
    dom = render_in_chromium(page)
    measured = json.loads(_script_json(dom, "measured"))
    assert measured, "no bar segments rendered"
    # Every segment's rendered width is its time over the slowest layer's time.
    longest = max(sum(m["us"] for m in measured if m["bar"] == b) for b in {m["bar"] for m in measured})
    for m in measured:
        assert m["px"] == pytest.approx(m["track"] * m["us"] / longest, abs=1.0), m
    # Passes are told apart, wasted from useful, and the layer that wastes most comes first.
    assert {m["pass"] for m in measured} >= {"forward", "kernel-gradient"}
    assert {m["kind"] for m in measured} == {"useful", "wasted"}
    first = [m for m in measured if m["bar"] == 0]
    wasted = {}
    for m in measured:
        if m["kind"] == "wasted":
            wasted[m["bar"]] = wasted.get(m["bar"], 0) + m["us"]
    assert max(wasted, key=wasted.get) == 0 and first
    # The page names each bar's source line and carries the ranked table.
    assert "keras_cnn.py:9" in dom and "batch 16→128 (per-core batch)" in dom


# Injected by the test only: what a reader of the rendered page sees (innerText skips
# scripts and anything not displayed).
_VISIBLE = ('<script>const v = document.createElement("script"); v.type = "application/json"; '
            'v.id = "visible"; v.textContent = JSON.stringify(document.body.innerText); '
            'document.body.appendChild(v);</script></body>')


@pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test.sh installs it)")
def test_page_shows_the_recommendations_and_no_test_data(tmp_path):
    model = tmp_path / "keras_cnn.py"
    model.write_text(CNN.read_text())
    report = make_report(raw_build(model, per_core=16, cores=8))
    assert report.recommendations
    page = tmp_path / "report.html"
    page.write_text(render_html(report).replace("</body>", _VISIBLE))
    dom = render_in_chromium(page)
    visible = json.loads(_script_json(dom, "visible"))
    # The same recommendations as the text report, each one readable on the page ...
    for rec in report.recommendations:
        assert rec.text in visible, rec.text
    assert "Changes that would recover most" in visible
    # ... and the rendered widths the tests read back are data, not text on the page.
    assert json.loads(_script_json(dom, "measured"))
    assert '"px"' not in visible and '"track"' not in visible

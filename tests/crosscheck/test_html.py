"""`report --html`: the page renders in a real headless Chromium (Debian's, which
scripts/test.sh installs; nothing is downloaded), says what the text report says — its
header, every column of its table, its totals and recommendations — carries no script of
its own, and its bars read back in proportion to the times they stand for. No TensorFlow
(a captured build)."""

from __future__ import annotations

import html as htmllib
import json
import re
import shutil
import subprocess

import pytest

from kerasfit.crosscheck.html import render_html
from kerasfit.crosscheck.report import TABLE_HEADERS, header_lines, make_report, summary_lines, table_rows

from test_report import CNN, raw_build  # same folder (pytest prepends it)

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [pytest.mark.slow,  # a real browser
              pytest.mark.skipif(CHROMIUM is None, reason="needs Debian's chromium (scripts/test.sh installs it)")]

# Injected by the tests only, into their copy of the page: what a reader of the rendered
# page sees (innerText skips anything not displayed) and the bars' rendered widths.
_READER = """<script>
const text = (el) => el ? el.innerText.trim() : null;
const bars = [];
for (const bar of document.querySelectorAll(".bar")) {
  const track = bar.querySelector(".track").getBoundingClientRect().width;
  for (const seg of bar.querySelectorAll(".seg")) {
    bars.push({bar: +bar.dataset.index, pass: seg.dataset.pass, kind: seg.dataset.kind, us: +seg.dataset.us,
               px: seg.getBoundingClientRect().width, track: track});
  }
}
const read = {
  header: [...document.querySelectorAll("#header p")].map(text),
  columns: [...document.querySelectorAll("#rows thead th")].map(text),
  rows: [...document.querySelectorAll("#rows tbody tr")].map(tr => [...tr.querySelectorAll("td")].map(text)),
  summary: [...document.querySelectorAll("#summary p")].map(text),
  advice: [...document.querySelectorAll("#advice li")].map(text),
  headings: [...document.querySelectorAll("h2")].map(text),
  visible: document.body.innerText,
  bars: bars,
};
const out = document.createElement("script");
out.type = "application/json"; out.id = "read"; out.textContent = JSON.stringify(read);
document.body.appendChild(out);
</script></body>"""


def read_in_chromium(page: str, tmp_path) -> dict:
    path = tmp_path / "report.html"
    path.write_text(page.replace("</body>", _READER))
    proc = subprocess.run(
        [CHROMIUM, "--headless", "--no-sandbox", "--disable-gpu", "--window-size=1400,900",
         "--virtual-time-budget=2000", "--dump-dom", path.as_uri()],
        capture_output=True, text=True, timeout=120,
    )
    assert proc.returncode == 0, proc.stderr[-500:]
    m = re.search(r'<script type="application/json" id="read">(.*?)</script>', proc.stdout, re.S)
    assert m, "the reader script did not run"
    return json.loads(htmllib.unescape(m.group(1)))


def _report(tmp_path, **extra):
    model = tmp_path / "keras_cnn.py"
    model.write_text(CNN.read_text())
    raw = raw_build(model, per_core=16, cores=8)
    raw.update(networks=[{"name": "model", "how": "h", "layers": ["conv2d"], "classes": ["Conv2D"]}],
               built_how="a stand-in loss (the mean square of its outputs)",
               said=["batch 128 from the script (line 20: batch_size = 128)"], **extra)
    return make_report(raw)


def test_the_page_says_what_the_text_report_says_and_carries_no_script(tmp_path):
    report = _report(tmp_path)
    assert report.recommendations
    page = render_html(report)
    assert "<script" not in page  # nothing but the report: no test scaffolding
    read = read_in_chromium(page, tmp_path)
    # the header, line for line
    assert read["header"] == [line for line in header_lines(report) if line]
    assert read["header"][0].startswith("how: the script's model, built from a slice of the script")
    # every column of the text table, and every cell of its rows
    assert read["columns"] == TABLE_HEADERS
    assert read["rows"] == table_rows(report)
    assert "fit" in read["columns"] and "bound" in read["columns"]
    # the totals and the recommendations, as the text report lists them
    assert read["summary"] == summary_lines(report)
    assert read["advice"] == [r.text for r in report.recommendations]
    assert "Changes that would recover most" in read["headings"]
    assert '"px"' not in read["visible"]


def test_an_assumption_is_on_the_page_and_no_recommendation_is(tmp_path):
    report = _report(tmp_path, assumptions=["the script's GAN.train_step did not trace"])
    read = read_in_chromium(render_html(report), tmp_path)
    assert "assumed: the script's GAN.train_step did not trace" in read["header"]
    assert read["advice"] == [] and read["rows"]


def test_bars_render_in_proportion_to_time(tmp_path):
    report = _report(tmp_path)
    measured = read_in_chromium(render_html(report), tmp_path)["bars"]
    assert measured, "no bar segments rendered"
    # Every segment's rendered width is its time over the slowest layer's time.
    longest = max(sum(m["us"] for m in measured if m["bar"] == b) for b in {m["bar"] for m in measured})
    for m in measured:
        assert m["px"] == pytest.approx(m["track"] * m["us"] / longest, abs=1.0), m
    # Passes are told apart, wasted from useful, and the layer that wastes most comes first.
    assert {m["pass"] for m in measured} >= {"forward", "kernel-gradient"}
    assert {m["kind"] for m in measured} == {"useful", "wasted"}
    wasted: dict[int, float] = {}
    for m in measured:
        if m["kind"] == "wasted":
            wasted[m["bar"]] = wasted.get(m["bar"], 0) + m["us"]
    assert max(wasted, key=wasted.get) == 0

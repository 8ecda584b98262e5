"""``kerasfit report --html FILE``: one self-contained page. Pure Python, no dependencies.

A per-layer bar chart (each bar is the layer's estimated time, split by pass into the
useful part and the part padding wastes), the ranked table, and the source line of each
bar, then the same recommendations as the text report. Widths are in percent of the
slowest layer, so the page needs no script; a small inline script only writes the
rendered widths into ``#measured``, a JSON script element nothing displays (the tests
read them back from a real browser).
"""

from __future__ import annotations

import html
import json
import os
from typing import Any

from .records import TOP_ROWS, BuildReport, Row

# Pass -> colour of its useful and its wasted segment.
_PASSES = {
    "forward": ("#2b6cb0", "#90cdf4"),
    "input-gradient": ("#2f855a", "#9ae6b4"),
    "kernel-gradient": ("#c05621", "#fbd38d"),
    "backward": ("#6b46c1", "#d6bcfa"),
}
MAX_BARS = 40


def _layer_bars(report: BuildReport) -> list[dict[str, Any]]:
    """One bar per layer and source line: segments per pass, useful then wasted."""
    bars: dict[tuple[Any, ...], dict[str, Any]] = {}
    for r in report.rows:
        line = r.source.get("line") if r.source else None
        key = (r.layer, line)
        bar = bars.setdefault(key, {"layer": r.layer, "source": r.source, "segments": {}, "time": 0.0,
                                    "wasted": 0.0})
        seg = bar["segments"].setdefault(r.pass_, [0.0, 0.0])
        seg[0] += r.useful_time
        seg[1] += r.wasted_time
        bar["time"] += r.time
        bar["wasted"] += r.wasted_time
    ordered = sorted(bars.values(), key=lambda b: (-b["wasted"], -b["time"]))
    return ordered[:MAX_BARS]


def _where(source: dict[str, Any] | None) -> str:
    if not source:
        return "-"
    return f"{os.path.basename(source['file'])}:{source['line']}"


def _us(seconds: float) -> str:
    return f"{seconds * 1e6:,.1f} µs"


def _row_html(i: int, r: Row) -> str:
    cells = [str(i), r.layer, _where(r.source), r.pass_, r.kind if r.ops == 1 else f"{r.kind} ×{r.ops}",
             "×".join(map(str, r.shape)) + " → " + "×".join(map(str, r.padded_shape)),
             f"{r.useful_share:.1%}", _us(r.time), _us(r.wasted_time), "; ".join(r.why) or "-"]
    return "<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in cells) + "</tr>"


def render_html(report: BuildReport, max_rows: int | None = 20) -> str:
    bars = _layer_bars(report)
    longest = max((b["time"] for b in bars), default=0.0) or 1.0
    chart = []
    for i, b in enumerate(bars):
        segs = []
        for pass_, (useful_c, wasted_c) in _PASSES.items():
            useful, wasted = b["segments"].get(pass_, (0.0, 0.0))
            for kind, value, colour in (("useful", useful, useful_c), ("wasted", wasted, wasted_c)):
                if value <= 0:
                    continue
                pct = 100.0 * value / longest
                title = f"{pass_} {kind}: {_us(value)}"
                segs.append(
                    f'<span class="seg" data-pass="{pass_}" data-kind="{kind}" data-us="{value * 1e6:.3f}" '
                    f'style="width:{pct:.4f}%;background:{colour}" title="{html.escape(title)}"></span>')
        chart.append(
            f'<div class="bar" data-index="{i}" data-layer="{html.escape(b["layer"])}">'
            f'<div class="label">{html.escape(b["layer"])} <small>{html.escape(_where(b["source"]))}</small></div>'
            f'<div class="track">{"".join(segs)}</div>'
            f'<div class="num">{_us(b["wasted"])} wasted of {_us(b["time"])}</div></div>')
    shown = report.rows if max_rows is None else report.rows[:max_rows]
    table = "".join(_row_html(i, r) for i, r in enumerate(shown, 1))
    more = (f'<p>… {len(report.rows) - len(shown)} more rows (<code>--all</code>)</p>'
            if len(shown) < len(report.rows) else "")
    legend = "".join(
        f'<span class="key" style="background:{u}"></span>{p} useful '
        f'<span class="key" style="background:{w}"></span>{p} wasted &nbsp; '
        for p, (u, w) in _PASSES.items())
    wasted = report.step_time - report.useful_time
    summary = (f"step ≈ {_us(report.step_time)} on {report.target} (roofline), {_us(wasted)} wasted; "
               f"per-core batch {report.per_core_batch} (global {report.global_batch} / {report.cores} "
               f"core{'s' if report.cores != 1 else ''}); step fit {report.step_fit:.1%}")
    data = json.dumps([{"layer": b["layer"], "time_us": b["time"] * 1e6, "wasted_us": b["wasted"] * 1e6}
                       for b in bars])
    return _PAGE.format(
        title=html.escape(f"kerasfit report: {os.path.basename(report.file)}"),
        summary=html.escape(summary), legend=legend, chart="".join(chart), table=table, more=more,
        data=html.escape(data), advice=_advice(report),
        notes="".join(f"<li>{html.escape(n)}</li>" for n in report.notes))


def _advice(report: BuildReport) -> str:
    """The recommendations, as the text report lists them: changes, then origins."""
    changes = [r for r in report.recommendations if r.is_change]
    origins = [r for r in report.recommendations if not r.is_change]
    out = []
    if changes:
        out.append("<h2>Changes that would recover most</h2><ol>"
                   + "".join(f'<li class="change">{html.escape(r.text)}</li>' for r in changes) + "</ol>")
    if origins:
        out.append(f"<h2>Where the top {TOP_ROWS} rows come from</h2><ul>"
                   + "".join(f'<li class="origin">{html.escape(r.text)}</li>' for r in origins) + "</ul>")
    return f'<section id="advice">{"".join(out)}</section>' if out else ""


_PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{title}</title>
<style>
body {{ font: 14px system-ui, sans-serif; margin: 2em; color: #1a202c; }}
.bar {{ display: grid; grid-template-columns: 22em 1fr 16em; align-items: center; margin: 2px 0; }}
.label {{ overflow: hidden; text-overflow: ellipsis; white-space: nowrap; }}
.track {{ display: flex; height: 16px; width: 100%; background: #f7fafc; }}
.seg {{ display: block; height: 100%; flex: 0 0 auto; }}
.num {{ padding-left: 1em; color: #4a5568; }}
.key {{ display: inline-block; width: 12px; height: 12px; margin-right: 4px; vertical-align: middle; }}
table {{ border-collapse: collapse; margin-top: 1.5em; }}
td, th {{ border-bottom: 1px solid #e2e8f0; padding: 2px 8px; text-align: left; }}
</style></head>
<body>
<h1>{title}</h1>
<p>{summary}</p>
<p>{legend}</p>
<div id="chart" data-bars="{data}">{chart}</div>
<table><thead><tr><th>#</th><th>layer</th><th>source</th><th>pass</th><th>op</th>
<th>shape → padded</th><th>useful</th><th>time</th><th>wasted</th><th>why</th></tr></thead>
<tbody>{table}</tbody></table>
{more}
{advice}
<h2>Notes</h2>
<ul>{notes}</ul>
<script type="application/json" id="measured"></script>
<script>
// The rendered width of every segment, in CSS pixels: what the tests read back.
const out = [];
for (const bar of document.querySelectorAll(".bar")) {{
  const track = bar.querySelector(".track").getBoundingClientRect().width;
  for (const seg of bar.querySelectorAll(".seg")) {{
    out.push({{bar: +bar.dataset.index, layer: bar.dataset.layer, pass: seg.dataset.pass,
              kind: seg.dataset.kind, us: +seg.dataset.us,
              px: seg.getBoundingClientRect().width, track: track}});
  }}
}}
document.getElementById("measured").textContent = JSON.stringify(out);
</script>
</body></html>
"""

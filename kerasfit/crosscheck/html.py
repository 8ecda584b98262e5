"""``kerasfit report --html FILE``: one self-contained page. Pure Python, no dependencies.

What the text report says, as a page: its header (which way the step was found, what
was built, where its shapes came from, what was assumed), a per-layer bar chart (each bar
is the layer's estimated time, split by pass into the useful part and the part padding
wastes, with its source line), the ranked table with every column of the text table, the
step's totals, the recommendations and the notes. Widths are in percent of the slowest
layer, so the page needs no script, and carries none.
"""

from __future__ import annotations

import html
import os
from typing import Any

from .records import TOP_ROWS, BuildReport
from .report import TABLE_HEADERS, header_lines, summary_lines, table_rows

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
    rows = table_rows(report, max_rows)
    table = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in row) + "</tr>" for row in rows)
    more = (f'<p>… {len(report.rows) - len(rows)} more rows (<code>--all</code>)</p>'
            if len(rows) < len(report.rows) else "")
    legend = "".join(
        f'<span class="key" style="background:{u}"></span>{p} useful '
        f'<span class="key" style="background:{w}"></span>{p} wasted &nbsp; '
        for p, (u, w) in _PASSES.items())
    header = "".join(f'<p class="{"assumed" if line.startswith("assumed:") else "said"}">{html.escape(line)}</p>'
                     for line in header_lines(report) if line)
    return _PAGE.format(
        title=html.escape(f"kerasfit report: {os.path.basename(report.file)}"), header=header,
        summary="".join(f"<p>{html.escape(line)}</p>" for line in summary_lines(report)),
        legend=legend, chart="".join(chart), table=table, more=more,
        columns="".join(f"<th>{html.escape(h)}</th>" for h in TABLE_HEADERS), advice=_advice(report),
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
td, th {{ border-bottom: 1px solid #e2e8f0; padding: 2px 8px; text-align: left; vertical-align: top; }}
.assumed {{ color: #9b2c2c; font-weight: 600; }}
</style></head>
<body>
<h1>{title}</h1>
<section id="header">{header}</section>
<p>{legend}</p>
<div id="chart">{chart}</div>
<table id="rows"><thead><tr>{columns}</tr></thead>
<tbody>{table}</tbody></table>
{more}
<section id="summary">{summary}</section>
{advice}
<h2>Notes</h2>
<ul id="notes">{notes}</ul>
</body></html>
"""

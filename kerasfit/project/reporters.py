"""Output formats. Each takes data and returns a string; ``FORMATS`` at the end is the
registry the command line's choices, the README and ``check`` read (one entry a format)."""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence
from urllib.parse import quote

from .. import __version__
from ..core.docpages import Links
from ..engine.registry import all_rules
from ..core.types import Applicability, Diagnostic, FileResult, Severity
from ..core.types import printable as printable  # the front ends import it from here

# Where a finding's rule page opens (the installed page, or a team's docs-url).
_INSTALLED = Links()


def _fixable(d: Diagnostic, unsafe: bool) -> bool:
    if d.fix is None or not d.fix.edits:
        return False
    if d.fix.applicability is Applicability.SAFE:
        return True
    return unsafe and d.fix.applicability is Applicability.UNSAFE


def _hidden_unsafe(d: Diagnostic) -> bool:
    return d.fix is not None and d.fix.applicability is Applicability.UNSAFE and bool(d.fix.edits)


# ---- text ---------------------------------------------------------------------------


def text(
    files: Sequence[FileResult],
    *,
    unsafe: bool = False,
    fixed: int = 0,
    show_fixes: bool = False,
    color: bool = False,
    accepted: int = 0,
) -> str:
    lines: list[str] = []
    diags = [d for f in files for d in f.diagnostics]

    def c(s: str, code: str) -> str:
        return f"\x1b[{code}m{s}\x1b[0m" if color else s

    for d in diags:
        mark = " [*]" if _fixable(d, unsafe) else ""
        build = _build_note(d.build)
        sev = "" if d.severity is Severity.WARNING else f" [{d.severity.value}]"
        where = printable(f"{d.filename}:cell {d.cell}" if d.cell is not None else d.filename)
        lines.append(
            f"{c(where, '1')}:{d.row}:{d.column + 1}: {c(d.code, '1;31')}{mark}{sev} {printable(d.message)}{build}"
        )
        if show_fixes and d.fix is not None:
            lines.append(f"    fix ({d.fix.applicability.value}): {printable(d.fix.title)}")
    for f in files:
        if f.error:
            lines.append(f"error: {printable(f.error)}")
    lines.append(summary_line(files, unsafe=unsafe, fixed=fixed, accepted=accepted))
    return "\n".join(lines)


def _build_note(b: dict[str, Any] | None) -> str:
    """`` (confirmed by --build: 128×16×16×30 → 128×16×16×32, fit 94%)``."""
    if not b or not b.get("status"):
        return ""
    parts = []
    if b.get("shape") and b.get("padded_shape"):
        parts.append("×".join(map(str, b["shape"])) + " → " + "×".join(map(str, b["padded_shape"])))
    if isinstance(b.get("fit"), (int, float)):
        parts.append(f"fit {b['fit']:.1%}")
    if b["status"] == "corrected" and b.get("detail"):
        parts.append(b["detail"])
    return f" ({b['status']} by --build" + (": " + ", ".join(parts) if parts else "") + ")"


def summary_line(files: Sequence[FileResult], *, unsafe: bool = False, fixed: int = 0, accepted: int = 0) -> str:
    # findings a baseline accepted are not shown; the count says they exist
    tail = f"\n{accepted} finding(s) accepted by the baseline (not shown)." if accepted else ""
    return _summary(files, unsafe, fixed) + tail


def _summary(files: Sequence[FileResult], unsafe: bool, fixed: int) -> str:
    diags = [d for f in files for d in f.diagnostics]
    n = len(diags)
    errors = sum(1 for f in files if f.error)
    if n == 0:
        if errors:
            return f"No findings, but {errors} file(s) could not be fully checked (see the errors above)."
        head = "All checks passed!" if not fixed else f"Found {fixed} finding(s) ({fixed} fixed, 0 remaining)."
        return head
    fixable = sum(_fixable(d, unsafe) for d in diags)
    hidden = 0 if unsafe else sum(_hidden_unsafe(d) for d in diags)
    head = f"Found {n + fixed} finding(s)" + (f" ({fixed} fixed, {n} remaining)." if fixed else ".")
    parts = [head]
    if fixable:
        parts.append(f"[*] {fixable} fixable with the `--fix` option.")
    if hidden:
        parts.append(f"({hidden} hidden fix(es) can be enabled with the `--unsafe-fixes` option.)")
    uncounted = uncounted_line(files)
    if uncounted:
        parts.append(uncounted)
    return "\n".join(parts)


def uncounted_line(files: Sequence[FileResult]) -> str:
    """Says how many findings sit below each file's fail-on level (they do not set exit 1)."""
    below: Counter[str] = Counter()
    for f in files:
        failing = {id(d) for d in f.failing}
        below.update(d.severity.value for d in f.diagnostics if id(d) not in failing)
    if not below:
        return ""
    what = ", ".join(f"{n} {sev}" for sev, n in sorted(below.items(), key=lambda kv: -Severity(kv[0]).rank))
    strict = "info" if "info" in below else "warning"
    return f"Not counted toward the exit code: {what} finding(s) (`--fail-on {strict}` counts them)."


def statistics(files: Sequence[FileResult], prefiltered: int, elapsed: float) -> str:
    """The findings counted by rule, and what the run did with the files."""
    from tabulate import tabulate  # type: ignore[import-untyped]  # no stubs installed (types-tabulate is not a dependency)

    counts: Counter[tuple[str, str]] = Counter((d.code, d.name) for f in files for d in f.diagnostics)
    fixable: Counter[str] = Counter(d.code for f in files for d in f.diagnostics if d.fixable)
    rows = [[n, code, name, "[*]" if fixable[code] else ""] for (code, name), n in counts.most_common()]
    checked = sum(1 for f in files if not f.skipped and not f.error)
    cached = sum(1 for f in files if f.cached)
    out = tabulate(rows, headers=["count", "code", "name", "fix"], tablefmt="plain") if rows else "no findings"
    out += (
        f"\n\nfiles: {len(files)} seen, {checked} checked ({cached} from cache), "
        f"{prefiltered} skipped by the prefilter (never mention tensorflow/keras), "
        f"{sum(1 for f in files if f.error)} unreadable; {elapsed:.2f}s"
    )
    return out


# ---- json ---------------------------------------------------------------------------


def _loc(row: int, col: int) -> dict[str, int]:
    return {"row": row, "column": col + 1}


def diagnostic_json(d: Diagnostic, links: Links = _INSTALLED) -> dict[str, Any]:
    fix = None
    if d.fix is not None:
        fix = {
            "applicability": d.fix.applicability.value,
            "message": d.fix.title,
            "edits": [
                {"content": e.content, "location": _loc(e.row, e.column), "end_location": _loc(e.end_row, e.end_column)}
                for e in d.fix.edits
            ],
        }
    out: dict[str, Any] = {
        "code": d.code,
        "name": d.name,
        "message": d.message,
        "severity": d.severity.value,
        "filename": d.filename,
        "location": _loc(d.row, d.column),
        "end_location": _loc(d.end_row, d.end_column),
        "fix": fix,
        "url": links.rule(d.code),
    }
    if d.finding is not None:
        out["finding"] = d.finding  # what the message says, as typed fields
        out["fields"] = d.fields
    if d.build is not None:
        out["build"] = d.build
    if d.cell is not None:
        out["cell"] = d.cell  # rows and columns are then within that cell (ruff's shape)
    return out


def json_report(files: Sequence[FileResult], links: Links = _INSTALLED) -> str:
    return json.dumps([diagnostic_json(d, links) for f in files for d in f.diagnostics], indent=2)


# ---- sarif --------------------------------------------------------------------------

_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def _unicode(s: str) -> str:
    """``s`` as text any JSON reader takes: the bytes of a file name that are not UTF-8
    (lone surrogates here) written as ``\\xff``."""
    try:
        return s.encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
    except UnicodeEncodeError:  # a surrogate no file name decodes to
        return s.encode("utf-8", "backslashreplace").decode("utf-8")


def _region(row: int, col: int, end_row: int, end_col: int) -> dict[str, int]:
    return {"startLine": max(row, 1), "startColumn": col + 1, "endLine": max(end_row, 1), "endColumn": end_col + 1}


def _sarif_rule(code: str, r: Any, diags: Sequence[Diagnostic], links: Links) -> dict[str, Any]:
    """SARIF's description of one rule (``r``: its class; None for a code no rule owns:
    KF001, KF002, the cross-check's findings)."""
    name = r.name if r is not None else next(d.name for d in diags if d.code == code)
    summary = r.message if r is not None else name
    doc = r.documentation() if r is not None else summary
    level = _SARIF_LEVEL[r.severity] if r is not None else "error"
    page = links.rule(code)
    if page is not None:
        doc = f"{doc}\n\nRule page: {page}"
    return {
        "id": code,
        "name": name,
        "shortDescription": {"text": summary},
        "fullDescription": {"text": doc.split("\n\n")[1] if doc.count("\n\n") else doc},
        "help": {"text": doc, "markdown": doc},
        "defaultConfiguration": {"level": level, "enabled": bool(getattr(r, "default_enabled", True))},
        "properties": {"targets": sorted(getattr(r, "targets", ()))},
        **({"helpUri": page} if page is not None else {}),
    }


def sarif(files: Sequence[FileResult], rules: dict[str, Any], links: Links = _INSTALLED) -> str:
    diags = [d for f in files for d in f.diagnostics]
    used = sorted({d.code for d in diags} | set(rules))
    index = {code: i for i, code in enumerate(used)}
    rule_objs = [_sarif_rule(code, rules.get(code), diags, links) for code in used]
    results = []
    for d in diags:
        # a URI reference (RFC 3986) of the name's bytes: '%', spaces, controls, ':' and
        # bytes that are not UTF-8 (a file name can hold any) percent-encoded
        uri = quote(os.fsencode(Path(d.filename).as_posix()), safe="/")
        res: dict[str, Any] = {
            "ruleId": d.code,
            "ruleIndex": index[d.code],
            "level": _SARIF_LEVEL[d.severity],
            "message": {"text": _unicode(d.message)},
            "locations": [
                {
                    "physicalLocation": {
                        "artifactLocation": {"uri": uri},
                        "region": _region(d.row, d.column, d.end_row, d.end_column),
                    }
                }
            ],
        }
        if d.cell is not None:
            # The artifact is the notebook's JSON: name the cell; the region is within it.
            res["locations"][0]["logicalLocations"] = [{"name": f"cell {d.cell}", "kind": "module"}]
            res["properties"] = {"cell": d.cell}
        if d.fix is not None and d.fix.edits and d.fix.applicability is not Applicability.DISPLAY and d.cell is None:
            res["fixes"] = [
                {
                    "description": {"text": f"{d.fix.title} ({d.fix.applicability.value})"},
                    "artifactChanges": [
                        {
                            "artifactLocation": {"uri": uri},
                            "replacements": [
                                {
                                    "deletedRegion": _region(e.row, e.column, e.end_row, e.end_column),
                                    "insertedContent": {"text": e.content},
                                }
                                for e in d.fix.edits
                            ],
                        }
                    ],
                }
            ]
        if d.finding is not None:
            res.setdefault("properties", {}).update(finding=d.finding, fields=d.fields)
        if d.build is not None:
            res.setdefault("properties", {})["build"] = d.build
        results.append(res)
    log = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "kerasfit",
                        "version": __version__,
                        "rules": rule_objs,
                    }
                },
                "results": results,
                "invocations": [
                    {
                        "executionSuccessful": True,
                        "toolExecutionNotifications": [
                            {"level": "error", "message": {"text": _unicode(f.error)}} for f in files if f.error
                        ],
                    }
                ],
            }
        ],
    }
    return json.dumps(log, indent=2)


# ---- github -------------------------------------------------------------------------


def _gh_escape(s: str, prop: bool = False) -> str:
    """GitHub's workflow-command escaping (which the runner undoes), then any other
    control character made inert (which it does not)."""
    s = printable(s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A"))
    if prop:
        s = s.replace(":", "%3A").replace(",", "%2C")
    return s


def github(files: Sequence[FileResult]) -> str:
    kind = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "notice"}
    lines = []
    for f in files:
        for d in f.diagnostics:
            props = (
                f"file={_gh_escape(d.filename, True)},line={d.row},col={d.column + 1},"
                f"endLine={d.end_row},endColumn={d.end_column + 1},title={_gh_escape(d.code + ' ' + d.name, True)}"
            )
            lines.append(f"::{kind[d.severity]} {props}::{_gh_escape(f'{d.code} {d.message}')}")
        if f.error:
            lines.append(f"::error file={_gh_escape(f.filename, True)}::{_gh_escape(f.error)}")
    return "\n".join(lines)


# ---- lsp ----------------------------------------------------------------------------

_LSP_SEVERITY = {Severity.ERROR: 1, Severity.WARNING: 2, Severity.INFO: 3}


def utf16_col(line: str, col: int) -> int:
    """LSP counts columns in UTF-16 code units by default."""
    prefix = line[:col]
    return col + sum(1 for ch in prefix if ord(ch) > 0xFFFF)


def lsp_diagnostic(
    d: Diagnostic, line_text: Callable[[int], str] | None = None, links: Links = _INSTALLED
) -> dict[str, Any]:
    def pos(row: int, col: int) -> dict[str, int]:
        c = utf16_col(line_text(row), col) if line_text else col
        return {"line": max(row - 1, 0), "character": c}

    data: dict[str, Any] = {"name": d.name}
    if d.finding is not None:
        data["finding"], data["fields"] = d.finding, d.fields
    if d.fix is not None:
        data["fix"] = {
            "applicability": d.fix.applicability.value,
            "title": d.fix.title,
            "edits": [
                {
                    "range": {"start": pos(e.row, e.column), "end": pos(e.end_row, e.end_column)},
                    "newText": e.content,
                }
                for e in d.fix.edits
            ],
            "imports": [list(i) for i in d.fix.imports],
            "orphan_imports": [list(i) for i in d.fix.orphan_imports],
        }
    if d.build is not None:
        data["build"] = d.build
    out: dict[str, Any] = {
        "range": {"start": pos(d.row, d.column), "end": pos(d.end_row, d.end_column)},
        "severity": _LSP_SEVERITY[d.severity],
        "code": d.code,
        "source": "kerasfit",
        "message": d.message,
        "data": data,
    }
    href = links.rule(d.code)
    if href is not None:  # an absolute URI, as LSP requires
        out["codeDescription"] = {"href": href}
    return out


def lsp(files: Sequence[FileResult], links: Links = _INSTALLED) -> str:
    out: dict[str, list[dict[str, Any]]] = {}
    for f in files:
        if not f.diagnostics:
            continue
        path = Path(f.filename).resolve()
        try:
            lines = path.read_text(encoding="utf-8").splitlines()
        except (OSError, UnicodeDecodeError):
            lines = []

        def line_text(row: int, lines: list[str] = lines) -> str:
            return lines[row - 1] if 0 < row <= len(lines) else ""

        out[path.as_uri()] = [lsp_diagnostic(d, line_text, links) for d in f.diagnostics]
    return json.dumps(out, indent=2)


# ---- the registry -------------------------------------------------------------------


@dataclass(frozen=True)
class WriteOptions:
    """What the command line tells a writer (each format uses what it needs)."""

    unsafe: bool = False  # --unsafe-fixes: count unsafe fixes as fixable
    fixed: int = 0  # fixes applied by this run
    show_fixes: bool = False
    color: bool = False
    quiet: bool = False  # findings only, no summary
    links: Links = _INSTALLED  # where each rule's page opens (--docs-url / docs-url)
    accepted: int = 0  # findings a baseline accepted, for the summary


@dataclass(frozen=True)
class OutputFormat:
    name: str
    help: str  # one line: the README's list of formats
    write: Callable[[Sequence[FileResult], WriteOptions], str]
    # Does the output itself name the files that could not be read? Else the command
    # prints them on stderr, so a machine-readable stdout stays parseable.
    lists_errors: bool = False


FINDING_LINE = re.compile(r":\d+:\d+: [A-Z]+\d{3}\b")  # any pack's code, not only KF


def _text(files: Sequence[FileResult], o: WriteOptions) -> str:
    out = text(files, unsafe=o.unsafe, fixed=o.fixed, show_fixes=o.show_fixes, color=o.color, accepted=o.accepted)
    if o.quiet:
        out = "\n".join(line for line in out.splitlines() if FINDING_LINE.search(line) or line.startswith("error:"))
    return out


FORMATS: dict[str, OutputFormat] = {
    f.name: f
    for f in (
        OutputFormat("text", "`path:line:col: CODE [*] message` lines and a summary", _text, lists_errors=True),
        OutputFormat("json", "a list of findings with their fixes", lambda files, o: json_report(files, o.links)),
        OutputFormat("sarif", "SARIF 2.1.0, for code-scanning services",
                     lambda files, o: sarif(files, all_rules(), o.links)),
        OutputFormat("github", "GitHub Actions workflow annotations", lambda files, o: github(files)),
        OutputFormat("lsp", "LSP `Diagnostic` objects keyed by file URI", lambda files, o: lsp(files, o.links)),
    )
}

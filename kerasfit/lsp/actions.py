"""Code actions: quick fixes, ``# noqa`` comments and fix-all (sent whole when the
diagnostics carry the edits, else resolved when the user picks them)."""

from __future__ import annotations

from typing import Any

from lsprotocol import types

from ..core.types import Applicability, Fix, allowed
from ..engine.fix import add_imports, apply_fixes
from ..engine.settings import SYNTAX_ERROR_CODE
from ..engine.suppressions import Comments
from . import edits as E
from .documents import CONVERTER, KerasfitServer, View, workspace_edit
from .guard import LintTimeout


FIX_ALL_KIND = "source.fixAll.kerasfit"
NOTEBOOK_FIX_ALL_KIND = "notebook.source.fixAll.kerasfit"


def _wants(only: list[str] | None, kind: str) -> bool:
    """LSP kinds are hierarchical: asking for "source.fixAll" includes "source.fixAll.kerasfit"."""
    return not only or any(kind == k or kind.startswith(k + ".") for k in only)


def _applied(source: str, fix: Fix) -> str | None:
    """``source`` with one fix and the imports it needs (runs on the lint thread)."""
    bom = source.startswith("\ufeff")
    body = source[1:] if bom else source
    if not fix.matches(body):
        return None  # offsets that miss the text they were made for: offer no edit
    new, chosen = apply_fixes(body, [fix])
    if not chosen:
        return None
    if fix.imports or fix.orphan_imports:
        new = add_imports(new, set(fix.imports), set(fix.orphan_imports)) or new
    return ("\ufeff" if bom else "") + new


def _resolves_edits(ls: KerasfitServer) -> bool:
    td = ls.client_capabilities.text_document
    ca = td.code_action if td is not None else None
    rs = ca.resolve_support if ca is not None else None
    return bool(ca is not None and ca.data_support and rs is not None and "edit" in (rs.properties or []))


async def code_action(ls: KerasfitServer, params: types.CodeActionParams) -> list[types.CodeAction] | None:
    view = await ls.view_of(params.text_document.uri)
    if view is None:
        return None
    only = [str(k) for k in params.context.only] if params.context.only else None
    actions: list[types.CodeAction] = []
    if _wants(only, types.CodeActionKind.QuickFix):
        fixes, noqa = _line_actions(view, params)
        actions += fixes + noqa
    actions += _fix_all_actions(ls, view, only)
    if not _resolves_edits(ls):  # an older client: compute what it picks from now
        resolved = [await resolve_code_action(ls, a) if a.data else a for a in actions]
        actions = [a for a in resolved if a.edit is not None]
    return actions or None


def _line_actions(view: View, params: types.CodeActionParams) -> tuple[list[types.CodeAction], list[types.CodeAction]]:
    """The quick fixes and the ``# noqa`` actions of the findings on the asked lines."""
    uri, linted = params.text_document.uri, view.linted
    want = {"start": {"line": params.range.start.line, "character": params.range.start.character},
            "end": {"line": params.range.end.line, "character": params.range.end.character}}
    asked = {(str(c.code), c.range.start.line) for c in params.context.diagnostics if c.source == "kerasfit"}
    lines = E.split_lines(view.text)
    comments: list[Comments] = []  # the text's comments and the rows one may end (computed on first need)
    fixes: list[types.CodeAction] = []
    noqa: list[types.CodeAction] = []
    seen_noqa: set[tuple[str, int]] = set()
    body = linted.source[1:] if linted.source.startswith("\ufeff") else linted.source
    for i, d, lsp_d in view.found:
        # Whole lines, like hover: a cursor anywhere on a flagged line gets its fixes.
        if (d.code, lsp_d["range"]["start"]["line"]) not in asked and not E.lines_overlap(want, lsp_d["range"]):
            continue
        diag = CONVERTER.structure(lsp_d, types.Diagnostic)
        fix = d.fix
        if fix is not None and fix.edits and fix.applicability is not Applicability.DISPLAY and fix.matches(body):
            action = types.CodeAction(
                title=E.quickfix_title(d),
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diag],
                is_preferred=fix.applicability is Applicability.SAFE,
            )
            if fix.imports or fix.orphan_imports or linted.cells is not None:
                action.data = {"kerasfit": "fix", "at": i, "key": view.lint_key, "version": linted.version}
            else:
                text_edits = [{"range": e["range"], "newText": e["newText"]} for e in lsp_d["data"]["fix"]["edits"]]
                action.edit = workspace_edit(uri, view.version, text_edits, CONVERTER)
            fixes.append(action)
        line_no = _noqa_line(lsp_d, view.text, comments)
        if line_no is None or d.code.startswith("KF0") or (d.code, line_no) in seen_noqa or line_no >= len(lines):
            continue  # a syntax error cannot be suppressed; nor a line no comment may follow
        seen_noqa.add((d.code, line_no))
        noqa.append(
            types.CodeAction(
                title=f"Disable {d.code} for this line",
                kind=types.CodeActionKind.QuickFix,
                diagnostics=[diag],
                edit=workspace_edit(uri, view.version, [E.noqa_edit(line_no, lines[line_no], d.code,
                                                                   comments[0].column(line_no + 1))], CONVERTER),
            )
        )
    return fixes, noqa


def _fix_all_actions(ls: KerasfitServer, view: View, only: list[str] | None) -> list[types.CodeAction]:
    """Fix-all, offered lazily (resolved when picked); none for a file that does not parse,
    which the fixer leaves alone."""
    linted = view.linted
    kinds = [FIX_ALL_KIND] + ([NOTEBOOK_FIX_ALL_KIND] if linted.cells is not None else [])
    kinds = [k for k in kinds if _wants(only, k)]
    if not _resolves_edits(ls) and only is None:
        return []  # a client that cannot resolve gets the fix-all only when it asks for it by kind
    codes = {d.code for d in linted.result.diagnostics}
    if not kinds or SYNTAX_ERROR_CODE in codes or not any(allowed(d.fix, ls.settings.unsafe_fixes) for d in linted.result.diagnostics):
        return []
    title = "kerasfit: fix all" + (" (including unsafe fixes)" if ls.settings.unsafe_fixes else " safe fixes")
    data = {"kerasfit": "fixAll", "key": view.lint_key, "version": linted.version}
    return [types.CodeAction(title=title, kind=kind, data=dict(data)) for kind in kinds]


async def resolve_code_action(ls: KerasfitServer, action: types.CodeAction) -> types.CodeAction:
    data = action.data if isinstance(action.data, dict) else {}
    what = data.get("kerasfit")
    if what not in ("fix", "fixAll") or not isinstance(data.get("key"), str):
        return action
    key = data["key"]
    linted = await ls.lint(key)
    if linted is None or linted.version != data.get("version"):
        return action  # the document moved on: no edit rather than a wrong one
    try:
        if what == "fixAll":
            fixed = await ls.run_guarded(key, lambda: ls.lint_now(key, linted.source, linted.version, fix=True))
            new = fixed.result.fixed_source
        else:
            at = data.get("at")
            if not isinstance(at, int) or not 0 <= at < len(linted.result.diagnostics):
                return action
            fix = linted.result.diagnostics[at].fix
            if fix is None:
                return action
            new = await ls.run_guarded(key, _applied, linted.source, fix)
    except LintTimeout:
        return action
    # A didChange handled while the fixer ran: the edit fits text the editor no longer has.
    now = ls.snapshot(key)
    if now is None or now[:2] != (linted.version, linted.source):
        return action
    action.edit = ls.edit_to(key, linted, new)
    return action


def _noqa_line(lsp_d: dict[str, Any], text: str, memo: list[Comments]) -> int | None:
    """The 0-based line a noqa comment for the diagnostic goes on, as ``check --add-noqa``
    places it: its first or last line, where Python allows a comment (not after a
    backslash, not inside a multi-line string); None when neither does."""
    if not memo:
        memo.append(Comments.of(text))
    ok = memo[0].open_rows
    first: int = lsp_d["range"]["start"]["line"]
    last: int = lsp_d["range"]["end"]["line"]
    return next((line for line in (first, last) if line + 1 in ok), None)

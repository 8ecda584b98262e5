"""The fix loop: apply the allowed fixes, re-lint, repeat with a bound; the imports
fixes need (STYLE 6, 12). Everything around an edit keeps its formatting."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Sequence

import libcst as cst

from ..core.types import Diagnostic, Fix, allowed
from .imports import still_read
from .layout import for_libcst
from .lint import LintOutput, lint_source
from .parse import LINE, cpython_parse
from .parseguard import budget_mask, parse_module
from .settings import MAX_FIX_PASSES, LintSettings


def apply_fixes(source: str, fixes: Sequence[Fix]) -> tuple[str, list[Fix]]:
    """Apply non-overlapping fixes, outermost first; return the new text and what was applied."""
    chosen: list[Fix] = []
    taken: list[tuple[int, int]] = []
    for fix in sorted(fixes, key=lambda f: (f.span[0], -f.span[1])):
        if not fix.matches(source):
            continue  # its offsets do not point at the text it was made for
        if any(not (e.end <= s or e.start >= t) or (e.start == e.end == s) for e in fix.edits for s, t in taken):
            continue
        chosen.append(fix)
        taken.extend((e.start, e.end) for e in fix.edits)
    edits = sorted((e for f in chosen for e in f.edits), key=lambda e: (e.start, e.end), reverse=True)
    out = source
    for e in edits:
        out = out[: e.start] + e.content + out[e.end :]
    return out, chosen


@dataclass
class FixOutcome:
    source: str
    applied: int
    diagnostics: list[Diagnostic]
    error: str | None = None


def fix_source(source: str, filename: str, settings: LintSettings, unsafe: bool = False) -> FixOutcome:
    """Lint, apply allowed fixes, re-lint; repeat until stable (bounded).

    A fix whose result does not parse is dropped (and named in ``error``); the other
    fixes of that round still apply.
    """
    current = source
    applied = 0
    out = lint_source(current, filename, settings)
    if out.recovered:  # never fix a file that does not parse (like ruff): the user is mid-edit
        return FixOutcome(current, 0, out.diagnostics)
    broken: dict[tuple[object, ...], str] = {}  # fix -> the code of the rule that offered it
    misplaced: set[str] = set()  # rules whose fix did not find its text where it pointed
    for _ in range(MAX_FIX_PASSES):
        offered, fixes = _fixes_to_try(out.diagnostics, current, unsafe, broken, misplaced)
        if not fixes:
            break
        candidate, chosen, new_out = _try_fixes(current, fixes, filename, settings)
        if candidate == current:
            break
        if new_out is None:
            retry = _without_culprits(current, chosen, offered, broken, filename, settings)
            if retry is None:
                continue
            candidate, chosen, new_out = retry
            if new_out is None:  # the fixes that parse on their own changed nothing together
                break
        current, out = candidate, new_out
        applied += len(chosen)
    return FixOutcome(current, applied, out.diagnostics, _fix_errors(filename, broken, misplaced))


def _fixes_to_try(diagnostics: list[Diagnostic], current: str, unsafe: bool, broken: dict[tuple[object, ...], str],
                  misplaced: set[str]) -> tuple[dict[tuple[object, ...], str], list[Fix]]:
    """The round's fixes: allowed, not known to break the file, and found at their text
    (the rules of those that were not are added to ``misplaced``); with the code of the
    rule that offered each allowed fix."""
    offered = {_fix_key(d.fix): d.code for d in diagnostics if d.fix is not None and allowed(d.fix, unsafe)}
    fixes = [d.fix for d in diagnostics if d.fix is not None and allowed(d.fix, unsafe) and _fix_key(d.fix) not in broken]
    for f in fixes:
        if not f.matches(current):
            misplaced.add(offered.get(_fix_key(f), "?"))
    return offered, [f for f in fixes if f.matches(current)]


def _without_culprits(
    current: str, chosen: list[Fix], offered: dict[tuple[object, ...], str], broken: dict[tuple[object, ...], str],
    filename: str, settings: LintSettings,
) -> tuple[str, list[Fix], LintOutput | None] | None:
    """A round whose result did not parse, tried again with only the fixes that parse on
    their own (the culprits are added to ``broken``, found one by one). None when nothing
    is left to apply this round; else what ``_try_fixes`` answers for the good ones (a
    lint of None then means they changed nothing)."""
    good = []
    for f in chosen:
        c, _, o = _try_fixes(current, [f], filename, settings)
        if c != current and o is None:
            broken[_fix_key(f)] = offered.get(_fix_key(f), "?")
        elif c != current:
            good.append(f)
    if not good:
        return None
    candidate, applied, new_out = _try_fixes(current, good, filename, settings)
    if candidate != current and new_out is None:
        broken.update((_fix_key(f), offered.get(_fix_key(f), "?")) for f in good)
        return None
    return candidate, applied, new_out


def _fix_errors(filename: str, broken: dict[tuple[object, ...], str], misplaced: set[str]) -> str | None:
    """The one error line naming the rules whose fixes were not applied, if any."""
    errors = []
    if broken:
        errors.append(
            f"{filename}: a fix produced code that does not parse and was not applied "
            f"({', '.join(sorted(set(broken.values())))})"
        )
    if misplaced:
        errors.append(
            f"{filename}: a fix did not find the text it replaces at its position and was not applied "
            f"({', '.join(sorted(misplaced))})"
        )
    return "; ".join(errors) or None


def _fix_key(fix: Fix) -> tuple[object, ...]:
    return (fix.title, tuple((e.content, e.row, e.column, e.end_row, e.end_column) for e in fix.edits))


def _try_fixes(
    current: str, fixes: Sequence[Fix], filename: str, settings: LintSettings
) -> tuple[str, list[Fix], LintOutput | None]:
    """Apply ``fixes`` to ``current``: (new text, fixes applied, its lint or None if it does not parse)."""
    candidate, chosen = apply_fixes(current, fixes)
    imports = {imp for f in chosen for imp in f.imports}
    orphans = {imp for f in chosen for imp in f.orphan_imports}
    if imports or orphans:
        with_imports = add_imports(candidate, imports, orphans)
        if with_imports is not None:
            candidate = with_imports
        elif imports:
            return current, [], None  # a fix without the import it needs would not run
        # (an orphaned import that cannot be removed, e.g. in a file with a masked
        # syntax error, stays: the fix itself still applies)
    if candidate == current:
        return candidate, chosen, None
    new_out = lint_source(candidate, filename, settings)
    return candidate, chosen, (new_out if new_out.module is not None and not new_out.recovered else None)


def add_imports(
    source: str,
    imports: set[tuple[str, str | None, str | None]],
    orphans: set[tuple[str, str | None, str | None]] = frozenset(),  # type: ignore[assignment]
) -> str | None:
    """Add the imports fixes need; remove the ones they orphaned if nothing else uses them."""
    from libcst.codemod import CodemodContext
    from libcst.codemod.visitors import AddImportsVisitor, RemoveImportsVisitor

    tree, _ = cpython_parse(source)
    if tree is None or budget_mask(source, tree)[1]:
        return None  # too deep for libcst's visitors: no import is added, so no fix applies
    # libcst does not give form feeds in indentation back as written: transform the text
    # without them (same lines), then carry only the lines the visitors changed back
    parse_text = for_libcst(source)
    try:
        module = parse_module(parse_text)
    except cst.ParserSyntaxError:
        return None
    if module.code != parse_text:
        return None  # libcst would not give the rest of the file back as written

    def order(specs: Iterable[tuple[str, str | None, str | None]]) -> list[tuple[str, str | None, str | None]]:
        return sorted(specs, key=lambda t: tuple(x or "" for x in t))

    orphans = orphans - still_read(module, orphans)
    if not imports and not orphans:
        return source
    if imports:
        context = CodemodContext()
        for mod, obj, asname in order(imports):
            AddImportsVisitor.add_needed_import(context, mod, obj, asname)
        module = AddImportsVisitor(context).transform_module(module)
    if orphans:
        context = CodemodContext()
        for mod, obj, asname in order(orphans):
            RemoveImportsVisitor.remove_unused_import(context, mod, obj, asname)
        module = RemoveImportsVisitor(context).transform_module(module)
    if parse_text is source:
        return module.code
    return _carry_line_changes(source, parse_text, module.code)


def _carry_line_changes(original: str, before: str, after: str) -> str:
    """``original`` with the lines that changed from ``before`` to ``after``.

    ``before`` has ``original``'s lines one for one (only ignored whitespace differs), so
    a line the change left alone keeps its original spelling."""
    import difflib

    # lines end at newlines only (str.splitlines would also split at a form feed)
    orig, old, new = LINE.findall(original), LINE.findall(before), LINE.findall(after)
    out: list[str] = []
    for tag, i1, i2, j1, j2 in difflib.SequenceMatcher(None, old, new, autojunk=False).get_opcodes():
        out.extend(orig[i1:i2] if tag == "equal" else new[j1:j2])
    return "".join(out)


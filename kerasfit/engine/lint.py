"""Parse once, walk once, report, suppress (STYLE 5).

The engine knows nothing about any particular rule. It runs every enabled rule in one
traversal of the libcst tree, turns reports into Diagnostics with positions computed
only for the reported nodes, and drops suppressed ones.
"""

from __future__ import annotations

import ast
import re
from collections import ChainMap
from dataclasses import dataclass
from typing import Hashable, Iterator, Mapping

import libcst as cst

from ..core.fixes import FixSpec
from ..core.types import Diagnostic, Severity
from ..ruleapi.context import RuleContext
from ..ruleapi.rule import Report, Rule
from ..semantic.model import SemanticModel
from .edits import Indents, to_fix
from .parse import LINE, ParseCache, compile_error, parse_guarded, syntax_error_diagnostic
from .positions import Positions
from .reuse import CheckedFile
from .settings import INTERNAL_ERROR_CODE, INTERNAL_ERROR_NAME, LintSettings
from .suppressions import Suppressions
from .walk import walk


def _nodes_of(spec: FixSpec) -> Iterator[cst.CSTNode]:
    for ch in spec.changes:
        yield ch.node


@dataclass
class LintOutput:
    diagnostics: list[Diagnostic]
    module: cst.Module | None
    # linted around syntax errors: ``module`` is the file with the broken statements blanked
    recovered: bool = False


def lint_source(
    source: str, filename: str, settings: LintSettings, parse_cache: ParseCache | None = None
) -> LintOutput:
    # the tree-wide answers parsed most files with CPython already: their AST is this text's
    known = settings.project.known_tree(filename, source) if parse_cache is None and settings.project is not None else None
    module, tree, refused, text = parse_guarded(source, filename, parse_cache, settings.stop, known)
    if known is None and tree is not None and parse_cache is None and settings.project is not None:
        # and the other way round: the index's facts of this text (and its share of the
        # tree-wide answers) take this parse instead of parsing the text again
        settings.project.offer_tree(filename, source, tree)
    if module is None:
        if tree is None:  # CPython refuses the file: keep what parses around the error
            recovered = lint_around_syntax_errors(source, filename, settings, parse_cache)
            if recovered is not None:
                return recovered
        return LintOutput(refused, None)
    # ``text`` is ``source`` with refused statements blanked (same offsets everywhere):
    # the module's own text, which positions and edits are checked against
    kept = parse_cache if parse_cache is not None and text is source and not refused else None
    diags = lint_module(module, text, filename, settings, tree, kept)
    if refused:
        diags = sorted(diags + refused, key=Diagnostic.sort_key)
    return LintOutput(diags, module)


MAX_MERGED_PIECES = 16


# a line at column 0 that continues the statement above, never starts one
_CONTINUES = re.compile(r"[)\]}]|(?:else|elif|except|finally)\b")


def lint_around_syntax_errors(
    source: str, filename: str, settings: LintSettings, parse_cache: ParseCache | None = None
) -> LintOutput | None:
    """Lint a file that does not parse, losing only the top-level statements that do not.

    CPython's AST is unavailable for such a file, so it is cut by indentation: a line
    at column 0 (not a comment, closing bracket or ``else``/``except`` clause) may start
    a statement. Each piece is verified by compiling it alone; a piece that does not
    compile is retried joined with the next ones (a string or bracket spanning a cut),
    and if none of those compile it is the broken statement: its characters become
    spaces, so every offset, row and column elsewhere stays what it is in the file, and
    the rest is linted as usual, with KF001 where CPython places each error. None when
    nothing parses around the error (the caller reports the file's one error).
    """
    lines = LINE.findall(source)
    starts = [0] + [i for i, ln in enumerate(lines) if i and ln[:1] not in ("", " ", "\t", "\f", "#", "\r", "\n")
                    and not _CONTINUES.match(ln)]
    bounds = list(zip(starts, starts[1:] + [len(lines)]))
    if len(bounds) < 2:
        return None
    broken: list[tuple[int, int, SyntaxError]] = []
    any_good = False
    i = 0
    while i < len(bounds):
        a = bounds[i][0]
        alone = SyntaxError("cannot parse")  # the piece's own error, set on the first try
        for j in range(i, min(len(bounds), i + MAX_MERGED_PIECES)):
            err = compile_error("".join(lines[a : bounds[j][1]]))
            if err is None:
                any_good = True
                i = j + 1
                break
            if j == i:
                alone = err
        else:
            broken.append((a, bounds[i][1], alone))
            i += 1
    if not broken or not any_good:
        return None
    blank: set[int] = set()
    for a, b, _ in broken:
        blank.update(range(a, b))
    kept = "".join(re.sub(r"[^\r\n]", " ", ln) if k in blank else ln for k, ln in enumerate(lines))
    if compile_error(kept) is not None:
        return None
    out = lint_source(kept, filename, settings, parse_cache)
    if out.module is None:
        return None
    for a, _, err in broken:
        row = a + (err.lineno or 1)
        err = SyntaxError(err.msg, (filename, row, err.offset or 1, None))
        out.diagnostics.append(syntax_error_diagnostic(filename, None, err))
    out.diagnostics.sort(key=Diagnostic.sort_key)
    out.recovered = True
    return out


def lint_module(
    module: cst.Module, source: str, filename: str, settings: LintSettings, tree: ast.Module | None = None,
    cache: ParseCache | None = None,
) -> list[Diagnostic]:
    """Every finding of ``module``. ``cache``: the document's (the language server's),
    whose ``reuse`` keeps findings between checks and walks only what an edit can have
    changed."""
    reuse = cache.reuse if cache is not None else None
    while True:
        ctx = SemanticModel(module, filename, settings.target, settings.options, source,
                            hints=cache.hints(module) if cache is not None else None, project=settings.project)
        rules = [r(RuleContext(ctx, r.code, r.reads)) for r in settings.rules]
        crashes: list[tuple[Rule, BaseException]] = []
        plan = reuse.plan(module, _settings_key(filename, settings), rules, crashes, CheckedFile(ctx)) if reuse is not None else None
        walk(module, ctx, rules, lambda rule, exc: crashes.append((rule, exc)), plan, settings.stop)
        if plan is None:
            break
        if plan.holds():
            plan.commit()
            break
        assert reuse is not None  # a plan comes from it
        reuse.forget()  # what kept findings rest on changed: check the whole file
    reports = _first_once([rep for r in rules for rep in r.reports])
    diags = _diagnostics(reports, module, source, filename, settings, tree, cache, ctx) if reports else []
    for rule, exc in crashes:
        diags.append(
            Diagnostic(
                INTERNAL_ERROR_CODE, INTERNAL_ERROR_NAME,
                f"{rule.code} crashed on this file: {type(exc).__name__}: {exc}".splitlines()[0],
                Severity.ERROR, filename, 1, 0, 1, 0,
            )
        )
    diags.sort(key=Diagnostic.sort_key)
    return diags


def _diagnostics(reports: list[Report], module: cst.Module, source: str, filename: str, settings: LintSettings,
                 tree: ast.Module | None, cache: ParseCache | None, ctx: SemanticModel) -> list[Diagnostic]:
    """The rules' reports as findings: each at its node's span, once, unless suppressed,
    with its fix (unless the rule's fixes are turned off)."""
    diags: list[Diagnostic] = []
    wanted: list[cst.CSTNode] = []
    for rep in reports:
        wanted.append(rep.node)
        if rep.fix is not None:
            wanted.extend(_nodes_of(rep.fix))
    index = ctx.scopes.built_index  # parent links, when a rule already needed the file index
    parent: Mapping[int, cst.CSTNode] | None = None
    if index is not None:
        # a name the index walk skips (``ds.batch``'s ``batch``) gets its host, so its
        # statement alone is generated, not the whole module
        hosts = index.hosts(wanted)
        parent = ChainMap(hosts, index.parent) if hosts else index.parent
    pos = Positions(module, source, wanted, tree, parent, cache.units if cache is not None else None)
    sup = Suppressions.scan(source)
    indents = Indents(module)
    seen: set[tuple[str, int, int, str]] = set()
    for rep in reports:
        try:
            start, end = pos.span(rep.node)
        except KeyError:
            continue
        row, col = pos.row_col(start)
        end_row, end_col = pos.row_col(end)
        code = rep.rule.code
        key = (code, start, end, rep.message)
        if key in seen:
            continue
        seen.add(key)
        if sup.suppressed(code, {row, end_row}):
            continue
        fix = to_fix(rep.fix, pos, module, indents) if rep.fix is not None and code not in settings.unfixable else None
        diags.append(
            Diagnostic(
                code, rep.rule.name, rep.message, rep.severity, filename,
                row, col, end_row, end_col, fix, start, end,
                finding=rep.finding.kind() if rep.finding is not None else None,
                fields=rep.finding.fields() if rep.finding is not None else {},
            )
        )
    return diags


def _first_once(reports: list[Report]) -> list[Report]:
    """``reports`` without a rule's ``once`` reports of a node (or key) after its first
    (the reports are in source order per rule)."""
    if all(rep.once is False for rep in reports):
        return reports
    seen: set[tuple[int, Hashable]] = set()
    out: list[Report] = []
    for rep in reports:
        if rep.once is not False:
            key = (id(rep.rule), id(rep.node) if rep.once is True else rep.once)
            if key in seen:
                continue
            seen.add(key)
        out.append(rep)
    return out


def _settings_key(filename: str, settings: LintSettings) -> tuple[object, ...]:
    return (
        filename, tuple(settings.rules), settings.target,
        repr(sorted(settings.options.items(), key=lambda kv: kv[0])), settings.unfixable,
    )


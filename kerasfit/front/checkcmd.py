"""``kerasfit check``'s body: what the command does once typer has read its command
line (kerasfit/front/cli.py owns every option and builds one ``CheckArgs`` from them).
A front end, like cli.py: it prints."""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from typer import echo

from ..core.sourcefile import read_regular
from ..core.types import FileResult
from ..project import reporters
from ..project.reporters import FORMATS, WriteOptions, printable

if TYPE_CHECKING:
    from ..project.buildstage import BuildRequest
    from ..project.check import CheckOptions, RunResult
    from ..core.docpages import Links


@dataclass(frozen=True)
class CheckArgs:
    """``kerasfit check``'s command line, one field per option (named as cli.check's
    parameter, value as typer read it; the defaults are the command's)."""

    paths: list[Path] | None = None
    fix: bool = False
    unsafe_fixes: bool = False
    diff: bool = False
    select: list[str] | None = None
    extend_select: list[str] | None = None
    ignore: list[str] | None = None
    target: str | None = None
    output_format: str = "text"
    exit_zero: bool = False
    fail_on: str | None = None
    statistics: bool = False
    no_cache: bool = False
    cache_dir: Path | None = None
    config: Path | None = None
    isolated: bool = False
    show_fixes: bool = False
    force_exclude: bool = False
    stdin_filename: str | None = None
    jobs: int | None = None
    quiet: bool = False
    build: bool = False
    entry: str | None = None
    batch_size: int | None = None
    cores: int | None = None
    dtype: str | None = None
    build_timeout: float | None = None
    input_shape: tuple[tuple[int, ...], ...] | None = None
    trace_script: bool = False
    docs_url: str | None = None
    baseline: Path | None = None
    write_baseline: Path | None = None
    add_noqa: bool = False
    max_file_size: int | None = None

    @property
    def adopting(self) -> str | None:
        """The adoption flag this run was given (it records findings instead of reporting them)."""
        return "--add-noqa" if self.add_noqa else "--write-baseline" if self.write_baseline is not None else None

    @property
    def path_list(self) -> list[Path]:
        return list(self.paths) if self.paths else [Path(".")]


# ---- the command ------------------------------------------------------------------

def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def run_check(args: CheckArgs) -> int:
    """``kerasfit check``; returns the exit code."""
    from ..project.check import links_for  # defers the check machinery (api, discovery, config) until argv is read
    from ..project.config import ConfigError  # defers the config reader until argv is read

    adopting = args.adopting
    if adopting and (args.fix or args.diff or args.add_noqa and args.write_baseline is not None):
        echo(f"kerasfit: error: {adopting} cannot be combined with --fix, --diff, --add-noqa or --write-baseline", err=True)
        return 2
    if args.build_timeout is not None:
        from ..project.config import check_timeout  # defers the config reader until argv is read

        try:
            check_timeout(args.build_timeout, "--build-timeout")
        except ConfigError as exc:
            echo(f"kerasfit: error: {exc}", err=True)
            return 2
    options = _check_options(args)
    try:
        checked = _check_stdin(args, options) if [str(p) for p in args.path_list] == ["-"] else _check_files(args, options)
        if isinstance(checked, int):
            return checked
        links = links_for(Path.cwd(), options)
    except ConfigError as exc:
        echo(f"kerasfit: error: {printable(str(exc))}", err=True)
        return 2
    result, originals = checked
    for warning in result.warnings:
        echo(f"warning: {printable(warning)}", err=True)
    if adopting:
        return _adopt(args, result)
    if args.diff:
        return _print_diffs(args, result.files, originals)
    return _print_findings(args, result, links)


def _check_options(args: CheckArgs) -> CheckOptions:
    """The check pipeline's options from the command line (config is layered under them there)."""
    from ..project.check import CheckOptions  # defers the check machinery (api, discovery, config) until argv is read
    from ..project.config import Selection  # defers the config reader until argv is read

    return CheckOptions(
        selection=Selection(select=_split(args.select) or None, extend_select=_split(args.extend_select),
                            ignore=_split(args.ignore)),
        target=args.target,
        fix=args.fix,
        unsafe_fixes=args.unsafe_fixes,
        diff=args.diff,
        use_cache=not args.no_cache,
        cores=args.cores,
        batch_size=args.batch_size,
        config_file=args.config,
        isolated=args.isolated,
        jobs=args.jobs,
        force_exclude=args.force_exclude,
        build=_build_request(args),
        fail_on=args.fail_on,
        cache_dir=args.cache_dir,
        docs_url=args.docs_url,
        baseline=args.baseline,
        use_baseline=args.write_baseline is None,
        max_file_size=args.max_file_size,
    )


def _check_stdin(args: CheckArgs, options: CheckOptions) -> tuple[RunResult, dict[str, str]] | int:
    """``kerasfit check -``: the result and the text read (for --diff), or the exit code
    when the run ends here (an error, or ``--fix -`` printing the fixed text)."""
    from ..project.check import RunResult, accept_baseline, check_source  # defers the check machinery until argv is read

    if args.adopting:
        echo(f"kerasfit: error: {args.adopting} works on files, not on stdin", err=True)
        return 2
    name = args.stdin_filename or "<stdin>"
    fix_in_place = args.fix and not args.diff
    source = _read_stdin(name, echo_back=fix_in_place)
    if source is None:
        return 1
    res = check_source(source, name, options, fix=args.fix or args.diff, unsafe=args.unsafe_fixes)
    accepted = accept_baseline(res, res.fixed_source or source, options) if options.use_baseline else 0
    if fix_in_place:
        sys.stdout.write(res.fixed_source if res.fixed_source is not None else source)
        # stdout is the file; what is left to fix goes to stderr (as ruff does)
        _remaining_to_stderr(res, args.unsafe_fixes, res.fixes_applied, args.quiet)
        return 1 if res.failing and not args.exit_zero else 0
    return RunResult([res], accepted=accepted), {name: source}


def _check_files(args: CheckArgs, options: CheckOptions) -> tuple[RunResult, dict[str, str]]:
    """The named files and directories checked. A path that does not exist is reported
    like an unreadable file (exit 1, as ruff does); the paths that do exist are still checked."""
    from ..project.check import RunResult, check_paths  # defers the check machinery until argv is read

    path_list = args.path_list
    missing = [p for p in path_list if _missing(p)]
    existing = [p for p in path_list if p not in missing]
    result = check_paths(existing, options) if existing else RunResult([])
    result.files.extend(FileResult(str(p), error=f"{p}: no such file or directory") for p in missing)
    return result, {}


def _adopt(args: CheckArgs, result: RunResult) -> int:
    """--write-baseline or --add-noqa: record this run's findings instead of reporting them."""
    from ..project.config import ConfigError  # defers the config reader until argv is read
    from .adopt import add_noqa_comments, record_baseline  # defers --add-noqa and --write-baseline until asked for

    try:
        if args.write_baseline is not None:
            code, report = record_baseline(result, args.write_baseline)
        else:
            code, report = add_noqa_comments(result, args.path_list)
    except ConfigError as exc:
        echo(f"kerasfit: error: {reporters.printable(str(exc))}", err=True)
        return 2
    echo("\n".join(reporters.printable(line) for line in report.split("\n")))  # (file names: one inert line each)
    return code


def _print_diffs(args: CheckArgs, files: list[Any], originals: dict[str, str]) -> int:
    """--diff: the patch on stdout, what could not be fixed on stderr."""
    text = _diffs(files, originals)
    if text:
        sys.stdout.write(text)
    # a file that does not parse has no diff: its KF001 line as --fix prints it, on
    # stderr (stdout is the patch)
    unparsed = [FileResult(f.filename, [d for d in f.diagnostics if d.code == "KF001"]) for f in files]
    if any(f.diagnostics for f in unparsed):
        lines = reporters.text(unparsed).splitlines()
        echo("\n".join(line for line in lines if reporters.FINDING_LINE.search(line)), err=True)
    fixed = sum(f.fixes_applied for f in files)
    echo(f"Would fix {fixed} finding(s) in {sum(1 for f in files if f.fixed_source)} file(s).", err=True)
    for f in files:
        if f.error:
            echo(f"error: {printable(f.error)}", err=True)
    # a file that could not be read or parsed is not "nothing to fix"
    unchecked = any(f.error for f in files) or any(f.diagnostics for f in unparsed)
    return 0 if args.exit_zero or not (text or unchecked) else 1


def _print_findings(args: CheckArgs, result: RunResult, links: Links) -> int:
    """The findings in the chosen format (and --statistics); the exit code they make."""
    files = result.files
    fixed = sum(f.fixes_applied for f in files) if args.fix else 0
    _emit(args, files, fixed, links, result.accepted)
    if args.statistics:
        echo(reporters.statistics(files, result.prefiltered, result.elapsed), err=args.output_format != "text")
    remaining = any(f.failing for f in files)
    errors = any(f.error for f in files)
    return 0 if args.exit_zero or not (remaining or errors) else 1


def _missing(path: Path) -> bool:
    """Nothing at ``path``, not even a dangling link. One that cannot be looked at (a
    directory on the way is not searchable) is not missing: discovery says why."""
    try:
        os.lstat(path)
    except (FileNotFoundError, NotADirectoryError, ValueError):  # ValueError: a NUL in the name
        return True
    except OSError:
        return False
    return False


def _remaining_to_stderr(res: Any, unsafe: bool, fixed: int, quiet: bool) -> None:
    if quiet and not res.diagnostics:
        return
    echo(reporters.text([res], unsafe=unsafe, fixed=fixed), err=True)


def _read_stdin(name: str, echo_back: bool) -> str | None:
    """stdin as text. Bytes that are not UTF-8 are one error line (None); with ``--fix -``
    they are also passed through unchanged, so a pipe (an editor's buffer) never comes
    back empty."""

    raw = getattr(sys.stdin, "buffer", None)
    if raw is None:  # a text-only stream (an embedding host): already decoded
        return str(sys.stdin.read())
    data = raw.read()
    try:
        return str(data.decode("utf-8"))
    except UnicodeDecodeError as exc:
        if echo_back:
            sys.stdout.buffer.write(data)
            sys.stdout.flush()
        echo(f"error: {reporters.printable(name)}: not valid UTF-8 (byte {exc.start}), not checked", err=True)
        return None


def _emit(args: CheckArgs, files: list[Any], fixed: int, links: Links, accepted: int = 0) -> None:
    form = FORMATS[args.output_format]
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    out = form.write(files, WriteOptions(unsafe=args.unsafe_fixes, fixed=fixed, show_fixes=args.show_fixes,
                                         color=color, quiet=args.quiet, links=links, accepted=accepted))
    if out:
        echo(out)
    if not form.lists_errors:
        for f in files:
            if f.error and args.output_format == "json":  # stdout is the findings' list: each failure, an object on stderr
                echo(json.dumps({"file": f.filename, "error": f.error}), err=True)
            elif f.error:
                echo(f"error: {reporters.printable(f.error)}", err=True)


def _diffs(files: list[Any], originals: dict[str, str] | None = None) -> str:
    import difflib


    chunks: list[str] = []
    for f in files:
        if f.fixed_source is None:
            continue
        old = (originals or {}).get(f.filename)
        if old is None:
            try:
                # bytes, not read_text: universal newlines would make every CRLF line differ
                old = read_regular(f.filename).decode("utf-8")  # (a FIFO swapped in meanwhile never blocks)
            except (OSError, UnicodeDecodeError):
                continue
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                f.fixed_source.splitlines(keepends=True),
                fromfile=f"a/{reporters.printable(f.filename)}",
                tofile=f"b/{reporters.printable(f.filename)}",
            )
        )
    return "".join(chunks)


def _build_request(args: CheckArgs) -> BuildRequest | None:
    """The command line's build values; the check pipeline layers them over config."""
    if not args.build:
        return None
    from ..project.buildstage import BuildRequest  # defers the build stage until --build

    return BuildRequest(entry=args.entry, batch_size=args.batch_size, cores=args.cores, dtype=args.dtype,
                        timeout=args.build_timeout, input_shape=args.input_shape, use_cache=not args.no_cache,
                        trace_script=args.trace_script)

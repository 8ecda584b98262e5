"""``kerasfit check``'s body: what the command does once typer has read its command
line (kerasfit/front/cli.py owns every option). A front end, like cli.py: it prints."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

from typer import echo

from ..core.sourcefile import read_regular
from ..project import reporters
from ..project.reporters import FORMATS, WriteOptions

# ---- the command ------------------------------------------------------------------

def _split(values: list[str] | None) -> list[str]:
    out: list[str] = []
    for v in values or []:
        out.extend(x.strip() for x in v.split(",") if x.strip())
    return out


def run_check(
    paths: list[Path] | None = None, fix: bool = False, unsafe_fixes: bool = False, diff: bool = False,
    select: list[str] | None = None, extend_select: list[str] | None = None, ignore: list[str] | None = None,
    target: str | None = None, output_format: str = "text", exit_zero: bool = False, fail_on: str | None = None,
    statistics: bool = False, no_cache: bool = False, cache_dir: Path | None = None, config: Path | None = None,
    isolated: bool = False, show_fixes: bool = False, force_exclude: bool = False, stdin_filename: str | None = None,
    jobs: int | None = None, quiet: bool = False, build: bool = False, entry: str | None = None,
    batch_size: int | None = None, cores: int | None = None, dtype: str | None = None,
    build_timeout: float | None = None, input_shape: tuple[tuple[int, ...], ...] | None = None,
    trace_script: bool = False, docs_url: str | None = None, baseline: Path | None = None,
    write_baseline: Path | None = None, add_noqa: bool = False, max_file_size: int | None = None,
) -> int:
    """``kerasfit check``; returns the exit code."""
    from ..project.check import CheckOptions, RunResult, accept_baseline, check_paths, check_source, links_for  # defers the check machinery (api, discovery, config) until argv is read
    from ..project.config import ConfigError, Selection  # defers the config reader until argv is read
    from ..project.reporters import printable  # defers the reporters until argv is read
    from ..core.types import FileResult  # defers the target tables until argv is read

    adopting = "--add-noqa" if add_noqa else "--write-baseline" if write_baseline is not None else None
    if build_timeout is not None:
        from ..project.config import check_timeout  # defers the config reader until argv is read

        try:
            check_timeout(build_timeout, "--build-timeout")
        except ConfigError as exc:
            echo(f"kerasfit: error: {exc}", err=True)
            return 2
    if adopting and (fix or diff or add_noqa and write_baseline is not None):
        echo(f"kerasfit: error: {adopting} cannot be combined with --fix, --diff, --add-noqa or --write-baseline", err=True)
        return 2

    options = CheckOptions(
        selection=Selection(select=_split(select) or None, extend_select=_split(extend_select), ignore=_split(ignore)),
        target=target,
        fix=fix,
        unsafe_fixes=unsafe_fixes,
        diff=diff,
        use_cache=not no_cache,
        cores=cores,
        batch_size=batch_size,
        config_file=config,
        isolated=isolated,
        jobs=jobs,
        force_exclude=force_exclude,
        build=_build_request(build, entry, batch_size, cores, dtype, build_timeout, no_cache, input_shape,
                             trace_script),
        fail_on=fail_on,
        cache_dir=cache_dir,
        docs_url=docs_url,
        baseline=baseline,
        use_baseline=write_baseline is None,
        max_file_size=max_file_size,
    )
    path_list = list(paths) if paths else [Path(".")]
    originals: dict[str, str] = {}  # text not on disk (stdin), for --diff
    try:
        if [str(p) for p in path_list] == ["-"]:
            if adopting:
                echo(f"kerasfit: error: {adopting} works on files, not on stdin", err=True)
                return 2
            name = stdin_filename or "<stdin>"
            source = _read_stdin(name, echo_back=fix and not diff)
            if source is None:
                return 1
            res = check_source(source, name, options, fix=fix or diff, unsafe=unsafe_fixes)
            accepted = accept_baseline(res, res.fixed_source or source, options) if options.use_baseline else 0
            originals[name] = source
            if fix and not diff:
                sys.stdout.write(res.fixed_source if res.fixed_source is not None else source)
                # stdout is the file; what is left to fix goes to stderr (as ruff does)
                _remaining_to_stderr(res, unsafe_fixes, res.fixes_applied, quiet)
                return 1 if res.failing and not exit_zero else 0
            result = RunResult([res], accepted=accepted)
        else:
            # A path that does not exist is reported like an unreadable file (exit 1, as
            # ruff does); the paths that do exist are still checked.
            missing = [p for p in path_list if _missing(p)]
            existing = [p for p in path_list if p not in missing]
            result = check_paths(existing, options) if existing else RunResult([])
            result.files.extend(FileResult(str(p), error=f"{p}: no such file or directory") for p in missing)
        links = links_for(Path.cwd(), options)
    except ConfigError as exc:
        echo(f"kerasfit: error: {printable(str(exc))}", err=True)
        return 2

    files = result.files
    for warning in result.warnings:
        echo(f"warning: {printable(warning)}", err=True)
    if add_noqa or write_baseline is not None:
        from .adopt import add_noqa_comments, record_baseline  # defers --add-noqa and --write-baseline until asked for

        try:
            if write_baseline is not None:
                code, report = record_baseline(result, write_baseline)
            else:
                code, report = add_noqa_comments(result, path_list)
        except ConfigError as exc:
            echo(f"kerasfit: error: {printable(str(exc))}", err=True)
            return 2
        echo("\n".join(printable(line) for line in report.split("\n")))  # (file names: one inert line each)
        return code

    fixed = sum(f.fixes_applied for f in files)
    if diff:
        text = _diffs(files, originals)
        if text:
            sys.stdout.write(text)
        # a file that does not parse has no diff: its KF001 line as --fix prints it, on
        # stderr (stdout is the patch)
        unparsed = [FileResult(f.filename, [d for d in f.diagnostics if d.code == "KF001"]) for f in files]
        if any(f.diagnostics for f in unparsed):
            lines = reporters.text(unparsed).splitlines()
            echo("\n".join(line for line in lines if reporters.FINDING_LINE.search(line)), err=True)
        echo(f"Would fix {fixed} finding(s) in {sum(1 for f in files if f.fixed_source)} file(s).", err=True)
        for f in files:
            if f.error:
                echo(f"error: {printable(f.error)}", err=True)
        # a file that could not be read or parsed is not "nothing to fix"
        unchecked = any(f.error for f in files) or any(f.diagnostics for f in unparsed)
        return 0 if exit_zero or not (text or unchecked) else 1

    _emit(files, output_format, unsafe_fixes, fixed if fix else 0, show_fixes, quiet, links, result.accepted)
    if statistics:
        from ..project.reporters import statistics as stats  # defers the reporters until there is output

        echo(stats(files, result.prefiltered, result.elapsed), err=output_format != "text")
    remaining = any(f.failing for f in files)
    errors = any(f.error for f in files)
    return 0 if exit_zero or not (remaining or errors) else 1


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


def _emit(files: list[Any], fmt: str, unsafe: bool, fixed: int, show_fixes: bool, quiet: bool, links: Any,
          accepted: int = 0) -> None:
    form = FORMATS[fmt]
    color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
    out = form.write(files, WriteOptions(unsafe=unsafe, fixed=fixed, show_fixes=show_fixes, color=color, quiet=quiet,
                                         links=links, accepted=accepted))
    if out:
        echo(out)
    if not form.lists_errors:
        for f in files:
            if f.error and fmt == "json":  # stdout is the findings' list: each failure, an object on stderr
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


def _build_request(build: bool, entry: str | None, batch_size: int | None, cores: int | None, dtype: str | None,
                   timeout: float | None, no_cache: bool, input_shape: tuple[tuple[int, ...], ...] | None,
                   trace_script: bool) -> Any:
    """The command line's build values; the check pipeline layers them over config."""
    if not build:
        return None
    from ..project.buildstage import BuildRequest  # defers the build stage until --build

    return BuildRequest(entry=entry, batch_size=batch_size, cores=cores, dtype=dtype, timeout=timeout,
                        input_shape=input_shape, use_cache=not no_cache, trace_script=trace_script)

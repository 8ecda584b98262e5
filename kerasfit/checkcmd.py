"""``kerasfit check`` without typer: the command's body, and a parser for the plain
command lines pre-commit and editors run (``kerasfit check --no-cache a.py``).

typer and click cost ~45 ms of a one-file check's ~0.4 s (importing them, then building
every command from its annotations). ``parse`` reads only the options it knows, in the
spellings click gives them the same meaning; anything else (``--help``, a value click
would refuse or convert, ``--``, an option it has never seen) returns None and the
command goes to typer as before, which owns every usage message. Both routes run
``run_check``, and ``echo`` writes as click's echo does, so output and exit codes are the
same whichever route a command line takes (tests/test_fast_cli.py runs both).
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any

OUTPUT_FORMATS = ("text", "json", "sarif", "github", "lsp")
FAIL_ON = ("error", "warning", "info")

# option -> keyword of run_check. Flags take no value; the rest take exactly one.
_FLAGS = {
    "--fix": "fix", "--unsafe-fixes": "unsafe_fixes", "--diff": "diff", "--exit-zero": "exit_zero",
    "--statistics": "statistics", "--no-cache": "no_cache", "--isolated": "isolated",
    "--show-fixes": "show_fixes", "--force-exclude": "force_exclude", "--quiet": "quiet", "-q": "quiet",
    "--build": "build",
}
_LISTS = {"--select": "select", "--extend-select": "extend_select", "--ignore": "ignore"}
_VALUES = {
    "--target": "target", "--output-format": "output_format", "--fail-on": "fail_on",
    "--cache-dir": "cache_dir", "--config": "config", "--stdin-filename": "stdin_filename",
    "--jobs": "jobs", "-j": "jobs", "--entry": "entry", "--batch-size": "batch_size",
    "--cores": "cores", "--dtype": "dtype", "--build-timeout": "build_timeout",
}
_POSITIVE_INTS = ("jobs", "batch_size", "cores")
_PATHS = ("cache_dir", "config")
_FLOAT = re.compile(r"\d+(\.\d+)?")


def defaults() -> dict[str, Any]:
    kw: dict[str, Any] = {name: False for name in _FLAGS.values()}
    kw.update({name: None for name in (*_LISTS.values(), *_VALUES.values())})
    kw.update(paths=None, output_format="text")
    return kw


def _click_path_ok(value: str) -> bool:
    """click's Path type refuses an existing path it cannot read; leave those to it."""
    return value != "" and (not os.path.exists(value) or os.access(value, os.R_OK))


def _value(name: str, value: str) -> Any:
    """The value typer would pass, or None where click might refuse or convert it."""
    if value.startswith("-"):
        return None
    if name in _POSITIVE_INTS:
        return int(value) if value.isascii() and value.isdigit() and int(value) >= 1 else None
    if name == "build_timeout":
        return float(value) if value.isascii() and _FLOAT.fullmatch(value) else None
    if name == "output_format":
        return value if value in OUTPUT_FORMATS else None
    if name == "fail_on":
        return value if value in FAIL_ON else None
    if name in _PATHS:
        return Path(value) if _click_path_ok(value) else None
    return value


def parse(args: list[str]) -> dict[str, Any] | None:
    """run_check's keywords for the arguments after ``check``, or None (ask typer)."""
    kw = defaults()
    paths: list[Path] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "-" or not arg.startswith("-"):
            if not _click_path_ok(arg):
                return None
            paths.append(Path(arg))
            continue
        opt, eq, inline = arg.partition("=")
        if opt in _FLAGS and not eq:
            kw[_FLAGS[opt]] = True
            continue
        if opt not in _LISTS and opt not in _VALUES:
            return None  # --help, -V, a short-option cluster, --, a typo: typer's business
        if not eq:
            if not opt.startswith("--") and len(opt) != 2:
                return None
            if i >= len(args):
                return None
            inline = args[i]
            i += 1
        if opt in _LISTS:
            if inline.startswith("-"):
                return None
            kw[_LISTS[opt]] = [*(kw[_LISTS[opt]] or []), inline]
            continue
        v = _value(_VALUES[opt], inline)
        if v is None:
            return None
        kw[_VALUES[opt]] = v
    kw["paths"] = paths or None
    return kw


# ---- output, as click.echo writes it -----------------------------------------------

_ANSI = re.compile(r"\033\[[;?0-9]*[a-zA-Z]")


def echo(message: str, err: bool = False) -> None:
    """click.echo's behaviour for text: a newline, ANSI codes stripped off a terminal,
    UTF-8 into a stream misconfigured as ASCII, and a flush."""
    stream = sys.stderr if err else sys.stdout
    if stream is None:
        return
    out = message + "\n"
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty and "\033" in out:
        out = _ANSI.sub("", out)
    buffer = getattr(stream, "buffer", None)
    if buffer is not None and _ascii(getattr(stream, "encoding", None) or "ascii"):
        stream.flush()
        buffer.write(out.encode("utf-8", "replace"))
        buffer.flush()
        return
    stream.write(out)
    stream.flush()


def _ascii(encoding: str) -> bool:
    import codecs

    try:
        return codecs.lookup(encoding).name == "ascii"
    except LookupError:
        return False


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
    build_timeout: float | None = None,
) -> int:
    """``kerasfit check``; returns the exit code."""
    from .api import CheckOptions, RunResult, check_paths, check_source  # defers the check machinery (api, discovery, config) until argv is read
    from .config import ConfigError, Selection  # defers the config reader until argv is read
    from .types import FileResult  # defers the target tables until argv is read

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
        build=_build_request(build, entry, batch_size, cores, dtype, build_timeout, no_cache),
        fail_on=fail_on,
        cache_dir=cache_dir,
    )
    path_list = list(paths) if paths else [Path(".")]
    originals: dict[str, str] = {}  # text not on disk (stdin), for --diff
    try:
        if [str(p) for p in path_list] == ["-"]:
            name = stdin_filename or "<stdin>"
            source = _read_stdin(name, echo_back=fix and not diff)
            if source is None:
                return 1
            res = check_source(source, name, options, fix=fix or diff, unsafe=unsafe_fixes)
            originals[name] = source
            if fix and not diff:
                sys.stdout.write(res.fixed_source if res.fixed_source is not None else source)
                # stdout is the file; what is left to fix goes to stderr (as ruff does)
                _remaining_to_stderr(res, unsafe_fixes, res.fixes_applied, quiet)
                return 1 if res.failing and not exit_zero else 0
            result = RunResult([res])
        else:
            # A path that does not exist is reported like an unreadable file (exit 1, as
            # ruff does); the paths that do exist are still checked.
            missing = [p for p in path_list if not p.exists() and not p.is_symlink()]
            existing = [p for p in path_list if p not in missing]
            result = check_paths(existing, options) if existing else RunResult([])
            result.files.extend(FileResult(str(p), error=f"{p}: no such file or directory") for p in missing)
    except ConfigError as exc:
        echo(f"kerasfit: error: {exc}", err=True)
        return 2

    files = result.files

    fixed = sum(f.fixes_applied for f in files)
    if diff:
        text = _diffs(files, originals)
        if text:
            sys.stdout.write(text)
        echo(f"Would fix {fixed} finding(s) in {sum(1 for f in files if f.fixed_source)} file(s).", err=True)
        for f in files:
            if f.error:
                echo(f"error: {f.error}", err=True)
        # a file that could not be read or parsed is not "nothing to fix"
        unchecked = any(f.error for f in files) or any(d.code == "KF001" for f in files for d in f.diagnostics)
        return 0 if exit_zero or not (text or unchecked) else 1

    _emit(files, output_format, unsafe_fixes, fixed if fix else 0, show_fixes, quiet)
    if statistics:
        from .reporters import statistics as stats  # defers the reporters until there is output

        echo(stats(files, result.prefiltered, result.elapsed), err=output_format != "text")
    remaining = any(f.failing for f in files)
    errors = any(f.error for f in files)
    return 0 if exit_zero or not (remaining or errors) else 1


_FINDING_LINE = re.compile(r":\d+:\d+: [A-Z]+\d{3}\b")  # any pack's code, not only KF


def _remaining_to_stderr(res: Any, unsafe: bool, fixed: int, quiet: bool) -> None:
    from . import reporters  # defers the reporters until there is output

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
        echo(f"error: {name}: not valid UTF-8 (byte {exc.start}), not checked", err=True)
        return None


def _emit(files: list[Any], fmt: str, unsafe: bool, fixed: int, show_fixes: bool, quiet: bool) -> None:
    from . import reporters  # defers the reporters until there is output

    if fmt == "text":
        color = sys.stdout.isatty() and not os.environ.get("NO_COLOR")
        out = reporters.text(files, unsafe=unsafe, fixed=fixed, show_fixes=show_fixes, color=color)
        if quiet:
            out = "\n".join(line for line in out.splitlines() if _FINDING_LINE.search(line) or line.startswith("error:"))
        if out:
            echo(out)
    elif fmt == "json":
        echo(reporters.json_report(files))
    elif fmt == "sarif":
        from .registry import all_rules  # defers the rule pack (libcst)

        echo(reporters.sarif(files, all_rules()))
    elif fmt == "github":
        out = reporters.github(files)
        if out:
            echo(out)
    else:
        echo(reporters.lsp(files))
    if fmt != "text":
        for f in files:
            if f.error:
                echo(f"error: {f.error}", err=True)


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
                old = Path(f.filename).read_bytes().decode("utf-8")
            except (OSError, UnicodeDecodeError):
                continue
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                f.fixed_source.splitlines(keepends=True),
                fromfile=f"a/{f.filename}",
                tofile=f"b/{f.filename}",
            )
        )
    return "".join(chunks)


def _build_request(build: bool, entry: str | None, batch_size: int | None, cores: int | None, dtype: str | None,
                   timeout: float | None, no_cache: bool) -> Any:
    """The command line's build values; the check pipeline layers them over config."""
    if not build:
        return None
    from .crosscheck.stage import BuildRequest  # defers the build stage until --build

    return BuildRequest(entry=entry, batch_size=batch_size, cores=cores, dtype=dtype,
                        timeout=timeout, use_cache=not no_cache)


# ---- running it as click would ------------------------------------------------------

def main(args: list[str]) -> bool:
    """Run ``kerasfit check`` when ``args`` (after ``check``) parse here; False to hand
    the command line to typer. Exits the process otherwise."""
    kw = parse(args)
    if kw is None:
        return False
    from .api import tune_gc  # defers the check machinery (api)
    from .registry import RuleRegistryError  # defers the rule registry until argv is read

    tune_gc()
    try:
        code = run_check(**kw)
    except KeyboardInterrupt:  # click: a blank line and "Aborted!", exit 1
        echo("", err=True)
        echo("Aborted!", err=True)
        code = 1
    except BrokenPipeError:  # click: a reader that went away is exit 1, silently
        _quiet_stdout()
        code = 1
    except RuleRegistryError as exc:  # a broken rule pack: the user's setup, not our bug
        print(f"kerasfit: error: {exc}", file=sys.stderr)
        code = 2
    except Exception as exc:  # an internal error is exit 2 with one line, not a traceback
        if os.environ.get("KERASFIT_DEBUG"):
            raise
        print(f"kerasfit: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        code = 2
    sys.exit(code)


def _quiet_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's last flush cannot fail again."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass

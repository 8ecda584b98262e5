"""The command line (a thin front end over kerasfit.api, STYLE 7).

Exit codes: 0 nothing left to report, 1 findings (or unreadable files) remain,
2 usage, configuration or internal error.
"""

from __future__ import annotations

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional, TypedDict

import typer

from . import __version__

if TYPE_CHECKING:
    from .config import Config
    from .crosscheck.api import BuildOptions  # defers the build machinery (sandbox, HLO reader, simulator)

app = typer.Typer(
    name="kerasfit",
    help="Find and fix Keras/TensorFlow code that wastes TPU, GPU tensor-core and Gaudi matrix units.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"
    github = "github"
    lsp = "lsp"


class ReportFormat(str, Enum):
    text = "text"
    json = "json"


class FailOn(str, Enum):
    error = "error"
    warning = "warning"
    info = "info"


class ListFormat(str, Enum):
    text = "text"
    json = "json"


def _fail(message: str) -> NoReturn:
    typer.echo(f"kerasfit: error: {message}", err=True)
    raise typer.Exit(2)


def _version(value: bool) -> None:
    if value:
        typer.echo(f"kerasfit {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: Annotated[
        bool, typer.Option("--version", "-V", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


TARGET_HELP = "Hardware target: tpu-v4, tpu-v5e, tpu-v6e, gpu, gaudi (default from config, else tpu-v5e)."


@app.command()
def check(
    paths: Annotated[Optional[list[Path]], typer.Argument(help="Files or directories (default: .); '-' reads stdin.")] = None,
    fix: Annotated[bool, typer.Option("--fix", help="Apply safe fixes in place.")] = False,
    unsafe_fixes: Annotated[bool, typer.Option("--unsafe-fixes", help="Also apply / offer fixes that change the model.")] = False,
    diff: Annotated[bool, typer.Option("--diff", help="Print a unified diff of the fixes; write nothing.")] = False,
    select: Annotated[Optional[list[str]], typer.Option("--select", help="Rule codes or prefixes to enable (ALL for every rule).")] = None,
    extend_select: Annotated[Optional[list[str]], typer.Option("--extend-select", help="Enable these in addition.")] = None,
    ignore: Annotated[Optional[list[str]], typer.Option("--ignore", help="Rule codes or prefixes to disable.")] = None,
    target: Annotated[Optional[str], typer.Option("--target", help=TARGET_HELP)] = None,
    output_format: Annotated[OutputFormat, typer.Option("--output-format", help="Output format.")] = OutputFormat.text,
    exit_zero: Annotated[bool, typer.Option("--exit-zero", help="Exit 0 even when findings remain.")] = False,
    fail_on: Annotated[Optional[FailOn], typer.Option("--fail-on", help="Lowest severity that makes the exit code 1 (default: config, else warning; info findings then do not fail).")] = None,
    statistics: Annotated[bool, typer.Option("--statistics", help="Print counts per rule and file statistics.")] = False,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Do not read or write the result cache.")] = False,
    cache_dir: Annotated[Optional[Path], typer.Option("--cache-dir", help="Where the result cache lives (default: config cache-dir, else $KERASFIT_CACHE_DIR, else .kerasfit_cache).")] = None,
    config: Annotated[Optional[Path], typer.Option("--config", help="Use this pyproject.toml / kerasfit.toml only.")] = None,
    isolated: Annotated[bool, typer.Option("--isolated", help="Ignore every configuration file.")] = False,
    show_fixes: Annotated[bool, typer.Option("--show-fixes", help="Show each finding's fix title.")] = False,
    force_exclude: Annotated[bool, typer.Option("--force-exclude", help="Apply excludes to files named on the command line too (pre-commit).")] = False,
    stdin_filename: Annotated[Optional[str], typer.Option("--stdin-filename", help="The name of the file read from stdin.")] = None,
    jobs: Annotated[Optional[int], typer.Option("--jobs", "-j", min=1, help="Worker processes (default: CPU count).")] = None,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Print findings only, no summary.")] = False,
    build: Annotated[bool, typer.Option("--build", help="Also build the model in a child process and cross-check findings against simulated TPU padding.")] = False,
    entry: Annotated[Optional[str], typer.Option("--entry", help="With --build: 'module:function' or an expression that builds the model.")] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Global batch size (rules and --build).")] = None,
    cores: Annotated[Optional[int], typer.Option("--cores", min=1, help="Replicas sharing the global batch.")] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="With --build: float32 or bfloat16 (default: config, else float32).")] = None,
    build_timeout: Annotated[Optional[float], typer.Option("--build-timeout", help="With --build: seconds before the build child is stopped (default: config, else 300).")] = None,
) -> None:
    """Check files for accelerator-unfriendly patterns (and fix them)."""
    # The body is typer-free (kerasfit.checkcmd): plain command lines run it without typer.
    from .checkcmd import run_check  # defers the check machinery (api, discovery, config) until a command runs

    raise typer.Exit(
        run_check(
            paths=paths, fix=fix, unsafe_fixes=unsafe_fixes, diff=diff, select=select,
            extend_select=extend_select, ignore=ignore, target=target, output_format=output_format.value,
            exit_zero=exit_zero, fail_on=fail_on.value if fail_on else None, statistics=statistics,
            no_cache=no_cache, cache_dir=cache_dir, config=config, isolated=isolated, show_fixes=show_fixes,
            force_exclude=force_exclude, stdin_filename=stdin_filename, jobs=jobs, quiet=quiet, build=build,
            entry=entry, batch_size=batch_size, cores=cores, dtype=dtype, build_timeout=build_timeout,
        )
    )


def _input_shape(text: str | None) -> tuple[int, ...] | None:
    if not text:
        return None
    try:
        dims = tuple(int(d) for d in str(text).replace("x", ",").split(",") if d.strip())
    except ValueError:
        dims = ()
    if not dims or any(d <= 0 for d in dims):
        _fail(f"--input-shape must be positive dims like 256,256,3, not {text!r}")
    return dims


def _build_options(entry: str | None, batch_size: int | None, cores: int | None, target: str | None,
                   dtype: str | None, timeout: float | None, no_cache: bool, path: Path,
                   input_shape: str | None = None) -> BuildOptions:
    from .crosscheck.api import BuildOptions  # defers the build machinery (sandbox, HLO reader, simulator)
    from .config import find_config  # defers the config reader until a command runs

    cfg = find_config(path.resolve().parent)
    b = cfg.build if cfg else {}
    return BuildOptions(
        entry=entry or b.get("entry"),
        batch_size=batch_size or b.get("batch-size") or (cfg.batch_size if cfg else None),
        cores=cores or b.get("cores") or (cfg.cores if cfg else None) or 1,
        target=target or (cfg.target if cfg and cfg.target else "tpu-v5e"),
        dtype=_checked_dtype(dtype or b.get("dtype") or "float32", cfg),
        timeout=timeout if timeout is not None else float(b.get("timeout", 300.0)),
        use_cache=not no_cache,
        input_shape=_input_shape(input_shape or b.get("input-shape")),
        memory_limit=b.get("memory-limit", BuildOptions.memory_limit),
    )


def _checked_dtype(dtype: str, cfg: Config | None) -> str:
    if dtype not in ("float32", "bfloat16"):
        from .config import ConfigError  # defers the config reader until a command runs

        where = cfg.source if cfg is not None and cfg.source else "--dtype"
        raise ConfigError(f"{where}: dtype must be float32 or bfloat16, not {dtype!r}")
    return dtype


@app.command()
def report(
    path: Annotated[Path, typer.Argument(help="The model file to build.")],
    entry: Annotated[Optional[str], typer.Option("--entry", help="'module:function' or an expression that builds the model.")] = None,
    batch_size: Annotated[Optional[int], typer.Option("--batch-size", min=1, help="Global batch size.")] = None,
    cores: Annotated[Optional[int], typer.Option("--cores", min=1, help="Replicas sharing the global batch.")] = None,
    target: Annotated[Optional[str], typer.Option("--target", help=TARGET_HELP)] = None,
    dtype: Annotated[Optional[str], typer.Option("--dtype", help="float32 or bfloat16 (default: config, else float32).")] = None,
    output_format: Annotated[ReportFormat, typer.Option("--output-format", help="text or json.")] = ReportFormat.text,
    build_timeout: Annotated[Optional[float], typer.Option("--build-timeout", help="Seconds before the build child is stopped (default: config, else 300).")] = None,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Rebuild even if a cached report exists.")] = False,
    input_shape: Annotated[Optional[str], typer.Option("--input-shape", help="Non-batch input dims for None ones, e.g. 256,256,3.")] = None,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the ranked table, not the top 20.")] = False,
    html_file: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained page: per-layer chart and the ranked table.")] = None,
) -> None:
    """Build the model (runs your code) and print the simulated TPU padding table."""
    from .config import ConfigError, check_target  # defers the config reader until a command runs

    if not path.is_file():
        _fail(f"{path}: no such file")
    if dtype is not None and dtype not in ("float32", "bfloat16"):
        _fail(f"--dtype must be float32 or bfloat16, not {dtype!r}")
    try:
        if target:
            check_target(target)
        from .crosscheck.api import BuildError, build_report, render_report  # defers the build machinery (sandbox, HLO reader, simulator)

        opts = _build_options(entry, batch_size, cores, target, dtype, build_timeout, no_cache, path,
                              input_shape)
        rep = build_report(path, opts)
    except ConfigError as exc:
        _fail(str(exc))
        return
    except BuildError as exc:
        typer.echo(f"kerasfit: build failed: {exc}", err=True)
        raise typer.Exit(2)
    typer.echo(render_report(rep, output_format.value, max_rows=None if all_rows else 20))
    if html_file is not None:
        from .api import atomic_write  # defers the check machinery (api)
        from .crosscheck.html import render_html  # defers the report page renderer

        try:
            html_file.touch(exist_ok=True)
            atomic_write(html_file, render_html(rep, max_rows=None if all_rows else 20))
        except OSError as exc:
            _fail(f"{html_file}: cannot write the page: {exc.strerror or exc}")


class _RuleRow(TypedDict):
    """One rule in ``kerasfit rules`` (the JSON output's objects)."""

    code: str
    name: str
    summary: str
    fix: str | None
    targets: list[str]
    default: str
    severity: str
    url: str | None


@app.command("rules")
def rules_cmd(
    output_format: Annotated[ListFormat, typer.Option("--output-format", help="text or json.")] = ListFormat.text,
) -> None:
    """List every rule: code, name, summary, fix safety, targets, default on/off."""
    from .registry import all_rules  # defers the rule pack (libcst)
    from .types import rule_page  # defers the target tables until a command runs

    rows: list[_RuleRow] = []
    for code, r in all_rules().items():
        rows.append(
            {
                "code": code,
                "name": r.name,
                "summary": r.summary(),
                "fix": r.fix_safety.value if r.fix_safety else None,
                "targets": sorted(r.targets),
                "default": "on" if r.default_enabled else "off",
                "severity": r.severity.value,
                "url": rule_page(code),
            }
        )
    if output_format is ListFormat.json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from tabulate import tabulate  # type: ignore[import-untyped]  # no stubs installed (types-tabulate is not a dependency)

    table = [[r["code"], r["name"], r["fix"] or "-", ",".join(r["targets"]), r["default"], r["summary"]] for r in rows]
    typer.echo(tabulate(table, headers=["code", "name", "fix", "targets", "default", "summary"], tablefmt="github"))


@app.command()
def explain(code: Annotated[str, typer.Argument(help="A rule code (KF101) or name (unfused-batchnorm).")]) -> None:
    """Print a rule's documentation."""
    from .registry import rule_by_name_or_code  # defers the rule pack (libcst)

    rule = rule_by_name_or_code(code)
    if rule is None:
        _fail(f"unknown rule {code!r} (see `kerasfit rules`)")
        return
    typer.echo(rule.page(), nl=False)
    from .registry import facts_file  # defers the rule registry until a command runs

    facts = facts_file()
    if facts is not None and "docs/facts.md#" in rule.documentation():
        typer.echo(f"\nThe facts cited as docs/facts.md#N, with their public sources: {facts}")


@app.command()
def lsp(
    tcp: Annotated[Optional[str], typer.Option("--tcp", help="Listen on HOST:PORT instead of stdio.")] = None,
) -> None:
    """Run the language server (stdio by default). Needs the `lsp` extra."""
    try:
        from .lsp.server import serve  # defers pygls and lsprotocol
    except ImportError as exc:
        _fail(f"the language server needs the 'lsp' extra: pip install 'kerasfit[lsp]' ({exc})")
        return
    serve(tcp)


def main() -> None:
    from .api import tune_gc  # defers the check machinery (api)
    from .registry import RuleRegistryError  # defers the rule registry until a command runs

    tune_gc()
    try:
        app()
    except SystemExit:
        raise
    except KeyboardInterrupt:
        sys.exit(130)
    except RuleRegistryError as exc:  # a broken rule pack: the user's setup, not our bug
        print(f"kerasfit: error: {exc}", file=sys.stderr)
        sys.exit(2)
    except Exception as exc:  # an internal error is exit 2 with one line, not a traceback
        if os.environ.get("KERASFIT_DEBUG"):
            raise
        print(f"kerasfit: internal error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)


if __name__ == "__main__":
    main()

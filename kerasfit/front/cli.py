"""The command line (a thin front end over kerasfit.project.check, STYLE 7).

Exit codes: 0 nothing left to report, 1 findings (or unreadable files) remain,
2 usage, configuration or internal error.

No ``from __future__ import annotations`` here: typer reads every command's
annotations, and string annotations cost it an eval per option on each start
(~7 ms of a one-file check).
"""

import json
import os
import sys
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, NoReturn, Optional, TypedDict

import typer

from .. import __version__
from ..core import interrupts
from .checkcmd import CheckArgs, run_check
from ..core.docpages import FACTS_TOPIC, fact_numbers, fact_section, facts_file
from ..engine.registry import RuleRegistryError, all_rules, rule_by_name_or_code
from ..project.reporters import FORMATS, printable
from ..core.types import target_help

if TYPE_CHECKING:
    from collections.abc import Callable

app = typer.Typer(
    name="kerasfit",
    help="Find and fix Keras/TensorFlow code that wastes TPU, GPU tensor-core and Gaudi matrix units.",
    no_args_is_help=True,
    context_settings={"help_option_names": ["-h", "--help"]},
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


# typer takes its choices from an Enum: this one is built from the format registry.
OutputFormat = Enum("OutputFormat", [(name, name) for name in FORMATS], type=str)  # type: ignore[misc]


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
    typer.echo(f"kerasfit: error: {printable(message)}", err=True)
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


TARGET_HELP = target_help()
INPUT_SHAPE_HELP = "Non-batch input dims for None ones, e.g. 256,256,3; several inputs separated by ';'."
TRACE_HELP = ("Run the script itself to its first training step (its data pipeline included) and trace that "
              "step, instead of building its model from a slice of it.")


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
    output_format: Annotated[OutputFormat, typer.Option("--output-format", help="Output format.")] = OutputFormat("text"),
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
    input_shape: Annotated[Optional[str], typer.Option("--input-shape", help="With --build: " + INPUT_SHAPE_HELP)] = None,
    trace_script: Annotated[bool, typer.Option("--trace-script", help="With --build: " + TRACE_HELP)] = False,
    docs_url: Annotated[Optional[str], typer.Option("--docs-url", help="Rule links under this URL (where your team serves kerasfit's docs/) instead of the installed pages (default: config docs-url).")] = None,
    baseline: Annotated[Optional[Path], typer.Option("--baseline", help="Accept the findings recorded in this file (default: config baseline); new findings still fail.")] = None,
    write_baseline: Annotated[Optional[Path], typer.Option("--write-baseline", help="Record every finding of this run in FILE (for --baseline) and exit 0.")] = None,
    add_noqa: Annotated[bool, typer.Option("--add-noqa", help="Append '# noqa: CODE' to each line with a finding that fails the run.")] = False,
    max_file_size: Annotated[Optional[int], typer.Option("--max-file-size", min=1, help="Skip files with more bytes of source than this, with one line each (default: config, else 2 MiB).")] = None,
) -> None:
    """Check files for accelerator-unfriendly patterns (and fix them)."""
    args = dict(locals())  # every option above, under CheckArgs' field of the same name
    args.update(output_format=output_format.value, fail_on=fail_on.value if fail_on else None,
                input_shape=_input_shape(input_shape))
    raise typer.Exit(run_check(CheckArgs(**args)))


def _input_shape(text: str | None, fail: "Callable[[str], NoReturn]" = _fail) -> tuple[tuple[int, ...], ...] | None:
    from ..crosscheck.options import parse_input_shapes  # defers the build options reader until a build runs

    if not text:
        return None
    try:
        return parse_input_shapes(str(text))
    except ValueError:
        fail(f"--input-shape must be positive dims like 256,256,3 (inputs separated by ';'), not {text!r}")


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
    input_shape: Annotated[Optional[str], typer.Option("--input-shape", help=INPUT_SHAPE_HELP)] = None,
    trace_script: Annotated[bool, typer.Option("--trace-script", help=TRACE_HELP)] = False,
    all_rows: Annotated[bool, typer.Option("--all", help="Every row of the ranked table, not the top 20.")] = False,
    html_file: Annotated[Optional[Path], typer.Option("--html", help="Also write a self-contained page: per-layer chart and the ranked table.")] = None,
) -> None:
    """Build the model (runs your code) and print the simulated TPU padding table."""
    fmt = output_format.value

    def fail(message: str, what: str = "error") -> NoReturn:
        if fmt == "json":  # a machine reading stdout gets an object with the message
            typer.echo(json.dumps({"ok": False, "file": str(path), "error": message}))
        else:
            typer.echo(f"kerasfit: {what}: {printable(message)}", err=True)
        raise typer.Exit(2)

    if not path.is_file():
        fail(f"{path}: no such file")
    from ..project.config import ConfigError, check_target, check_timeout  # defers the config reader until a command runs

    try:
        if target:
            check_target(target)
        if build_timeout is not None:
            check_timeout(build_timeout, "--build-timeout")
        from ..project.check import CheckOptions, Resolver, check_paths  # defers the check machinery until a command runs
        from ..project.buildstage import BuildRequest, report_text  # defers the build stage until a command runs
        from ..crosscheck.api import BuildError  # defers the build machinery (sandbox, HLO reader, simulator)

        request = BuildRequest(entry=entry, batch_size=batch_size, cores=cores, dtype=dtype, timeout=build_timeout,
                               input_shape=_input_shape(input_shape, fail), use_cache=not no_cache,
                               trace_script=trace_script)
        options = CheckOptions(target=target, batch_size=batch_size, cores=cores)
        resolver = Resolver(options)
        static = check_paths([path], options).diagnostics
        text, page = report_text(path, request, resolver, static, fmt, None if all_rows else 20,
                                 html=html_file is not None)
    except ConfigError as exc:
        fail(str(exc))
    except BuildError as exc:
        fail(str(exc), "build failed")
    typer.echo(text)
    if html_file is not None and page is not None:
        from ..project.writeback import write_output  # defers the file writer

        problem = write_output(html_file, page.encode("utf-8"), [path])
        if problem is not None:
            fail(f"the page: {problem}")


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
    from ..project.check import CheckOptions, links_for  # defers the check machinery until a command runs
    from ..project.config import ConfigError  # defers the config reader until a command runs

    try:
        links = links_for(Path.cwd(), CheckOptions())  # the project's docs-url, else the installed pages
    except ConfigError as exc:
        _fail(str(exc))
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
                "url": links.rule(code),
            }
        )
    if output_format is ListFormat.json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from tabulate import tabulate  # type: ignore[import-untyped]  # no stubs installed (types-tabulate is not a dependency)

    table = [[r["code"], r["name"], r["fix"] or "-", ",".join(r["targets"]), r["default"], r["summary"]] for r in rows]
    typer.echo(tabulate(table, headers=["code", "name", "fix", "targets", "default", "summary"], tablefmt="github"))


@app.command()
def explain(
    code: Annotated[str, typer.Argument(help="A rule code (KF101) or name (unfused-batchnorm); 'facts' for the facts the rules cite, 'facts#11' for one.")],
) -> None:
    """Print a rule's documentation, or the accelerator facts (docs/facts.md#N)."""
    topic = FACTS_TOPIC.match(code.strip())
    if topic is not None:
        _explain_facts(topic.group("n"))
        return
    rule = rule_by_name_or_code(code)
    if rule is None:
        _fail(f"unknown rule {code!r} (see `kerasfit rules`; `kerasfit explain facts` prints the facts)")
        return
    typer.echo(rule.page(), nl=False)
    facts = facts_file()
    if facts is not None and "docs/facts.md#" in rule.documentation():
        typer.echo("\nThe facts cited as docs/facts.md#N (`kerasfit explain facts#N` prints one), "
                   f"with their public sources: {facts}")


def _explain_facts(number: str | None) -> None:
    path = facts_file()
    if path is None:
        _fail("the facts page (docs/facts.md) is not installed with this kerasfit")
        return
    text = path.read_text(encoding="utf-8")
    if not number:
        typer.echo(text, nl=False)
        return
    numbers = fact_numbers(text)
    section = fact_section(text, int(number)) if number.isascii() and number.isdigit() else None
    if section is None:
        _fail(f"no fact {number!r} in docs/facts.md (facts {min(numbers)}–{max(numbers)})")
        return
    typer.echo(section, nl=False)


@app.command()
def lsp(
    tcp: Annotated[Optional[str], typer.Option("--tcp", help="Listen on HOST:PORT instead of stdio.")] = None,
) -> None:
    """Run the language server (stdio by default). Needs the `lsp` extra."""
    try:
        from ..lsp.server import serve  # defers pygls and lsprotocol
    except ImportError as exc:
        _fail(f"the language server needs the 'lsp' extra: pip install 'kerasfit[lsp]' ({exc})")
        return
    serve(tcp)


def main() -> None:
    from ..project.check import tune_gc  # defers the check machinery (api)

    tune_gc()
    # SIGINT, SIGTERM, SIGHUP: a file being written is finished first, then the run ends
    # by the signal (core.interrupts); worker processes inherit the handlers
    interrupts.install()
    try:
        app()
    except SystemExit:
        raise
    except interrupts.Terminated as exc:
        interrupts.end_by(exc.signum)
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

"""``[tool.kerasfit]`` in pyproject.toml, read into typed settings (STYLE 8).

The nearest pyproject.toml with a ``[tool.kerasfit]`` table, walking up from each
file, configures that file; command-line flags override it. Unknown keys, codes and
targets are errors with a message naming the file.
"""

from __future__ import annotations

import fnmatch
import math
import os
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any, Sequence

from ..core.sourcefile import DEFAULT_MAX_FILE_SIZE, Cost, NotRegularFile, TooLarge, read_regular
from ..core.types import DEFAULT_TARGET, TARGETS
from ..crosscheck.options import parse_input_shapes


DEFAULT_EXCLUDES = (
    ".git", ".hg", ".svn", ".venv", "venv", ".tox", ".nox", "__pycache__", "build", "dist",
    "node_modules", "site-packages", ".mypy_cache", ".pytest_cache", ".ruff_cache", ".kerasfit_cache",
    ".eggs", "*.egg-info", ".ipynb_checkpoints",
)

_KEYS = {
    "select", "ignore", "extend-select", "extend-ignore", "per-file-ignores", "exclude", "extend-exclude",
    "target", "batch-size", "cores", "build", "cache-dir", "fixable", "unfixable", "extend-fixable", "fail-on",
    "max-file-size", "docs-url", "baseline",
}
FAIL_ON = ("error", "warning", "info")
_BUILD_KEYS = {"entry", "batch-size", "cores", "timeout", "dtype", "memory-limit", "input-shape"}
DTYPES = ("float32", "bfloat16")  # the build's compute dtypes (and the gpu target's)


class ConfigError(Exception):
    """A one-line, user-facing configuration error."""


@dataclass
class Config:
    """Raw options from one pyproject.toml (or from the command line)."""

    root: Path = field(default_factory=Path.cwd)  # directory of the pyproject.toml
    source: Path | None = None
    select: list[str] | None = None
    ignore: list[str] = field(default_factory=list)
    extend_select: list[str] = field(default_factory=list)
    per_file_ignores: dict[str, list[str]] = field(default_factory=dict)
    exclude: list[str] | None = None
    extend_exclude: list[str] = field(default_factory=list)
    target: str | None = None
    batch_size: int | None = None
    cores: int | None = None
    build: dict[str, Any] = field(default_factory=dict)
    cache_dir: str | None = None
    fixable: list[str] | None = None
    extend_fixable: list[str] = field(default_factory=list)
    unfixable: list[str] = field(default_factory=list)
    fail_on: str | None = None  # the lowest severity that makes the exit code 1
    max_file_size: int | None = None  # bytes of source (a notebook's: its code cells')
    docs_url: str | None = None  # where the team serves kerasfit's docs/ (rule links point there)
    baseline: Path | None = None  # accepted findings (resolved against this file's directory)

    def excludes(self) -> tuple[str, ...]:
        base = tuple(self.exclude) if self.exclude is not None else DEFAULT_EXCLUDES
        return base + tuple(self.extend_exclude)


def _list_of_str(value: Any, key: str, where: Path) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ConfigError(f"{where}: [tool.kerasfit] {key} must be a list of strings")
    return value


def _positive_int(value: Any, key: str, where: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
        raise ConfigError(f"{where}: [tool.kerasfit] {key} must be a positive integer, got {value!r}")
    return value


def _path_text(value: Any, key: str, where: Path, what: str) -> str:
    """A path written in the config: a non-empty string a file system can hold."""
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"{where}: [tool.kerasfit] {key} must be a string (a {what} path, not empty, "
                          f"without NUL characters), got {value!r}")
    return value


def check_timeout(value: Any, where: str) -> float:
    """Seconds for the build: a finite number above zero (``where`` names the key or flag)."""
    ok = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value) and value > 0
    if not ok:
        raise ConfigError(f"{where} must be a number of seconds above 0, got {value!r}")
    return float(value)


def check_dtype(value: Any, where: str) -> str:
    if value not in DTYPES:
        raise ConfigError(f"{where} must be {' or '.join(DTYPES)}, not {value!r}")
    return str(value)


def _build_table(build: Any, where: Path) -> dict[str, Any]:
    """``[tool.kerasfit.build]``, every value checked (one line naming the key when wrong)."""
    if not isinstance(build, dict):
        raise ConfigError(f"{where}: [tool.kerasfit.build] must be a table")
    bad = sorted(set(build) - _BUILD_KEYS)
    if bad:
        raise ConfigError(f"{where}: unknown key(s) in [tool.kerasfit.build]: {', '.join(bad)}")
    key = f"{where}: [tool.kerasfit.build]"
    if "entry" in build:
        entry = build["entry"]
        if not isinstance(entry, str) or not entry.strip() or "\0" in entry:
            raise ConfigError(f"{key} entry must be 'module:function' or an expression (a non-empty string), "
                              f"got {entry!r}")
    for name in ("batch-size", "cores", "memory-limit"):  # memory-limit: MiB of address space for the build child
        if name in build:
            _positive_int(build[name], f"build.{name}", where)
    if "timeout" in build:
        check_timeout(build["timeout"], f"{key} timeout")
    if "dtype" in build:
        check_dtype(build["dtype"], f"{key} dtype")
    if "input-shape" in build:
        shape = build["input-shape"]
        try:
            if not isinstance(shape, str):
                raise ValueError(shape)
            parse_input_shapes(shape)
        except ValueError:
            raise ConfigError(f"{key} input-shape must be positive dims like '256,256,3' (inputs separated "
                              f"by ';'), got {shape!r}") from None
    return dict(build)


def parse_table(table: dict[str, Any], where: Path) -> Config:
    unknown = sorted(set(table) - _KEYS)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) in [tool.kerasfit]: {', '.join(unknown)}")
    cfg = Config(root=where.parent, source=where)
    if "select" in table:
        cfg.select = _list_of_str(table["select"], "select", where)
    cfg.ignore = _list_of_str(table.get("ignore", []), "ignore", where) + _list_of_str(
        table.get("extend-ignore", []), "extend-ignore", where
    )
    cfg.extend_select = _list_of_str(table.get("extend-select", []), "extend-select", where)
    pfi = table.get("per-file-ignores", {})
    if not isinstance(pfi, dict):
        raise ConfigError(f"{where}: [tool.kerasfit] per-file-ignores must be a table of glob = [codes]")
    cfg.per_file_ignores = {k: _list_of_str(v, f"per-file-ignores.{k}", where) for k, v in pfi.items()}
    if "exclude" in table:
        cfg.exclude = _list_of_str(table["exclude"], "exclude", where)
    cfg.extend_exclude = _list_of_str(table.get("extend-exclude", []), "extend-exclude", where)
    if "target" in table:
        cfg.target = str(table["target"])
        check_target(cfg.target, where)
    if "batch-size" in table:
        cfg.batch_size = _positive_int(table["batch-size"], "batch-size", where)
    if "cores" in table:
        cfg.cores = _positive_int(table["cores"], "cores", where)
    cfg.build = _build_table(table.get("build", {}), where)
    if "cache-dir" in table:
        cfg.cache_dir = _path_text(table["cache-dir"], "cache-dir", where, "directory")
    if "fixable" in table:
        cfg.fixable = _list_of_str(table["fixable"], "fixable", where)
    cfg.extend_fixable = _list_of_str(table.get("extend-fixable", []), "extend-fixable", where)
    cfg.unfixable = _list_of_str(table.get("unfixable", []), "unfixable", where)
    if "fail-on" in table:
        cfg.fail_on = check_fail_on(table["fail-on"], where)
    if "max-file-size" in table:
        cfg.max_file_size = _positive_int(table["max-file-size"], "max-file-size", where)
    if "docs-url" in table:
        cfg.docs_url = check_docs_url(table["docs-url"], f"{where}: [tool.kerasfit] docs-url")
    if "baseline" in table:
        cfg.baseline = where.parent / Path(_path_text(table["baseline"], "baseline", where, "file")).expanduser()
    return cfg


_URL = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*://\S+$")


def check_docs_url(value: Any, where: str = "--docs-url") -> str:
    """An absolute URL (the pages are ``<docs-url>/rules/KF101.md``, ``<docs-url>/facts.md``)."""
    if not isinstance(value, str) or not _URL.match(value):
        raise ConfigError(f"{where} must be an absolute URL such as https://example.com/kerasfit/docs/, not {value!r}")
    return value


def over_size_budget(path: str, cost: Cost | None, limit: int) -> str | None:
    """The one-line reason a file that costs ``cost`` (core.sourcefile) is not checked, or None."""
    if cost is None or cost.total <= limit:
        return None
    return (f"{path}: {cost.describe()}, over max-file-size ({limit:,} bytes); not checked "
            "(raise it with --max-file-size or [tool.kerasfit] max-file-size)")


def check_fail_on(value: Any, where: Path | str = "--fail-on") -> str:
    if value not in FAIL_ON:
        raise ConfigError(f"{where}: fail-on must be one of {', '.join(FAIL_ON)}, not {value!r}")
    return str(value)


def check_target(target: str, where: Path | str = "--target") -> None:
    if target not in TARGETS:
        raise ConfigError(f"{where}: unknown target {target!r}; choose one of {', '.join(TARGETS)}")


def _read_toml(path: Path) -> dict[str, Any]:
    """A TOML file's top-level table; every way it can be unreadable is a ConfigError."""
    try:
        text = read_regular(path, DEFAULT_MAX_FILE_SIZE).decode("utf-8")
    except NotRegularFile as exc:
        raise ConfigError(f"{path}: {exc.kind}, not a configuration file") from None
    except TooLarge as exc:
        raise ConfigError(f"{path}: {exc.size:,} bytes, too large for a configuration file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not valid UTF-8 (byte {exc.start})") from None
    import tomllib  # here: a tree without a config file does not pay for its import

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {str(exc).splitlines()[0]}") from None
    except RecursionError:  # tomllib recurses once per nested array / inline table
        raise ConfigError(f"{path}: invalid TOML: nested too deeply") from None


def _kerasfit_table(data: dict[str, Any], path: Path, top_level_fallback: bool) -> Any:
    """``[tool.kerasfit]`` of a parsed file (None when absent), checking each level is a table."""
    tool = data.get("tool")
    if tool is None:
        return data if top_level_fallback else None
    if not isinstance(tool, dict):
        raise ConfigError(f"{path}: [tool] must be a table, not {type(tool).__name__}")
    table = tool.get("kerasfit")
    if table is not None and not isinstance(table, dict):
        raise ConfigError(f"{path}: [tool.kerasfit] must be a table, not {type(table).__name__}")
    if table is None and top_level_fallback:
        return data
    return table


@lru_cache(maxsize=256)
def _load_pyproject(path: Path) -> Config | None:
    table = _kerasfit_table(_read_toml(path), path, False)
    if table is None:
        return None
    return parse_table(table, path)


def inside_project(path: Path, cfg: Config, what: str, hint: str = "") -> None:
    """A path a project's own config names must lie inside the project (its real path under
    the config's directory): a checked-out repository must make kerasfit neither create
    files elsewhere nor tell whether they exist. ``what`` names the key and its value."""
    root = os.path.realpath(cfg.root)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise ConfigError(f"{what} is outside the project ({root}){hint}")


def cache_dir_of(cfg: Config, *, trusted: bool) -> Path | None:
    """The config's ``cache-dir`` (relative to its file), or None. A project's own
    pyproject (not ``trusted``) may only keep its cache inside the project (``--config``,
    like ``--cache-dir`` and $KERASFIT_CACHE_DIR, is the user's and may point anywhere)."""
    if not cfg.cache_dir:
        return None
    path = cfg.root / Path(cfg.cache_dir).expanduser()
    if not trusted:
        inside_project(path, cfg, f"{cfg.source or cfg.root}: [tool.kerasfit] cache-dir {cfg.cache_dir!r}",
                       "; use --cache-dir or KERASFIT_CACHE_DIR for a cache elsewhere")
    return path


@lru_cache(maxsize=4096)
def find_config(directory: Path) -> Config | None:
    """The nearest [tool.kerasfit] at or above ``directory``."""
    d = directory.resolve()
    for candidate in (d, *d.parents):
        p = candidate / "pyproject.toml"
        if p.is_file():
            cfg = _load_pyproject(p)
            if cfg is not None:
                return cfg
    return None


def load_config_file(path: Path) -> Config:
    """``--config FILE``: a pyproject.toml or a kerasfit.toml with the table at top level."""
    data = _read_toml(path)
    table = _kerasfit_table(data, path, path.name != "pyproject.toml")
    return parse_table(table if table is not None else {}, path.resolve())


# ---- rule selection --------------------------------------------------------------


def _matches(code: str, selector: str) -> bool:
    s = selector.upper()
    return s == "ALL" or code.startswith(s)


def validate_selectors(selectors: list[str], rules: dict[str, Any], where: str) -> None:
    for s in selectors:
        if s.upper() == "ALL":
            continue
        if not any(c.startswith(s.upper()) for c in rules):
            raise ConfigError(f"{where}: unknown rule code or prefix {s!r} (see `kerasfit rules`)")


@dataclass
class Selection:
    select: list[str] | None = None
    extend_select: list[str] = field(default_factory=list)
    ignore: list[str] = field(default_factory=list)

    def merged_over(self, cfg: Config) -> Selection:
        """Command-line selection layered over a config's."""
        return Selection(
            select=self.select if self.select is not None else cfg.select,
            extend_select=cfg.extend_select + self.extend_select,
            ignore=cfg.ignore + self.ignore,
        )


def select_rules(rules: dict[str, Any], sel: Selection, family: str, extra_ignores: Sequence[str] = ()) -> list[Any]:
    """Ruff's model: a base set (defaults, or ``select``), plus ``extend-select``, minus ``ignore``.

    A rule off by default is on only when a selector names it or its prefix, or ALL.
    """
    chosen: list[Any] = []
    for code, rule in rules.items():
        if not rule.applies_to(family):
            continue
        if sel.select is None:
            on = rule.default_enabled
        else:
            on = any(_matches(code, s) for s in sel.select)
        if any(_matches(code, s) for s in sel.extend_select):
            on = True
        # ignore always wins over select / extend-select
        for s in (*sel.ignore, *extra_ignores):
            if _matches(code, s):
                on = False
        if on:
            chosen.append(rule)
    return chosen


def per_file_ignores(cfg: Config, path: Path) -> list[str]:
    if not cfg.per_file_ignores:
        return []
    try:
        rel = path.resolve().relative_to(cfg.root).as_posix()
    except ValueError:
        rel = path.as_posix()
    out: list[str] = []
    for pattern, codes in cfg.per_file_ignores.items():
        if fnmatch.fnmatch(rel, pattern) or fnmatch.fnmatch(path.name, pattern):
            out.extend(codes)
    return out


def effective_target(cli_target: str | None, cfg: Config) -> str:
    t = cli_target or cfg.target or DEFAULT_TARGET
    check_target(t, "--target" if cli_target else (cfg.source or "config"))
    return t

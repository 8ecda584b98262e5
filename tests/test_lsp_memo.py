"""Findings reused per top-level statement (kerasfit.lsp.memo, kerasfit.semantic.indexparts).

The language server keeps each statement's findings and walks again only what an edit
can have changed. The sessions below edit real fixtures the way people edit models
(numbers, names, calls, imports, a TPU strategy, whole statements) and hold every check
equal to a check from scratch. ``KERASFIT_REUSE_EXAMPLES`` runs more of them, and
``KERASFIT_REUSE_DIRS`` (paths joined by ``:``) adds the ``.py`` files under more folders.
"""

from __future__ import annotations

import io
import os
import random
import threading
import tokenize
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kerasfit.project.check import check_source
from kerasfit.engine.parse import ParseCache
from kerasfit.engine.settings import Stopped
from kerasfit.engine.reuse import signature
from kerasfit.lsp.memo import StatementMemo, affected
from kerasfit.ruleapi import Finding, Reads
from kfhelpers import TWO_TOWERS, TWO_TOWERS_EDITED

ROOT = Path(__file__).resolve().parent.parent
SOURCES = {str(p.relative_to(ROOT)): p.read_text() for p in sorted((ROOT / "fixtures").rglob("*.py"))}
for _d in filter(None, os.environ.get("KERASFIT_REUSE_DIRS", "").split(":")):
    for _p in sorted(Path(_d).rglob("*.py")):
        try:
            SOURCES[str(_p)] = _p.read_text()
        except (UnicodeDecodeError, OSError):
            pass
EXAMPLES = int(os.environ.get("KERASFIT_REUSE_EXAMPLES", "40"))


def _cache() -> ParseCache:
    """A document's cache as the language server makes it."""
    return ParseCache(reuse=StatementMemo())


def _memo(cache: ParseCache) -> StatementMemo:
    assert isinstance(cache.reuse, StatementMemo)
    return cache.reuse

# Statements that change what the rest of a file means: imports, a TPU, training, an
# input pipeline, shared regularizers, core counts, module constants, call sites.
STATEMENTS = [
    "import tf_keras as keras\n",
    "from tensorflow.keras import layers\n",
    "import tensorflow as tf\n",
    "resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu='')\n"
    "strategy = tf.distribute.TPUStrategy(resolver)\n",
    "model.fit(ds, epochs=3)\n",
    "ds = ds.map(parse).batch(100)\n",
    "reg = tf.keras.regularizers.l2(1e-4)\n",
    "y = tf.keras.layers.Conv2D(63, 3, kernel_regularizer=reg)(x)\n",
    "NUM_CORES = 8\n",
    "FILTERS = 100\n",
    "def helper(x, filters=FILTERS):\n    return tf.keras.layers.Conv2D(filters, 3)(x)\n",
    "out = helper(x, filters=30)\n",
    "x = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])\n",
    "global_batch = 64\n",
    "def parse(x):\n    return tf.concat([x, x], -1)\n",
]
NUMBERS = ["1", "3", "8", "16", "30", "63", "64", "100", "128", "0.9"]


def _tokens(text: str) -> list[tokenize.TokenInfo]:
    try:
        return [t for t in tokenize.generate_tokens(io.StringIO(text).readline) if t.type in (tokenize.NAME, tokenize.NUMBER, tokenize.STRING)]
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []


def _offset(text: str, row: int, col: int) -> int:
    lines = text.splitlines(keepends=True)
    return sum(len(x) for x in lines[: row - 1]) + col


def _top_level_starts(text: str) -> list[int]:
    lines = text.splitlines(keepends=True)
    out, pos = [], 0
    for ln in lines:
        if ln[:1] not in ("", " ", "\t", "\n", "\r", "#", ")", "]", "}"):
            out.append(pos)
        pos += len(ln)
    return out or [0]


def semantic_edit(text: str, rng: random.Random) -> str:
    r = rng.random()
    toks = _tokens(text)
    if r < 0.3 and toks:  # a number, a name or a string changed in place
        t = rng.choice(toks)
        a, b = _offset(text, *t.start), _offset(text, *t.end)
        if t.type == tokenize.NUMBER:
            new = rng.choice(NUMBERS)
        elif t.type == tokenize.NAME:
            names = [x.string for x in toks if x.type == tokenize.NAME]
            new = rng.choice(names + ["x", "layers", "tf", "reg", "parse", "strategy"])
        else:
            new = rng.choice(["'same'", "'valid'", "'channels_first'", "'kernel_regularizer'"])
        return text[:a] + new + text[b:]
    starts = _top_level_starts(text)
    at = rng.choice(starts + [len(text)])
    if r < 0.65:  # a statement added at top level
        snippet = rng.choice(STATEMENTS)
        if at == len(text) and text and not text.endswith("\n"):
            snippet = "\n" + snippet
        return text[:at] + snippet + text[at:]
    if r < 0.8 and len(starts) > 1:  # a top-level statement deleted
        i = rng.randrange(len(starts))
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        return text[: starts[i]] + text[end:]
    if r < 0.9 and len(starts) > 1:  # a top-level statement duplicated below itself
        i = rng.randrange(len(starts))
        end = starts[i + 1] if i + 1 < len(starts) else len(text)
        chunk = text[starts[i] : end]
        return text[:end] + ("" if chunk.endswith("\n") else "\n") + chunk + text[end:]
    lines = text.splitlines(keepends=True)  # a line inside a block replaced by a comment
    inner = [k for k, ln in enumerate(lines) if ln.startswith((" ", "\t")) and ln.strip()]
    if not inner:
        return text
    k = rng.choice(inner)
    indent = lines[k][: len(lines[k]) - len(lines[k].lstrip())]
    lines[k] = f"{indent}# edited\n"
    return "".join(lines)


def _same(a, b) -> None:
    assert [d.to_dict() for d in a.diagnostics] == [d.to_dict() for d in b.diagnostics]


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(SOURCES)))
def test_semantic_edit_sessions_give_the_findings_of_a_fresh_check(seed, name):
    rng = random.Random(seed)
    text = SOURCES[name]
    cache = _cache()
    check_source(text, "model.py", parse_cache=cache)
    for _ in range(6):
        text = semantic_edit(text, rng)
        _same(check_source(text, "model.py", parse_cache=cache), check_source(text, "model.py"))


MODEL = '''import tensorflow as tf
from tensorflow.keras import layers


def block_a(x, filters=32):
    y = layers.Conv2D(filters, 3, padding="same", use_bias=False)(x)
    y = layers.BatchNormalization(fused=False)(y)
    return layers.ReLU()(y)


def block_b(x):
    y = layers.Conv2D(50, 3, padding="same")(x)
    return layers.ReLU()(y)


def block_c(x):
    return layers.Dense(100)(x)


def build(inputs):
    x = block_a(inputs, filters=20)
    x = block_b(x)
    return block_c(x)
'''


def _session(*texts: str) -> tuple[ParseCache, list]:
    cache = _cache()
    out = []
    for t in texts:
        got = check_source(t, "model.py", parse_cache=cache)
        _same(got, check_source(t, "model.py"))
        out.append(got)
    return cache, out


NEW_BLOCK = "\n\ndef block_d(x):\n    return layers.Conv2D(50, 1)(x)\n"


def test_an_edit_inside_one_function_walks_only_that_function():
    """A helper nothing calls yet (the one being written): its edits walk it alone."""
    text = MODEL + NEW_BLOCK
    edited = text.replace("Conv2D(50, 1)", "Conv2D(60, 1)")
    cache, (before, after) = _session(text, edited)
    assert _memo(cache).walked == 1 and _memo(cache).reused == len(cst.parse_module(text).body) - 1
    assert sum(d.fields.get("width") == 50 for d in before.diagnostics) == 2
    assert sum(d.fields.get("width") == 50 for d in after.diagnostics) == 1


def test_an_edit_in_a_called_helper_walks_what_the_builder_links():
    text = MODEL + NEW_BLOCK + NEW_BLOCK.replace("block_d", "block_e") + NEW_BLOCK.replace("block_d", "block_f")
    edited = text.replace("Conv2D(50, 3", "Conv2D(56, 3")
    cache, (before, after) = _session(text, edited)
    # block_b, build, and block_a / block_c that build also calls; the imports and the
    # helpers nothing calls are kept
    assert (_memo(cache).walked, _memo(cache).reused) == (4, 5)
    assert sum(d.fields.get("width") == 50 for d in before.diagnostics) == 4
    assert sum(d.fields.get("width") == 50 for d in after.diagnostics) == 3


def test_a_call_site_edit_walks_the_function_it_calls():
    """block_a's conv is reported at build's ``filters=20``: editing the call site must
    walk block_a again (linked by its name), and the finding follows the new value."""
    text = MODEL + NEW_BLOCK + NEW_BLOCK.replace("block_d", "block_e") + NEW_BLOCK.replace("block_d", "block_f")
    edited = text.replace("filters=20", "filters=24")
    cache, (before, after) = _session(text, edited)
    assert (_memo(cache).walked, _memo(cache).reused) == (4, 5)  # build and the three it calls
    assert any(d.code == "KF102" and d.fields["width"] == 20 for d in before.diagnostics)
    assert not any(d.code == "KF102" and d.fields["width"] in (20, 24) for d in after.diagnostics)


def test_a_tpu_added_at_the_end_changes_findings_in_untouched_statements():
    """``train`` does not mention the resolver, yet its batch becomes a finding: a
    whole-file fact (the file uses a TPU) changed, so nothing is kept."""
    base = "import tensorflow as tf\n\n\ndef train(model, x, y):\n    model.fit(x, y, batch_size=32, epochs=3)\n\n\n"
    base += "".join(f"def other_{i}(x):\n    return x\n\n\n" for i in range(4))
    cache, (before, mid, after, back) = _session(
        base + "resolver = None\n",
        base + "resolver = 1\n",
        base + "resolver = tf.distribute.cluster_resolver.TPUClusterResolver()\n",
        base + "resolver = 2\n",
    )
    assert [d.code for d in before.diagnostics] == [d.code for d in mid.diagnostics] == []
    assert [(d.code, d.row) for d in after.diagnostics] == [("KF203", 5)]
    assert back.diagnostics == []
    assert _memo(cache).reused == 0


def test_an_import_edit_walks_the_whole_file():
    edited = MODEL.replace("from tensorflow.keras import layers", "from tf_keras import layers")
    cache, _ = _session(MODEL, edited)
    assert _memo(cache).reused == 0


class _StoppedAfterPlan(StatementMemo):
    """The server's memo, whose check is stopped right after planning when asked: the
    server's next edit superseding a check before its walk is done."""

    stop: threading.Event | None = None

    def plan(self, *args):  # type: ignore[no-untyped-def]
        out = super().plan(*args)
        if self.stop is not None:
            self.stop.set()
            self.stop = None
        return out


def test_a_check_stopped_mid_walk_leaves_the_memo_of_the_last_finished_check():
    """The fuzz test's "internal error: KeyError: <id>": a check stopped after its plan
    had replaced the kept signatures, so the next check looked up a statement of the last
    finished check (edited in both later texts) among the stopped check's."""
    text = MODEL + NEW_BLOCK
    memo = _StoppedAfterPlan()
    cache = ParseCache(reuse=memo)
    check_source(text, "model.py", parse_cache=cache)
    memo.stop = stop = threading.Event()
    with pytest.raises(Stopped):
        check_source(text.replace("Conv2D(50, 1)", "Conv2D(51, 1)"), "model.py", parse_cache=cache, stop=stop)
    edited = text.replace("Conv2D(50, 1)", "Conv2D(60, 1)")
    got = check_source(edited, "model.py", parse_cache=cache)
    _same(got, check_source(edited, "model.py"))
    # the edited helper alone is walked again, as after an edit no check was stopped
    assert memo.walked == 1 and memo.reused == len(cst.parse_module(text).body) - 1
    assert any(d.fields.get("width") == 60 for d in got.diagnostics)


def test_a_shared_regularizer_is_reported_once_by_its_first_use_whatever_is_edited():
    src = (
        "import tensorflow as tf\n\nreg = tf.keras.regularizers.l2(1e-4)\n\n\n"
        "def a(x):\n    return tf.keras.layers.Conv2D(64, 3, kernel_regularizer=reg)(x)\n\n\n"
        "def b(x):\n    return tf.keras.layers.Dense(64, bias_regularizer=reg)(x)\n"
    )
    no_first = src.replace("kernel_regularizer=reg", "kernel_regularizer=None")
    _, results = _session(src, no_first, src)
    for r in results:
        assert sum(d.code == "KF104" for d in r.diagnostics) == 1
    assert [(d.fields["keyword"], d.fields["value"]) for d in results[0].diagnostics if d.code == "KF104"] == [
        ("kernel_regularizer", "reg")]
    assert [(d.fields["keyword"], d.fields["value"]) for d in results[1].diagnostics if d.code == "KF104"] == [
        ("bias_regularizer", "reg")]


def test_a_changed_file_of_the_project_walks_the_whole_file(tmp_path, monkeypatch):
    from kerasfit.semantic.index import ProjectIndex

    (tmp_path / "helpers.py").write_text("from tensorflow.keras import layers as L\n")
    main = tmp_path / "model.py"
    src = "from helpers import L\n\n\ndef f(x):\n    return L.Dense(100)(x)\n\n\ndef g(x):\n    return x\n"
    main.write_text(src)
    project = ProjectIndex([tmp_path])
    cache = _cache()
    first = check_source(src, str(main), parse_cache=cache, project=project)
    assert [d.code for d in first.diagnostics] == ["KF102"]
    again = check_source(src.replace("return x", "return x + 1"), str(main), parse_cache=cache, project=project)
    assert _memo(cache).reused > 0 and [d.code for d in again.diagnostics] == ["KF102"]
    (tmp_path / "helpers.py").write_text("import numpy as L\n")
    os.utime(tmp_path / "helpers.py", ns=(1, 1))
    third = check_source(src.replace("return x", "return x + 2"), str(main), parse_cache=cache, project=project)
    assert _memo(cache).reused == 0
    assert third.diagnostics == [] or [d.code for d in third.diagnostics] != ["KF102"]


def _sig(code: str):
    return signature(cst.parse_module(code).body[0])


def test_signatures_bind_module_names_and_what_others_find_by_name():
    s = _sig("def f(x, n=3):\n    y = x\n    self.conv = g(y)\n    d = {'filters': 4}\n    global G\n    G = 1\n")
    assert {"f", "conv", "filters", "G"} <= s.binds
    assert "y" not in s.binds and "x" not in s.binds  # a function's locals are its own
    assert {"g", "x", "y", "conv"} <= s.reads
    assert _sig("import tensorflow as tf\n").inert and _sig("import a.b\n").binds == {"a"}
    assert _sig("N = 64\n").inert and not _sig("N = M\n").inert and not _sig("N = f()\n").inert
    assert "flag" in _sig("flags.DEFINE_integer('flag', 3, 'help')\n").binds


def test_the_walk_stops_at_an_unchanged_import_but_not_at_a_function():
    body = cst.parse_module(
        "import tensorflow as tf\n"  # 0
        "def a():\n    return tf.ones(1)\n"  # 1
        "def b():\n    return tf.zeros(1)\n"  # 2
        "def c():\n    return a()\n"  # 3
        "def d():\n    return c()\n"  # 4
        "def e():\n    return 1\n"  # 5
        "def f():\n    return 2\n"  # 6
        "def g():\n    return 3\n"  # 7
    ).body
    sigs = {id(s): signature(s) for s in body}
    got = affected(body, {id(body[1])}, [], sigs)
    assert got == {id(body[i]) for i in (1, 3, 4)}  # a; c calls a; d calls c (not the import)


def test_a_rule_that_reports_at_module_end_is_checked_over_the_whole_file_every_time():
    """A rule gathering across statements (a pack's, reporting in ``leave_Module``) must
    never see only the edited statement."""
    from kerasfit.engine.settings import LintSettings
    from kerasfit.engine.lint import lint_source
    from kerasfit.ruleapi.rule import Rule

    @dataclass(frozen=True)
    class Calls(Finding):
        n: int
        template = "{n} calls"

    class CountCalls(Rule):
        code, name, message = "KF990", "count-calls", "calls"
        reads = frozenset({Reads.STATEMENT, Reads.OTHER_STATEMENTS})

        def __init__(self, ctx) -> None:
            super().__init__(ctx)
            self.n = 0

        def visit_Call(self, node: cst.Call) -> None:
            self.n += 1

        def leave_Module(self, node: cst.Module) -> None:
            self.report(node.body[0], Calls(self.n))

    settings = LintSettings(rules=[CountCalls])
    text = "import tensorflow as tf\n" + "".join(f"def f{i}(x):\n    return g(x)\n" for i in range(6))
    cache = _cache()
    lint_source(text, "m.py", settings, cache)
    out = lint_source(text.replace("return g(x)\ndef f3", "return g(h(x))\ndef f3"), "m.py", settings, cache)
    assert [(d.finding, d.fields) for d in out.diagnostics] == [("Calls", {"n": 7})]
    assert _memo(cache).module is None  # nothing kept for such a rule set


# ---- what rules declare they read decides whose findings are kept ---------------------


def _lint_session(settings, *texts: str):
    """Each text checked with one kept cache and from scratch; both results per text."""
    from kerasfit.engine.lint import lint_source

    cache = _cache()
    out = []
    for t in texts:
        kept = [d.to_dict() for d in lint_source(t, "model.py", settings, cache).diagnostics]
        fresh = [d.to_dict() for d in lint_source(t, "model.py", settings).diagnostics]
        out.append((kept, fresh))
    return _memo(cache), out


def test_a_rule_that_reads_other_statements_walks_every_statement_while_the_others_are_kept():
    """A pack's rule numbering calls across statements declares that it reads other
    statements: its findings follow every edit, while the built-in rule beside it keeps its
    unchanged statements'."""
    from kerasfit.engine.settings import LintSettings
    from kerasfit.lsp.memo import reusable
    from kerasfit.engine.registry import rule_by_name_or_code
    from kerasfit.ruleapi import Reads, Rule

    @dataclass(frozen=True)
    class CallNumber(Finding):
        n: int
        template = "call {n}"

    class NumberCalls(Rule):
        code, name, message = "KF990", "number-calls", "call"
        reads = frozenset({Reads.STATEMENT, Reads.OTHER_STATEMENTS})

        def __init__(self, ctx) -> None:
            super().__init__(ctx)
            self.n = 0

        def visit_Call(self, node: cst.Call) -> None:
            self.n += 1
            self.report(node, CallNumber(self.n))

    assert not reusable(NumberCalls)
    kf101 = rule_by_name_or_code("KF101")
    assert kf101 is not None and reusable(kf101)
    head, rest = MODEL.split("def block_a", 1)
    text = head + NEW_BLOCK.lstrip("\n") + "\n\ndef block_a" + rest  # a helper nothing calls, first
    edited = text.replace("Conv2D(50, 1)(x)", "Conv2D(50, 1)(layers.ReLU()(x))")
    memo, [(k1, f1), (k2, f2)] = _lint_session(LintSettings(rules=[NumberCalls, kf101]), text, edited)
    assert k1 == f1 and k2 == f2
    # the inserted call renumbers the calls after it, in statements the edit did not touch
    assert [d["fields"]["n"] for d in k2 if d["code"] == "KF990"][-1] == sum(d["code"] == "KF990" for d in k2)
    assert k1 != k2 and [d["fields"] for d in k2 if d["code"] == "KF101"] == [d["fields"] for d in k1 if d["code"] == "KF101"]
    assert memo.reused > 0 and memo.rewalked == ("KF990",)


def test_every_built_in_rule_declares_what_it_reads():
    """Each built-in says it (the registry refuses a rule that does not); none gathers
    across statements, so the language server keeps every built-in rule's findings per
    statement."""
    from kerasfit.lsp.memo import reusable
    from kerasfit.engine.registry import all_rules
    from kerasfit.ruleapi import Reads

    for code, rule in all_rules().items():
        if not rule.__module__.startswith("rules."):
            continue
        assert "reads" in vars(rule), f"{code} does not declare `reads`"
        assert Reads.STATEMENT in rule.reads and reusable(rule), code


# KF102 reports a width reached from several layers once: an element of a literal two
# loops walk. The literal is an inert statement, so the memo does not link the loops.
HIDDEN, HIDDEN_EDITED = TWO_TOWERS, TWO_TOWERS_EDITED

# KF102 calls a module-level layer the model's last (an output head, info) by the last
# layer call of the module: a statement nothing links to moves it.
SCRIPT = '''import tensorflow as tf
from tensorflow.keras import layers

inputs = tf.keras.Input((32,))
y = layers.Dense(10)(inputs)
model = tf.keras.Model(inputs, y)


def helper(x):
    return x
'''
SCRIPT_EDITED = SCRIPT + "\n\nhead = layers.Dense(24)\n"


@pytest.mark.parametrize(
    "before,after,kept",
    # the loops: the other tower's statement is kept, its finding follows; the module's
    # head: a whole-file fact changed, so the whole file is checked
    [(HIDDEN, HIDDEN_EDITED, True), (SCRIPT, SCRIPT_EDITED, False)],
    ids=["loop-literal", "module-head"],
)
def test_channel_multiple_follows_an_edit_of_another_statement(before, after, kept):
    cache, results = _session(before, after, before)  # each equal to a fresh check
    first, second, third = ([d.to_dict() for d in r.diagnostics if d.code == "KF102"] for r in results)
    assert first and first != second and third == first  # the edit changes what KF102 reports
    assert (_memo(cache).reused > 0) == kept


def _static_built_ins() -> list:
    from kerasfit.engine.registry import all_rules

    return [r for r in all_rules().values() if r.__module__.startswith("rules.") and not r.build_only]


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(seed=st.integers(0, 2**32 - 1), name=st.sampled_from(sorted(SOURCES)))
def test_every_built_in_rule_gives_a_fresh_lints_findings_after_single_statement_edits(seed, name):
    """The default-off rules too, straight through the engine (no prefilter, no config)."""
    from kerasfit.engine.settings import LintSettings
    from kerasfit.engine.lint import lint_source

    lint = LintSettings(rules=_static_built_ins())
    rng = random.Random(seed)
    text = SOURCES[name]
    cache = _cache()
    lint_source(text, "model.py", lint, cache)
    for _ in range(4):
        text = semantic_edit(text, rng)
        kept = lint_source(text, "model.py", lint, cache).diagnostics
        assert [d.to_dict() for d in kept] == [d.to_dict() for d in lint_source(text, "model.py", lint).diagnostics]


def test_a_tree_wide_answer_keeps_reuse_beside_a_file_that_does_not_parse(tmp_path):
    from kerasfit.semantic.index import ProjectIndex

    (tmp_path / "broken.py").write_text("def f(:\n")
    main = tmp_path / "train.py"
    src = (
        "import tensorflow as tf\n\n\ndef build():\n    return tf.keras.layers.Dense(100)\n\n\n"
        "def g(x):\n    return x\n\n\nif __name__ == '__main__':\n    build().fit()\n"
    )
    main.write_text(src)
    project = ProjectIndex([tmp_path])
    cache = _cache()
    check_source(src, str(main), parse_cache=cache, project=project)
    # the check asked whether another file imports this one: it rests on the whole tree
    assert str(tmp_path / "broken.py") in _memo(cache).deps
    check_source(src.replace("return x", "return x + 1"), str(main), parse_cache=cache, project=project)
    assert _memo(cache).reused > 0

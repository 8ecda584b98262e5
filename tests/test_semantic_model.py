"""The semantic model keeps what it remembers in declared fields (STYLE 16): asking it
questions never sticks new attributes onto it, and nothing is kept in module globals."""

from __future__ import annotations

import ast
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from kerasfit.ruleapi import Reads
from kerasfit.ruleapi.context import RuleContext
from kerasfit.semantic.caches import ModelCaches
from kerasfit.semantic.model import SemanticModel

ROOT = Path(__file__).resolve().parent.parent

SRC = textwrap.dedent(
    """\
    import tensorflow as tf
    from tensorflow.keras import layers

    def block(x, filters):
        global G
        return layers.Conv2D(filters, 3)(x)

    class Net(tf.keras.Model):
        def __init__(self):
            super().__init__()
            self.convs = [layers.Conv2D(30, 3) for _ in range(2)]

        def call(self, x):
            for conv in self.convs:
                x = conv(x)
            y = tf.pad(x, [[0, 0], [1, 1], [1, 1], [0, 0]])
            return block(y, 30)
    """
)


def test_questions_add_no_attributes_to_the_model() -> None:
    ctx = SemanticModel(cst.parse_module(SRC), "net.py", source=SRC)
    calls = [c for c, _ in ctx.index.calls]
    for call in calls:
        ctx.names.call_name_anywhere(call)
        ctx.layers.built_layer(call)
        for a in call.args:
            ctx.values.possible_values(a.value)
    fns = [f for f in ctx.index.functions if isinstance(f, cst.FunctionDef)]
    for f in fns:
        ctx.layers.tensor_names(f)
        ctx.roles.is_host_function(f)
        ctx.scopes.name_refs_in("x", f)
    # the model and its parts declare their fields: nothing can be stuck onto them
    for obj in (ctx, ctx.scopes, ctx.names, ctx.values, ctx.layers, ctx.roles):
        assert not hasattr(obj, "__dict__"), type(obj).__name__
        with pytest.raises(AttributeError):
            obj.memo = {}  # type: ignore[union-attr]
    assert isinstance(ctx.caches, ModelCaches)
    assert ctx.caches.tensor_names and ctx.caches.scoped_refs  # the answers were kept, where declared


def _module_level_id_caches(path: Path) -> list[str]:
    """Module-level dicts annotated as keyed by ``int`` (an ``id()``) in ``path``."""
    found = []
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            ann = ast.unparse(node.annotation).replace(" ", "")
            if ann.startswith("dict[int,"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno}: {node.target.id}")
    return found


def test_no_dunder_dict_caches_and_no_id_keyed_module_globals() -> None:
    sources = [*(ROOT / "kerasfit").rglob("*.py"), *(ROOT / "rules").rglob("*.py")]
    sources = [p for p in sources if "crosscheck" not in p.parts]  # the build child runs user code
    dunder = [f"{p.relative_to(ROOT)}" for p in sources if "__dict__" in p.read_text(encoding="utf-8")]
    assert not dunder, dunder
    globals_ = [hit for p in sources for hit in _module_level_id_caches(p)]
    assert not globals_, globals_


def test_ancestors_take_their_node_during_the_walk_and_outside_it() -> None:
    """``ctx.scopes.ancestors(node)`` answers for the node asked about: the visited node's from
    the walk, any other node's from the file index — the same chain either way."""
    from kerasfit.engine.walk import walk
    from kerasfit.ruleapi.rule import Rule

    src = "import tensorflow as tf\n\ndef f(x):\n    return tf.concat([tf.nn.relu(x)], -1)\n"
    seen: list[tuple[str, list[str], list[str]]] = []

    class Probe(Rule):
        code, name, message = "KF999", "probe", "probe"
        reads = frozenset({Reads.STATEMENT})

        def visit_Call(self, node: cst.Call) -> None:
            during = [type(a).__name__ for a in self.ctx.ancestors(node)]
            inner = node.args[0].value if node.args else node
            seen.append((self.ctx.code(node.func), during, [type(a).__name__ for a in self.ctx.ancestors(inner)]))

    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    walk(ctx.module, ctx, [Probe(RuleContext(ctx, Probe.code, Probe.reads))], lambda rule, exc: (_ for _ in ()).throw(exc))
    concat = next(s for s in seen if s[0] == "tf.concat")
    assert concat[1] == ["Module", "FunctionDef", "IndentedBlock", "SimpleStatementLine", "Return"]
    # the list element is not the visited node: its own chain, which continues the walk's
    assert concat[2] == concat[1] + ["Call", "Arg"]
    fresh = SemanticModel(cst.parse_module(src), "m.py", source=src)  # no walk: every answer from the index
    call = next(c for c, _ in fresh.index.calls if fresh.module.code_for_node(c.func) == "tf.concat")
    assert [type(a).__name__ for a in fresh.scopes.ancestors(call)] == concat[1]


def test_roles_are_an_enum_equal_to_their_names() -> None:
    from kerasfit.ruleapi import Role

    src = "import tensorflow as tf\n\n@tf.function\ndef step(x):\n    return x\n\ndef parse(r):\n    return r\n\nds = tf.data.Dataset.range(3).map(parse)\n"
    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    step, parse = (s for s in ctx.module.body if isinstance(s, cst.FunctionDef))
    assert ctx.roles.function_role(step) is Role.MODEL and ctx.roles.function_role(parse) is Role.INPUT
    assert ctx.roles.function_role(step) == "model" and f"{ctx.roles.function_role(parse)}" == "input"
    assert ctx.roles.of(ctx.module.body[-1]) is Role.MODULE
    assert ctx.roles.of(step.body.body[0]) is Role.MODEL


def test_the_model_answers_only_through_its_parts() -> None:
    """No forwarding of an earlier release's flat spellings: a part answers each question."""
    src = "import tensorflow as tf\nN = 2 * 3\nx = tf.keras.layers.Dense(N)\n"
    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    call = ctx.module.body[-1].body[0].value
    assert ctx.values.const(call.args[0].value) == 6
    for gone in ("const", "call_name", "role_of", "uses_tpu", "walk_path", "visiting", "enclosing_function"):
        with pytest.raises(AttributeError):
            getattr(ctx, gone)


def test_built_in_rules_never_use_the_deprecated_spellings() -> None:
    """Every fixture linted by every rule with the forwarder's warning raised as an
    error: a built-in rule (or kerasfit itself) reaching the forwarder would crash (KF002)."""
    import warnings

    from kerasfit.engine.settings import LintSettings
    from kerasfit.engine.lint import lint_source
    from kerasfit.engine.registry import all_rules

    settings = LintSettings(list(all_rules().values()))
    files = sorted((ROOT / "fixtures").rglob("*.py"))
    assert len(files) > 20
    with warnings.catch_warnings():
        warnings.simplefilter("error", DeprecationWarning)
        for path in files:
            diags = lint_source(path.read_text(encoding="utf-8"), str(path), settings).diagnostics
            assert not [d.message for d in diags if d.code == "KF002"], path


def test_answers_do_not_depend_on_where_the_walk_is() -> None:
    """Asked during the walk about a node of another function, every part answers for that
    node (its scopes, its role), exactly as a model that never walked: there is no cursor."""
    from kerasfit.engine.walk import walk
    from kerasfit.ruleapi.rule import Rule

    src = textwrap.dedent(
        """\
        import tensorflow as tf
        N = 3

        def parse(record, N=5):
            tf = None
            return tf.reshape(record, [N])

        @tf.function
        def step(x):
            return tf.keras.layers.Dense(N)(x)

        ds = tf.data.Dataset.range(3).map(parse)
        """
    )
    module = cst.parse_module(src)
    parse = module.body[2]
    ret = parse.body.body[1].body[0].value  # tf.reshape(record, [N]) inside parse
    n_in_parse = ret.args[1].value.elements[0].value

    def answers(ctx: RuleContext) -> tuple[object, ...]:
        return (
            ctx.const(n_in_parse),
            ctx.call_name(ret),
            ctx.raw_name(ret.func),
            ctx.role_of(ret),
            ctx.lookup("N", at=n_in_parse).kind,  # type: ignore[union-attr]
            ctx.enclosing_function(n_in_parse) is parse,
        )

    expected = answers(RuleContext(SemanticModel(module, "m.py", source=src), "KF999", frozenset()))
    assert expected == (5, None, None, "input", "param", True)
    seen: list[tuple[object, ...]] = []

    class Probe(Rule):
        code, name, message = "KF999", "probe", "probe"
        reads = frozenset({Reads.STATEMENT})

        def visit_Call(self, node: cst.Call) -> None:  # every call of the file, parse's own included
            seen.append(answers(self.ctx))

    ctx = SemanticModel(module, "m.py", source=src)
    walk(module, ctx, [Probe(RuleContext(ctx, Probe.code, Probe.reads))], lambda rule, exc: (_ for _ in ()).throw(exc))
    assert len(seen) >= 5 and all(s == expected for s in seen), seen


def test_a_heads_meaning_is_worked_out_once_per_scope() -> None:
    """``raw_name`` answers what a dotted name's head stands for once per (head, innermost
    def / class / lambda) — kept in ``caches.heads`` — and the answer still differs where the
    scopes around a spelling differ."""
    src = textwrap.dedent(
        """\
        from tensorflow.keras import layers
        import tensorflow as tf

        def plain(x):
            y = layers.Dense(4)(x)
            return layers.Dense(8)(y)

        def handed(x, **kwargs):
            layers = kwargs['layers']
            return layers.Dense(4)(x)

        def own(x):
            layers = make_layers()
            return layers.Dense(4)(x)

        class Block:
            layers = None
            dense = layers.Dense(2)

            def call(self, x):
                f = lambda v: layers.Dense(3)(v)
                return f(x)
        """
    )
    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    dense = [(c, f) for c, _ in ctx.index.calls for f in [c.func] if ctx.module.code_for_node(f) == "layers.Dense"]
    got = [ctx.names.raw_name_anywhere(f) for _, f in dense]
    assert got == [
        "tensorflow.keras.layers.Dense", "tensorflow.keras.layers.Dense",  # plain
        "keras.layers.Dense",  # handed in through **kwargs
        None,  # a local value nothing resolves
        "tensorflow.keras.layers.Dense",  # a class body: the import (no class-level rebinding is followed)
        "tensorflow.keras.layers.Dense",  # a lambda in a method skips the class scope
    ]
    heads = ctx.caches.heads
    scopes = {id(s) for (head, s) in heads if head == "layers"}
    assert len(scopes) == 5  # plain's two uses shared one answer
    assert [ctx.names.raw_name_anywhere(f) for _, f in dense] == got and len(heads) == len(scopes)
    # the bare head is answered from the same entry: no submodule without a member
    assert ctx.names.raw_name_anywhere(cst.ensure_type(dense[2][1], cst.Attribute).value) is None


def test_a_call_is_resolved_anywhere_once() -> None:
    """``call_name_anywhere`` (asked of most calls by whole-file questions) keeps each
    call's answer; a layer application answers its layer's name."""
    src = "from tensorflow.keras import layers\n\ndef f(x):\n    return layers.Dense(4)(x)\n"
    ctx = SemanticModel(cst.parse_module(src), "m.py", source=src)
    app = next(c for c, _ in ctx.index.calls if type(c.func) is cst.Call)
    assert ctx.names.call_name_anywhere(app) == "keras.layers.Dense"
    assert ctx.caches.call_names_anywhere[id(app)] == (app, "keras.layers.Dense")
    assert ctx.names.call_name_anywhere(app) == "keras.layers.Dense"

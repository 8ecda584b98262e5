"""kerasfit's positions subclass libcst's private ``CodegenState`` (issue 11 item 7).

Placing a few nodes through the public ``PositionProvider`` costs a position pass over
the whole statement per lookup: measured ten times slower per statement, which the
language server pays on every keystroke. So the private class stays, with the libcst
range pinned in pyproject.toml, and these tests fail the day the interface we rely on
changes, or a version outside the range is installed.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import libcst as cst
from libcst._nodes.internal import CodegenState
from libcst.metadata import MetadataWrapper, PositionProvider

from kerasfit.engine.positions import Positions, _PositionState

from test_positions import TRICKY

ROOT = Path(__file__).resolve().parent.parent


def _pinned() -> tuple[tuple[int, ...], tuple[int, ...]]:
    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    spec = next(d for d in deps if d.startswith("libcst"))
    lo = re.search(r">=\s*([\d.]+)", spec)
    hi = re.search(r"<\s*([\d.]+)", spec)
    assert lo and hi, f"libcst must be pinned to a range (>=X,<Y): {spec}"
    return tuple(map(int, lo.group(1).split("."))), tuple(map(int, hi.group(1).split(".")))


def test_installed_libcst_is_in_the_pinned_range():
    lo, hi = _pinned()
    installed = tuple(int(x) for x in re.findall(r"\d+", version("libcst"))[:3])
    assert lo <= installed < hi


def test_the_private_interface_is_what_positions_override():
    fields = [f.name for f in dataclasses.fields(CodegenState)]
    assert fields[:2] == ["default_indent", "default_newline"]
    assert {"indent_tokens", "tokens"} <= set(fields)
    for name, params in {
        "add_token": ["self", "value"],
        "add_indent_tokens": ["self"],
        "pop_trailing_newline": ["self"],
        "before_codegen": ["self", "node"],
        "after_codegen": ["self", "node"],
        "record_syntactic_position": ["self", "node", "start_node", "end_node"],
    }.items():
        assert list(inspect.signature(getattr(CodegenState, name)).parameters) == params, name
        assert name in _PositionState.__dict__, f"_PositionState must override {name}"
    assert callable(getattr(cst.CSTNode, "_codegen", None))


def test_private_positions_agree_with_the_public_provider():
    """Every statement's start and every call's span in a tricky file, placed both ways."""
    for src in (TRICKY, TRICKY.replace("\n", "\r\n")):
        wrapper = MetadataWrapper(cst.parse_module(src), unsafe_skip_copy=True)
        public = wrapper.resolve(PositionProvider)
        module = wrapper.module
        nodes = [n for n in public if isinstance(n, (cst.SimpleStatementLine, cst.BaseCompoundStatement, cst.Call))]
        assert len(nodes) > 10
        pos = Positions(module, src, nodes)
        for n in nodes:
            start, end = pos.span(n)
            r = public[n]
            assert pos.row_col(start) == (r.start.line, r.start.column), module.code_for_node(n)[:60]
            if isinstance(n, cst.Call):  # (a statement's end: libcst stops at its last child)
                assert pos.row_col(end) == (r.end.line, r.end.column), module.code_for_node(n)[:60]


def test_node_classes_tested_by_exact_type_have_no_subclasses():
    """The semantic model's hot helpers (nodes.dotted_name, iter_statements, walk,
    class_index; fileindex; naming; scopes; containers' loop climbs) and the hot rule visitors
    (pad-before-conv, channel-multiple, reduce-elementwise, needless-concat-slice) test libcst
    node types with ``type(n) is C``: right only while libcst's concrete node classes have
    no subclasses."""
    import kerasfit  # noqa: F401  (every kerasfit module that could subclass one)
    from kerasfit.engine.registry import all_rules
    from kerasfit.semantic import fileindex, naming, nodes  # noqa: F401

    all_rules()  # the rule modules, which could subclass one too

    exact = [
        cst.Name, cst.Attribute, cst.Call, cst.FunctionDef, cst.ClassDef, cst.Lambda, cst.Param,
        cst.ImportAlias, cst.AsName, cst.Assign, cst.AnnAssign, cst.AugAssign, cst.IndentedBlock,
        cst.SimpleStatementSuite, cst.SimpleStatementLine, cst.Else, cst.If, cst.ExceptHandler, cst.Finally,
        cst.Module, cst.For, cst.ListComp, cst.GeneratorExp, cst.SetComp, cst.DictComp,
        cst.With, cst.Import, cst.ImportFrom, cst.ImportStar, cst.Tuple, cst.List, cst.Element, cst.StarredElement,
        cst.Global, cst.Subscript, cst.BinaryOperation, cst.Multiply, cst.Divide, cst.Integer, cst.Arg,
    ]
    assert {c.__name__: c.__subclasses__() for c in exact if c.__subclasses__()} == {}

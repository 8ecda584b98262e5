"""The fast string-literal path agrees with Python's own evaluation."""

from __future__ import annotations

import ast

import libcst as cst
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kerasfit.semantic.nodes import string_value


@pytest.mark.filterwarnings("ignore::DeprecationWarning", "ignore::SyntaxWarning")
@settings(max_examples=300, database=None)
@given(st.text(alphabet=st.characters(blacklist_categories=("Cs",)) | st.sampled_from(["\r", "\n", "\\", "'", '"']), max_size=30), st.sampled_from(["'", '"', "'''", '"""']), st.sampled_from(["", "r", "b", "u", "f"]))
def test_string_value_matches_python(text, quote, prefix):
    literal = prefix + quote + text + quote
    try:
        expected = ast.literal_eval(literal)
        node = cst.parse_expression(literal)
    except Exception:
        return  # not a valid literal (or an f-string): nothing to compare
    if not isinstance(node, cst.SimpleString):
        return
    assert string_value(node) == expected

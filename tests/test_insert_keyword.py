"""A fix that adds a keyword argument (``insert_keyword``: KF201's ``drop_remainder=True``,
``steps_per_execution=``) copes with every layout of the call's last argument."""

from __future__ import annotations

import ast

from kerasfit.project.check import CheckOptions, check_source

OPTIONS = CheckOptions(isolated=True)

# The comma on a line of its own: libcst gives it whitespace *before* that is a
# ParenthesizedWhitespace (no ``.value``), which the one-per-line branch once read as plain.
LEADING_COMMA = """import tensorflow as tf
ds = tf.data.TFRecordDataset(files).map(parse).batch(
    1024
    ,
)
"""


def test_comma_on_its_own_line_gets_the_keyword_and_no_crash():
    r = check_source(LEADING_COMMA, "input.py", OPTIONS, fix=True, unsafe=True)
    assert [d.code for d in r.diagnostics if d.code.startswith("KF0")] == [], r.diagnostics
    assert r.fixes_applied == 1 and r.fixed_source is not None
    call = ast.parse(r.fixed_source).body[1].value
    assert isinstance(call, ast.Call)
    assert [(k.arg, ast.literal_eval(k.value)) for k in call.keywords] == [("drop_remainder", True)]
    again = check_source(r.fixed_source, "input.py", OPTIONS, fix=True, unsafe=True)
    assert again.fixed_source is None  # idempotent

"""Call-argument edits rules build fixes from (public through kerasfit.ruleapi)."""

from __future__ import annotations

import libcst as cst


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``, keeping the comma layout valid."""
    args = [a for a in call.args if a is not arg]
    if args and call.args and call.args[-1] is arg:
        # the new last argument must not keep a dangling comma unless the call had one
        last = args[-1]
        args[-1] = last.with_changes(comma=arg.comma)
    return call.with_changes(args=args)


def set_keyword(call: cst.Call, keyword: str, value: cst.BaseExpression) -> cst.Call:
    """``call`` with ``keyword=value`` replaced or appended."""
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return call.with_deep_changes(a, value=value)
    args = list(call.args)
    new = cst.Arg(
        value=value,
        keyword=cst.Name(keyword),
        equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""), whitespace_after=cst.SimpleWhitespace("")),
    )
    if args:
        last = args[-1]
        if last.comma is cst.MaybeSentinel.DEFAULT:
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
        else:
            new = new.with_changes(comma=last.comma)
            args[-1] = last.with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
    args.append(new)
    return call.with_changes(args=args)


def keyword_value(call: cst.Call, keyword: str) -> cst.BaseExpression | None:
    for a in call.args:
        if a.keyword is not None and a.keyword.value == keyword:
            return a.value
    return None

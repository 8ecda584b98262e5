"""Call-argument edits rules build fixes from (public through kerasfit.ruleapi)."""

from __future__ import annotations

import libcst as cst


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``, keeping the comma layout valid and the comments that
    sat on the removed argument's lines (they stay, on their own line)."""
    i = next(k for k, a in enumerate(call.args) if a is arg)
    args = [a for a in call.args if a is not arg]
    comments = _comment_lines(arg)
    if args and call.args[-1] is arg:
        # the new last argument must not keep a dangling comma unless the call had one
        last = args[-1]
        comma = arg.comma
        if comments and isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
            prev = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
            if isinstance(prev, cst.ParenthesizedWhitespace):
                ws = comma.whitespace_after
                comma = comma.with_changes(
                    whitespace_after=ws.with_changes(
                        first_line=prev.first_line,
                        empty_lines=[*prev.empty_lines, *_as_lines(comments, prev), *ws.empty_lines],
                    )
                )
        args[-1] = last.with_changes(comma=comma)
    elif comments and i > 0 and isinstance(prev_comma := args[i - 1].comma, cst.Comma):
        after = prev_comma.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace):
            after = after.with_changes(empty_lines=[*after.empty_lines, *_as_lines(comments, after)])
            args[i - 1] = args[i - 1].with_changes(comma=prev_comma.with_changes(whitespace_after=after))
    elif comments and i == 0 and isinstance(before := call.whitespace_before_args, cst.ParenthesizedWhitespace):
        call = call.with_changes(
            whitespace_before_args=before.with_changes(empty_lines=[*before.empty_lines, *_as_lines(comments, before)])
        )
    return call.with_changes(args=args)


def _comment_lines(arg: cst.Arg) -> list[cst.EmptyLine]:
    """Comments written on the removed argument's own line(s) and the lines after its comma."""
    out: list[cst.EmptyLine] = []
    comma = arg.comma
    if isinstance(comma, cst.Comma) and isinstance(comma.whitespace_after, cst.ParenthesizedWhitespace):
        ws = comma.whitespace_after
        if ws.first_line.comment is not None:
            out.append(cst.EmptyLine(indent=True, comment=ws.first_line.comment))
    return out


def _as_lines(comments: list[cst.EmptyLine], like: cst.ParenthesizedWhitespace) -> list[cst.EmptyLine]:
    """The comment lines indented like the argument lines of the call."""
    return [c.with_changes(indent=like.indent, whitespace=like.last_line) for c in comments]


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

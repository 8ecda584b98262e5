"""Call-argument edits rules build fixes from (public through kerasfit.ruleapi)."""

from __future__ import annotations

import libcst as cst


def remove_arg(call: cst.Call, arg: cst.Arg) -> cst.Call:
    """``call`` without ``arg``, keeping the comma layout valid and every comment of the
    call: those on the removed argument's line and the comment lines after it stay, on
    their own line."""
    i = next(k for k, a in enumerate(call.args) if a is arg)
    args = [a for a in call.args if a is not arg]
    comma = arg.comma
    # what follows the removed argument: its comma's whitespace, or the closing paren's
    tail = comma.whitespace_after if isinstance(comma, cst.Comma) else arg.whitespace_after_arg
    comments = _own_line_comment(tail)
    if args and call.args[-1] is arg:
        # the new last argument must not keep a dangling comma unless the call had one
        last = args[-1]
        prev = last.comma.whitespace_after if isinstance(last.comma, cst.Comma) else None
        # (the removed comma's whitespace, comment lines and all, is kept as it was)
        lost = comments or _has_comment(prev) or (not isinstance(comma, cst.Comma) and _has_comment(tail))
        if lost and not isinstance(last.whitespace_after_arg, cst.ParenthesizedWhitespace):
            closing = _closing(prev, comments, tail)
            if isinstance(comma, cst.Comma):
                args[-1] = last.with_changes(comma=comma.with_changes(whitespace_after=closing))
            else:
                args[-1] = last.with_changes(comma=comma, whitespace_after_arg=closing)
        else:
            args[-1] = last.with_changes(comma=comma)
        return call.with_changes(args=args)
    # the removed argument's comment, then the comment lines between it and the next one
    if isinstance(tail, cst.ParenthesizedWhitespace):
        comments += [line for line in tail.empty_lines if line.comment is not None]
    if not comments:
        return call.with_changes(args=args)
    if i > 0 and isinstance(prev_comma := args[i - 1].comma, cst.Comma):
        after = prev_comma.whitespace_after
        if isinstance(after, cst.ParenthesizedWhitespace):
            after = after.with_changes(empty_lines=[*after.empty_lines, *_as_lines(comments, after)])
            args[i - 1] = args[i - 1].with_changes(comma=prev_comma.with_changes(whitespace_after=after))
        else:  # ``a, b=1,  # why`` on one line: the previous comma takes the removed one's layout
            args[i - 1] = args[i - 1].with_changes(comma=prev_comma.with_changes(whitespace_after=tail))
    elif i == 0:
        before = call.whitespace_before_args
        if isinstance(before, cst.ParenthesizedWhitespace):
            before = before.with_changes(empty_lines=[*before.empty_lines, *_as_lines(comments, before)])
        else:
            before = tail
        call = call.with_changes(whitespace_before_args=before)
    return call.with_changes(args=args)


def _own_line_comment(ws: cst.BaseParenthesizableWhitespace) -> list[cst.EmptyLine]:
    """The comment at the end of the removed argument's line, as a line of its own."""
    if isinstance(ws, cst.ParenthesizedWhitespace) and ws.first_line.comment is not None:
        return [cst.EmptyLine(indent=True, comment=ws.first_line.comment)]
    return []


def _has_comment(ws: cst.BaseParenthesizableWhitespace | None) -> bool:
    return isinstance(ws, cst.ParenthesizedWhitespace) and (
        ws.first_line.comment is not None or any(line.comment is not None for line in ws.empty_lines)
    )


def _closing(
    prev: cst.BaseParenthesizableWhitespace | None, comments: list[cst.EmptyLine], tail: cst.BaseParenthesizableWhitespace
) -> cst.BaseParenthesizableWhitespace:
    """What ends the call once its last argument is gone: the line of the new last
    argument (its comment), the comment lines up to the removed one, the removed one's
    comment, then whatever stood before the closing paren."""
    if isinstance(prev, cst.ParenthesizedWhitespace):
        if isinstance(tail, cst.ParenthesizedWhitespace):
            return tail.with_changes(
                first_line=prev.first_line,
                empty_lines=[*prev.empty_lines, *_as_lines(comments, prev), *tail.empty_lines],
            )
        return prev  # ``f(\n    a,  # why\n    b=1)``: the paren moves to the next line
    return tail


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

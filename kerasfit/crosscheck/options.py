"""Build options as the command line and the configuration spell them. Pure Python: the
build child reads them too."""

from __future__ import annotations

def parse_input_shapes(text: str) -> tuple[tuple[int, ...], ...]:
    """``256,256,3`` (one input), or several inputs' dims separated by ``;`` (``2754,129;199``),
    each input's non-batch dims. ValueError when it is not that."""
    shapes = tuple(tuple(int(d) for d in part.replace("x", ",").split(",") if d.strip())
                   for part in text.split(";"))
    if not shapes or any(not dims or any(d <= 0 for d in dims) for dims in shapes):
        raise ValueError(text)
    return shapes

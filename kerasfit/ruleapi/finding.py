"""What a rule found, as typed fields (STYLE 2): the message is rendered from them.

A rule declares one frozen dataclass per message shape, in its own module, and reports
an instance: ``self.report(node, OddWidth(layer="Dense", width=30, ...))``. The engine
renders the message with :meth:`Finding.message` and carries the finding's kind (its
class name) and fields on the :class:`~kerasfit.core.types.Diagnostic`, so reporters
(JSON, SARIF) and tests read ``padded_to`` or ``wasted`` instead of parsing prose.
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar


class _Attributes(dict[str, Any]):
    """A ``format_map`` mapping over a finding: its fields, and any phrase a property
    derives from them (``{advice}``)."""

    def __init__(self, finding: Finding) -> None:
        super().__init__()
        self.finding = finding

    def __missing__(self, key: str) -> Any:
        return getattr(self.finding, key)


@dataclasses.dataclass(frozen=True)
class Finding:
    """A finding's typed fields (ints, strs, bools, floats, tuples of them, or None) and
    the text they render to.

    ``template`` is ``str.format`` text over the fields and the class's properties; a
    shape that templates cannot say overrides :meth:`message`. A finding with no
    variable part is a subclass with no fields."""

    template: ClassVar[str] = ""

    @classmethod
    def kind(cls) -> str:
        """What the finding is called in output and tests: its class name."""
        return cls.__name__

    def fields(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    def message(self) -> str:
        return self.template.format_map(_Attributes(self))

"""What a rule's fix is made of: the edit types and the call-argument edits (the edit that
adds a keyword to a call in its own layout is ``ctx.insert_keyword``).

    from kerasfit.ruleapi.fixes import Replace, set_keyword
"""

from __future__ import annotations

from .callargs import keyword_value, remove_arg, set_keyword
from ..core.fixes import FixSpec, Remove, Replace

__all__ = ["FixSpec", "Remove", "Replace", "keyword_value", "remove_arg", "set_keyword"]

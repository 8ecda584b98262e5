"""What a rule's fix is made of: the edit types and the call-argument edits.

    from kerasfit.ruleapi.fixes import Replace, set_keyword
"""

from __future__ import annotations

from .callargs import keyword_value, remove_arg, set_keyword
from ..core.fixes import FixSpec, Remove, Replace
from ..semantic.pipeline import insert_keyword

__all__ = ["FixSpec", "Remove", "Replace", "insert_keyword", "keyword_value", "remove_arg", "set_keyword"]

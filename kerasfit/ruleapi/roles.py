"""What a piece of code is for: model building, the input pipeline, evaluation.

    from kerasfit.ruleapi.roles import Role, is_tf_data_chain
"""

from __future__ import annotations

from ..semantic.pipeline import feeds_evaluation, is_tf_data_chain, reaches_evaluation
from ..core.types import Role

__all__ = ["Role", "feeds_evaluation", "is_tf_data_chain", "reaches_evaluation"]

"""``intstr.IntOrString`` as PodDisruptionBudgets use it: ``2`` or ``"50%"``.

Shared by the API server (validation of ``minAvailable``/``maxUnavailable``) and the disruption
controller (what a percentage means for a number of pods). Pure functions.
"""

from __future__ import annotations

import math
import re
from typing import Any

_PERCENT = re.compile(r"^[0-9]+%$")


def is_percent(value: Any) -> bool:
    return isinstance(value, str) and bool(_PERCENT.match(value))


def percent_of(value: str) -> int:
    return int(value[:-1])


def scaled_value(value: Any, total: int, *, round_up: bool) -> int:
    """``intstr.GetScaledValueFromIntOrPercent``: an int as is, a percentage of ``total``.

    :raises ValueError: for a string that is not a percentage (validation refuses those).
    """
    if isinstance(value, bool):
        raise ValueError(f"invalid value for IntOrString: {value!r}")
    if isinstance(value, int):
        return value
    if not is_percent(value):
        raise ValueError(
            f"invalid value for IntOrString: invalid type: string is not a percentage: {value!r}"
        )
    scaled = percent_of(value) * total / 100
    return math.ceil(scaled) if round_up else math.floor(scaled)

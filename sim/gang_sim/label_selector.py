"""``metav1.LabelSelector`` (``matchLabels`` + ``matchExpressions``) as a pure predicate.

Shared by the API server (the Eviction API finds a pod's PodDisruptionBudgets) and the
controllers (the disruption controller finds a budget's pods), which must not import each
other. ``None`` selects nothing and ``{}`` everything, as ``metav1.LabelSelectorAsSelector``
makes them; callers that want an empty selector to select nothing check `is_empty` first.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def is_empty(selector: Mapping[str, Any] | None) -> bool:
    """No requirement at all (``None`` or ``{}``)."""
    return not selector or (not selector.get("matchLabels") and not selector.get("matchExpressions"))


def selects(selector: Mapping[str, Any] | None, labels: Mapping[str, str] | None) -> bool:
    """Whether ``labels`` satisfy ``selector``; an operator this does not know selects nothing."""
    if selector is None:
        return False
    labels = labels or {}
    for key, value in (selector.get("matchLabels") or {}).items():
        if labels.get(key) != value:
            return False
    for expression in selector.get("matchExpressions") or []:
        key, operator = expression.get("key"), expression.get("operator")
        values = expression.get("values") or []
        present = key in labels
        if operator == "In":
            matched = present and labels[key] in values
        elif operator == "NotIn":
            matched = not present or labels[key] not in values
        elif operator == "Exists":
            matched = present
        elif operator == "DoesNotExist":
            matched = not present
        else:
            return False
        if not matched:
            return False
    return True

"""PodDisruptionBudgets (``policy/v1``): defaulting, validation and ``kubectl get pdb`` columns.

As upstream's strategy, a new budget starts with an all-zero status (``currentHealthy``,
``desiredHealthy``, ``disruptionsAllowed``, ``expectedPods``: the Go type has no
``omitempty`` on them, so clients always find them), the spec may change after creation (since
policy/v1) and bumps ``generation``, and only the disruption controller writes the status
(``controllers/core/disruption.py``), through the ``status`` subresource. The Eviction API reads
that status and spends ``disruptionsAllowed`` (``../eviction.py``).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.errors import Cause, forbidden, invalid, not_supported, required
from gang_sim.apiserver.registry import ClusterView, Operation
from gang_sim.intstr import is_percent, percent_of

JsonDict = dict[str, Any]

EVICTION_POLICIES = ["AlwaysAllow", "IfHealthyBudget"]
_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist")


def empty_status() -> JsonDict:
    return {"currentHealthy": 0, "desiredHealthy": 0, "disruptionsAllowed": 0, "expectedPods": 0}


def default_pdb(op: Operation, pdb: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    if op == "CREATE":
        pdb["status"] = empty_status()


def _int_or_percent_causes(value: Any, path: str) -> list[Cause]:
    """``ValidatePositiveIntOrPercent`` and ``IsNotMoreThan100Percent``."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if isinstance(value, int):
        return [invalid(path, value, "must be greater than or equal to 0")] if value < 0 else []
    if not is_percent(value):
        return [invalid(path, value, "must be an integer or percentage (e.g '5%')")]
    if percent_of(value) > 100:
        return [invalid(path, value, "must not be greater than 100%")]
    return []


def _selector_causes(selector: Any, path: str) -> list[Cause]:
    if selector is None:
        return []
    if not isinstance(selector, dict):
        return [invalid(path, selector, "must be an object")]
    causes: list[Cause] = []
    for index, expression in enumerate(selector.get("matchExpressions") or []):
        here = f"{path}.matchExpressions[{index}]"
        operator, values = expression.get("operator"), expression.get("values") or []
        if not expression.get("key"):
            causes.append(required(f"{here}.key"))
        if operator in ("In", "NotIn") and not values:
            causes.append(required(f"{here}.values", "must be specified when `operator` is 'In' or 'NotIn'"))
        elif operator in ("Exists", "DoesNotExist") and values:
            causes.append(
                forbidden(
                    f"{here}.values", "may not be specified when `operator` is 'Exists' or 'DoesNotExist'"
                )
            )
        elif operator not in _OPERATORS:
            causes.append(invalid(f"{here}.operator", operator, "not a valid selector operator"))
    return causes


def validate_pdb(pdb: JsonDict, old: JsonDict | None) -> list[Cause]:
    spec = pdb.get("spec") or {}
    causes: list[Cause] = []
    if spec.get("minAvailable") is not None and spec.get("maxUnavailable") is not None:
        causes.append(invalid("spec", spec, "minAvailable and maxUnavailable cannot be both set"))
    for name in ("minAvailable", "maxUnavailable"):
        if spec.get(name) is not None:
            causes += _int_or_percent_causes(spec[name], f"spec.{name}")
    causes += _selector_causes(spec.get("selector"), "spec.selector")
    policy = spec.get("unhealthyPodEvictionPolicy")
    if policy is not None and policy not in EVICTION_POLICIES:
        causes.append(not_supported("spec.unhealthyPodEvictionPolicy", policy, EVICTION_POLICIES))
    return causes


# --- kubectl get pdb ----------------------------------------------------------------------------


def min_available(pdb: JsonDict) -> str:
    value = (pdb.get("spec") or {}).get("minAvailable")
    return "N/A" if value is None else str(value)


def max_unavailable(pdb: JsonDict) -> str:
    value = (pdb.get("spec") or {}).get("maxUnavailable")
    return "N/A" if value is None else str(value)


def allowed_disruptions(pdb: JsonDict) -> int:
    return int((pdb.get("status") or {}).get("disruptionsAllowed") or 0)

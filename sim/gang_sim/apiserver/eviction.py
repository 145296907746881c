"""The Eviction API: ``POST .../pods/{name}/eviction`` with a ``policy/v1`` ``Eviction``.

What ``kubectl drain`` and cluster autoscalers call instead of deleting pods, as kube-apiserver
serves it (``pkg/registry/core/pod/storage/eviction.go``):

- A pod that is Pending, Succeeded, Failed or already being deleted is evicted without looking
  at budgets: it disrupts nothing more.
- Otherwise the PodDisruptionBudgets of its namespace whose selector matches it decide. None:
  evicted. More than one: 500 "This pod has more than one PodDisruptionBudget, which the
  eviction subresource does not support." One: its status, which the disruption controller
  keeps, must allow a disruption. A budget whose status is behind its spec
  (``observedGeneration``) answers 429 "is still being processed" (``Retry-After: 10``); one
  with ``disruptionsAllowed`` 0 answers 429 ``TooManyRequests`` "Cannot evict pod as it would
  violate the pod's disruption budget." with a ``DisruptionBudget`` cause naming what it needs;
  otherwise ``disruptionsAllowed`` goes down by one and the pod joins ``disruptedPods``, so the
  next eviction sees the budget spent before the controller has caught up. A pod that is not
  ready is evicted without spending the budget when the budget is healthy anyway (or its
  ``unhealthyPodEvictionPolicy`` is ``AlwaysAllow``).
- An evicted pod first gets the ``DisruptionTarget`` condition (``EvictionByEvictionAPI``),
  then is deleted gracefully (its own grace period, or the Eviction's ``deleteOptions``); the
  answer is a ``Status`` Success with code 201.

Sources: kubernetes/kubernetes could not be read at a tag for this work, so its functions are
named instead of lines (``canIgnorePDB``, ``checkAndDecrement``, ``createTooManyRequestsError``,
``addConditionAndDeletePod``, the strings quoted above); the cause type is
``policyv1.DisruptionBudgetCause`` (k8s.io/api ``policy/v1/types.go:24-25@kubernetes-1.36.3``).

Everything happens under the store lock, so two evictions racing for the last allowed
disruption cannot both win (upstream retries the budget write on a conflict to the same end).
``dryRun`` (query or ``deleteOptions``) decides everything and writes nothing.
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver import objects
from gang_sim.apiserver.errors import BadRequest, Conflict, NotFound, StatusError
from gang_sim.apiserver.json_copy import json_copy
from gang_sim.apiserver.options import DeleteOptions, parse_propagation
from gang_sim.apiserver.registry import ResourceInfo
from gang_sim.apiserver.state import ServerState
from gang_sim.label_selector import is_empty, selects
from gang_sim.pod_conditions import EVICTION_API, disruption_target, is_ready, with_condition

JsonDict = dict[str, Any]
PODS_KEY = "/pods"
PDBS_KEY = "policy/poddisruptionbudgets"
EVICTION_VERSIONS = ("policy/v1", "policy/v1beta1")
VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."
DISRUPTION_BUDGET_CAUSE = "DisruptionBudget"


class BudgetViolated(StatusError):
    """429 with a ``DisruptionBudget`` cause (no reason beyond ``TooManyRequests``)."""

    code = 429
    reason = "TooManyRequests"

    def __init__(self, cause: str, retry_after: int = 0) -> None:
        details: JsonDict = {"causes": [{"reason": DISRUPTION_BUDGET_CAUSE, "message": cause}]}
        if retry_after:
            details["retryAfterSeconds"] = retry_after
        super().__init__(VIOLATION, details)


class TooManyBudgets(StatusError):
    """What upstream returns as a plain ``Status`` of code 500: no reason, no details."""

    code = 500
    reason = ""

    def __init__(self) -> None:
        super().__init__(
            "This pod has more than one PodDisruptionBudget, which the eviction subresource does not support."
        )


def _eviction(body: Any, name: str) -> JsonDict:
    if not isinstance(body, dict):
        raise BadRequest("the object provided is unrecognized (must be of type Eviction)")
    kind, version = body.get("kind", "Eviction"), body.get("apiVersion", "policy/v1")
    if kind != "Eviction" or version not in EVICTION_VERSIONS:
        raise BadRequest(
            f"the object provided is unrecognized ({version}, Kind={kind}: expected policy/v1 Eviction)"
        )
    eviction_name = (body.get("metadata") or {}).get("name", "")
    if eviction_name != name:
        raise BadRequest("name in URL does not match name in Eviction object")
    return body


def _delete_options(eviction: JsonDict) -> tuple[DeleteOptions, bool]:
    """The deletion the eviction asks for, and whether it is a dry run."""
    options = eviction.get("deleteOptions") or {}
    if not isinstance(options, dict):
        raise BadRequest("deleteOptions must be an object")
    preconditions = options.get("preconditions") or {}
    grace = options.get("gracePeriodSeconds")
    delete = DeleteOptions(
        propagation=parse_propagation(options.get("propagationPolicy")),
        grace_period=int(grace) if grace is not None else None,
        uid=preconditions.get("uid"),
        resource_version=preconditions.get("resourceVersion"),
    )
    return delete, "All" in (options.get("dryRun") or [])


def _can_ignore_budgets(pod: JsonDict) -> bool:
    phase = (pod.get("status") or {}).get("phase")
    return phase in ("Pending", "Succeeded", "Failed") or objects.is_deleting(pod)


def _budgets_of(state: ServerState, info: ResourceInfo, pod: JsonDict) -> list[JsonDict]:
    """The budgets of the pod's namespace whose selector matches it; an empty selector matches
    no pod here, as upstream's eviction guards against one that crept in."""
    meta = objects.meta(pod)
    labels = meta.get("labels") or {}
    found = []
    for pdb in state.store.items(info.key, meta.get("namespace", "")):
        selector = (pdb.get("spec") or {}).get("selector")
        if not is_empty(selector) and selects(selector, labels):
            found.append(pdb)
    return found


def _spend(state: ServerState, info: ResourceInfo, pdb: JsonDict, pod: JsonDict, dry_run: bool) -> None:
    """``checkAndDecrement``: refuse, or take one allowed disruption and remember the pod."""
    meta, status = objects.meta(pdb), pdb.get("status") or {}
    name = meta["name"]
    if int(status.get("observedGeneration") or 0) < int(meta.get("generation") or 0):
        raise BudgetViolated(f"The disruption budget {name} is still being processed by the server.", 10)
    allowed = int(status.get("disruptionsAllowed") or 0)
    if allowed <= 0:
        raise BudgetViolated(
            f"The disruption budget {name} needs {int(status.get('desiredHealthy') or 0)} healthy pods "
            f"and has {int(status.get('currentHealthy') or 0)} currently"
        )
    if dry_run:
        return
    spent = json_copy(pdb)
    spent_status = spent.setdefault("status", {})
    spent_status["disruptionsAllowed"] = allowed - 1
    disrupted = dict(spent_status.get("disruptedPods") or {})
    disrupted[objects.meta(pod)["name"]] = objects.rfc3339(state.api.clock())
    spent_status["disruptedPods"] = disrupted
    state.api.update(info, meta.get("namespace", ""), name, spent, subresource="status")


def _check_preconditions(pod: JsonDict, options: DeleteOptions) -> None:
    meta = objects.meta(pod)
    if options.uid and options.uid != meta.get("uid"):
        raise Conflict(
            "pods",
            meta["name"],
            f"Precondition failed: UID in precondition: {options.uid}, UID in object meta: {meta.get('uid')}",
        )
    if options.resource_version and options.resource_version != meta.get("resourceVersion"):
        raise Conflict(
            "pods",
            meta["name"],
            f"Precondition failed: ResourceVersion in precondition: {options.resource_version}, "
            f"ResourceVersion in object meta: {meta.get('resourceVersion')}",
        )


def evict_pod(state: ServerState, namespace: str, name: str, body: Any, *, dry_run: bool = False) -> JsonDict:
    """Serve one Eviction; returns the Success ``Status`` (raises a `StatusError` otherwise)."""
    eviction = _eviction(body, name)
    options, options_dry_run = _delete_options(eviction)
    dry_run = dry_run or options_dry_run
    pods, budgets = state.registry.by_key(PODS_KEY), state.registry.by_key(PDBS_KEY)
    if pods is None:  # pragma: no cover - pods are always registered
        raise NotFound("pods", name)
    with state.store.lock:
        pod = state.api.get(pods, namespace, name)
        _check_preconditions(pod, options)
        if budgets is not None and not _can_ignore_budgets(pod):
            matching = _budgets_of(state, budgets, pod)
            if len(matching) > 1:
                raise TooManyBudgets()
            if matching:
                pdb = matching[0]
                spec, status = pdb.get("spec") or {}, pdb.get("status") or {}
                healthy_anyway = (
                    int(status.get("currentHealthy") or 0) >= int(status.get("desiredHealthy") or 0)
                    and int(status.get("desiredHealthy") or 0) > 0
                )
                unready = not is_ready(pod)
                if not (
                    unready and (spec.get("unhealthyPodEvictionPolicy") == "AlwaysAllow" or healthy_anyway)
                ):
                    _spend(state, budgets, pdb, pod, dry_run)
        if dry_run:
            return _success()
        marked = json_copy(pod)
        status = marked.setdefault("status", {})
        condition = disruption_target(*EVICTION_API)
        status["conditions"] = with_condition(
            status.get("conditions"), condition, objects.rfc3339(state.api.clock())
        )
        state.api.update(pods, namespace, name, marked, subresource="status")
        state.api.delete(pods, namespace, name, DeleteOptions(options.propagation, options.grace_period))
    return _success()


def _success() -> JsonDict:
    return {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "code": 201}

"""Defaulting and validation of batch/v1 Jobs, as kube-apiserver's Job strategy does them.

What clients see of a created Job: ``parallelism`` defaults to 1, and ``completions`` to 1
when neither is given (it stays unset when only ``parallelism`` is: a work queue);
``backoffLimit: 6``, ``completionMode: NonIndexed``, ``suspend: false``,
``podReplacementPolicy: TerminatingOrFailed``; and the generated selector: the Job's UID as
``batch.kubernetes.io/controller-uid`` (plus ``batch.kubernetes.io/job-name`` and the legacy
``controller-uid``/``job-name`` labels) on the pod template, matched by ``spec.selector``. The
template's pod spec gets the pod defaults that matter for validation (``restartPolicy: Always``
when unset, which the Job rule then refuses: a Job's pods must say ``OnFailure`` or ``Never``).
Updates may not change the selector, the completion mode, or the pod template of a Job that is
not suspended (elastic Indexed Jobs may change ``completions``, so it is not checked).
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.errors import Cause, invalid, not_supported, required
from gang_sim.apiserver.registry import ClusterView, Operation

JsonDict = dict[str, Any]

CONTROLLER_UID_LABEL = "batch.kubernetes.io/controller-uid"
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
LEGACY_CONTROLLER_UID_LABEL = "controller-uid"
LEGACY_JOB_NAME_LABEL = "job-name"
DEFAULT_BACKOFF_LIMIT = 6
_RESTART_POLICIES = ["OnFailure", "Never"]
_COMPLETION_MODES = ["NonIndexed", "Indexed"]


def default_job(op: Operation, job: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    spec = job.setdefault("spec", {})
    if spec.get("completions") is None and spec.get("parallelism") is None:
        spec["completions"] = 1
    spec.setdefault("parallelism", 1)
    if spec.get("backoffLimitPerIndex") is None:
        spec.setdefault("backoffLimit", DEFAULT_BACKOFF_LIMIT)
    spec.setdefault("completionMode", "NonIndexed")
    spec.setdefault("suspend", False)
    replacement = "Failed" if spec.get("podFailurePolicy") else "TerminatingOrFailed"
    spec.setdefault("podReplacementPolicy", replacement)
    template = spec.setdefault("template", {})
    pod_spec = template.setdefault("spec", {})
    pod_spec.setdefault("restartPolicy", "Always")
    pod_spec.setdefault("dnsPolicy", "ClusterFirst")
    pod_spec.setdefault("schedulerName", "default-scheduler")
    pod_spec.setdefault("terminationGracePeriodSeconds", 30)
    if op == "CREATE" and not spec.get("manualSelector"):
        _generate_selector(job)


def _generate_selector(job: JsonDict) -> None:
    """The selector the API server generates: the Job's own UID, on the template and in the selector."""
    meta = job.get("metadata") or {}
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    spec = job["spec"]
    template_meta = spec["template"].setdefault("metadata", {})
    labels = template_meta.setdefault("labels", {})
    labels.update(
        {
            CONTROLLER_UID_LABEL: uid,
            JOB_NAME_LABEL: name,
            LEGACY_CONTROLLER_UID_LABEL: uid,
            LEGACY_JOB_NAME_LABEL: name,
        }
    )
    spec["selector"] = {"matchLabels": {CONTROLLER_UID_LABEL: uid}}


def _non_negative(spec: JsonDict, field: str) -> list[Cause]:
    value = spec.get(field)
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return []
    return [invalid(f"spec.{field}", value, "must be greater than or equal to 0")]


def validate_job(job: JsonDict, old: JsonDict | None) -> list[Cause]:
    spec = job.get("spec") or {}
    causes: list[Cause] = []
    for field in ("parallelism", "completions", "backoffLimit", "activeDeadlineSeconds"):
        causes += _non_negative(spec, field)
    mode = spec.get("completionMode")
    if mode not in _COMPLETION_MODES:
        causes.append(not_supported("spec.completionMode", mode, _COMPLETION_MODES))
    elif mode == "Indexed" and spec.get("completions") is None:
        causes.append(required("spec.completions", "when completion mode is Indexed"))
    pod_spec = (spec.get("template") or {}).get("spec") or {}
    if not pod_spec.get("containers"):
        causes.append(required("spec.template.spec.containers"))
    policy = pod_spec.get("restartPolicy")
    if policy not in _RESTART_POLICIES:
        causes.append(not_supported("spec.template.spec.restartPolicy", policy, _RESTART_POLICIES))
    if old is not None:
        causes += _immutable(old.get("spec") or {}, spec)
    return causes


def _immutable(old: JsonDict, new: JsonDict) -> list[Cause]:
    causes = [
        invalid(f"spec.{field}", new.get(field), "field is immutable")
        for field in ("selector", "completionMode")
        if old.get(field) != new.get(field)
    ]
    # Upstream lets a suspended Job's template change (Kueue and JobSet rely on it to re-place pods).
    if not old.get("suspend") and old.get("template") != new.get("template"):
        causes.append(invalid("spec.template", new.get("template"), "field is immutable"))
    return causes

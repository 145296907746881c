"""The admission webhooks of Kubeflow Trainer v2 and JobSet, as in-process hooks.

- JobSet defaulting (``mjobset.kb.io``): ``successPolicy {operator: All}``, ``startupPolicy
  {startupPolicyOrder: AnyOrder}``, ``network.enableDNSHostnames: true``, and per replicated
  job ``completionMode: Indexed`` and a pod ``restartPolicy: OnFailure`` when unset.
- JobSet validation (``vjobset.kb.io``, CREATE): the Job and pod names a JobSet will generate
  must be DNS-1035 labels of at most 63 characters. Denied with 403 ``Forbidden``, the answer
  controller-runtime gives for a plain error.
- TrainJob validation (``validator.trainjob.trainer.kubeflow.org``, CREATE): the
  runtime named by ``spec.runtimeRef`` must be a supported kind and must exist, and a torch
  runtime's trainer may not set the environment variables torchrun reserves (``PET_NNODES``,
  ``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``). Denied
  with 422 ``Invalid``, because the trainer's validator answers with a field error list.
  Upstream checks updates too, and protects a runtime in use with a finalizer; here an update is
  never refused, so deleting a runtime cannot leave its TrainJobs impossible to edit.
"""

from __future__ import annotations

from typing import Any

from gang_sim.apiserver.errors import Cause, WebhookDenied, aggregate, invalid
from gang_sim.apiserver.kinds.trainer_schemas import DEFAULT_RUNTIME_KIND, TRAINER_GROUP
from gang_sim.apiserver.registry import ClusterView, Operation
from gang_sim.apiserver.validation import dns1035_label_errors

JsonDict = dict[str, Any]

JOBSET_WEBHOOK = "vjobset.kb.io"
TRAINJOB_WEBHOOK = "validator.trainjob.trainer.kubeflow.org"
RUNTIME_PLURALS = {"ClusterTrainingRuntime": "clustertrainingruntimes", "TrainingRuntime": "trainingruntimes"}
TORCH_RESERVED_ENV = (
    "PET_NNODES",
    "PET_NPROC_PER_NODE",
    "PET_NODE_RANK",
    "PET_MASTER_ADDR",
    "PET_MASTER_PORT",
)
# The Job controller names Indexed pods ``<job>-<index>-<5 random characters>``.
_POD_SUFFIX = "-abcde"
_TOO_LONG_POD_NAME = (
    "JobSet name must be shorter; pod names generated for this JobSet will exceed 63 characters."
)


def _replicated_jobs(js: JsonDict) -> list[JsonDict]:
    return [r for r in (js.get("spec") or {}).get("replicatedJobs") or [] if isinstance(r, dict)]


def default_jobset(op: Operation, js: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    spec = js.setdefault("spec", {})
    spec.setdefault("successPolicy", {"operator": "All"})
    spec.setdefault("startupPolicy", {"startupPolicyOrder": "AnyOrder"})
    spec.setdefault("network", {}).setdefault("enableDNSHostnames", True)
    for rjob in _replicated_jobs(js):
        job_spec = rjob.setdefault("template", {}).setdefault("spec", {})
        job_spec.setdefault("completionMode", "Indexed")
        pod_spec = job_spec.setdefault("template", {}).setdefault("spec", {})
        pod_spec.setdefault("restartPolicy", "OnFailure")


def admit_jobset(op: Operation, js: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    if op != "CREATE":
        return
    name = str((js.get("metadata") or {}).get("name") or "")
    errors: list[str] = []
    for rjob in _replicated_jobs(js):
        replicas = rjob["replicas"] if isinstance(rjob.get("replicas"), int) else 1
        longest_job = f"{name}-{rjob.get('name')}-{max(replicas - 1, 0)}"
        errors += dns1035_label_errors(longest_job)
        job_spec = (rjob.get("template") or {}).get("spec") or {}
        completions = job_spec.get("completions")
        if job_spec.get("completionMode") == "Indexed" and isinstance(completions, int):
            longest_pod = f"{longest_job}-{max(completions - 1, 0)}{_POD_SUFFIX}"
            errors += [
                _TOO_LONG_POD_NAME if "must be no more than 63 characters" in error else error
                for error in dns1035_label_errors(longest_pod)
            ]
    if errors:
        message = errors[0] if len(errors) == 1 else "\n".join(errors)
        raise WebhookDenied(JOBSET_WEBHOOK, message, code=403, reason="Forbidden")


def runtime_of(trainjob: JsonDict, view: ClusterView) -> tuple[str, JsonDict | None]:
    """The runtime ``spec.runtimeRef`` names: ``(group-kind text, object or None)``.

    The group-kind text is ``Kind.group`` as the trainer's runtime registry keys it; the object
    is None when the kind is unsupported or the runtime does not exist.
    """
    ref = (trainjob.get("spec") or {}).get("runtimeRef") or {}
    kind = str(ref.get("kind") or DEFAULT_RUNTIME_KIND)
    group = str(ref.get("apiGroup") or TRAINER_GROUP)
    plural = RUNTIME_PLURALS.get(kind)
    if group != TRAINER_GROUP or plural is None:
        return f"{kind}.{group}", None
    namespace = "" if kind == DEFAULT_RUNTIME_KIND else str((trainjob.get("metadata") or {}).get("namespace"))
    return f"{kind}.{group}", view.lookup(group, plural, namespace, str(ref.get("name") or ""))


def trainjob_causes(trainjob: JsonDict, view: ClusterView) -> list[Cause]:
    spec = trainjob.get("spec") or {}
    ref = spec.get("runtimeRef") or {}
    group_kind, runtime = runtime_of(trainjob, view)
    kind = group_kind.partition(".")[0]
    if kind not in RUNTIME_PLURALS or not group_kind.endswith(f".{TRAINER_GROUP}"):
        return [invalid("spec.runtimeRef", ref, f"unsupported runtime: {group_kind}")]
    if runtime is None:
        resource = f"{RUNTIME_PLURALS[kind]}.{TRAINER_GROUP}"
        lower = kind[0].lower() + kind[1:]
        detail = (
            f'{resource} "{ref.get("name")}" not found: specified {lower} must be created before '
            "the TrainJob is created"
        )
        return [invalid("spec.runtimeRef", ref, detail)]
    torch = ((runtime.get("spec") or {}).get("mlPolicy") or {}).get("torch")
    env = ((spec.get("trainer") or {}).get("env")) or []
    reserved = sorted({str(e.get("name")) for e in env if isinstance(e, dict)} & set(TORCH_RESERVED_ENV))
    if torch is not None and reserved:
        detail = f"must not have reserved envs, invalid envs configured: [{' '.join(reserved)}]"
        return [invalid("spec.trainer.env", env, detail)]
    return []


def admit_trainjob(op: Operation, trainjob: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    if op != "CREATE":
        return
    causes = trainjob_causes(trainjob, view)
    if causes:
        name = (trainjob.get("metadata") or {}).get("name") or ""
        message = f'TrainJob.{TRAINER_GROUP} "{name}" is invalid: {aggregate(causes)}'
        raise WebhookDenied(TRAINJOB_WEBHOOK, message, code=422, reason="Invalid")

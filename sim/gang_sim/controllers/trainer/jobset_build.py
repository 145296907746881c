"""What the JobSet controller creates for a JobSet, as pure builders: child Jobs, headless Service.

Names, labels and annotations are those of kubernetes-sigs/jobset (v0.12): one batch Job per
replicated job replica, ``<jobset>-<replicatedJob>-<index>``, owned by the JobSet (controller
reference), its metadata and its pod template both labelled *and* annotated with the JobSet's
keys (``jobset.sigs.k8s.io/jobset-name``, ``replicatedjob-name``, ``replicatedjob-replicas``,
``global-replicas``, ``job-index``, ``job-global-index``, ``job-key`` (SHA-1 of
``<namespace>/<job>``), ``jobset-uid`` and ``restart-attempt``); ``spec.suspend`` follows the
JobSet's. With ``network.enableDNSHostnames`` (the webhook's default) every pod template gets
``subdomain`` = the JobSet name (or ``network.subdomain``), and one headless Service of that name
selects the JobSet's pods, so ``<jobset>-<rjob>-<job index>-<pod index>.<subdomain>`` is each
pod's DNS name (the Job controller sets the hostname part).
"""

from __future__ import annotations

import copy
import hashlib
from typing import Any

from gang_sim.controllers.kinds import JOBS, JOBSETS, SERVICES
from gang_sim.controllers.ownership import owner_reference

JsonDict = dict[str, Any]

PREFIX = "jobset.sigs.k8s.io/"
JOBSET_NAME_KEY = PREFIX + "jobset-name"
REPLICATED_JOB_NAME_KEY = PREFIX + "replicatedjob-name"
REPLICATED_JOB_REPLICAS_KEY = PREFIX + "replicatedjob-replicas"
GLOBAL_REPLICAS_KEY = PREFIX + "global-replicas"
JOB_INDEX_KEY = PREFIX + "job-index"
JOB_GLOBAL_INDEX_KEY = PREFIX + "job-global-index"
JOB_KEY = PREFIX + "job-key"
JOBSET_UID_KEY = PREFIX + "jobset-uid"
RESTARTS_KEY = PREFIX + "restart-attempt"


def _spec(obj: JsonDict | None) -> JsonDict:
    return (obj or {}).get("spec") or {}


def replicated_jobs(jobset: JsonDict) -> list[JsonDict]:
    return [r for r in _spec(jobset).get("replicatedJobs") or [] if isinstance(r, dict)]


def replicas(rjob: JsonDict) -> int:
    value = rjob.get("replicas")
    return value if isinstance(value, int) else 1


def job_name(jobset_name: str, rjob_name: str, index: int) -> str:
    return f"{jobset_name}-{rjob_name}-{index}"


def dns_hostnames(jobset: JsonDict) -> bool:
    return bool((_spec(jobset).get("network") or {}).get("enableDNSHostnames"))


def subdomain(jobset: JsonDict) -> str:
    network = _spec(jobset).get("network") or {}
    return str(network.get("subdomain") or (jobset.get("metadata") or {}).get("name") or "")


def _global_index(jobset: JsonDict, rjob_name: str, index: int) -> str:
    before = 0
    for rjob in replicated_jobs(jobset):
        if rjob.get("name") == rjob_name:
            return str(before + index)
        before += replicas(rjob)
    return ""


def jobset_keys(jobset: JsonDict, rjob: JsonDict, index: int) -> dict[str, str]:
    """The labels (and, identically, annotations) of a child Job and of its pods."""
    meta = jobset.get("metadata") or {}
    namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
    child = job_name(name, str(rjob.get("name")), index)
    return {
        JOBSET_NAME_KEY: name,
        REPLICATED_JOB_NAME_KEY: str(rjob.get("name")),
        RESTARTS_KEY: str(int((jobset.get("status") or {}).get("restarts") or 0)),
        REPLICATED_JOB_REPLICAS_KEY: str(replicas(rjob)),
        GLOBAL_REPLICAS_KEY: str(sum(replicas(r) for r in replicated_jobs(jobset))),
        JOB_INDEX_KEY: str(index),
        JOB_KEY: hashlib.sha1(f"{namespace}/{child}".encode(), usedforsecurity=False).hexdigest(),
        JOB_GLOBAL_INDEX_KEY: _global_index(jobset, str(rjob.get("name")), index),
        JOBSET_UID_KEY: str(meta.get("uid") or ""),
    }


def _marked(metadata: JsonDict, keys: dict[str, str]) -> JsonDict:
    return {
        **metadata,
        "labels": {**(metadata.get("labels") or {}), **keys},
        "annotations": {**(metadata.get("annotations") or {}), **keys},
    }


def build_job(jobset: JsonDict, rjob: JsonDict, index: int) -> JsonDict:
    """``constructJob``: the replicated job's Job template, named, marked and owned."""
    meta = jobset.get("metadata") or {}
    template = copy.deepcopy(rjob.get("template") or {})
    keys = jobset_keys(jobset, rjob, index)
    spec = template.get("spec") or {}
    pod_template = spec.setdefault("template", {})
    pod_template["metadata"] = _marked(pod_template.get("metadata") or {}, keys)
    if dns_hostnames(jobset):
        pod_template.setdefault("spec", {})["subdomain"] = subdomain(jobset)
    spec["suspend"] = bool(_spec(jobset).get("suspend"))
    metadata = _marked(
        {
            key: value
            for key, value in (template.get("metadata") or {}).items()
            if key in ("labels", "annotations")
        },
        keys,
    )
    metadata.update(
        name=job_name(str(meta.get("name")), str(rjob.get("name")), index),
        namespace=meta.get("namespace"),
        ownerReferences=[owner_reference(jobset, JOBSETS)],
    )
    return {"apiVersion": JOBS.api_version, "kind": JOBS.kind, "metadata": metadata, "spec": spec}


def build_service(jobset: JsonDict) -> JsonDict:
    """The headless Service that gives every pod of the JobSet its DNS name."""
    meta = jobset.get("metadata") or {}
    network = _spec(jobset).get("network") or {}
    publish = network.get("publishNotReadyAddresses")
    return {
        "apiVersion": SERVICES.api_version,
        "kind": SERVICES.kind,
        "metadata": {
            "name": subdomain(jobset),
            "namespace": meta.get("namespace"),
            "ownerReferences": [owner_reference(jobset, JOBSETS)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOBSET_NAME_KEY: str(meta.get("name"))},
            "publishNotReadyAddresses": True if publish is None else bool(publish),
        },
    }

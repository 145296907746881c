"""Volcano Jobs as the tests submit them, and reads of what the controllers made.

Everything goes through the official ``kubernetes`` client (``CustomObjectsApi`` for vcjobs and
PodGroups), the way the provider will. Pods run on the script runtime: their template carries
``sim.airflow-gang.io/duration`` and ``exit-code`` (the kubelet reads them from the pod).
"""

from __future__ import annotations

import threading
from typing import Any

from kubernetes import client as k8s
from kubernetes import watch

JsonDict = dict[str, Any]

BATCH = ("batch.volcano.sh", "v1alpha1")
SCHEDULING = ("scheduling.volcano.sh", "v1beta1")
GPU = "nvidia.com/gpu"
DURATION = "sim.airflow-gang.io/duration"
EXIT_CODE = "sim.airflow-gang.io/exit-code"


def task(
    name: str | None,
    replicas: int,
    *,
    gpus: int = 1,
    duration: float = 0.5,
    exit_code: int | None = None,
    **extra: Any,
) -> JsonDict:
    annotations = {DURATION: str(duration)}
    if exit_code is not None:
        annotations[EXIT_CODE] = str(exit_code)
    container: JsonDict = {
        "name": "pytorch",
        "image": "ghcr.io/acme/train:1",
        "command": ["python", "train.py"],
        "resources": {"requests": {"cpu": "1", GPU: str(gpus)}, "limits": {GPU: str(gpus)}},
    }
    spec: JsonDict = {
        "replicas": replicas,
        "template": {
            "metadata": {"annotations": annotations},
            "spec": {"restartPolicy": "Never", "containers": [container]},
        },
        **extra,
    }
    if name is not None:
        spec["name"] = name
    return spec


def vcjob(name: str, tasks: list[JsonDict], **spec: Any) -> JsonDict:
    return {
        "apiVersion": "/".join(BATCH),
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {"tasks": tasks, **spec},
    }


def pytorch_job(name: str, *, workers: int = 1, duration: float = 0.5, **spec: Any) -> JsonDict:
    """A master and ``workers`` workers, with the pytorch and env plugins (svc added by admission)."""
    tasks = [task("master", 1, duration=duration), task("worker", workers, duration=duration)]
    return vcjob(name, tasks, plugins={"pytorch": ["--master=master", "--worker=worker"], "env": []}, **spec)


def create(custom: k8s.CustomObjectsApi, namespace: str, body: JsonDict) -> JsonDict:
    created: JsonDict = custom.create_namespaced_custom_object(*BATCH, namespace, "jobs", body)
    return created


def get(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict:
    job: JsonDict = custom.get_namespaced_custom_object(*BATCH, namespace, "jobs", name)
    return job


def phase(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> str:
    return str(((get(custom, namespace, name).get("status") or {}).get("state") or {}).get("phase") or "")


def podgroups(custom: k8s.CustomObjectsApi, namespace: str) -> list[JsonDict]:
    items: list[JsonDict] = custom.list_namespaced_custom_object(*SCHEDULING, namespace, "podgroups")["items"]
    return items


def pods(core: k8s.CoreV1Api, namespace: str, job: str) -> list[k8s.V1Pod]:
    listed = core.list_namespaced_pod(namespace, label_selector=f"volcano.sh/job-name={job}").items
    return sorted(listed, key=lambda pod: pod.metadata.name)


def env_of(container: k8s.V1Container) -> dict[str, str]:
    values = {}
    for item in container.env or []:
        if item.value_from is not None and item.value_from.config_map_key_ref is not None:
            ref = item.value_from.config_map_key_ref
            values[item.name] = f"configMapKeyRef:{ref.name}/{ref.key}"
        else:
            values[item.name] = item.value
    return values


class PhaseRecorder:
    """Every phase and status a job goes through, from a watch started before it is created."""

    def __init__(self, api_client: k8s.ApiClient, namespace: str, name: str) -> None:
        self.custom = k8s.CustomObjectsApi(api_client)
        self.namespace, self.name = namespace, name
        self.statuses: list[JsonDict] = []
        self._watch = watch.Watch()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()
        self._ready.wait(5)

    def _run(self) -> None:
        try:
            self._follow()
        except Exception:  # the stream closed under it (stop, or the cluster going): done
            self._ready.set()

    def _follow(self) -> None:
        listed = self.custom.list_namespaced_custom_object(*BATCH, self.namespace, "jobs")
        version = listed["metadata"]["resourceVersion"]
        self._ready.set()
        for event in self._watch.stream(
            self.custom.list_namespaced_custom_object,
            *BATCH,
            self.namespace,
            "jobs",
            resource_version=version,
            field_selector=f"metadata.name={self.name}",
            timeout_seconds=60,
        ):
            self.statuses.append(event["object"].get("status") or {})

    @property
    def phases(self) -> list[str]:
        seen: list[str] = []
        for status in self.statuses:
            current = (status.get("state") or {}).get("phase")
            if current and (not seen or seen[-1] != current):
                seen.append(current)
        return seen

    def stop(self) -> None:
        self._watch.stop()

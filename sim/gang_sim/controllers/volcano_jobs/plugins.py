"""The job plugins ``env``, ``svc`` and ``pytorch``: what they add to pods, and the svc objects.

As ``pkg/controllers/job/plugins`` at v1.16.0-alpha.1 (commit a4b775ad):

- ``env/env.go`` lines 45-59: every container and init container gets ``VK_TASK_INDEX`` and
  ``VC_TASK_INDEX``, the pod's index within its task (the last ``-`` part of its name).
- ``svc/svc.go``: on pod create (76-131) ``hostname`` = the pod's name and ``subdomain`` = the
  job's name when unset, ``VC_<TASK>_HOSTS``/``VC_<TASK>_NUM`` for every task from the hosts
  ConfigMap (``configMapKeyRef``; ``--inject-hosts-env`` defaults on), and that ConfigMap
  mounted at ``/etc/volcano``. On job add (133-157) the ConfigMap ``<job>-svc`` with the hosts
  (309-345 ``GenerateHosts``: ``<task>.host`` one per line, ``VC_<TASK>_HOSTS`` comma-separated,
  ``VC_<TASK>_NUM``) and the headless Service ``<job>`` selecting ``volcano.sh/job-name`` and
  ``volcano.sh/job-namespace`` (219-254), both owned by the job; on job update (187-192) the
  ConfigMap is rewritten; on job delete (159-185), i.e. on every kill, both are deleted.
  The NetworkPolicy it also makes is not (the simulator serves no NetworkPolicies).
- ``distributed-framework/pytorch/pytorch.go`` lines 74-146: arguments ``--master`` (default
  ``master``), ``--worker`` (``worker``), ``--port`` (23456); every container gets the port
  ``pytorchjob-port`` unless it has that port already, ``MASTER_ADDR`` (``<job>-<master>-0.<job>``),
  ``MASTER_PORT``, ``WORLD_SIZE`` (the master and worker replicas) and ``RANK`` (0 on the
  master, index + 1 on a worker; none on another task). No master task: nothing at all. The
  ``--wait-master-enabled`` init container is not modelled.

Upstream visits a job's plugins in Go map order (``job_controller_plugins.go`` lines 30-45), so
the order of the variables varies between pods; here it is the order of ``spec.plugins``.
"""

from __future__ import annotations

from typing import Any

from gang_sim.controllers.kinds import VCJOBS
from gang_sim.controllers.ownership import owner_reference
from gang_sim.controllers.volcano_jobs.build import (
    JOB_NAME_KEY,
    JOB_NAMESPACE_KEY,
    TASK_SPEC_KEY,
    pod_name,
    tasks,
)

JsonDict = dict[str, Any]

SVC, ENV, PYTORCH = "svc", "env", "pytorch"
CONFIGMAP_MOUNT_PATH = "/etc/volcano"
PYTORCH_DEFAULT_PORT = 23456
PYTORCH_PORT_NAME = "pytorchjob-port"


def plugins_of(job: JsonDict) -> dict[str, list[str]]:
    raw = (job.get("spec") or {}).get("plugins") or {}
    return {str(name): [str(a) for a in args or []] for name, args in raw.items()}


def _flag(arguments: list[str], name: str, default: str) -> str:
    """Go's ``flag`` parsing of ``--name=value`` / ``--name value`` (the last one wins)."""
    value = default
    for position, argument in enumerate(arguments):
        stripped = argument.lstrip("-")
        if stripped.startswith(f"{name}="):
            value = stripped.partition("=")[2]
        elif stripped == name and position + 1 < len(arguments):
            value = arguments[position + 1]
    return value


def configmap_name(job: JsonDict) -> str:
    return f"{(job.get('metadata') or {}).get('name')}-{SVC}"


def _env_key(task_name: str) -> str:
    return task_name.replace("-", "_")


def generate_hosts(job: JsonDict) -> dict[str, str]:
    """``GenerateHosts`` (svc.go lines 309-345)."""
    job_name = str((job.get("metadata") or {}).get("name") or "")
    hosts_file: dict[str, str] = {}
    for task in tasks(job):
        pod_spec = (task.get("template") or {}).get("spec") or {}
        hosts: list[str] = []
        for index in range(int(task.get("replicas") or 0)):
            host = pod_spec.get("hostname") or pod_name(job_name, str(task.get("name")), index)
            hosts.append(f"{host}.{pod_spec.get('subdomain') or job_name}")
            if pod_spec.get("hostname"):
                break
        key = _env_key(str(task.get("name")))
        hosts_file[f"{key}.host"] = "\n".join(hosts)
        hosts_file[f"VC_{key.upper()}_HOSTS"] = ",".join(hosts)
        hosts_file[f"VC_{key.upper()}_NUM"] = str(len(hosts))
    return hosts_file


def build_configmap(job: JsonDict) -> JsonDict:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": configmap_name(job),
            "namespace": (job.get("metadata") or {}).get("namespace"),
            "ownerReferences": [owner_reference(job, VCJOBS)],
        },
        "data": generate_hosts(job),
    }


def build_service(job: JsonDict) -> JsonDict:
    metadata = job.get("metadata") or {}
    arguments = plugins_of(job).get(SVC, [])
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": metadata.get("name"),
            "namespace": metadata.get("namespace"),
            "ownerReferences": [owner_reference(job, VCJOBS)],
        },
        "spec": {
            "clusterIP": "None",
            "selector": {JOB_NAME_KEY: metadata.get("name"), JOB_NAMESPACE_KEY: metadata.get("namespace")},
            "publishNotReadyAddresses": _flag(arguments, "publish-not-ready-addresses", "false") == "true",
        },
    }


def _containers(pod: JsonDict, *, init: bool = True) -> list[JsonDict]:
    spec = pod.get("spec") or {}
    groups = ("containers", "initContainers") if init else ("containers",)
    return [c for group in groups for c in spec.get(group) or [] if isinstance(c, dict)]


def _add_env(container: JsonDict, *env: JsonDict) -> None:
    container["env"] = [*(container.get("env") or []), *env]


def _env_plugin(pod: JsonDict) -> None:
    index = str((pod.get("metadata") or {}).get("name") or "").rpartition("-")[2]
    for container in _containers(pod):
        _add_env(
            container, {"name": "VK_TASK_INDEX", "value": index}, {"name": "VC_TASK_INDEX", "value": index}
        )


def _svc_plugin(pod: JsonDict, job: JsonDict, arguments: list[str]) -> None:
    spec = pod.setdefault("spec", {})
    job_name = str((job.get("metadata") or {}).get("name") or "")
    if not spec.get("hostname"):
        spec["hostname"] = (pod.get("metadata") or {}).get("name")
    if not spec.get("subdomain"):
        spec["subdomain"] = job_name
    cm_name = configmap_name(job)
    if _flag(arguments, "inject-hosts-env", "true") != "false":
        names = []
        for task in tasks(job):
            key = _env_key(str(task.get("name"))).upper()
            names += [f"VC_{key}_HOSTS", f"VC_{key}_NUM"]
        host_env = [
            {"name": name, "valueFrom": {"configMapKeyRef": {"name": cm_name, "key": name}}} for name in names
        ]
        for container in _containers(pod):
            _add_env(container, *host_env)
    spec["volumes"] = [*(spec.get("volumes") or []), {"name": cm_name, "configMap": {"name": cm_name}}]
    for container in _containers(pod):
        mount = {"mountPath": CONFIGMAP_MOUNT_PATH, "name": cm_name}
        container["volumeMounts"] = [*(container.get("volumeMounts") or []), mount]


def _pytorch_plugin(pod: JsonDict, job: JsonDict, arguments: list[str]) -> None:
    master = _flag(arguments, "master", "master")
    worker = _flag(arguments, "worker", "worker")
    port = int(_flag(arguments, "port", str(PYTORCH_DEFAULT_PORT)))
    job_name = str((job.get("metadata") or {}).get("name") or "")
    master_task = next((t for t in tasks(job) if t.get("name") == master), None)
    if master_task is None:
        return
    master_spec = (master_task.get("template") or {}).get("spec") or {}
    host = master_spec.get("hostname") or pod_name(job_name, master, 0)
    address = f"{host}.{master_spec.get('subdomain') or job_name}"
    metadata = pod.get("metadata") or {}
    task_type = (metadata.get("annotations") or {}).get(TASK_SPEC_KEY) or "default"
    world = sum(int(t.get("replicas") or 0) for t in tasks(job) if t.get("name") in (master, worker))
    rank: str | None = None
    if task_type == worker:
        rank = str(int(str(metadata.get("name")).rpartition("-")[2]) + 1)
    elif task_type == master:
        rank = "0"
    for container in _containers(pod, init=False):
        ports = container.get("ports") or []
        if not any(p.get("containerPort") == port for p in ports):
            container["ports"] = [*ports, {"name": PYTORCH_PORT_NAME, "containerPort": port}]
        _add_env(
            container,
            {"name": "MASTER_ADDR", "value": address},
            {"name": "MASTER_PORT", "value": str(port)},
            {"name": "WORLD_SIZE", "value": str(world)},
        )
        if rank is not None:
            _add_env(container, {"name": "RANK", "value": rank})


def on_pod_create(pod: JsonDict, job: JsonDict) -> None:
    """``pluginOnPodCreate``: each plugin of the job edits the new pod, in place."""
    for name, arguments in plugins_of(job).items():
        if name == ENV:
            _env_plugin(pod)
        elif name == SVC:
            _svc_plugin(pod, job, arguments)
        elif name == PYTORCH:
            _pytorch_plugin(pod, job, arguments)

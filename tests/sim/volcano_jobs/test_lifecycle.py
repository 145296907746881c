"""A Volcano Job on the embedded cluster, end to end through the official client over HTTP.

vcjob -> PodGroup -> pods on the simulated kubelets, gang-scheduled by the simulated Volcano.
What is asserted follows volcano-sh/volcano v1.16.0-alpha.1 (commit a4b775ad):

- the PodGroup: ``job_controller_actions.go`` lines 64-66 (name), 796-867 (spec, ownerReference),
  932-968 (``minResources``);
- no pods before the PodGroup leaves Pending: ``syncJob`` lines 404-443;
- pods: ``job_controller_util.go`` lines 46-180 (``createJobPod``), the plugins
  ``env/env.go`` 45-59, ``svc/svc.go`` 76-157 and 219-254, ``pytorch/pytorch.go`` 91-146;
- phases: ``state/pending.go`` 29-67, ``running.go`` 33-114, ``restarting.go`` 31-63,
  ``completing.go`` 30-40, ``aborting.go`` 29-47, ``finished.go`` 27-30; counters and conditions
  ``job_controller_actions.go`` 588-629 and 1067-1084; a kill counts only what it could not
  delete (``killPods`` 91-288);
- policies: ``applyPolicies`` (``job_controller_util.go`` 182-284), events from
  ``job_controller_handler.go`` 211-402;
- TTL: ``garbagecollector/garbagecollector.go`` 189-309.
"""

from __future__ import annotations

import time
from typing import Any

from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.volcano_jobs.manifests import (
    BATCH,
    GPU,
    PhaseRecorder,
    create,
    env_of,
    get,
    phase,
    podgroups,
    pods,
    pytorch_job,
    task,
    vcjob,
)
from tests.waiting import eventually

GROUP_NAME = "scheduling.k8s.io/group-name"


def owner_of(obj: Any) -> dict[str, Any]:
    refs = obj["metadata"]["ownerReferences"] if isinstance(obj, dict) else obj.metadata.owner_references
    ref = refs[0]
    if not isinstance(ref, dict):
        ref = {
            "apiVersion": ref.api_version,
            "kind": ref.kind,
            "name": ref.name,
            "uid": ref.uid,
            "controller": ref.controller,
            "blockOwnerDeletion": ref.block_owner_deletion,
        }
    return dict(ref)


def job_owner(name: str, uid: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch.volcano.sh/v1alpha1",
        "kind": "Job",
        "name": name,
        "uid": uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }


def assert_pod(pod: k8s.V1Pod, task_name: str, namespace: str, uid: str) -> None:
    """A pod of the ``pt`` job as createJobPod and the env, svc and pytorch plugins made it."""
    index = "0"
    annotations, labels = pod.metadata.annotations, pod.metadata.labels
    assert annotations["volcano.sh/job-name"] == "pt"
    assert annotations["volcano.sh/task-spec"] == task_name
    assert annotations["volcano.sh/task-index"] == index
    assert annotations["volcano.sh/job-version"] == "0"
    assert annotations["volcano.sh/queue-name"] == "default"
    assert annotations["volcano.sh/template-uid"] == f"pt-{task_name}"
    assert annotations["volcano.sh/job-retry-count"] == "0"
    assert labels["volcano.sh/job-name"] == "pt"
    assert labels["volcano.sh/task-spec"] == task_name
    assert labels["volcano.sh/job-namespace"] == namespace
    assert labels["volcano.sh/task-index"] == index
    assert labels["volcano.sh/queue-name"] == "default"
    assert pod.spec.scheduler_name == "volcano"
    assert owner_of(pod) == job_owner("pt", uid)
    assert (pod.spec.hostname, pod.spec.subdomain) == (pod.metadata.name, "pt")
    container = pod.spec.containers[0]
    env = env_of(container)
    assert env["VK_TASK_INDEX"] == env["VC_TASK_INDEX"] == index
    assert env["MASTER_ADDR"] == "pt-master-0.pt"
    assert env["MASTER_PORT"] == "23456"
    assert env["WORLD_SIZE"] == "2"
    assert env["VC_MASTER_HOSTS"] == "configMapKeyRef:pt-svc/VC_MASTER_HOSTS"
    assert env["VC_WORKER_NUM"] == "configMapKeyRef:pt-svc/VC_WORKER_NUM"
    assert [(p.name, p.container_port) for p in container.ports] == [("pytorchjob-port", 23456)]
    assert [m.mount_path for m in container.volume_mounts] == ["/etc/volcano"]


def test_a_pytorch_vcjob_runs_to_completed_with_its_podgroup_pods_and_svc_objects(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    recorder = PhaseRecorder(api_client, namespace, "pt")
    created = create(custom, namespace, pytorch_job("pt", workers=1, duration=1.5))
    uid = created["metadata"]["uid"]

    group = eventually(lambda: podgroups(custom, namespace), timeout=10)[0]
    assert group["metadata"]["name"] == f"pt-{uid}"
    assert owner_of(group) == job_owner("pt", uid)
    assert group["spec"]["minMember"] == 2
    assert group["spec"]["minTaskMember"] == {"master": 1, "worker": 1}
    assert group["spec"]["queue"] == "default"
    assert group["spec"]["minResources"] == {"cpu": "2", GPU: "2"}

    listed = eventually(
        lambda: len(pods(core, namespace, "pt")) == 2 and pods(core, namespace, "pt"), timeout=10
    )
    master, worker = listed
    assert [p.metadata.name for p in listed] == ["pt-master-0", "pt-worker-0"]
    assert master.metadata.annotations[GROUP_NAME] == f"pt-{uid}"
    for pod, task_name in ((master, "master"), (worker, "worker")):
        assert_pod(pod, task_name, namespace, uid)
    assert env_of(master.spec.containers[0])["RANK"] == "0"
    assert env_of(worker.spec.containers[0])["RANK"] == "1"

    service = core.read_namespaced_service("pt", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {"volcano.sh/job-name": "pt", "volcano.sh/job-namespace": namespace}
    assert owner_of(service) == job_owner("pt", uid)
    hosts = core.read_namespaced_config_map("pt-svc", namespace)
    assert hosts.data == {
        "master.host": "pt-master-0.pt",
        "VC_MASTER_HOSTS": "pt-master-0.pt",
        "VC_MASTER_NUM": "1",
        "worker.host": "pt-worker-0.pt",
        "VC_WORKER_HOSTS": "pt-worker-0.pt",
        "VC_WORKER_NUM": "1",
    }

    eventually(lambda: phase(custom, namespace, "pt") == "Completed", timeout=20)
    recorder.stop()
    assert recorder.phases == ["Pending", "Running", "Completed"]
    running = next(s for s in recorder.statuses if s.get("state", {}).get("phase") == "Running")
    assert running.get("minAvailable") == 2
    completed = next(s for s in recorder.statuses if s.get("state", {}).get("phase") == "Completed")
    assert completed.get("succeeded") == 2
    assert completed["taskStatusCount"] == {
        "master": {"phase": {"Succeeded": 1}},
        "worker": {"phase": {"Succeeded": 1}},
    }
    assert [c["status"] for c in completed["conditions"]] == ["Pending", "Running", "Completed"]

    # finished.go: the finished job is killed softly (its Succeeded pods kept, not counted), the
    # version bumped, the PodGroup and the svc objects deleted.
    def killed() -> dict[str, Any] | None:
        status: dict[str, Any] = get(custom, namespace, "pt").get("status") or {}
        return status if status.get("version", 0) >= 1 else None

    final = eventually(killed, timeout=10)
    assert "succeeded" not in final
    assert final["state"]["phase"] == "Completed"
    eventually(lambda: not podgroups(custom, namespace), timeout=10)
    assert [p.status.phase for p in pods(core, namespace, "pt")] == ["Succeeded", "Succeeded"]


def test_a_failing_master_with_restart_policy_fails_after_max_retry(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    recorder = PhaseRecorder(api_client, namespace, "retry")
    body = vcjob(
        "retry",
        [task("master", 1, duration=0.3, exit_code=3), task("worker", 1, duration=5)],
        maxRetry=2,
        policies=[{"event": "PodFailed", "action": "RestartJob"}],
    )
    create(custom, namespace, body)
    eventually(lambda: phase(custom, namespace, "retry") == "Failed", timeout=30)
    recorder.stop()
    status = get(custom, namespace, "retry")["status"]
    assert status["retryCount"] == 2
    assert recorder.phases == [
        "Pending",
        "Running",
        "Restarting",
        "Pending",
        "Running",
        "Restarting",
        "Failed",
    ]
    # The last retry keeps the Failed master (killPods lines 159-170); the worker went.
    eventually(
        lambda: [p.metadata.name for p in pods(core, namespace, "retry")] == ["retry-master-0"], timeout=15
    )


def test_a_failed_pod_without_policy_fails_the_job_once_every_pod_finished(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = vcjob("nopolicy", [task("master", 1, duration=0.3, exit_code=1), task("worker", 1, duration=0.8)])
    create(custom, namespace, body)
    eventually(lambda: phase(custom, namespace, "nopolicy") == "Failed", timeout=20)
    assert (get(custom, namespace, "nopolicy")["status"].get("retryCount") or 0) == 0


def test_task_completed_completes_the_job(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    # The master's task completes while the workers still run: CompleteJob kills them.
    master = task("master", 1, duration=0.5, policies=[{"event": "TaskCompleted", "action": "CompleteJob"}])
    create(custom, namespace, vcjob("tc", [master, task("worker", 1, duration=30)]))
    eventually(lambda: phase(custom, namespace, "tc") == "Completed", timeout=20)
    eventually(lambda: [p.metadata.name for p in pods(core, namespace, "tc")] == ["tc-master-0"], timeout=15)


def test_an_evicted_pod_restarts_the_job(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = vcjob(
        "ev", [task("w", 2, duration=30)], policies=[{"event": "PodEvicted", "action": "RestartJob"}]
    )
    create(custom, namespace, body)
    eventually(lambda: phase(custom, namespace, "ev") == "Running", timeout=15)
    first = {p.metadata.name: p.metadata.uid for p in pods(core, namespace, "ev")}
    eviction = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="ev-w-0", namespace=namespace))
    core.create_namespaced_pod_eviction("ev-w-0", namespace, eviction)
    eventually(lambda: (get(custom, namespace, "ev")["status"].get("retryCount") or 0) == 1, timeout=15)

    def recreated() -> bool:
        now = {p.metadata.name: p for p in pods(core, namespace, "ev")}
        return sorted(now) == ["ev-w-0", "ev-w-1"] and all(
            p.metadata.uid != first[name] and p.metadata.annotations["volcano.sh/job-version"] == "1"
            for name, p in now.items()
        )

    eventually(recreated, timeout=20)
    eventually(lambda: phase(custom, namespace, "ev") == "Running", timeout=15)


def test_abort_job_aborts(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = vcjob(
        "ab",
        [task("m", 1, duration=0.3, exit_code=7), task("w", 1, duration=30)],
        policies=[{"exitCode": 7, "action": "AbortJob"}],
    )
    create(custom, namespace, body)
    eventually(lambda: phase(custom, namespace, "ab") == "Aborted", timeout=20)
    eventually(lambda: [p.metadata.name for p in pods(core, namespace, "ab")] == ["ab-m-0"], timeout=15)


def test_ttl_seconds_after_finished_deletes_the_job(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    create(custom, namespace, vcjob("ttl", [task("a", 1, duration=0.3)], ttlSecondsAfterFinished=1))
    eventually(lambda: phase(custom, namespace, "ttl") == "Completed", timeout=20)

    def gone() -> bool:
        return not custom.list_namespaced_custom_object(*BATCH, namespace, "jobs")["items"]

    eventually(gone, timeout=15)


def leftovers(core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str) -> dict[str, list[str]]:
    return {
        "pods": [p.metadata.name for p in core.list_namespaced_pod(namespace).items],
        "podgroups": [g["metadata"]["name"] for g in podgroups(custom, namespace)],
        "services": [s.metadata.name for s in core.list_namespaced_service(namespace).items],
        "configmaps": [
            c.metadata.name
            for c in core.list_namespaced_config_map(namespace).items
            if c.metadata.name.endswith("-svc")
        ],
        "jobs": [
            j["metadata"]["name"]
            for j in custom.list_namespaced_custom_object(*BATCH, namespace, "jobs")["items"]
        ],
    }


def _delete_running_job(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str, propagation: str
) -> None:
    create(custom, namespace, pytorch_job("del", workers=1, duration=30))
    eventually(lambda: phase(custom, namespace, "del") == "Running", timeout=15)
    options = k8s.V1DeleteOptions(propagation_policy=propagation)
    custom.delete_namespaced_custom_object(*BATCH, namespace, "jobs", "del", body=options)
    empty = {"pods": [], "podgroups": [], "services": [], "configmaps": [], "jobs": []}
    eventually(lambda: leftovers(core, custom, namespace) == empty, timeout=30)
    # Nothing comes back: the controller never recreates anything for a deleted job (a few of
    # its reconcile periods later, still nothing).
    time.sleep(1.0)
    assert leftovers(core, custom, namespace) == empty


def test_foreground_deletion_leaves_nothing(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    _delete_running_job(core, custom, namespace, "Foreground")


def test_background_deletion_leaves_nothing(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    _delete_running_job(core, custom, namespace, "Background")


def test_two_jobs_on_a_pool_too_small_for_both_one_waits_without_pods(
    cluster: SimCluster, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    # 4 GPUs in all (x1.2 overcommit: 4.8): 3 + 3 do not fit; the second PodGroup stays Pending.
    create(custom, namespace, vcjob("first", [task("w", 3, duration=2)]))
    eventually(lambda: phase(custom, namespace, "first") == "Running", timeout=15)
    create(custom, namespace, vcjob("second", [task("w", 3, duration=0.5)]))
    eventually(lambda: len(podgroups(custom, namespace)) == 2, timeout=10)
    groups = {g["metadata"]["name"].rsplit("-", 5)[0]: g for g in podgroups(custom, namespace)}
    assert groups["second"].get("status", {}).get("phase", "Pending") == "Pending"
    assert phase(custom, namespace, "second") == "Pending"
    assert pods(core, namespace, "second") == []
    # Once the first finishes (and its PodGroup goes), the second runs.
    eventually(lambda: phase(custom, namespace, "second") == "Completed", timeout=30)

"""The simulated training-operator against a real API server, through the official client.

No scheduler or kubelet runs here: each test plays them itself by writing pod phases and
container statuses through ``pods/status`` (pods stay unbound, so deleting them is immediate).
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes.client.rest import ApiException

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.controllers.manager import ControllerManager
from gang_sim.controllers.training_operator.pytorchjob_controller import TrainingOperator
from tests.waiting import eventually

JsonDict = dict[str, Any]
GROUP, VERSION, PLURAL = "kubeflow.org", "v1", "pytorchjobs"
VC_GROUP, VC_VERSION = "scheduling.volcano.sh", "v1beta1"
JOB_LABEL = "training.kubeflow.org/job-name"
StartOperator = Callable[..., TrainingOperator]


@pytest.fixture
def start_operator(apiserver: ApiServerHandle) -> Iterator[StartOperator]:
    """Start a training-operator on demand (so a test can create jobs before it runs)."""
    managers: list[ControllerManager] = []

    def start(**options: Any) -> TrainingOperator:
        options.setdefault("period", 0.2)
        manager = ControllerManager(
            apiserver.kubeconfig_path, [lambda client, cache: TrainingOperator(client, cache, **options)]
        )
        managers.append(manager.start())
        controller = manager.controllers[0]
        assert isinstance(controller, TrainingOperator)
        return controller

    yield start
    for manager in managers:
        manager.stop()


def replica(replicas: int, policy: str, gpus: int = 0, **template_meta: Any) -> JsonDict:
    resources = {"requests": {"cpu": "1", "nvidia.com/gpu": str(gpus)}} if gpus else {}
    return {
        "replicas": replicas,
        "restartPolicy": policy,
        "template": {
            "metadata": template_meta,
            "spec": {"containers": [{"name": "pytorch", "image": "pytorch:2", "resources": resources}]},
        },
    }


def pytorchjob(
    name: str, workers: int = 1, policy: str = "OnFailure", run_policy: JsonDict | None = None, **extra: Any
) -> JsonDict:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": replica(1, policy, **extra),
                "Worker": replica(workers, policy, **extra),
            },
            "runPolicy": run_policy or {},
        },
    }


def create(custom: k8s.CustomObjectsApi, namespace: str, body: JsonDict) -> JsonDict:
    result: JsonDict = custom.create_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, body)
    return result


def get_job(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict:
    result: JsonDict = custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, name)
    return result


def conditions(job: JsonDict) -> list[tuple[str, str, str, str]]:
    return [
        (c["type"], c["status"], c["reason"], c["message"])
        for c in (job.get("status") or {}).get("conditions", [])
    ]


def condition(job: JsonDict, ctype: str) -> tuple[str, str, str] | None:
    for kind, status, reason, message in conditions(job):
        if kind == ctype:
            return status, reason, message
    return None


def required_condition(job: JsonDict, ctype: str) -> tuple[str, str, str]:
    found = condition(job, ctype)
    assert found is not None, f"no {ctype} condition in {conditions(job)}"
    return found


def job_pods(core: k8s.CoreV1Api, namespace: str, job: str) -> dict[str, k8s.V1Pod]:
    listed = core.list_namespaced_pod(namespace, label_selector=f"{JOB_LABEL}={job}").items
    return {pod.metadata.name: pod for pod in listed}


def set_pod(
    core: k8s.CoreV1Api,
    namespace: str,
    pod: str,
    phase: str,
    *,
    exit_code: int | None = None,
    restarts: int = 0,
) -> None:
    """Play the kubelet: phase plus a container status for ``pytorch``."""
    now = "2026-01-01T00:00:00Z"
    if exit_code is None:
        state: JsonDict = {"running": {"startedAt": now}}
    else:
        reason = "Completed" if exit_code == 0 else "Error"
        state = {"terminated": {"exitCode": exit_code, "reason": reason, "startedAt": now, "finishedAt": now}}
    container = {
        "name": "pytorch",
        "image": "pytorch:2",
        "imageID": "",
        "ready": exit_code is None,
        "restartCount": restarts,
        "state": state,
    }
    core.patch_namespaced_pod_status(
        pod, namespace, {"status": {"phase": phase, "containerStatuses": [container]}}
    )


def env_of(pod: k8s.V1Pod, container: str = "pytorch") -> dict[str, str]:
    spec = next(c for c in pod.spec.containers if c.name == container)
    return {e.name: e.value for e in spec.env or []}


def ensure_queue(custom: k8s.CustomObjectsApi, name: str) -> None:
    body = {"apiVersion": f"{VC_GROUP}/{VC_VERSION}", "kind": "Queue", "metadata": {"name": name}, "spec": {}}
    try:
        custom.create_cluster_custom_object(VC_GROUP, VC_VERSION, "queues", body)
    except ApiException as error:
        if error.status != 409:
            raise


def get_podgroup(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict | None:
    try:
        result: JsonDict = custom.get_namespaced_custom_object(
            VC_GROUP, VC_VERSION, namespace, "podgroups", name
        )
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return result


def wait_for_pods(core: k8s.CoreV1Api, namespace: str, job: str, count: int) -> dict[str, k8s.V1Pod]:
    eventually(
        lambda: len(job_pods(core, namespace, job)) == count, message=f"waiting for {count} pods of {job}"
    )
    return job_pods(core, namespace, job)


def wait_for_replacement(core: k8s.CoreV1Api, namespace: str, job: str, pod: str, old_uid: str) -> k8s.V1Pod:
    """The pod named ``pod`` once it is a new object (deleted and created again)."""

    def probe() -> k8s.V1Pod | None:
        current = job_pods(core, namespace, job).get(pod)
        return current if current is not None and current.metadata.uid != old_uid else None

    return eventually(probe, message=f"waiting for {pod} to be recreated")


def wait_for_job(
    custom: k8s.CustomObjectsApi,
    namespace: str,
    name: str,
    test: Callable[[JsonDict], Any],
    timeout: float = 10,
) -> JsonDict:
    def probe() -> JsonDict | None:
        job = get_job(custom, namespace, name)
        return job if test(job) else None

    found = eventually(probe, timeout, message=f"waiting on job {name}")
    assert found is not None
    return found


def wait_for_condition(
    custom: k8s.CustomObjectsApi,
    namespace: str,
    name: str,
    ctype: str,
    *,
    status: str = "True",
    timeout: float = 10,
) -> JsonDict:
    def holds(job: JsonDict) -> bool:
        found = condition(job, ctype)
        return found is not None and found[0] == status

    return wait_for_job(custom, namespace, name, holds, timeout)


def wait_for_podgroup(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict:
    found = eventually(lambda: get_podgroup(custom, namespace, name), message=f"waiting for podgroup {name}")
    assert found is not None
    return found


def rounds_pass(operator: TrainingOperator, count: int = 3) -> None:
    """Wait until the operator has reconciled ``count`` more times: proof that it chose to do nothing."""
    target = operator.reconciles + count
    eventually(lambda: operator.reconciles >= target, timeout=10)


# --- pods and services ----------------------------------------------------------------------------


def test_pods_and_services_carry_the_operator_names_labels_env_and_owner(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = pytorchjob("mnist", workers=2, labels={"team": "vision"})
    body["spec"]["nprocPerNode"] = "2"
    body["spec"]["pytorchReplicaSpecs"]["Worker"]["template"]["spec"]["containers"].append(
        {"name": "sidecar", "image": "busybox", "env": [{"name": "KEEP", "value": "me"}]}
    )
    job = create(custom, namespace, body)
    start_operator()

    pods = wait_for_pods(core, namespace, "mnist", 3)
    assert set(pods) == {"mnist-master-0", "mnist-worker-0", "mnist-worker-1"}
    master, worker = pods["mnist-master-0"], pods["mnist-worker-1"]
    assert master.metadata.labels == {
        "team": "vision",
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "master",
        "training.kubeflow.org/replica-index": "0",
        "training.kubeflow.org/job-role": "master",
    }
    assert "training.kubeflow.org/job-role" not in worker.metadata.labels
    assert worker.metadata.labels["training.kubeflow.org/replica-index"] == "1"
    owner = worker.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller, owner.block_owner_deletion) == (
        "PyTorchJob",
        "mnist",
        job["metadata"]["uid"],
        True,
        True,
    )
    assert master.spec.restart_policy == "OnFailure"
    assert master.spec.scheduler_name in (None, "default-scheduler")
    assert env_of(worker) == {
        "PYTHONUNBUFFERED": "1",
        "MASTER_PORT": "23456",
        "PET_MASTER_PORT": "23456",
        "MASTER_ADDR": "mnist-master-0",
        "PET_MASTER_ADDR": "mnist-master-0",
        "WORLD_SIZE": "6",
        "RANK": "2",
        "PET_NPROC_PER_NODE": "2",
        "PET_NODE_RANK": "2",
        "PET_NNODES": "3",
    }
    assert env_of(master)["RANK"] == "0"
    assert env_of(worker, "sidecar")["KEEP"] == "me"
    assert env_of(worker, "sidecar")["RANK"] == "2"

    eventually(lambda: len(core.list_namespaced_service(namespace).items) == 3)
    services = core.list_namespaced_service(namespace).items
    service = next(s for s in services if s.metadata.name == "mnist-worker-0")
    assert service.spec.cluster_ip == "None"
    assert [(p.name, p.port) for p in service.spec.ports] == [("pytorchjob-port", 23456)]
    assert service.spec.selector == {
        "training.kubeflow.org/operator-name": "pytorchjob-controller",
        "training.kubeflow.org/job-name": "mnist",
        "training.kubeflow.org/replica-type": "worker",
        "training.kubeflow.org/replica-index": "0",
    }
    assert service.metadata.owner_references[0].uid == job["metadata"]["uid"]

    status = wait_for_job(custom, namespace, "mnist", lambda job: job.get("status", {}).get("startTime"))[
        "status"
    ]
    assert conditions({"status": status}) == [
        ("Created", "True", "PyTorchJobCreated", "PyTorchJob mnist is created.")
    ]
    assert status["replicaStatuses"] == {
        "Master": {
            "selector": "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name="
            "pytorchjob-controller,training.kubeflow.org/replica-type=master"
        },
        "Worker": {
            "selector": "training.kubeflow.org/job-name=mnist,training.kubeflow.org/operator-name="
            "pytorchjob-controller,training.kubeflow.org/replica-type=worker"
        },
    }


def test_pods_of_jobs_created_together_are_created_interleaved(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    for name in ("job-a", "job-b", "job-c"):
        create(custom, namespace, pytorchjob(name, workers=2))
    start_operator()

    pods = [
        pod for job in ("job-a", "job-b", "job-c") for pod in wait_for_pods(core, namespace, job, 3).values()
    ]
    assert creation_rounds(pods, 3) == [
        {"job-a-master-0", "job-b-master-0", "job-c-master-0"},
        {"job-a-worker-0", "job-b-worker-0", "job-c-worker-0"},
        {"job-a-worker-1", "job-b-worker-1", "job-c-worker-1"},
    ]


def test_jobs_submitted_one_after_another_to_a_running_operator_are_still_interleaved(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    start_operator()
    for name in ("late-a", "late-b"):
        create(custom, namespace, pytorchjob(name, workers=1))

    pods = [pod for job in ("late-a", "late-b") for pod in wait_for_pods(core, namespace, job, 2).values()]
    assert creation_rounds(pods, 2) == [
        {"late-a-master-0", "late-b-master-0"},
        {"late-a-worker-0", "late-b-worker-0"},
    ]


def creation_rounds(pods: list[Any], jobs: int) -> list[set[str]]:
    """Pod names in creation (resourceVersion) order, cut into rounds of one pod per job: each
    round is created in parallel, so only the order of the rounds is fixed."""
    order = [pod.metadata.name for pod in sorted(pods, key=lambda p: int(p.metadata.resource_version))]
    return [set(order[start : start + jobs]) for start in range(0, len(order), jobs)]


# --- lifecycle and conditions ------------------------------------------------------------------


def test_a_job_goes_created_running_succeeded_with_the_real_conditions(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("lifecycle"))
    start_operator()
    wait_for_pods(core, namespace, "lifecycle", 2)

    set_pod(core, namespace, "lifecycle-master-0", "Running")
    set_pod(core, namespace, "lifecycle-worker-0", "Pending")
    job = wait_for_condition(custom, namespace, "lifecycle", "Running")
    assert condition(job, "Running") == ("True", "PyTorchJobRunning", "PyTorchJob lifecycle is running.")
    assert job["status"]["replicaStatuses"]["Master"]["active"] == 1
    assert "active" not in job["status"]["replicaStatuses"]["Worker"]  # Pending is not active

    set_pod(core, namespace, "lifecycle-worker-0", "Running")
    set_pod(core, namespace, "lifecycle-master-0", "Succeeded", exit_code=0)
    job = wait_for_job(
        custom, namespace, "lifecycle", lambda j: j["status"]["replicaStatuses"]["Worker"].get("succeeded")
    )
    assert conditions(job) == [
        ("Created", "True", "PyTorchJobCreated", "PyTorchJob lifecycle is created."),
        ("Running", "False", "PyTorchJobRunning", "PyTorchJob lifecycle is running."),
        ("Succeeded", "True", "PyTorchJobSucceeded", "PyTorchJob lifecycle is successfully completed."),
    ]
    replicas = job["status"]["replicaStatuses"]
    assert (replicas["Master"].get("succeeded"), replicas["Worker"].get("succeeded")) == (1, 1)
    assert "active" not in replicas["Worker"]
    assert job["status"]["completionTime"] >= job["status"]["startTime"]
    for cond in job["status"]["conditions"]:
        assert cond["lastUpdateTime"]
        assert cond["lastTransitionTime"]


def test_never_policy_and_exit_1_fail_the_job_with_the_real_message(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("never", policy="Never"))
    start_operator()
    wait_for_pods(core, namespace, "never", 2)
    assert job_pods(core, namespace, "never")["never-worker-0"].spec.restart_policy == "Never"

    set_pod(core, namespace, "never-master-0", "Running")
    set_pod(core, namespace, "never-worker-0", "Failed", exit_code=1)
    job = wait_for_condition(custom, namespace, "never", "Failed")
    assert condition(job, "Failed") == (
        "True",
        "PyTorchJobFailed",
        "PyTorchJob never is failed because 1 Worker replica(s) failed.",
    )
    assert condition(job, "Running") == ("False", "PyTorchJobRunning", "PyTorchJob never is running.")
    assert job["status"]["completionTime"]
    assert set(job_pods(core, namespace, "never")) == {
        "never-master-0",
        "never-worker-0",
    }  # cleanPodPolicy None


def test_a_failed_on_failure_pod_is_recreated_and_the_job_then_succeeds(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("retry"))
    start_operator()
    first = wait_for_pods(core, namespace, "retry", 2)["retry-worker-0"]
    # The master stays Pending: with it Running, the next round's Running would replace Restarting.
    set_pod(core, namespace, "retry-worker-0", "Failed", exit_code=1)  # e.g. its node was lost

    job = wait_for_condition(custom, namespace, "retry", "Restarting")
    assert condition(job, "Restarting") == (
        "True",
        "PyTorchJobRestarting",
        "PyTorchJob retry is restarting because 1 Worker replica(s) failed.",
    )
    assert condition(job, "Running") is None  # Running and Restarting exclude each other
    second = wait_for_replacement(core, namespace, "retry", "retry-worker-0", first.metadata.uid)
    assert second.status.phase in (None, "Pending")

    set_pod(core, namespace, "retry-worker-0", "Running")
    set_pod(core, namespace, "retry-master-0", "Running")
    wait_for_condition(custom, namespace, "retry", "Running")
    set_pod(core, namespace, "retry-master-0", "Succeeded", exit_code=0)
    job = wait_for_condition(custom, namespace, "retry", "Succeeded")
    assert [c[0] for c in conditions(job)] == ["Created", "Running", "Succeeded"]


def test_in_place_restarts_reaching_the_backoff_limit_fail_the_job_and_delete_its_pods(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("backoff", run_policy={"backoffLimit": 2}))
    start_operator()
    wait_for_pods(core, namespace, "backoff", 2)
    set_pod(core, namespace, "backoff-master-0", "Running", restarts=1)
    set_pod(core, namespace, "backoff-worker-0", "Running")
    wait_for_condition(custom, namespace, "backoff", "Running")
    assert condition(get_job(custom, namespace, "backoff"), "Failed") is None  # 1 restart < 2

    set_pod(core, namespace, "backoff-master-0", "Running", restarts=2)
    job = wait_for_condition(custom, namespace, "backoff", "Failed")
    assert condition(job, "Failed") == (
        "True",
        "PyTorchJobFailed",
        "Job backoff has failed because it has reached the specified backoff limit",
    )
    wait_for_pods(core, namespace, "backoff", 0)


def test_pods_the_operator_recreated_count_against_the_backoff_limit(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("recreated", run_policy={"backoffLimit": 2}))
    start_operator()
    for attempt in range(2):
        previous = wait_for_pods(core, namespace, "recreated", 2)["recreated-worker-0"]
        assert condition(get_job(custom, namespace, "recreated"), "Failed") is None, attempt
        set_pod(core, namespace, "recreated-worker-0", "Failed", exit_code=1)
        if attempt == 0:
            wait_for_replacement(core, namespace, "recreated", "recreated-worker-0", previous.metadata.uid)
    job = wait_for_condition(custom, namespace, "recreated", "Failed")
    assert (
        required_condition(job, "Failed")[2]
        == "Job recreated has failed because it has reached the specified backoff limit"
    )


@pytest.mark.parametrize(
    "case",
    [(3, "Failed"), (137, "Restarting")],
    ids=["exit-3-is-permanent", "exit-137-is-retried"],
)
def test_exit_code_policy_fails_on_permanent_codes_and_retries_signals(
    start_operator: StartOperator,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    namespace: str,
    case: tuple[int, str],
) -> None:
    code, outcome = case
    create(custom, namespace, pytorchjob("exitcode", policy="ExitCode"))
    operator = start_operator()
    first = wait_for_pods(core, namespace, "exitcode", 2)["exitcode-worker-0"]
    assert first.spec.restart_policy == "Never"  # the operator, not the kubelet, decides
    set_pod(core, namespace, "exitcode-worker-0", "Failed", exit_code=code)

    job = wait_for_condition(custom, namespace, "exitcode", outcome)
    if outcome == "Failed":
        assert condition(job, "Failed") == (
            "True",
            "PyTorchJobFailed",
            "PyTorchJob exitcode is failed because 1 Worker replica(s) failed.",
        )
        rounds_pass(operator)
        assert job_pods(core, namespace, "exitcode")["exitcode-worker-0"].metadata.uid == first.metadata.uid
    else:
        assert required_condition(job, "Restarting")[1] == "PyTorchJobRestarting"
        wait_for_replacement(core, namespace, "exitcode", "exitcode-worker-0", first.metadata.uid)


def test_active_deadline_fails_the_job_and_deletes_its_pods(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    # Long enough for the job to be seen Running first even on a loaded machine.
    create(custom, namespace, pytorchjob("deadline", run_policy={"activeDeadlineSeconds": 3}))
    start_operator()
    wait_for_pods(core, namespace, "deadline", 2)
    set_pod(core, namespace, "deadline-master-0", "Running")
    set_pod(core, namespace, "deadline-worker-0", "Running")
    wait_for_condition(custom, namespace, "deadline", "Running", timeout=3)

    job = wait_for_condition(custom, namespace, "deadline", "Failed", timeout=8)
    assert condition(job, "Failed") == (
        "True",
        "PyTorchJobFailed",
        "Job deadline has failed because it was active longer than specified deadline",
    )
    assert required_condition(job, "Running")[0] == "False"
    wait_for_pods(core, namespace, "deadline", 0)
    assert not core.list_namespaced_service(namespace).items


@pytest.mark.parametrize(
    "case",
    [("All", set()), ("Running", {"clean-master-0"}), ("None", {"clean-master-0", "clean-worker-0"})],
    ids=["all-deletes-everything", "running-deletes-running-pods", "none-keeps-everything"],
)
def test_clean_pod_policy_decides_what_a_finished_job_keeps(
    start_operator: StartOperator,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    namespace: str,
    case: tuple[str, set[str]],
) -> None:
    policy, remaining = case
    create(custom, namespace, pytorchjob("clean", run_policy={"cleanPodPolicy": policy}))
    start_operator()
    eventually(lambda: len(core.list_namespaced_service(namespace).items) == 2)
    set_pod(core, namespace, "clean-worker-0", "Running")
    set_pod(core, namespace, "clean-master-0", "Succeeded", exit_code=0)

    # The finishing round moves the still-active worker to succeeded: cleanup has been decided.
    eventually(
        lambda: (
            get_job(custom, namespace, "clean")["status"]["replicaStatuses"]["Worker"].get("succeeded") == 1
        )
    )
    eventually(lambda: set(job_pods(core, namespace, "clean")) == remaining)
    services = {s.metadata.name for s in core.list_namespaced_service(namespace).items}
    assert services == remaining  # services follow their pods


def test_ttl_after_finished_deletes_the_job(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("ttl", workers=1, run_policy={"ttlSecondsAfterFinished": 1}))
    start_operator()
    wait_for_pods(core, namespace, "ttl", 2)
    set_pod(core, namespace, "ttl-master-0", "Succeeded", exit_code=0)
    wait_for_condition(custom, namespace, "ttl", "Succeeded")

    def job_gone() -> bool:
        try:
            get_job(custom, namespace, "ttl")
        except ApiException as error:
            return bool(error.status == 404)
        return False

    eventually(job_gone, timeout=5)
    wait_for_pods(core, namespace, "ttl", 0)  # garbage-collected with their owner


def test_suspend_deletes_pods_and_resume_restarts_the_clock(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, pytorchjob("pause", run_policy={"suspend": True}))
    operator = start_operator()
    job = wait_for_condition(custom, namespace, "pause", "Suspended")
    assert condition(job, "Suspended") == ("True", "PyTorchJobSuspended", "PyTorchJob pause is suspended.")
    assert "startTime" not in job["status"]
    rounds_pass(operator)
    assert not job_pods(core, namespace, "pause")

    patch = {"spec": {"runPolicy": {"suspend": False}}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pause", patch)
    wait_for_pods(core, namespace, "pause", 2)
    job = wait_for_job(custom, namespace, "pause", lambda j: j["status"].get("startTime"))
    assert condition(job, "Suspended") == ("False", "PyTorchJobResumed", "PyTorchJob pause is resumed.")

    set_pod(core, namespace, "pause-master-0", "Running")
    wait_for_condition(custom, namespace, "pause", "Running")
    patch = {"spec": {"runPolicy": {"suspend": True}}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "pause", patch)
    job = wait_for_condition(custom, namespace, "pause", "Suspended")
    assert condition(job, "Running") == ("False", "PyTorchJobSuspended", "PyTorchJob pause is suspended.")
    wait_for_pods(core, namespace, "pause", 0)


# --- gang scheduling ------------------------------------------------------------------------------


def test_the_gang_flag_creates_the_podgroup_and_holds_pods_until_volcano_admits_it(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    ensure_queue(custom, "default")
    body = pytorchjob("gang", workers=2, gpus=1)
    body["metadata"]["annotations"] = {"team": "vision"}
    job = create(custom, namespace, body)
    operator = start_operator(gang_scheduler_name="volcano")

    group = wait_for_podgroup(custom, namespace, "gang")
    assert group["spec"]["minMember"] == 3
    assert group["spec"]["queue"] == "default"
    assert group["spec"]["minResources"] == {"cpu": "3", "nvidia.com/gpu": "3"}
    assert group["metadata"]["annotations"] == {"team": "vision"}
    owner = group["metadata"]["ownerReferences"][0]
    assert (owner["kind"], owner["uid"], owner["controller"], owner["blockOwnerDeletion"]) == (
        "PyTorchJob",
        job["metadata"]["uid"],
        True,
        True,
    )
    rounds_pass(operator)
    assert not job_pods(core, namespace, "gang")  # no phase yet: not admitted

    group["status"] = {"phase": "Pending"}
    group = custom.replace_namespaced_custom_object(
        VC_GROUP, VC_VERSION, namespace, "podgroups", "gang", group
    )
    rounds_pass(operator)
    assert not job_pods(core, namespace, "gang")
    assert "startTime" not in get_job(custom, namespace, "gang")["status"]

    group["status"] = {"phase": "Inqueue"}
    custom.replace_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", "gang", group)
    pods = wait_for_pods(core, namespace, "gang", 3)
    worker = pods["gang-worker-1"]
    assert worker.spec.scheduler_name == "volcano"
    assert worker.metadata.annotations == {
        "scheduling.k8s.io/group-name": "gang",
        "volcano.sh/task-spec": "worker",
    }
    assert pods["gang-master-0"].metadata.annotations["volcano.sh/task-spec"] == "master"

    set_pod(core, namespace, "gang-master-0", "Succeeded", exit_code=0)
    wait_for_condition(custom, namespace, "gang", "Succeeded")
    eventually(lambda: get_podgroup(custom, namespace, "gang") is None)


def test_a_rejected_podgroup_leaves_the_job_without_pods_until_the_job_is_touched(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """A refused PodGroup create is only logged (ReconcileJobs returns no error): no retry, so the
    queue appearing later changes nothing until some event of the job itself wakes it."""
    queue = f"q-{uuid.uuid4().hex[:8]}"
    create(custom, namespace, pytorchjob("queued", run_policy={"schedulingPolicy": {"queue": queue}}))
    operator = start_operator(gang_scheduler_name="volcano")
    job = wait_for_condition(custom, namespace, "queued", "Created")
    assert "lastReconcileTime" in job["status"]  # a delayed round
    rounds_pass(operator)
    assert get_podgroup(custom, namespace, "queued") is None  # the webhook refused it
    assert not job_pods(core, namespace, "queued")

    ensure_queue(custom, queue)
    time.sleep(1.5)  # any retry of the real work queue's backoff would have come by now
    assert get_podgroup(custom, namespace, "queued") is None

    patch = {"metadata": {"labels": {"touched": "yes"}}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "queued", patch)
    group = wait_for_podgroup(custom, namespace, "queued")
    assert group["spec"]["queue"] == queue
    assert group["spec"]["minResources"] == {}  # no requests: nothing to reserve


def someone_elses_podgroup(namespace: str, name: str, job: JsonDict, *, controller: bool) -> JsonDict:
    """A PodGroup made before the job (as the provider makes it), then owned by the job."""
    return {
        "apiVersion": f"{VC_GROUP}/{VC_VERSION}",
        "kind": "PodGroup",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "ownerReferences": [
                {
                    "apiVersion": f"{GROUP}/{VERSION}",
                    "kind": "PyTorchJob",
                    "name": name,
                    "uid": job["metadata"]["uid"],
                    "controller": controller,
                    "blockOwnerDeletion": True,
                }
            ],
        },
        "spec": {"minMember": 2, "queue": "default", "minResources": {"cpu": "2", "nvidia.com/gpu": "2"}},
    }


def admit(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict:
    """Play Volcano's enqueue: the group goes Inqueue (a plain update: PodGroups have no status
    subresource)."""
    group = get_podgroup(custom, namespace, name)
    assert group is not None
    group["status"] = {"phase": "Inqueue"}
    result: JsonDict = custom.replace_namespaced_custom_object(
        VC_GROUP, VC_VERSION, namespace, "podgroups", name, group
    )
    return result


@pytest.mark.parametrize("controller", [False, True], ids=["non-controller-owner", "controller-owner"])
def test_only_a_controller_reference_lets_the_admission_of_a_podgroup_wake_its_job(
    start_operator: StartOperator,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    namespace: str,
    controller: bool,
) -> None:
    """The hang of issue 23, as the real v1.9 operator has it: its PodGroup watch maps an event
    to a job only through the group's controller ownerReference. A group owned with
    ``controller: false`` is synced once (the job's own event), seen Pending, and its admission
    by Volcano never reaches the job."""
    ensure_queue(custom, "default")
    operator = start_operator(gang_scheduler_name="volcano")
    group = someone_elses_podgroup(
        namespace, "owned", {"metadata": {"uid": "not-yet"}}, controller=controller
    )
    del group["metadata"]["ownerReferences"]  # made first, like the provider makes it
    custom.create_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", group)
    job = create(custom, namespace, pytorchjob("owned", gpus=1))
    owned = someone_elses_podgroup(namespace, "owned", job, controller=controller)
    patch = {"metadata": {"ownerReferences": owned["metadata"]["ownerReferences"]}}
    custom.patch_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", "owned", patch)
    wait_for_job(custom, namespace, "owned", lambda job: "lastReconcileTime" in (job.get("status") or {}))
    rounds_pass(operator)
    assert not job_pods(core, namespace, "owned")  # no phase yet: not admitted

    admit(custom, namespace, "owned")
    if controller:
        wait_for_pods(core, namespace, "owned", 2)
        return
    time.sleep(1.5)
    rounds_pass(operator)
    assert not job_pods(core, namespace, "owned"), "the operator heard of an admission it does not watch"
    # Anything that wakes the job itself lets it see the admission.
    patch = {"metadata": {"labels": {"touched": "yes"}}}
    custom.patch_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "owned", patch)
    wait_for_pods(core, namespace, "owned", 2)


def test_the_spec_sync_writes_the_computed_spec_over_an_edited_one(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    ensure_queue(custom, "default")
    create(custom, namespace, pytorchjob("drift", gpus=1))
    operator = start_operator(gang_scheduler_name="volcano")
    group = wait_for_podgroup(custom, namespace, "drift")
    wanted = dict(group["spec"])
    group["spec"] = {**wanted, "minMember": 1, "minTaskMember": {"worker": 1}}
    custom.replace_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", "drift", group)
    # The edit of a group it controls wakes the job; its round writes the computed spec whole.
    eventually(lambda: (get_podgroup(custom, namespace, "drift") or {}).get("spec") == wanted)
    rounds_pass(operator)
    assert not job_pods(core, namespace, "drift")


def test_without_the_flag_pods_of_a_provider_made_podgroup_are_created_at_once(
    start_operator: StartOperator, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    annotations = {"scheduling.k8s.io/group-name": "provided"}
    body = pytorchjob("provided", annotations=annotations)
    for spec in body["spec"]["pytorchReplicaSpecs"].values():
        spec["template"]["spec"]["schedulerName"] = "volcano"
    create(custom, namespace, body)
    operator = start_operator()

    pods = wait_for_pods(core, namespace, "provided", 2)
    assert pods["provided-master-0"].metadata.annotations == annotations
    assert pods["provided-master-0"].spec.scheduler_name == "volcano"
    rounds_pass(operator)
    assert get_podgroup(custom, namespace, "provided") is None


@pytest.mark.parametrize("flag", [None, "volcano"], ids=["no-gang-flag", "gang-flag"])
def test_a_job_marked_for_deletion_is_left_alone_so_a_foreground_deletion_ends(
    start_operator: StartOperator,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    namespace: str,
    flag: str | None,
) -> None:
    """``PyTorchJobReconciler.Reconcile`` returns at once for a job with a ``deletionTimestamp``
    (kubeflow/trainer v1.9.4 ``pkg/controller.v1/pytorch/pytorchjob_controller.go`` lines 149-152),
    so neither a PodGroup nor a pod deleted while the job waits in a foreground deletion comes
    back, with or without ``--gang-scheduler-name``: the provider may delete a PyTorchJob in the
    foreground and its PodGroup itself (unlike a TrainJob, whose controller re-applies them)."""
    ensure_queue(custom, "default")
    hold = {"metadata": {"finalizers": ["example.com/hold"]}}
    job = create(custom, namespace, pytorchjob("going", workers=1, gpus=1))
    operator = start_operator(gang_scheduler_name=flag)
    if flag is None:
        custom.create_namespaced_custom_object(
            VC_GROUP, VC_VERSION, namespace, "podgroups",
            {"metadata": {"name": "going", "ownerReferences": [{
                "apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "going",
                "uid": job["metadata"]["uid"], "controller": True, "blockOwnerDeletion": True,
            }]}, "spec": {"minMember": 2, "queue": "default"}},
        )  # fmt: skip
    group = wait_for_podgroup(custom, namespace, "going")
    group["status"] = {"phase": "Inqueue"}
    custom.replace_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", "going", group)
    wait_for_pods(core, namespace, "going", 2)
    # A finalizer on the master keeps the job marked for deletion while we look.
    core.patch_namespaced_pod("going-master-0", namespace, hold)

    custom.delete_namespaced_custom_object(
        "kubeflow.org", "v1", namespace, "pytorchjobs", "going", propagation_policy="Foreground"
    )
    custom.delete_namespaced_custom_object(VC_GROUP, VC_VERSION, namespace, "podgroups", "going")
    eventually(lambda: list(job_pods(core, namespace, "going")) == ["going-master-0"], timeout=10)
    rounds_pass(operator)
    assert get_podgroup(custom, namespace, "going") is None
    assert list(job_pods(core, namespace, "going")) == ["going-master-0"]
    assert get_job(custom, namespace, "going")["metadata"]["deletionTimestamp"]

    core.patch_namespaced_pod("going-master-0", namespace, {"metadata": {"finalizers": None}})
    eventually(
        lambda: (
            not custom.list_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs")["items"]
        )
    )

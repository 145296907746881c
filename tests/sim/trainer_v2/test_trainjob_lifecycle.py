"""A TrainJob on the embedded cluster, end to end through the official client over HTTP.

TrainJob -> JobSet -> batch Job -> pods on the simulated kubelets, with Volcano gang scheduling
through the ``torch-distributed`` runtime's PodGroup. Asserted: what each controller creates
(names, labels, annotations, environment, ownerReferences), the conditions a client reads on
success and failure, suspension, and garbage collection of the whole tree.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.sim.trainer_v2.manifests import (
    DURATION,
    EXIT_CODE,
    GPU,
    JOBSET,
    TRAINER,
    TRAINJOB_LABEL,
    VOLCANO,
    conditions,
    controller_of,
    create_trainjob,
    env_of,
    finished,
    get_trainjob,
    items,
    pod_log,
    runtime_without_retries,
    trainjob,
)
from tests.waiting import eventually

COMPLETION_INDEX = "batch.kubernetes.io/job-completion-index"
GROUP_NAME = "scheduling.k8s.io/group-name"


@pytest.fixture
def batch(api_client: k8s.ApiClient) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(api_client)


def pods_of(core: k8s.CoreV1Api, namespace: str, name: str) -> list[k8s.V1Pod]:
    listed = core.list_namespaced_pod(namespace, label_selector=f"{TRAINJOB_LABEL}={name}").items
    return sorted(listed, key=lambda pod: pod.metadata.annotations[COMPLETION_INDEX])


def assert_node_pod(pod: k8s.V1Pod, index: int, job_uid: str) -> None:
    """A pod of the ``mnist`` TrainJob's node Job, as the Job controller and the trainer made it."""
    assert pod.metadata.name.startswith(f"mnist-node-0-{index}-")
    assert (pod.spec.hostname, pod.spec.subdomain) == (f"mnist-node-0-{index}", "mnist")
    assert pod.spec.scheduler_name == "volcano"
    assert pod.metadata.annotations[GROUP_NAME] == "mnist"
    assert pod.metadata.labels[COMPLETION_INDEX] == str(index)
    assert controller_of(pod) == {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "mnist-node-0",
        "uid": job_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }
    assert pod.status.phase == "Succeeded"
    node = pod.spec.containers[0]
    assert (node.name, node.image, node.command, node.args) == (
        "node",
        "ghcr.io/acme/train:1",
        ["torchrun", "train.py"],
        ["--epochs", "1"],
    )
    assert node.resources.limits == {GPU: "1"}
    assert [port.container_port for port in node.ports] == [29500]
    env = env_of(node)
    assert env["LEARNING_RATE"] == "0.1"
    assert env["PET_NNODES"] == "2"
    assert env["PET_NPROC_PER_NODE"] == "auto"  # a GPU node: torchrun counts the GPUs
    assert env["PET_NODE_RANK"] == f"fieldRef:metadata.annotations['{COMPLETION_INDEX}']"
    assert env["PET_MASTER_ADDR"] == "mnist-node-0-0.mnist"
    assert env["PET_MASTER_PORT"] == "29500"


def test_a_two_node_trainjob_completes_with_its_jobset_job_pods_service_and_podgroup(
    cluster: SimCluster,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    batch: k8s.BatchV1Api,
    namespace: str,
) -> None:
    created = create_trainjob(custom, namespace, trainjob("mnist", annotations={DURATION: "1"}))
    owner_uid = created["metadata"]["uid"]

    podgroup = eventually(lambda: items(custom, VOLCANO, namespace, "podgroups"), timeout=10)[0]
    assert podgroup["metadata"]["name"] == "mnist"
    assert podgroup["spec"]["minMember"] == 2
    assert podgroup["spec"]["minResources"] == {"cpu": "2", GPU: "2"}
    assert podgroup["spec"]["queue"] == "default"
    assert controller_of(podgroup) == {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "name": "mnist",
        "uid": owner_uid,
        "controller": True,
        "blockOwnerDeletion": True,
    }

    assert eventually(lambda: finished(custom, namespace, "mnist"), timeout=30) == "Complete"
    status = get_trainjob(custom, namespace, "mnist")["status"]
    complete = conditions({"status": status})["Complete"]
    assert (complete["status"], complete["reason"]) == ("True", "AllJobsCompleted")
    assert complete["message"] == "jobset completed successfully"
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 0, "succeeded": 1, "failed": 0, "active": 0, "suspended": 0}
    ]
    # Trainer never deletes the PodGroup (no Delete call in plugins/volcano/volcano.go, v2.3.0):
    # Volcano leaves it Completed, unlabelled, until the TrainJob goes.
    finished_group = eventually(
        lambda: [
            group
            for group in items(custom, VOLCANO, namespace, "podgroups")
            if (group.get("status") or {}).get("phase") == "Completed"
        ],
        message="the finished job's PodGroup Completed",
    )[0]
    assert finished_group["metadata"]["uid"] == podgroup["metadata"]["uid"]
    assert not finished_group["metadata"].get("labels")

    jobset = custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", "mnist")
    assert controller_of(jobset)["uid"] == owner_uid
    assert jobset["status"]["terminalState"] == "Completed"
    node_job = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]
    assert (node_job["parallelism"], node_job["completions"]) == (2, 2)
    assert jobset["spec"]["network"]["enableDNSHostnames"] is True  # the JobSet webhook's default

    job = batch.read_namespaced_job("mnist-node-0", namespace)
    assert controller_of(job)["kind"] == "JobSet"
    assert controller_of(job)["uid"] == jobset["metadata"]["uid"]
    assert job.spec.completion_mode == "Indexed"
    assert job.metadata.labels["jobset.sigs.k8s.io/jobset-name"] == "mnist"
    assert job.metadata.labels["jobset.sigs.k8s.io/replicatedjob-name"] == "node"
    assert job.metadata.labels["jobset.sigs.k8s.io/job-index"] == "0"
    assert job.status.succeeded == 2
    assert job.status.completed_indexes == "0-1"
    assert {c.type: c.reason for c in job.status.conditions} == {
        "SuccessCriteriaMet": "CompletionsReached",
        "Complete": "CompletionsReached",
    }

    service = core.read_namespaced_service("mnist", namespace)
    assert service.spec.cluster_ip == "None"
    assert service.spec.selector == {"jobset.sigs.k8s.io/jobset-name": "mnist"}
    assert controller_of(service)["kind"] == "JobSet"

    pods = pods_of(core, namespace, "mnist")
    assert [pod.metadata.annotations[COMPLETION_INDEX] for pod in pods] == ["0", "1"]
    for index, pod in enumerate(pods):
        assert_node_pod(pod, index, job.metadata.uid)
    # The leader's log (node rank 0) is where a training job reports; the kubelet serves it.
    assert "starting training rank=0" in pod_log(core, pods[0].metadata.name, namespace)


def test_a_node_exiting_non_zero_fails_the_trainjob(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, namespace: str
) -> None:
    """The runtime's pods restart in place (``OnFailure``, the JobSet default) until the Job's
    ``backoffLimit`` (6) is spent; the Job fails, then the JobSet, then the TrainJob."""
    body = trainjob("broken", annotations={DURATION: "0.1", EXIT_CODE: "3"})
    create_trainjob(custom, namespace, body)

    assert eventually(lambda: finished(custom, namespace, "broken"), timeout=40) == "Failed"
    failed = conditions(get_trainjob(custom, namespace, "broken"))["Failed"]
    assert (failed["reason"], failed["message"]) == (
        "FailedJobs",
        "jobset failed due to one or more job failures",
    )
    job = batch.read_namespaced_job("broken-node-0", namespace)
    reasons = {c.type: (c.status, c.reason) for c in job.status.conditions}
    assert reasons["Failed"] == ("True", "BackoffLimitExceeded")
    assert reasons["FailureTarget"] == ("True", "BackoffLimitExceeded")
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=broken-node-0").items
    assert "BackoffLimitExceeded" in {event.reason for event in events}
    # The Job controller deletes a failed Job's running pods, as upstream does.
    eventually(lambda: not pods_of(core, namespace, "broken"), message="pods of the failed Job")


@pytest.mark.parametrize("max_restarts", [0, 1])
def test_a_runtime_without_retries_fails_at_the_first_exit_and_keeps_the_pod(
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    batch: k8s.BatchV1Api,
    namespace: str,
    max_restarts: int,
) -> None:
    """The first failed pod fails the Job; the JobSet restarts (all its Jobs anew) while its
    failure policy allows, then fails; the last failed pod stays with its container's exit code."""
    runtime = runtime_without_retries("no-retries", max_restarts)
    custom.create_namespaced_custom_object(*TRAINER, namespace, "trainingruntimes", runtime)
    body = trainjob(
        "once", runtime="no-retries", runtime_kind="TrainingRuntime", annotations={EXIT_CODE: "7"}
    )
    create_trainjob(custom, namespace, body)

    assert eventually(lambda: finished(custom, namespace, "once"), timeout=30) == "Failed"
    failed = conditions(get_trainjob(custom, namespace, "once"))["Failed"]
    assert failed["reason"] == "ReachedMaxRestarts"  # a failurePolicy with no restarts left
    jobset = custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", "once")
    assert jobset["status"]["restarts"] == max_restarts
    job = batch.read_namespaced_job("once-node-0", namespace)
    assert job.metadata.labels["jobset.sigs.k8s.io/restart-attempt"] == str(max_restarts)
    leftover = [pod for pod in pods_of(core, namespace, "once") if pod.status.phase == "Failed"]
    assert leftover, "the failed pod is kept"
    assert {controller_of(pod)["uid"] for pod in leftover} == {job.metadata.uid}
    terminated = leftover[0].status.container_statuses[0].state.terminated
    assert terminated.exit_code == 7


def test_deleting_the_trainjob_collects_everything_it_made(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, namespace: str
) -> None:
    create_trainjob(custom, namespace, trainjob("long", annotations={DURATION: "60"}))
    eventually(
        lambda: [pod.status.phase for pod in pods_of(core, namespace, "long")] == ["Running", "Running"],
        timeout=20,
    )
    assert items(custom, VOLCANO, namespace, "podgroups")
    assert core.list_namespaced_service(namespace).items

    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "long")

    def everything_gone() -> bool:
        return not (
            items(custom, TRAINER, namespace, "trainjobs")
            or items(custom, JOBSET, namespace, "jobsets")
            or batch.list_namespaced_job(namespace).items
            or core.list_namespaced_pod(namespace).items
            or core.list_namespaced_service(namespace).items
            or items(custom, VOLCANO, namespace, "podgroups")
        )

    eventually(everything_gone, timeout=20, message="the TrainJob's JobSet, Jobs, pods, Service, PodGroup")


def test_a_suspended_trainjob_runs_nothing_until_resumed(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, namespace: str
) -> None:
    create_trainjob(custom, namespace, trainjob("later", suspend=True, annotations={DURATION: "0.2"}))
    suspended = eventually(lambda: conditions(get_trainjob(custom, namespace, "later")).get("Suspended"))
    assert suspended is not None
    assert (suspended["status"], suspended["reason"]) == ("True", "Suspended")
    job = eventually(lambda: batch.list_namespaced_job(namespace).items)[0]
    assert job.spec.suspend is True
    jobset = custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", "later")
    assert jobset["spec"]["suspend"] is True
    assert not pods_of(core, namespace, "later")
    # Trainer's Volcano plugin builds the PodGroup whether or not the TrainJob is suspended
    # (plugins/volcano/volcano.go lines 148-158, v2.3.0): it exists before any pod does.
    (podgroup,) = items(custom, VOLCANO, namespace, "podgroups")
    assert podgroup["spec"]["minMember"] == 2

    custom.patch_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "later", {"spec": {"suspend": False}}
    )

    assert eventually(lambda: finished(custom, namespace, "later"), timeout=30) == "Complete"
    resumed = conditions(get_trainjob(custom, namespace, "later"))["Suspended"]
    assert (resumed["status"], resumed["reason"], resumed["message"]) == (
        "False",
        "Resumed",
        "TrainJob is resumed",
    )


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"runtimeRef": {"name": "no-such-runtime"}}, "must be created before the TrainJob is created"),
        ({"runtimeRef": {"name": "x", "kind": "MPIJob"}}, "unsupported runtime: MPIJob.trainer.kubeflow.org"),
        (
            {"trainer": {"numNodes": 1, "env": [{"name": "PET_NNODES", "value": "9"}]}},
            "must not have reserved envs, invalid envs configured: [PET_NNODES]",
        ),
    ],
    ids=["missing-runtime", "unsupported-kind", "reserved-env"],
)
def test_the_trainjob_webhook_refuses_what_the_trainer_cannot_run(
    custom: k8s.CustomObjectsApi, namespace: str, change: dict[str, Any], expected: str
) -> None:
    body = trainjob("refused")
    body["spec"].update(change)
    with pytest.raises(k8s.ApiException) as caught:
        create_trainjob(custom, namespace, body)
    assert caught.value.status == 422
    message = json.loads(caught.value.body)["message"]
    assert message.startswith(
        'admission webhook "validator.trainjob.trainer.kubeflow.org" denied the request: '
    )
    assert expected in message

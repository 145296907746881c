"""The simulated Trainer does what Kubeflow Trainer v2.3.0 does, fact by fact, from its source.

Each test names the upstream lines it follows (kubeflow/trainer tag v2.3.0; the same facts were
observed on the real controllers, docs/trainer-v2.md). The ones about deletion are why the
provider deletes TrainJobs with ``Background`` propagation and never touches their PodGroup:
``TrainJobReconciler.Reconcile`` never looks at ``deletionTimestamp`` and drops a ``Failed``
condition before deciding, so it re-applies whatever child disappears while the TrainJob exists.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from tests.sim.trainer_v2.manifests import (
    DURATION,
    EXIT_CODE,
    JOBSET,
    TRAINER,
    VOLCANO,
    conditions,
    controller_of,
    create_trainjob,
    finished,
    get_trainjob,
    items,
    runtime_without_retries,
    trainjob,
)
from tests.waiting import eventually

QUEUE = "scheduling.volcano.sh/queue-name"
JsonDict = dict[str, Any]


@pytest.fixture
def batch(api_client: k8s.ApiClient) -> k8s.BatchV1Api:
    return k8s.BatchV1Api(api_client)


def queue_patch(queue: str, manager: str = "example.com/queues") -> JsonDict:
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"annotations": {QUEUE: queue}}}},
    }


def podgroup_of(custom: k8s.CustomObjectsApi, namespace: str, name: str) -> JsonDict | None:
    try:
        found: JsonDict = custom.get_namespaced_custom_object(*VOLCANO, namespace, "podgroups", name)
    except k8s.ApiException as error:
        if error.status == 404:
            return None
        raise
    return found


def runtime_with_queue(name: str, queue: str) -> JsonDict:
    """A namespaced copy of the one-node runtime whose JobSet template names ``queue``."""
    runtime = runtime_without_retries(name, 0)
    runtime["spec"]["template"]["metadata"] = {"annotations": {QUEUE: queue}}
    return runtime


@pytest.mark.parametrize(
    ("runtime_queue", "trainjob_annotation", "patches", "expected"),
    [
        # trainingruntime.go 144-161 reads no annotation of the TrainJob's own metadata.
        (None, "research", [], "default"),
        (None, None, [queue_patch("research")], "research"),
        ("research", None, [], "research"),
        # Patches are applied over the runtime's annotations, in list order: the last one wins.
        ("research", None, [queue_patch("default")], "default"),
        (None, None, [queue_patch("default", "a.example.com/x"), queue_patch("research")], "research"),
    ],
    ids=[
        "trainjob-annotation-ignored",
        "runtime-patch",
        "runtime-template",
        "patch-over-runtime",
        "last-patch",
    ],
)
def test_the_podgroup_queue_comes_from_the_runtime_template_and_runtime_patches_only(
    custom: k8s.CustomObjectsApi,
    namespace: str,
    runtime_queue: str | None,
    trainjob_annotation: str | None,
    patches: list[JsonDict],
    expected: str,
) -> None:
    """volcano.go line 182 sets the PodGroup's queue from ``info.Annotations``, which
    trainingruntime.go lines 144-161 build from the runtime's ``spec.template.metadata.annotations``
    and then each runtime patch's ``trainingRuntimeSpec.template.metadata.annotations``."""
    runtime_name = "one-node"
    if runtime_queue is not None:
        runtime_name = "one-node-queued"
        runtime = runtime_with_queue(runtime_name, runtime_queue)
    else:
        runtime = runtime_without_retries(runtime_name, 0)
    custom.create_namespaced_custom_object(*TRAINER, namespace, "trainingruntimes", runtime)
    annotations = {DURATION: "30", **({QUEUE: trainjob_annotation} if trainjob_annotation else {})}
    body = trainjob(
        "queued", nodes=1, runtime=runtime_name, runtime_kind="TrainingRuntime", annotations=annotations
    )
    if patches:
        body["spec"]["runtimePatches"] = patches
    create_trainjob(custom, namespace, body)
    podgroup = eventually(lambda: podgroup_of(custom, namespace, "queued"), timeout=10)
    assert podgroup["spec"]["queue"] == expected
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "queued")


def test_the_runtime_is_snapshotted_into_a_configmap_owned_by_the_trainjob(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """snapshot.go lines 97-127: ``<trainjob>-runtime-snapshot``, data key ``runtime``, the runtime
    as YAML, owned by the TrainJob (controller, blockOwnerDeletion); trainingruntime.go lines
    88-106 read it before the live runtime on every later pass."""
    created = create_trainjob(custom, namespace, trainjob("snap", nodes=1, annotations={DURATION: "0.2"}))
    snapshot = eventually(lambda: core.read_namespaced_config_map("snap-runtime-snapshot", namespace))
    assert controller_of(snapshot)["uid"] == created["metadata"]["uid"]
    assert controller_of(snapshot)["blockOwnerDeletion"] is True
    runtime = json.loads(snapshot.data["runtime"])  # JSON is YAML
    assert runtime["metadata"]["name"] == "torch-distributed"
    assert "volcano" in runtime["spec"]["podGroupPolicy"]
    assert eventually(lambda: finished(custom, namespace, "snap"), timeout=30) == "Complete"
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "snap")
    eventually(lambda: not core.list_namespaced_config_map(namespace).items, message="snapshot collected")


def test_a_podgroup_deleted_while_its_trainjob_waits_in_a_foreground_deletion_is_created_again(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """trainjob_controller.go ``Reconcile`` (lines 80-140) never checks ``deletionTimestamp``, and
    volcano.go lines 148-158 build a PodGroup whenever none exists: deleting the PodGroup of a
    TrainJob marked for foreground deletion (what the provider did before issue 32) brings a new
    one, owned by the TrainJob that is going away."""
    created = create_trainjob(custom, namespace, trainjob("doomed", nodes=1, annotations={DURATION: "60"}))
    first = eventually(lambda: podgroup_of(custom, namespace, "doomed"), timeout=10)
    eventually(lambda: core.list_namespaced_pod(namespace).items, timeout=10)
    custom.delete_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "doomed", propagation_policy="Foreground"
    )
    custom.delete_namespaced_custom_object(*VOLCANO, namespace, "podgroups", "doomed")

    def recreated() -> JsonDict | None:
        podgroup = podgroup_of(custom, namespace, "doomed")
        if podgroup is None or podgroup["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return podgroup

    again = eventually(recreated, timeout=10, message="the PodGroup applied again")
    assert controller_of(again)["uid"] == created["metadata"]["uid"]
    # A foreground deletion racing such a controller need not end; letting the TrainJob go
    # (its foregroundDeletion finalizer removed) hands what is left to the garbage collector.
    try:
        custom.patch_namespaced_custom_object(
            *TRAINER, namespace, "trainjobs", "doomed", {"metadata": {"finalizers": None}}
        )
    except k8s.ApiException as error:
        if error.status != 404:
            raise
    eventually(lambda: not core.list_namespaced_pod(namespace).items, timeout=30, message="pods collected")


def test_a_failed_trainjob_whose_jobset_goes_is_run_again(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """trainjob_controller.go line 100 drops the ``Failed`` condition before deciding, so at line
    107 a failed TrainJob counts as unfinished, and jobset.go lines 330-342 apply a JobSet when
    none exists: a failed TrainJob whose JobSet the garbage collector removed (a foreground
    deletion of the TrainJob) gets a new JobSet, and its pods run again."""
    custom.create_namespaced_custom_object(
        *TRAINER, namespace, "trainingruntimes", runtime_without_retries("no-retries", 0)
    )
    body = trainjob(
        "failing", nodes=1, runtime="no-retries", runtime_kind="TrainingRuntime",
        annotations={EXIT_CODE: "7", DURATION: "2"},
    )  # fmt: skip
    create_trainjob(custom, namespace, body)
    assert eventually(lambda: finished(custom, namespace, "failing"), timeout=30) == "Failed"
    first = custom.get_namespaced_custom_object(*JOBSET, namespace, "jobsets", "failing")

    custom.delete_namespaced_custom_object(*JOBSET, namespace, "jobsets", "failing")

    def new_jobset() -> JsonDict | None:
        found = [
            j
            for j in items(custom, JOBSET, namespace, "jobsets")
            if j["metadata"]["uid"] != first["metadata"]["uid"]
        ]
        return found[0] if found else None

    eventually(new_jobset, timeout=10, message="a new JobSet for the failed TrainJob")
    eventually(
        lambda: "Failed" not in conditions(get_trainjob(custom, namespace, "failing")),
        timeout=10,
        message="the Failed condition dropped while the new JobSet runs",
    )
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "failing")


def test_a_background_deletion_ends_and_nothing_comes_back(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, namespace: str
) -> None:
    """With ``Background`` propagation the TrainJob itself goes at once (Trainer sets no finalizer
    on it), so its reconcile finds nothing (``client.IgnoreNotFound``, line 83) and the garbage
    collector removes the rest for good."""
    create_trainjob(custom, namespace, trainjob("gone", nodes=2, annotations={DURATION: "60"}))
    eventually(lambda: len(core.list_namespaced_pod(namespace).items) == 2, timeout=20)
    since = custom.list_namespaced_custom_object(*JOBSET, namespace, "jobsets")["metadata"]["resourceVersion"]

    custom.delete_namespaced_custom_object(
        *TRAINER, namespace, "trainjobs", "gone", propagation_policy="Background"
    )
    with pytest.raises(k8s.ApiException) as caught:
        get_trainjob(custom, namespace, "gone")
    assert caught.value.status == 404

    def nothing_left() -> bool:
        return not (
            items(custom, JOBSET, namespace, "jobsets")
            or batch.list_namespaced_job(namespace).items
            or core.list_namespaced_pod(namespace).items
            or items(custom, VOLCANO, namespace, "podgroups")
        )

    eventually(nothing_left, timeout=30, message="JobSet, Jobs, pods and PodGroup collected")
    # Nothing was applied again after the deletion: no JobSet was added since.
    added = [
        event["object"]["metadata"]["name"]
        for event in watch.Watch().stream(
            custom.list_namespaced_custom_object,
            *JOBSET,
            namespace,
            "jobsets",
            resource_version=since,
            timeout_seconds=2,
        )
        if event["type"] == "ADDED"
    ]
    assert added == []


def test_one_indexed_job_runs_every_node_with_the_jobset_webhook_defaults_and_a_headless_service(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, batch: k8s.BatchV1Api, namespace: str
) -> None:
    """jobset.go ``SyncParallelCount`` (lines 302-323) sets ``parallelism`` = ``completions`` = the
    node count on the trainer's one replicated job (torch.go line 118: ``numNodes``), so one batch
    Job runs every node; JobSet's webhook ``Default`` (jobset ``pkg/webhooks/jobset_webhook.go``
    lines 111-136) adds ``completionMode: Indexed``, ``restartPolicy: OnFailure``,
    ``enableDNSHostnames``, success policy ``All`` and startup order ``AnyOrder``; the JobSet
    controller makes the headless Service (``createHeadlessSvcIfNecessary``, jobset_controller.go
    lines 788-812, ``clusterIP: None``)."""
    create_trainjob(custom, namespace, trainjob("three", nodes=3, annotations={DURATION: "30"}))
    jobset = eventually(lambda: items(custom, JOBSET, namespace, "jobsets"))[0]
    spec = jobset["spec"]
    assert spec["successPolicy"]["operator"] == "All"
    assert spec["startupPolicy"]["startupPolicyOrder"] == "AnyOrder"
    assert spec["network"]["enableDNSHostnames"] is True
    (node,) = spec["replicatedJobs"]
    assert node["template"]["spec"]["completionMode"] == "Indexed"
    assert node["template"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"
    jobs = eventually(lambda: batch.list_namespaced_job(namespace).items)
    assert [(job.metadata.name, job.spec.parallelism, job.spec.completions) for job in jobs] == [
        ("three-node-0", 3, 3)
    ]
    service = eventually(lambda: core.read_namespaced_service("three", namespace))
    assert service.spec.cluster_ip == "None"
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "three")


def test_while_it_runs_a_trainjob_has_no_condition_and_its_jobs_status_counts_jobs(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """jobset.go ``Status`` (lines 438-472) copies only the JobSet's ``Completed`` and ``Failed``
    conditions: no condition while the TrainJob waits or runs. ``jobsStatus`` is the JobSet's
    ``replicatedJobsStatus``, which counts Jobs: a Job is ``ready`` once its ready and succeeded
    pods reach its parallelism (jobset_controller.go lines 473-491), so two running nodes read
    ``ready: 1``."""
    create_trainjob(custom, namespace, trainjob("busy", nodes=2, annotations={DURATION: "60"}))

    def two_running() -> bool:
        pods = core.list_namespaced_pod(namespace).items
        return len(pods) == 2 and all(pod.status.phase == "Running" for pod in pods)

    eventually(two_running, timeout=20)
    eventually(
        lambda: (
            ((get_trainjob(custom, namespace, "busy").get("status") or {}).get("jobsStatus") or [{}])[0].get(
                "ready"
            )
            == 1
        ),
        timeout=10,
    )
    status = get_trainjob(custom, namespace, "busy")["status"]
    assert status["jobsStatus"] == [
        {"name": "node", "ready": 1, "succeeded": 0, "failed": 0, "active": 1, "suspended": 0}
    ]
    assert not status.get("conditions")
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "busy")


def test_trainer_sets_no_scheduler_name_and_records_no_event_of_a_trainjob_that_runs(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """Neither the Volcano plugin (volcano.go lines 130-139 add only the group-name annotation) nor
    the JobSet plugin sets ``schedulerName``: a runtime whose pod template names none gives pods
    the default scheduler, which Volcano never binds. The TrainJob controller records events only
    when applying its objects fails (trainjob_controller.go lines 113-119)."""
    runtime = runtime_without_retries("unscheduled", 0)
    pod_spec = runtime["spec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"][
        "spec"
    ]
    del pod_spec["schedulerName"]
    custom.create_namespaced_custom_object(*TRAINER, namespace, "trainingruntimes", runtime)
    body = trainjob("plain", nodes=1, runtime="unscheduled", runtime_kind="TrainingRuntime")
    create_trainjob(custom, namespace, body)
    (pod,) = eventually(lambda: core.list_namespaced_pod(namespace).items, timeout=10)
    assert pod.spec.scheduler_name == "default-scheduler"
    assert pod.metadata.annotations["scheduling.k8s.io/group-name"] == "plain"
    events = core.list_namespaced_event(namespace, field_selector="involvedObject.name=plain").items
    assert [event.reason for event in events] == []
    custom.delete_namespaced_custom_object(*TRAINER, namespace, "trainjobs", "plain")

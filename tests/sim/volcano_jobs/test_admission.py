"""Volcano's webhooks for its Job, through the official client: the defaults ``mutatejob.volcano.sh``
adds and the denials of ``validatejob.volcano.sh``, worded as upstream words them.

Sources (volcano-sh/volcano v1.16.0-alpha.1): ``pkg/webhooks/admission/jobs/mutate/mutate_job.go``
lines 115-267, ``pkg/webhooks/admission/jobs/validate/admit_job.go`` lines 120-237 and
``validate/util.go`` lines 62-123; the CRD (``config/crd/volcano/bases/batch.volcano.sh_jobs.yaml``)
refuses negative replicas before any webhook.
"""

from __future__ import annotations

import json

import pytest
from kubernetes import client as k8s

from tests.sim.volcano_jobs.manifests import create, task, vcjob

WEBHOOK = 'admission webhook "validatejob.volcano.sh" denied the request: '


def denial(custom: k8s.CustomObjectsApi, namespace: str, body: dict) -> tuple[int, str]:
    with pytest.raises(k8s.ApiException) as raised:
        create(custom, namespace, body)
    return raised.value.status, json.loads(raised.value.body)["message"]


def test_defaults_of_the_mutating_webhook(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    # mutate_job.go 145-233: queue, schedulerName, maxRetry, task names and minAvailable; then
    # 169-184 the job's minAvailable, and 235-267 svc for pytorch.
    body = vcjob("defaults", [task(None, 2), task(None, 1, minAvailable=0)], plugins={"pytorch": []})
    spec = create(custom, namespace, body)["spec"]
    assert (spec["queue"], spec["schedulerName"], spec["maxRetry"]) == ("default", "volcano", 3)
    assert [t["name"] for t in spec["tasks"]] == ["default0", "default1"]
    assert [t["minAvailable"] for t in spec["tasks"]] == [2, 0]
    assert [t["maxRetry"] for t in spec["tasks"]] == [3, 3]
    assert spec["minAvailable"] == 2  # the sum of the tasks' minAvailable
    assert spec["plugins"] == {"pytorch": [], "svc": []}


def test_no_tasks(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    assert denial(custom, namespace, vcjob("empty", [])) == (400, WEBHOOK + "No task specified in job spec")


def test_duplicated_task_name(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    assert denial(custom, namespace, vcjob("dup", [task("a", 1), task("a", 1)])) == (
        400,
        WEBHOOK + "duplicated task name a;",
    )


def test_task_min_available_above_replicas(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    _, message = denial(custom, namespace, vcjob("big", [task("a", 1, minAvailable=2)]))
    # The job's minAvailable was defaulted to the tasks' sum (2): both checks speak.
    assert message == WEBHOOK + (
        "'minAvailable' is greater than 'replicas' in task: a, job: big; "
        "job 'minAvailable' should not be greater than total replicas in tasks;"
    )


def test_job_min_available_above_total_replicas(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    _, message = denial(custom, namespace, vcjob("big", [task("a", 2)], minAvailable=3))
    assert message == WEBHOOK + "job 'minAvailable' should not be greater than total replicas in tasks;"


def test_negative_replicas_are_refused_by_the_crd_schema(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    code, message = denial(custom, namespace, vcjob("neg", [task("a", -1)]))
    assert code == 422
    assert "spec.tasks[0].replicas" in message
    assert "greater than or equal to 0" in message


def test_invalid_policy_event(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = vcjob("pol", [task("a", 1)], policies=[{"event": "PodExploded", "action": "RestartJob"}])
    _, message = denial(custom, namespace, body)
    assert message.startswith(
        WEBHOOK + '1 error occurred:\n\t* spec.policies: Invalid value: "PodExploded": invalid policy event'
    )
    assert "valid events are [* PodFailed PodEvicted" in message


def test_invalid_policy_action_and_event_with_exit_code(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body = vcjob("pol", [task("a", 1)], policies=[{"event": "PodFailed", "action": "Explode"}])
    assert 'Invalid value: "Explode": invalid policy action' in denial(custom, namespace, body)[1]
    body = vcjob(
        "pol", [task("a", 1)], policies=[{"event": "PodFailed", "exitCode": 3, "action": "AbortJob"}]
    )
    assert "must not specify event and exitCode simultaneously" in denial(custom, namespace, body)[1]


def test_unknown_plugin(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    _, message = denial(custom, namespace, vcjob("plug", [task("a", 1)], plugins={"teleport": []}))
    assert message == WEBHOOK + "unable to find job plugin: teleport;"


def test_missing_and_closed_queues(
    custom: k8s.CustomObjectsApi, namespace: str, api_client: k8s.ApiClient
) -> None:
    _, message = denial(custom, namespace, vcjob("q", [task("a", 1)], queue="nowhere"))
    assert message == WEBHOOK + 'unable to find job queue: queue.scheduling.volcano.sh "nowhere" not found;'
    queue = {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "Queue",
        "metadata": {"name": f"closed-{namespace}"},
    }
    custom.create_cluster_custom_object("scheduling.volcano.sh", "v1beta1", "queues", queue)
    custom.patch_cluster_custom_object_status(
        "scheduling.volcano.sh", "v1beta1", "queues", f"closed-{namespace}", {"status": {"state": "Closed"}}
    )
    try:
        _, message = denial(custom, namespace, vcjob("q", [task("a", 1)], queue=f"closed-{namespace}"))
        assert message == WEBHOOK + (
            f"can only submit job to queue with state `Open`, queue `closed-{namespace}` status is `Closed`;"
        )
    finally:
        custom.delete_cluster_custom_object(
            "scheduling.volcano.sh", "v1beta1", "queues", f"closed-{namespace}"
        )


def test_updates_may_change_only_replicas_min_available_and_priority(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    create(custom, namespace, vcjob("upd", [task("a", 1)]))
    with pytest.raises(k8s.ApiException) as raised:
        custom.patch_namespaced_custom_object(
            "batch.volcano.sh", "v1alpha1", namespace, "jobs", "upd", {"spec": {"queue": "research"}}
        )
    assert json.loads(raised.value.body)["message"] == WEBHOOK + (
        "job updates may not change fields other than `minAvailable`, `tasks[*].replicas under spec` "
        "and `PriorityClassName`"
    )

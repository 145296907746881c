"""The Eviction API and PodDisruptionBudgets, observed through the official client.

Upstream behaviour followed (``docs/disruptions.md``; the kubernetes/kubernetes
files could not be fetched at a tag, so they are cited by function and string literal):
``pkg/registry/core/pod/storage/eviction.go`` — ``canIgnorePDB`` (Pending, Succeeded, Failed or
deleting pods skip the budget), one budget at most ("This pod has more than one
PodDisruptionBudget, which the eviction subresource does not support.", 500),
``checkAndDecrement`` (429 ``TooManyRequests`` "Cannot evict pod as it would violate the pod's
disruption budget." with a ``DisruptionBudget`` cause, ``policyv1.DisruptionBudgetCause`` at
k8s.io/api ``policy/v1/types.go:24-25@kubernetes-1.36.3``; a stale budget answers 429 with
retry-after 10; a success spends ``disruptionsAllowed`` and records ``disruptedPods``) and
``addConditionAndDeletePod`` (``DisruptionTarget``, k8s.io/api
``core/v1/types.go:3532-3534@kubernetes-1.36.3``, reason ``EvictionByEvictionAPI``, then a
graceful delete); and ``pkg/controller/disruption`` for the budget's status.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator

import pytest
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from gang_sim.apiserver.server import start_apiserver
from tests.sim.apiserver.helpers import status_of
from tests.sim.disruptions.pods import (
    Json,
    budget,
    budget_status,
    condition,
    evict,
    gone,
    pod,
    pod_json,
    start_running,
    states_until_gone,
)
from tests.waiting import eventually

VIOLATION = "Cannot evict pod as it would violate the pod's disruption budget."


@pytest.fixture
def policy(api_client: k8s.ApiClient) -> k8s.PolicyV1Api:
    return k8s.PolicyV1Api(api_client)


def settled(policy: k8s.PolicyV1Api, namespace: str, name: str, **expected: int) -> Json:
    """The budget's status once the disruption controller has counted what ``expected`` says."""
    return eventually(
        lambda: (
            (status := budget_status(policy, namespace, name)).get("observedGeneration") == 1
            and all(status.get(key) == value for key, value in expected.items())
            and status
        ),
        timeout=10,
        message=f"budget {name} at {expected}",
    )


def test_discovery_serves_pods_eviction_and_poddisruptionbudgets(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api
) -> None:
    """As kube-apiserver lists them, so that ``kubectl drain`` (``CheckEvictionSupport``) finds
    the policy/v1 Eviction."""
    resources = {r.name: r for r in core.get_api_resources().resources}
    eviction = resources["pods/eviction"]
    assert (eviction.group, eviction.version, eviction.kind, eviction.verbs) == (
        "policy",
        "v1",
        "Eviction",
        ["create"],
    )
    assert eviction.namespaced
    policy = {r.name: r for r in k8s.PolicyV1Api(api_client).get_api_resources().resources}
    assert policy["poddisruptionbudgets"].short_names == ["pdb"]
    assert policy["poddisruptionbudgets"].namespaced
    assert "poddisruptionbudgets/status" in policy


def test_an_evicted_pod_is_marked_then_deleted_with_its_grace_period(
    core: k8s.CoreV1Api, namespace: str
) -> None:
    """``addConditionAndDeletePod``: the condition first, then a graceful delete (the pod's own
    ``terminationGracePeriodSeconds`` unless the Eviction's ``deleteOptions`` say otherwise)."""
    start_running(core, namespace, pod("lone"), pod("hurried"))
    version = core.list_namespaced_pod(namespace).metadata.resource_version

    answer = core.create_namespaced_pod_eviction(
        "lone", namespace, k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name="lone")), _preload_content=False
    )
    evict(core, namespace, "hurried", grace_period_seconds=5)

    assert answer.status == 201
    assert json.loads(answer.data) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    # The kubelet stops the containers and confirms: each pod is deleted in the state it was marked.
    states = states_until_gone(core, namespace, {"lone", "hurried"}, version)
    for name, grace in (("lone", 30), ("hurried", 5)):
        marked = [s for s in states[name] if s["metadata"].get("deletionTimestamp")]
        first = marked[0]
        assert first["metadata"]["deletionGracePeriodSeconds"] == grace
        target = condition(first, "DisruptionTarget")
        assert target is not None, "the condition is written before the deletion"
        assert {k: target[k] for k in ("status", "reason", "message")} == {
            "status": "True",
            "reason": "EvictionByEvictionAPI",
            "message": "Eviction API: evicting",
        }
        assert first["status"]["phase"] == "Running"


def test_a_budget_that_allows_no_disruption_refuses_with_429(
    core: k8s.CoreV1Api, policy: k8s.PolicyV1Api, namespace: str
) -> None:
    """``checkAndDecrement`` with ``disruptionsAllowed`` 0: 429 with a ``DisruptionBudget`` cause
    and no ``Retry-After``; the pod is left alone."""
    labels = {"app": "guarded"}
    start_running(core, namespace, pod("a", labels=labels), pod("b", labels=labels))
    policy.create_namespaced_pod_disruption_budget(namespace, budget("all", labels, minAvailable=2))
    status = settled(policy, namespace, "all", currentHealthy=2)
    assert {
        k: status[k] for k in ("currentHealthy", "desiredHealthy", "disruptionsAllowed", "expectedPods")
    } == {
        "currentHealthy": 2,
        "desiredHealthy": 2,
        "disruptionsAllowed": 0,
        "expectedPods": 2,
    }
    assert [(c["type"], c["status"], c["reason"]) for c in status["conditions"]] == [
        ("DisruptionAllowed", "False", "InsufficientPods")
    ]

    with pytest.raises(k8s.ApiException) as caught:
        evict(core, namespace, "a")

    assert caught.value.status == 429
    assert "Retry-After" not in (caught.value.headers or {})
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": VIOLATION,
        "reason": "TooManyRequests",
        "details": {
            "causes": [
                {
                    "reason": "DisruptionBudget",
                    "message": "The disruption budget all needs 2 healthy pods and has 2 currently",
                }
            ]
        },
        "code": 429,
    }
    untouched = pod_json(core, namespace, "a")
    assert "deletionTimestamp" not in untouched["metadata"]
    assert condition(untouched, "DisruptionTarget") is None


def test_an_eviction_spends_the_budget_before_the_controller_counts_again(
    core: k8s.CoreV1Api, policy: k8s.PolicyV1Api, namespace: str
) -> None:
    """A success decrements ``disruptionsAllowed`` and records the pod in ``disruptedPods`` in
    the same request, so a second eviction right after is refused whatever the controller has
    seen; the controller then counts the pods that are left."""
    labels = {"app": "pair"}
    start_running(core, namespace, pod("a", labels=labels), pod("b", labels=labels))
    created = policy.create_namespaced_pod_disruption_budget(
        namespace, budget("one-of-two", labels, minAvailable=1)
    )
    settled(policy, namespace, "one-of-two", currentHealthy=2, disruptionsAllowed=1)
    version = policy.read_namespaced_pod_disruption_budget("one-of-two", namespace).metadata.resource_version
    assert created.status.disruptions_allowed == 0, "a new budget allows nothing until it is counted"
    stream = k8s_watch.Watch().stream(
        policy.list_namespaced_pod_disruption_budget,
        namespace,
        resource_version=version,
        timeout_seconds=5,
    )

    evict(core, namespace, "a")
    with pytest.raises(k8s.ApiException) as caught:
        evict(core, namespace, "b")

    spent = next(event for event in stream if event["type"] == "MODIFIED")["raw_object"]["status"]
    assert spent["disruptionsAllowed"] == 0
    assert list(spent["disruptedPods"]) == ["a"]
    assert caught.value.status == 429
    assert re.fullmatch(
        r"The disruption budget one-of-two needs 1 healthy pods and has [12] currently",
        status_of(caught.value)["details"]["causes"][0]["message"],
    )
    eventually(lambda: gone(core, namespace, "a"), timeout=10)
    settled(policy, namespace, "one-of-two", currentHealthy=1, expectedPods=1, disruptionsAllowed=0)


def test_a_pod_under_two_budgets_cannot_be_evicted(
    core: k8s.CoreV1Api, policy: k8s.PolicyV1Api, namespace: str
) -> None:
    """Upstream answers a plain 500 Status (no reason) for a pod more than one budget selects."""
    start_running(core, namespace, pod("shared", labels={"app": "x", "tier": "y"}))
    policy.create_namespaced_pod_disruption_budget(
        namespace, budget("by-app", {"app": "x"}, maxUnavailable=1)
    )
    policy.create_namespaced_pod_disruption_budget(
        namespace, budget("by-tier", {"tier": "y"}, minAvailable=0)
    )

    with pytest.raises(k8s.ApiException) as caught:
        evict(core, namespace, "shared")

    assert caught.value.status == 500
    assert status_of(caught.value) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "This pod has more than one PodDisruptionBudget, which the eviction subresource does not "
        "support.",
        "code": 500,
    }


def test_pending_and_finished_pods_are_evicted_whatever_the_budget(
    core: k8s.CoreV1Api, policy: k8s.PolicyV1Api, namespace: str
) -> None:
    """``canIgnorePDB``: a Pending, Succeeded or Failed pod disrupts nothing more."""
    labels = {"app": "mixed"}
    waiting = pod("waiting", labels=labels)
    waiting["spec"]["nodeSelector"] = {"kubernetes.io/hostname": "no-such-node"}
    core.create_namespaced_pod(namespace, waiting)
    core.create_namespaced_pod(namespace, pod("done", "sim-node-1", labels=labels, seconds=0))
    eventually(lambda: pod_json(core, namespace, "done")["status"]["phase"] == "Succeeded", timeout=10)
    policy.create_namespaced_pod_disruption_budget(namespace, budget("strict", labels, minAvailable=5))
    settled(policy, namespace, "strict", expectedPods=2, disruptionsAllowed=0)

    evict(core, namespace, "waiting")
    evict(core, namespace, "done")

    assert gone(core, namespace, "waiting"), "unbound: deleted at once"
    assert gone(core, namespace, "done"), "finished: deleted at once"


def test_the_budget_counts_the_scale_of_the_pods_controllers(
    core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, policy: k8s.PolicyV1Api, namespace: str
) -> None:
    """``getExpectedPodCount``: ``maxUnavailable`` needs the pods' controllers' scale
    (``getExpectedScale``): a PyTorchJob's is its Worker count, as its CRD declares, pods with no
    controller do not count, and a controller with no scale (a batch Job) fails safe
    (``failSafe``: ``SyncFailed``, no disruption allowed)."""
    job = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": "train", "annotations": {"sim.airflow-gang.io/duration": "600"}},
        "spec": {
            "pytorchReplicaSpecs": {
                role: {
                    "replicas": count,
                    "restartPolicy": "Never",
                    "template": {
                        "spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}]}
                    },
                }
                for role, count in (("Master", 1), ("Worker", 2))
            }
        },
    }
    custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", job)
    labels = {"training.kubeflow.org/job-name": "train"}
    eventually(
        lambda: (
            sum(
                1
                for p in core.list_namespaced_pod(
                    namespace, label_selector="training.kubeflow.org/job-name=train"
                ).items
                if p.status.phase == "Running"
            )
            == 3
        ),
        timeout=20,
        message="3 replicas running",
    )
    start_running(core, namespace, pod("bare", labels={"app": "bare"}))
    batch = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "batch"},
        "spec": {
            "template": {
                "metadata": {
                    "labels": {"app": "batch"},
                    "annotations": {"sim.airflow-gang.io/duration": "600"},
                },
                "spec": {"restartPolicy": "Never", "containers": [{"name": "main", "image": "busybox:1.36"}]},
            }
        },
    }
    k8s.BatchV1Api(core.api_client).create_namespaced_job(namespace, batch)
    eventually(lambda: core.list_namespaced_pod(namespace, label_selector="app=batch").items, timeout=10)

    policy.create_namespaced_pod_disruption_budget(namespace, budget("train", labels, maxUnavailable=1))
    policy.create_namespaced_pod_disruption_budget(
        namespace, budget("bare", {"app": "bare"}, maxUnavailable=0)
    )
    policy.create_namespaced_pod_disruption_budget(
        namespace, budget("batch", {"app": "batch"}, maxUnavailable=1)
    )

    train = settled(policy, namespace, "train", currentHealthy=3)
    assert (train["expectedPods"], train["desiredHealthy"], train["disruptionsAllowed"]) == (2, 1, 2)
    bare = settled(policy, namespace, "bare", currentHealthy=1)
    assert (bare["expectedPods"], bare["desiredHealthy"], bare["disruptionsAllowed"]) == (0, 0, 0)
    failed = eventually(
        lambda: (status := budget_status(policy, namespace, "batch")).get("conditions") and status, timeout=10
    )
    [allowed] = failed["conditions"]
    batch_pod = core.list_namespaced_pod(namespace, label_selector="app=batch").items[0].metadata.name
    assert (allowed["type"], allowed["status"], allowed["reason"], allowed["message"]) == (
        "DisruptionAllowed",
        "False",
        "SyncFailed",
        f'found no controllers for pod "{batch_pod}"',
    )
    assert failed["disruptionsAllowed"] == 0
    assert "observedGeneration" not in failed, "a budget that failed safe stays unprocessed"


@pytest.fixture
def bare_server() -> Iterator[k8s.ApiClient]:
    """An API server without controllers: the test writes the budget's status itself."""
    with start_apiserver() as server:
        client = k8s_config.new_client_from_config(config_file=server.kubeconfig_path)
        yield client
        client.close()


def test_a_stale_budget_a_dry_run_and_an_unready_pod(bare_server: k8s.ApiClient) -> None:
    """``checkAndDecrement``'s other answers: a budget whose status is behind its spec is "still
    being processed" (429 with ``Retry-After: 10``); ``dryRun`` decides and writes nothing; a pod
    that is not ready is evicted without spending a budget that is healthy anyway."""
    core, policy = k8s.CoreV1Api(bare_server), k8s.PolicyV1Api(bare_server)
    core.create_namespaced_pod("default", pod("p", "node-without-kubelet", labels={"app": "p"}))
    ready = {"type": "Ready", "status": "True"}
    core.patch_namespaced_pod_status("p", "default", {"status": {"phase": "Running", "conditions": [ready]}})
    policy.create_namespaced_pod_disruption_budget("default", budget("b", {"app": "p"}, minAvailable=1))

    with pytest.raises(k8s.ApiException) as caught:
        evict(core, "default", "p")
    assert (caught.value.status, caught.value.headers["Retry-After"]) == (429, "10")
    assert status_of(caught.value)["details"] == {
        "causes": [
            {
                "reason": "DisruptionBudget",
                "message": "The disruption budget b is still being processed by the server.",
            }
        ],
        "retryAfterSeconds": 10,
    }

    counted = {
        "observedGeneration": 1,
        "currentHealthy": 2,
        "desiredHealthy": 1,
        "expectedPods": 2,
        "disruptionsAllowed": 1,
    }
    policy.patch_namespaced_pod_disruption_budget_status("b", "default", {"status": counted})
    evict(core, "default", "p", dry_run=["All"])
    assert "deletionTimestamp" not in pod_json(core, "default", "p")["metadata"]
    assert budget_status(policy, "default", "b")["disruptionsAllowed"] == 1

    unready = {"type": "Ready", "status": "False"}
    core.patch_namespaced_pod_status("p", "default", {"status": {"conditions": [unready]}})
    evict(core, "default", "p")
    assert pod_json(core, "default", "p")["metadata"]["deletionTimestamp"], "no kubelet confirms it here"
    after = budget_status(policy, "default", "b")
    assert after["disruptionsAllowed"] == 1, "the budget was not spent"
    assert "disruptedPods" not in after

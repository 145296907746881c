"""GangJobHook and AsyncGangJobHook against a real simulated cluster over HTTPS.

No mocks: the hooks talk to a `SimCluster` through the official clients. Faults the simulator
cannot produce on demand (503s, dropped connections, RBAC 403s, a cluster without the CRDs)
come from `FaultProxy` (tests/support/fault_proxy.py), a small HTTP reverse proxy in front of it
that answers or drops chosen requests and forwards the rest. The 403 and discovery rules are also
tested as the pure functions they are.
"""

from __future__ import annotations

import contextlib
import json
import threading
import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import pytest
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from airflow_gang.exceptions import GangApiError, GangApiUnavailable, GangCRDNotInstalled, GangPermissionError
from airflow_gang.hooks import REQUIRED_PERMISSIONS, AsyncGangJobHook, GangJobHook
from airflow_gang.hooks.errors import (
    PYTORCHJOB_API,
    VOLCANO_API,
    ApiRequest,
    evaluate_discovery,
    translate_api_error,
)
from airflow_gang.hooks.retrying import RetryPolicy
from airflow_gang.job_kinds import TRAINJOB
from airflow_gang.kinds import VCJOB
from airflow_gang.kinds.vcjob.spec import VolcanoJobSpec
from airflow_gang.model.outage import Outage
from airflow_gang.spec import GangJobSpec
from airflow_gang.trainjob_spec import TrainJobSpec
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.apiserver.server import start_apiserver
from gang_sim.cluster import SimCluster
from tests.support.fault_proxy import Fault, FaultProxy, rbac_forbidden
from tests.support.submission import submit
from tests.waiting import eventually

NS = "default"
LOG_LINES = ("epoch 1 loss 0.9", "epoch 2 loss 0.5", "epoch 3 loss 0.2")
FAST = RetryPolicy(attempts=4, initial_delay=0.05, max_delay=0.2)


# -- fixtures ----------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2) as running:
        yield running


@pytest.fixture(scope="module")
def custom(cluster: SimCluster) -> Iterator[k8s.CustomObjectsApi]:
    """The official client, for arranging and checking what the hooks did."""
    with cluster.api_client() as api:
        yield k8s.CustomObjectsApi(api)


@pytest.fixture
def hook(cluster: SimCluster) -> GangJobHook:
    return GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=cluster.kubeconfig_path)


@pytest.fixture
def async_hook(cluster: SimCluster) -> AsyncGangJobHook:
    return AsyncGangJobHook(
        conn_id=None, kubernetes_conn_id=None, config_file=cluster.kubeconfig_path, connection_extras={}
    )


@pytest.fixture
def test_id(custom: k8s.CustomObjectsApi) -> Iterator[str]:
    """A label value for this test's objects; whatever still carries it afterwards is deleted."""
    value = uuid.uuid4().hex[:8]
    yield value
    kinds = [("kubeflow.org", "v1", "pytorchjobs"), ("scheduling.volcano.sh", "v1beta1", "podgroups")]

    def leftovers() -> list[tuple[str, str, str, str]]:
        return [
            (group, version, plural, item["metadata"]["name"])
            for group, version, plural in kinds
            for item in custom.list_namespaced_custom_object(
                group, version, NS, plural, label_selector=f"test-id={value}"
            )["items"]
        ]

    for group, version, plural, name in leftovers():
        with contextlib.suppress(ApiException):
            custom.delete_namespaced_custom_object(
                group, version, NS, plural, name, propagation_policy="Foreground"
            )
    eventually(lambda: not leftovers(), timeout=15, message="(test objects left behind)")


def job_spec(duration: float = 0.5, lines: tuple[str, ...] = LOG_LINES) -> GangJobSpec:
    annotations = {"sim.airflow-gang.io/duration": str(duration), "sim.airflow-gang.io/log": "\n".join(lines)}
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": annotations}},
    )


def submit_labelled(
    hook: GangJobHook, test_id: str, spec: GangJobSpec | None = None
) -> tuple[str, dict[str, Any]]:
    """A job named and labelled for this test (the `test_id` fixture deletes what carries the
    label): PodGroup first, then the job, then the ownerReference, as the operator submits."""
    name = f"hk-{test_id}-{uuid.uuid4().hex[:4]}"
    labels = {"test-id": test_id}
    job = submit(name, spec or job_spec(), hook=hook, namespace=NS, labels=labels, own_podgroup=True)
    return name, job


def true_conditions(job: dict[str, Any] | None) -> list[str]:
    conditions = ((job or {}).get("status") or {}).get("conditions") or []
    return [c["type"] for c in conditions if c.get("status") == "True"]


# -- a fault-injecting reverse proxy ------------------------------------------------------------


@pytest.fixture
def proxy(cluster: SimCluster) -> Iterator[FaultProxy]:
    server = FaultProxy(cluster.kubeconfig_path)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield server
    server.shutdown()
    server.server_close()


@pytest.fixture
def proxied_hook(proxy: FaultProxy) -> GangJobHook:
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_dict=proxy.config)
    hook.retry_policy = FAST
    return hook


@pytest.fixture
def proxied_async_hook(proxy: FaultProxy) -> AsyncGangJobHook:
    hook = AsyncGangJobHook(
        conn_id=None, kubernetes_conn_id=None, config_dict=proxy.config, connection_extras={}
    )
    hook.retry_policy = FAST
    return hook


# -- PyTorchJob and PodGroup lifecycle (sync) ---------------------------------------------------


def test_pytorchjob_is_created_found_and_deleted_once(hook: GangJobHook, test_id: str) -> None:
    name, job = submit_labelled(hook, test_id)

    assert job["metadata"]["uid"]
    assert hook.get_pytorchjob(name, NS)["metadata"]["uid"] == job["metadata"]["uid"]  # type: ignore[index]
    found = hook.find_pytorchjobs(NS, f"test-id={test_id}")
    assert [j["metadata"]["name"] for j in found] == [name]
    assert hook.find_pytorchjobs(NS, "test-id=nobody") == []

    assert hook.delete_pytorchjob(name, NS, uid=job["metadata"]["uid"]) is True
    assert hook.wait_deleted("pytorchjob", name, NS, timeout=15) is True
    assert hook.get_pytorchjob(name, NS) is None
    assert hook.delete_pytorchjob(name, NS) is False


def test_delete_with_another_uid_is_refused_with_409(hook: GangJobHook, test_id: str) -> None:
    name = f"hk-{test_id}"
    podgroup = job_spec().build_podgroup(name, NS, labels={"test-id": test_id})
    assert podgroup is not None
    created = hook.create_podgroup(podgroup, NS)

    with pytest.raises(GangApiError) as refused:
        hook.delete_podgroup(name, NS, uid="00000000-0000-0000-0000-000000000000")
    assert refused.value.status == 409
    assert (refused.value.verb, refused.value.resource) == ("delete", "podgroups.scheduling.volcano.sh")
    assert hook.get_podgroup(name, NS) is not None

    assert hook.delete_podgroup(name, NS, uid=created["metadata"]["uid"]) is True
    assert hook.wait_deleted("podgroup", name, NS, timeout=10) is True
    assert hook.delete_podgroup(name, NS) is False


def test_second_create_of_the_same_name_raises_409_for_the_caller_to_adopt(
    hook: GangJobHook, test_id: str
) -> None:
    name, _ = submit_labelled(hook, test_id)
    with pytest.raises(GangApiError) as conflict:
        hook.create_pytorchjob(job_spec().build_pytorchjob(name, NS, labels={"test-id": test_id}), NS)
    assert conflict.value.status == 409
    assert "already exists" in str(conflict.value)


def test_deleting_the_job_garbage_collects_the_owned_podgroup(hook: GangJobHook, test_id: str) -> None:
    name, job = submit_labelled(hook, test_id)
    owners = hook.get_podgroup(name, NS)["metadata"]["ownerReferences"]  # type: ignore[index]
    assert owners == [
        {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "name": name,
            "uid": job["metadata"]["uid"],
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]

    assert hook.delete_pytorchjob(name, NS, propagation="Foreground") is True
    assert hook.wait_deleted("podgroup", name, NS, timeout=15) is True
    assert hook.wait_deleted("pytorchjob", name, NS, timeout=15) is True


def test_get_queue_reads_the_cluster_scoped_queue(hook: GangJobHook) -> None:
    queue = hook.get_queue("default")
    assert queue is not None
    assert queue["status"]["state"] == "Open"
    assert hook.get_queue("no-such-queue") is None


def test_webhook_denial_is_an_api_error_not_a_permission_error(hook: GangJobHook, test_id: str) -> None:
    job = job_spec().build_pytorchjob(f"hk-{test_id}", NS, labels={"test-id": test_id})
    job["spec"]["pytorchReplicaSpecs"]["Master"]["replicas"] = 2

    with pytest.raises(GangApiError) as denied:
        hook.create_pytorchjob(job, NS)
    assert not isinstance(denied.value, GangPermissionError)
    assert denied.value.status == 403
    assert 'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied' in str(
        denied.value
    )
    assert "Master].replicas" in str(denied.value)


def test_invalid_job_keeps_the_servers_causes(hook: GangJobHook, test_id: str) -> None:
    job = job_spec().build_pytorchjob(f"hk-{test_id}", NS, labels={"test-id": test_id})
    job["spec"]["pytorchReplicaSpecs"]["Worker"]["replicas"] = "two"

    with pytest.raises(GangApiError) as invalid:
        hook.create_pytorchjob(job, NS)
    assert invalid.value.status == 422
    assert "spec.pytorchReplicaSpecs.Worker.replicas" in str(invalid.value)


# -- pods, events and logs ---------------------------------------------------------------------


def run_to_completion(hook: GangJobHook, test_id: str, duration: float = 0.5) -> str:
    name, _ = submit_labelled(hook, test_id, job_spec(duration))
    eventually(lambda: "Succeeded" in true_conditions(hook.get_pytorchjob(name, NS)), timeout=20)
    return name


def test_pods_events_and_logs_of_a_finished_job(hook: GangJobHook, test_id: str) -> None:
    name = run_to_completion(hook, test_id)

    pods = hook.list_job_pods(name, NS)
    assert sorted(p["metadata"]["name"] for p in pods) == [f"{name}-master-0", f"{name}-worker-0"]
    assert all(p["spec"]["nodeName"] and p["status"]["phase"] == "Succeeded" for p in pods)  # wire form
    master = f"{name}-master-0"
    events = hook.list_events(NS, master)
    assert "Started" in [e["reason"] for e in events]
    assert {e["involvedObject"]["name"] for e in events} == {master}

    assert hook.read_pod_log(master, NS).splitlines()[-3:] == list(LOG_LINES)
    assert hook.read_pod_log(master, NS, tail_lines=1) == LOG_LINES[-1] + "\n"
    assert hook.read_pod_log(master, NS, since_seconds=3600).splitlines()[-1] == LOG_LINES[-1]


def test_stream_pod_log_follows_the_running_container_to_its_end(hook: GangJobHook, test_id: str) -> None:
    name, _ = submit_labelled(hook, test_id, job_spec(duration=2.0))
    master = f"{name}-master-0"
    eventually(
        lambda: any(
            p["metadata"]["name"] == master and p["status"].get("phase") == "Running"
            for p in hook.list_job_pods(name, NS)
        ),
        timeout=20,
    )
    assert "Succeeded" not in true_conditions(hook.get_pytorchjob(name, NS))

    lines = list(hook.stream_pod_log(master, NS))

    assert lines[-3:] == list(LOG_LINES)


async def test_async_reads_of_a_finished_job(
    hook: GangJobHook, async_hook: AsyncGangJobHook, test_id: str
) -> None:
    name = run_to_completion(hook, test_id)
    master = f"{name}-master-0"

    job = await async_hook.get_pytorchjob(name, NS)
    assert "Succeeded" in true_conditions(job)
    podgroup = await async_hook.get_podgroup(name, NS)
    assert podgroup is not None
    assert podgroup["spec"]["minMember"] == 2
    assert (await async_hook.get_queue("default")) is not None
    assert await async_hook.get_queue("no-such-queue") is None
    pods = await async_hook.list_job_pods(name, NS)
    assert sorted(p["metadata"]["name"] for p in pods) == [master, f"{name}-worker-0"]
    assert pods[0]["status"]["phase"] == "Succeeded"
    events = await async_hook.list_events(NS, master)
    assert events
    assert all(e["involvedObject"]["name"] == master for e in events)
    assert await async_hook.read_pod_log(master, NS, tail_lines=2) == "\n".join(LOG_LINES[-2:]) + "\n"

    with pytest.raises(GangApiError) as refused:
        await async_hook.delete_pytorchjob(name, NS, uid="00000000-0000-0000-0000-000000000000")
    assert refused.value.status == 409
    assert await async_hook.delete_pytorchjob(name, NS, uid=job["metadata"]["uid"]) is True  # type: ignore[index]
    eventually(lambda: hook.get_podgroup(name, NS) is None, timeout=15)
    assert await async_hook.delete_podgroup(name, NS) is False
    eventually(lambda: hook.get_pytorchjob(name, NS) is None, timeout=15)
    assert await async_hook.delete_pytorchjob(name, NS) is False
    assert await async_hook.get_pytorchjob(name, NS) is None


# -- watch -------------------------------------------------------------------------------------


async def test_watch_yields_added_then_modified_with_resource_versions(
    hook: GangJobHook, async_hook: AsyncGangJobHook, test_id: str
) -> None:
    selector = f"test-id={test_id}"
    items, version = await async_hook.list_with_version("pytorchjob", NS, label_selector=selector)
    assert items == []
    assert version.isdigit()

    name, _ = submit_labelled(hook, test_id)
    seen: list[tuple[str, str]] = []
    async with contextlib.aclosing(
        async_hook.watch(
            "pytorchjob", NS, resource_version=version, label_selector=selector, timeout_seconds=20
        )
    ) as events:
        async for event in events:
            if event["type"] == "BOOKMARK":
                continue
            assert event["object"]["metadata"]["name"] == name
            seen.append((event["type"], event["object"]["metadata"]["resourceVersion"]))
            if event["type"] == "MODIFIED":
                break
    assert [kind for kind, _ in seen][:2] == ["ADDED", "MODIFIED"]
    versions = [int(v) for _, v in seen]
    assert versions == sorted(versions)
    assert versions[0] > int(version)

    pods, _ = await async_hook.list_with_version(
        "pod", NS, label_selector=f"training.kubeflow.org/job-name={name}"
    )
    assert all(p["metadata"]["labels"]["training.kubeflow.org/job-name"] == name for p in pods)


async def test_watch_from_a_compacted_version_raises_410() -> None:
    with start_apiserver(event_window=5) as server:
        hook = AsyncGangJobHook(
            conn_id=None, kubernetes_conn_id=None, config_file=server.kubeconfig_path, connection_extras={}
        )
        _, start = await hook.list_with_version("pytorchjob", NS)
        sync = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=server.kubeconfig_path)
        for index in range(8):
            sync.create_pytorchjob(job_spec().build_pytorchjob(f"old-{index}", NS), NS)

        with pytest.raises(GangApiError) as gone:
            async for _ in hook.watch("pytorchjob", NS, resource_version=start, timeout_seconds=5):
                pass
    assert gone.value.status == 410
    assert (gone.value.verb, gone.value.resource) == ("watch", "pytorchjobs.kubeflow.org")


# -- discovery -----------------------------------------------------------------------------------


def test_check_api_passes_where_the_training_operator_and_volcano_are_installed(hook: GangJobHook) -> None:
    hook.check_api(require_volcano=True)


def test_check_api_names_the_missing_pytorchjob_crd(proxied_hook: GangJobHook, proxy: FaultProxy) -> None:
    proxy.faults.append(Fault("GET", "/apis/kubeflow.org/v1", status=404, times=99))

    with pytest.raises(GangCRDNotInstalled) as missing:
        proxied_hook.check_api()
    assert str(missing.value) == (
        "PyTorchJob CRD is not installed on this cluster (kubeflow.org/v1 pytorchjobs not served): "
        "install the Kubeflow training-operator"
    )


def test_check_api_only_asks_for_volcano_when_told(proxied_hook: GangJobHook, proxy: FaultProxy) -> None:
    proxy.faults.append(
        Fault(
            "GET",
            "/apis/scheduling.volcano.sh/v1beta1",
            status=200,
            times=99,
            body={
                "kind": "APIResourceList",
                "groupVersion": "scheduling.volcano.sh/v1beta1",
                "resources": [{"name": "podgroups", "namespaced": True, "kind": "PodGroup"}],
            },
        )
    )
    proxied_hook.check_api(require_volcano=False)

    with pytest.raises(
        GangCRDNotInstalled,
        match=r"^Volcano is not installed on this cluster "
        r"\(scheduling.volcano.sh/v1beta1 queues not served\): install Volcano",
    ):
        proxied_hook.check_api(require_volcano=True)


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        (None, "podgroups, queues not served"),
        ({"resources": []}, "podgroups, queues not served"),
        ({"resources": [{"name": "podgroups"}, {"name": "podgroups/status"}]}, "queues not served"),
        ({"resources": [{"name": "podgroups"}, {"name": "queues"}]}, None),
    ],
    ids=["group-not-served", "empty", "no-queues", "complete"],
)
def test_evaluate_discovery(resources: dict[str, Any] | None, expected: str | None) -> None:
    error = evaluate_discovery(VOLCANO_API, resources)
    if expected is None:
        assert error is None
    else:
        assert error is not None
        assert expected in str(error)
    assert evaluate_discovery(PYTORCHJOB_API, {"resources": [{"name": "pytorchjobs"}]}) is None


# -- error translation (pure) ------------------------------------------------------------------


def api_exception(status: int, body: dict[str, Any] | None) -> ApiException:
    error = ApiException(status=status, reason="Forbidden" if status == 403 else "Error")
    error.body = json.dumps(body).encode() if body is not None else None
    return error


def test_rbac_403_names_verb_resource_namespace_and_the_fix() -> None:
    request = ApiRequest("create", "pytorchjobs.kubeflow.org", "train-1", "ml")
    error = translate_api_error(
        api_exception(403, rbac_forbidden("create", "pytorchjobs.kubeflow.org", "ml")), request
    )

    assert isinstance(error, GangPermissionError)
    assert (error.status, error.verb, error.resource, error.namespace) == (
        403,
        "create",
        "pytorchjobs.kubeflow.org",
        "ml",
    )
    message = str(error)
    assert 'cannot create pytorchjobs.kubeflow.org in namespace "ml"' in message
    assert (
        "in a Role bound to the Airflow service account; "
        "airflow_gang.hooks.REQUIRED_PERMISSIONS lists every permission" in message
    )
    assert 'User "system:serviceaccount:airflow:worker"' in message


def test_rbac_403_on_a_cluster_scoped_queue_asks_for_a_cluster_role() -> None:
    request = ApiRequest("get", "queues.scheduling.volcano.sh", "research", None)
    error = translate_api_error(api_exception(403, None), request)
    assert isinstance(error, GangPermissionError)
    assert "cluster-wide" in str(error)
    assert "in a ClusterRole bound" in str(error)


@pytest.mark.parametrize(
    "message",
    [
        'admission webhook "validator.pytorchjob.training-operator.kubeflow.org" denied the request: '
        "spec.pytorchReplicaSpecs[Master].replicas: Forbidden: must be 1",
        'pytorchjobs.kubeflow.org "train-1" is forbidden: exceeded quota: gpu-quota, '
        "requested: count/pytorchjobs.kubeflow.org=1",
        "unable to create new content in namespace ml because it is being terminated",
    ],
    ids=["webhook", "quota", "terminating-namespace"],
)
def test_other_403s_are_api_errors_with_the_servers_words(message: str) -> None:
    body = {"kind": "Status", "status": "Failure", "message": message, "reason": "Forbidden", "code": 403}
    error = translate_api_error(
        api_exception(403, body), ApiRequest("create", "pytorchjobs.kubeflow.org", "train-1", "ml")
    )
    assert type(error) is GangApiError
    assert error.status == 403
    assert message in str(error)


def test_422_keeps_causes_the_message_does_not_spell_out() -> None:
    body = {
        "kind": "Status",
        "message": 'PyTorchJob.kubeflow.org "train-1" is invalid',
        "reason": "Invalid",
        "details": {
            "causes": [{"reason": "FieldValueRequired", "message": "Required value", "field": "spec.x"}]
        },
        "code": 422,
    }
    error = translate_api_error(
        api_exception(422, body), ApiRequest("create", "pytorchjobs.kubeflow.org", "train-1", "ml")
    )
    assert error.status == 422
    assert "is invalid" in str(error)
    assert "spec.x: Required value" in str(error)


# -- retries, through the fault proxy -----------------------------------------------------------


def test_reads_are_retried_through_503s(proxied_hook: GangJobHook, proxy: FaultProxy) -> None:
    proxy.faults.append(
        Fault("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default", status=503, times=2)
    )

    queue = proxied_hook.get_queue("default")

    assert queue is not None
    assert queue["metadata"]["name"] == "default"
    assert proxy.seen.count(("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default")) == 3


def test_retries_give_up_with_the_last_status(proxied_hook: GangJobHook, proxy: FaultProxy) -> None:
    proxy.faults.append(
        Fault("GET", "/apis/scheduling.volcano.sh/v1beta1/queues/default", status=503, times=99)
    )

    with pytest.raises(GangApiError) as failed:
        proxied_hook.get_queue("default")
    assert failed.value.status == 503
    assert len(proxy.seen) == FAST.attempts


QUEUE_PATH = "/apis/scheduling.volcano.sh/v1beta1/queues/default"


def test_inside_riding_out_a_call_waits_through_an_outage_longer_than_its_retries(
    proxied_hook: GangJobHook, proxy: FaultProxy
) -> None:
    proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=FAST.attempts * 3))
    pauses: list[float] = []
    outage = Outage("queue default", timeout=600)

    with proxied_hook.riding_out(outage, name="j", namespace=NS, sleep=pauses.append):
        queue = proxied_hook.get_queue("default")

    assert queue is not None
    assert queue["metadata"]["name"] == "default"
    assert proxy.seen.count(("GET", QUEUE_PATH)) == FAST.attempts * 3 + 1
    assert len(pauses) == 3  # one pause per exhausted round of the hook's own retries
    assert not outage.active  # the episode ended with the answer


def test_riding_out_ends_with_the_block_is_turned_off_by_none_and_stays_in_its_thread(
    proxied_hook: GangJobHook, proxy: FaultProxy
) -> None:
    outage = Outage("queue default", timeout=600)
    with proxied_hook.riding_out(outage, sleep=lambda _seconds: None):
        proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=FAST.attempts))
        with proxied_hook.riding_out(None), pytest.raises(GangApiError) as bounded:
            proxied_hook.get_queue("default")
        assert bounded.value.status == 503
        proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=FAST.attempts))
        in_thread: list[BaseException] = []

        def look() -> None:
            try:
                proxied_hook.get_queue("default")
            except GangApiError as error:
                in_thread.append(error)

        thread = threading.Thread(target=look)
        thread.start()
        thread.join(30)
        assert [getattr(error, "status", None) for error in in_thread] == [503]
        # Other hooks are not affected either: the block belongs to this hook.
        other = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_dict=proxy.config)
        other.retry_policy = FAST
        proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=FAST.attempts))
        with pytest.raises(GangApiError):
            other.get_queue("default")
    proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=FAST.attempts))
    with pytest.raises(GangApiError):
        proxied_hook.get_queue("default")


def test_riding_out_raises_a_refusal_at_once_and_gives_up_after_the_outage_timeout(
    proxied_hook: GangJobHook, proxy: FaultProxy
) -> None:
    proxy.faults.append(Fault("GET", QUEUE_PATH, status=403, body=rbac_forbidden("get", "queues", NS)))
    riding = proxied_hook.riding_out(Outage("queue default", timeout=600), sleep=lambda _seconds: None)
    with riding, pytest.raises(GangPermissionError):
        proxied_hook.get_queue("default")
    assert proxy.seen.count(("GET", QUEUE_PATH)) == 1

    proxy.faults.append(Fault("GET", QUEUE_PATH, status=503, times=10_000))
    riding = proxied_hook.riding_out(Outage("queue default", timeout=0.3), name="j", namespace=NS)
    with riding, pytest.raises(GangApiUnavailable) as unavailable:
        proxied_hook.get_queue("default")
    assert (unavailable.value.name, unavailable.value.namespace) == ("j", NS)
    assert "more than api_unavailable_timeout=0s" in str(unavailable.value)


def test_rbac_403_from_the_wire_is_a_permission_error_without_retries(
    proxied_hook: GangJobHook, proxy: FaultProxy
) -> None:
    path = f"/api/v1/namespaces/{NS}/pods"
    proxy.faults.append(Fault("GET", path, status=403, body=rbac_forbidden("list", "pods", NS)))

    with pytest.raises(GangPermissionError) as denied:
        proxied_hook.list_job_pods("train-1", NS)
    assert (denied.value.verb, denied.value.resource, denied.value.namespace) == ("list", "pods", NS)
    assert len(proxy.seen) == 1


def test_create_is_retried_when_the_connection_drops_before_the_server_saw_it(
    proxied_hook: GangJobHook, proxy: FaultProxy, hook: GangJobHook, test_id: str
) -> None:
    path = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
    proxy.faults.append(Fault("POST", path, drop=True))
    name = f"hk-{test_id}"

    created = proxied_hook.create_pytorchjob(
        job_spec().build_pytorchjob(name, NS, labels={"test-id": test_id}), NS
    )

    assert created["metadata"]["name"] == name
    assert proxy.seen.count(("POST", path)) == 2


def test_create_whose_reply_was_lost_reports_409_for_adoption(
    proxied_hook: GangJobHook, proxy: FaultProxy, hook: GangJobHook, test_id: str
) -> None:
    path = f"/apis/kubeflow.org/v1/namespaces/{NS}/pytorchjobs"
    proxy.faults.append(Fault("POST", path, drop=True, forward_first=True))
    name = f"hk-{test_id}"

    with pytest.raises(GangApiError) as conflict:
        proxied_hook.create_pytorchjob(job_spec().build_pytorchjob(name, NS, labels={"test-id": test_id}), NS)

    assert conflict.value.status == 409
    assert "adopt it only if its identity labels match" in str(conflict.value)
    assert hook.get_pytorchjob(name, NS)["metadata"]["labels"]["test-id"] == test_id  # type: ignore[index]


async def test_async_calls_are_retried_through_dropped_connections_and_503s(
    proxied_async_hook: AsyncGangJobHook, proxy: FaultProxy
) -> None:
    path = "/apis/scheduling.volcano.sh/v1beta1/queues/default"
    proxy.faults += [Fault("GET", path, drop=True), Fault("GET", path, status=503)]

    queue = await proxied_async_hook.get_queue("default")

    assert queue is not None
    assert queue["metadata"]["name"] == "default"
    assert proxy.seen.count(("GET", path)) == 3


# -- connections, and the permissions the hooks need ---------------------------------------------


def ml_team_connection(cluster: SimCluster, monkeypatch: pytest.MonkeyPatch) -> None:
    """``kubernetes_default`` from the environment: the cluster's kubeconfig file, namespace ml-team."""
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps(
            {
                "conn_type": "kubernetes",
                "extra": {"kube_config_path": cluster.kubeconfig_path, "namespace": "ml-team"},
            }
        ),
    )


async def trigger_reads_the_queue(hook_kwargs: dict[str, Any]) -> bool:
    """Whether a trigger given these kwargs reaches the cluster (reads the default queue)."""
    async_hook = await GangJobTrigger("any", "default", "uid", hook_kwargs=hook_kwargs).hook()
    try:
        return await async_hook.get_queue("default") is not None
    finally:
        await async_hook.close()


async def test_hook_from_an_airflow_connection_and_handed_to_the_triggerer(
    cluster: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    ml_team_connection(cluster, monkeypatch)
    hook = GangJobHook()
    assert hook.get_namespace() == "ml-team"
    assert hook.get_queue("default") is not None

    kwargs = hook.async_hook_kwargs()
    # What the trigger table stores: the connection's name, no credentials and no extras.
    assert kwargs == {"conn_id": "kubernetes_default"}
    assert cluster.apiserver is not None
    assert cluster.apiserver.token not in json.dumps(kwargs)
    # The trigger looks the connection up where it runs (here from the environment, in a
    # triggerer through its supervisor).
    assert await trigger_reads_the_queue(kwargs)


async def test_kubeconfig_content_travels_only_when_configured_to(
    cluster: SimCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``[gang] kubeconfig_to_triggerer``: for a kubeconfig file that exists on workers alone."""
    ml_team_connection(cluster, monkeypatch)
    monkeypatch.setenv("AIRFLOW__GANG__KUBECONFIG_TO_TRIGGERER", "True")
    kwargs = GangJobHook().async_hook_kwargs()
    json.dumps(kwargs)  # what a trigger serialises
    assert kwargs["connection_extras"] == {"namespace": "ml-team"}
    assert kwargs["config_dict"]["current-context"]
    # The triggerer has no such connection: the kwargs alone must do.
    monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT")
    assert await trigger_reads_the_queue(kwargs)


def rbac_rule(method: str, url: str) -> tuple[str, str, str] | None:
    """The (api group, resource, verb) RBAC checks for one request, as kube-apiserver derives it.

    None for discovery (``/api``, ``/apis/<group>/<version>``): not a resource request.
    """
    parts = urlsplit(url)
    segments = parts.path.strip("/").split("/")
    group = "" if segments[0] == "api" else segments[1]
    rest = segments[2:] if segments[0] == "api" else segments[3:]
    if rest[:1] == ["namespaces"]:
        rest = rest[2:]
    if not rest:
        return None
    resource = rest[0] + (f"/{rest[2]}" if len(rest) > 2 else "")
    named = len(rest) > 1
    # kube-apiserver parses booleans with Go's strconv.ParseBool: kubernetes_asyncio sends "True".
    watch = [v.lower() for v in parse_qs(parts.query).get("watch", [])] in (["true"], ["1"])
    verb = {"POST": "create", "PATCH": "patch", "DELETE": "delete", "PUT": "update"}.get(method)
    if verb is None:
        verb = "get" if named else ("watch" if watch else "list")
    return group, resource, verb


async def test_required_permissions_cover_every_request_the_hooks_make(
    proxy: FaultProxy, proxied_hook: GangJobHook, proxied_async_hook: AsyncGangJobHook, test_id: str
) -> None:
    hook, ahook = proxied_hook, proxied_async_hook
    name = run_to_completion(hook, test_id, duration=0.2)
    master = f"{name}-master-0"
    hook.find_pytorchjobs(NS, f"test-id={test_id}")
    hook.get_queue("default")
    # The UI plugin's read-only overview lists.
    hook.list_pytorchjobs(NS)
    hook.list_podgroups(NS, f"test-id={test_id}")
    hook.list_pods(NS, "training.kubeflow.org/job-name")
    hook.list_queues()
    hook.list_namespace_events(NS)
    hook.set_pytorchjob_suspended(name, NS, False)
    hook.list_events(NS, master)
    hook.read_pod_log(master, NS, tail_lines=1)
    list(hook.stream_pod_log(master, NS))
    for kind in ("pytorchjob", "podgroup", "pod"):
        _, version = await ahook.list_with_version(kind, NS)
        async for _ in ahook.watch(kind, NS, resource_version=version, timeout_seconds=1):
            pass
    await ahook.get_podgroup(name, NS)
    await ahook.list_job_pods(name, NS)
    await ahook.list_events(NS, master)
    await ahook.read_pod_log(master, NS)
    await ahook.delete_podgroup(name, NS)
    await ahook.delete_pytorchjob(name, NS)
    hook.delete_pytorchjob(name, NS)
    hook.delete_podgroup(name, NS)
    # A TrainJob's calls (TrainJobOperator): its runtime, the job itself, its watch.
    trainjob = TrainJobSpec(image="ghcr.io/acme/train:1", suspend=True).build_trainjob(f"tj-{name}", NS)
    hook.get_training_runtime("torch-distributed", "ClusterTrainingRuntime", NS)
    hook.get_training_runtime("torch-distributed", "TrainingRuntime", NS)
    hook.create_job(TRAINJOB, trainjob, NS)
    hook.get_job(TRAINJOB, f"tj-{name}", NS)
    hook.list_jobs(TRAINJOB, NS, f"test-id={test_id}")
    hook.set_job_suspended(TRAINJOB, f"tj-{name}", NS, True)
    _, version = await ahook.list_with_version("trainjob", NS)
    async for _ in ahook.watch("trainjob", NS, resource_version=version, timeout_seconds=1):
        pass
    await ahook.get_job(TRAINJOB, f"tj-{name}", NS)
    # What confirms a TrainJob's deletion: its JobSet and batch Jobs, listed.
    hook.list_job_children(TRAINJOB, f"tj-{name}", NS)
    await ahook.list_job_children(TRAINJOB, f"tj-{name}", NS)
    await ahook.delete_job(TRAINJOB, f"tj-{name}", NS)
    # A Volcano Job's (VolcanoJobOperator): the job, its watch; Volcano's controller makes the rest.
    submit(f"vc-{name}", VolcanoJobSpec(image="ghcr.io/acme/train:1", workers=0), hook=hook, namespace=NS)
    hook.get_job(VCJOB, f"vc-{name}", NS)
    hook.list_jobs(VCJOB, NS, f"test-id={test_id}")
    _, version = await ahook.list_with_version(VCJOB.watch_name, NS)
    async for _ in ahook.watch(VCJOB.watch_name, NS, resource_version=version, timeout_seconds=1):
        pass
    await ahook.delete_job(VCJOB, f"vc-{name}", NS)

    hook.check_api(require_volcano=True)  # discovery: no RBAC rule needed
    used = {rule for method, url in proxy.seen if (rule := rbac_rule(method, url)) is not None}
    assert used <= set(REQUIRED_PERMISSIONS)
    assert set(REQUIRED_PERMISSIONS) - used == {("kubeflow.org", "pytorchjobs/finalizers", "update")}
    assert len(set(REQUIRED_PERMISSIONS)) == len(REQUIRED_PERMISSIONS)

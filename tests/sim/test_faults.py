"""Fault injection in the simulator's API server, observed the way users see it.

Everything goes over real HTTPS with the official ``kubernetes`` client: injected errors are
Status objects with kube-apiserver's codes and reasons (and ``Retry-After`` on 429), watches end
early or get 410 Gone on resume, an outage refuses connections and comes back on the same port
with every object, external deletions and node failures happen at their time. The same seed
gives the same faulted requests; the simulator's own controllers are spared by default and
survive an outage. Entry points: ``SimCluster(faults=...)``, ``set_faults``, ``POST
/sim/v1/faults`` and ``airflow-gang sim --faults``.
"""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes import config as k8s_config
from kubernetes import watch as k8s_watch

from airflow_gang.cli import build_parser
from airflow_gang.spec import GangJobSpec
from gang_sim.apiserver.server import ApiServerHandle, start_apiserver
from gang_sim.cluster import SimCluster
from gang_sim.conventions import CONTROLLERS_USER_AGENT
from gang_sim.faults import FAULT_KINDS, FaultSpec, FaultSpecError, load_fault_spec
from tests.sim.apiserver.helpers import call, pod_manifest, pytorchjob_manifest, status_of
from tests.sim.seed import job_state
from tests.waiting import eventually

PYTORCH = ("kubeflow.org", "v1")
VOLCANO = ("scheduling.volcano.sh", "v1beta1")


# --------------------------------------------------------------------------------------------
# Fixtures: one bare API server for the request-level faults, clients with their own settings
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def apiserver() -> Iterator[ApiServerHandle]:
    with start_apiserver() as handle:
        yield handle


@pytest.fixture
def faulty(apiserver: ApiServerHandle) -> Iterator[ApiServerHandle]:
    """The module's API server, with no faults left behind by the test."""
    yield apiserver
    apiserver.clear_faults()


@pytest.fixture
def client_factory(apiserver: ApiServerHandle) -> Iterator[Callable[..., k8s.ApiClient]]:
    """Official clients with a chosen User-Agent; ``retries=False`` shows 429/503 as they come."""
    opened: list[k8s.ApiClient] = []

    def make(user_agent: str | None = None, *, retries: bool = True, kubeconfig: str = "") -> k8s.ApiClient:
        configuration = k8s.Configuration()
        k8s_config.load_kube_config(
            config_file=kubeconfig or apiserver.kubeconfig_path, client_configuration=configuration
        )
        if not retries:
            configuration.retries = False
        client = k8s.ApiClient(configuration)
        if user_agent:
            client.user_agent = user_agent
        opened.append(client)
        return client

    yield make
    for client in opened:
        client.close()


def delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    """The counters that moved."""
    return {kind: after[kind] - before[kind] for kind in after if after[kind] != before[kind]}


def faulted_indices(core: k8s.CoreV1Api, namespace: str, requests: int = 40) -> list[int]:
    """Which of ``requests`` sequential pod lists got an injected error."""
    statuses = {}
    for index in range(requests):
        try:
            core.list_namespaced_pod(namespace)
        except k8s.ApiException as error:
            statuses[index] = error.status
    assert set(statuses.values()) <= {500}
    return sorted(statuses)


# --------------------------------------------------------------------------------------------
# The spec
# --------------------------------------------------------------------------------------------


def test_spec_loads_from_yaml_file_inline_json_and_mappings(tmp_path: Path) -> None:
    document = {
        "seed": 7,
        "clients": ["airflow", "bench"],
        "errors": [{"verbs": ["create"], "resources": ["pods"], "rate": 0.05, "status": 429}],
        "latency": [{"rate": 1.0, "seconds": 0.2}],
        "watches": {"cut_after_events": 5, "gone_on_resume_rate": 0.5},
        "outages": [{"start": 10, "duration": 5}, {"start": 20, "duration": 1}],
        "deletions": [{"at": 12, "kind": "pytorchjob", "label_selector": "team in (a,b)"}],
        "node_failures": [
            {"at": 20, "node": "sim-node-1", "duration": 3},
            {"at": 5, "node": "n", "delete_node_after": 9},
        ],
        "kubelet_evictions": [{"at": 1, "pod": "p", "usage": "1Gi"}],
    }
    path = tmp_path / "faults.yaml"
    path.write_text(yaml.safe_dump(document), encoding="utf-8")
    from_file = load_fault_spec(path)
    assert from_file == load_fault_spec(str(path)) == load_fault_spec(json.dumps(document))
    assert from_file == load_fault_spec(document) == load_fault_spec(from_file)
    assert from_file.errors[0].retry_after == 1, "Retry-After defaults to one second"
    assert from_file.deletions[0].namespace == "default"
    eviction = from_file.kubelet_evictions[0]
    assert (eviction.namespace, eviction.resource, eviction.threshold, eviction.available) == (
        "default",
        "memory",
        "100Mi",
        "80Mi",
    )
    assert load_fault_spec({}) == FaultSpec(), "every section is optional"


@pytest.mark.parametrize(
    ("document", "named"),
    [
        ({"erors": []}, "erors: unknown field"),
        ({"errors": [{"status": 404}]}, "errors[0].status"),
        ({"errors": [{"status": 503, "rate": 1.5}]}, "errors[0].rate"),
        ({"errors": [{"status": 503, "verbs": ["GET"]}]}, "errors[0].verbs[0]"),
        ({"latency": [{"seconds": 1, "sloth": True}]}, "latency[0].sloth: unknown field"),
        ({"watches": {"cut_after_events": 0}}, "watches.cut_after_events"),
        ({"deletions": [{"at": 1, "kind": "pod", "name": "x"}]}, "deletions[0].kind"),
        ({"deletions": [{"at": 1, "kind": "pytorchjob"}]}, "exactly one of name and label_selector"),
        ({"deletions": [{"at": 1, "kind": "podgroup", "label_selector": "a in b"}]}, "label_selector"),
        ({"node_failures": [{"node": "n"}]}, "node_failures[0].at"),
        (
            {"node_failures": [{"at": 1, "node": "n", "duration": 1, "delete_node_after": 2}]},
            "at most one of",
        ),
        ({"kubelet_evictions": [{"at": 1, "pod": "p", "resource": "gpu"}]}, "kubelet_evictions[0].resource"),
        ({"outages": [{"start": 1, "duration": 5}, {"start": 3, "duration": 1}]}, "outages overlap"),
    ],
)
def test_a_bad_spec_is_rejected_naming_the_field(document: dict[str, Any], named: str) -> None:
    with pytest.raises(FaultSpecError, match=re.escape(named)):
        load_fault_spec(document)


def test_a_missing_spec_file_says_so(tmp_path: Path) -> None:
    with pytest.raises(FaultSpecError, match="no such file"):
        load_fault_spec(tmp_path / "absent.yaml")


def test_a_cluster_with_a_bad_spec_fails_before_it_starts() -> None:
    with pytest.raises(FaultSpecError, match=re.escape("errors[0].status")):
        SimCluster(faults={"errors": [{"status": 418}]})


# --------------------------------------------------------------------------------------------
# Per-request faults
# --------------------------------------------------------------------------------------------


def test_same_seed_same_faulted_requests(
    faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str
) -> None:
    errors = [{"verbs": ["list"], "resources": ["pods"], "rate": 0.3, "status": 500}]
    faulty.set_faults({"seed": 7, "errors": errors})
    first = faulted_indices(core, namespace)
    faulty.set_faults({"seed": 7, "errors": errors})
    assert faulted_indices(core, namespace) == first
    assert 0 < len(first) < 40
    # Latency draws from a stream of its own: adding a rule does not move the errors.
    latency = [{"verbs": ["list"], "rate": 0.5, "seconds": 0.001}]
    faulty.set_faults({"seed": 7, "errors": errors, "latency": latency})
    assert faulted_indices(core, namespace) == first
    faulty.set_faults({"seed": 8, "errors": errors})
    assert faulted_indices(core, namespace) != first


@pytest.mark.parametrize(
    ("status", "reason", "message"),
    [
        (500, "InternalError", "Internal error occurred: injected by the simulator's fault spec"),
        (503, "ServiceUnavailable", "the server is currently unable to handle the request"),
        (429, "TooManyRequests", "Too many requests, please try again later."),
    ],
)
def test_errors_are_status_objects_as_kube_apiserver_sends_them(
    faulty: ApiServerHandle,
    client_factory: Callable[..., k8s.ApiClient],
    namespace: str,
    status: int,
    reason: str,
    message: str,
) -> None:
    core = k8s.CoreV1Api(client_factory(retries=False))
    before = faulty.state.faults.counts()
    faulty.set_faults(
        {"errors": [{"verbs": ["get"], "resources": ["namespaces"], "status": status, "retry_after": 2}]}
    )
    with pytest.raises(k8s.ApiException) as caught:
        core.read_namespace(namespace)
    body = status_of(caught.value)
    assert caught.value.status == status
    assert {key: body[key] for key in ("kind", "apiVersion", "status", "code", "reason")} == {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "code": status,
        "reason": reason,
    }
    assert body["message"].startswith(message)
    assert "injected" in body["message"]
    assert caught.value.headers.get("Retry-After") == ("2" if status == 429 else None)
    assert core.list_namespace().items, "requests the rule does not pick are served"
    assert delta(before, faulty.state.faults.counts()) == {f"error_{status}": 1}


def test_the_official_client_honours_retry_after_on_429(
    faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str
) -> None:
    """urllib3 (under the official client) retries a 429 that carries Retry-After, by default."""
    before = faulty.state.faults.counts()
    faulty.set_faults(
        {
            "seed": 1,
            "errors": [{"verbs": ["get"], "resources": ["namespaces"], "status": 429, "retry_after": 0}],
        }
    )
    with pytest.raises(k8s.ApiException) as caught:
        core.read_namespace(namespace)
    assert caught.value.status == 429
    assert delta(before, faulty.state.faults.counts()) == {"error_429": 4}, "one try and 3 retries"


def test_latency_delays_the_picked_requests(
    faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str
) -> None:
    before = faulty.state.faults.counts()
    faulty.set_faults({"latency": [{"verbs": ["get"], "resources": ["namespaces"], "seconds": 0.4}]})
    started = time.monotonic()
    core.read_namespace(namespace)
    assert time.monotonic() - started >= 0.4
    core.list_namespace()
    assert delta(before, faulty.state.faults.counts()) == {"latency": 1}


def test_clients_filter_picks_by_user_agent_and_spares_the_controllers_by_default(
    faulty: ApiServerHandle, client_factory: Callable[..., k8s.ApiClient]
) -> None:
    bench = k8s.CoreV1Api(client_factory("bench-runner/1.0"))
    other = k8s.CoreV1Api(client_factory("someone-else/2.0"))
    controllers = k8s.CoreV1Api(client_factory(CONTROLLERS_USER_AGENT))
    everything = {"errors": [{"verbs": ["list"], "resources": ["namespaces"], "status": 503}]}

    faulty.set_faults({**everything, "clients": ["airflow", "bench"]})
    with pytest.raises(k8s.ApiException, match="503"):
        bench.list_namespace()
    assert other.list_namespace().items

    faulty.set_faults(everything)  # the default: every client except the simulator's controllers
    with pytest.raises(k8s.ApiException, match="503"):
        other.list_namespace()
    assert controllers.list_namespace().items

    faulty.set_faults({**everything, "clients": ["sim-controller-manager"]})  # named, they are faulted
    with pytest.raises(k8s.ApiException, match="503"):
        controllers.list_namespace()


# --------------------------------------------------------------------------------------------
# Watches
# --------------------------------------------------------------------------------------------


def make_pods(core: k8s.CoreV1Api, namespace: str, count: int) -> str:
    """Create ``count`` pods; return the resourceVersion of the list before them."""
    version: str = core.list_namespaced_pod(namespace).metadata.resource_version
    for index in range(count):
        core.create_namespaced_pod(namespace, pod_manifest(f"p{index}"))
    return version


def test_a_watch_is_cut_after_n_events(faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str) -> None:
    make_pods(core, namespace, 5)
    before = faulty.state.faults.counts()
    faulty.set_faults({"watches": {"cut_after_events": 3}})
    events = list(k8s_watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=30))
    assert [event["type"] for event in events] == ["ADDED"] * 3, "5 pods exist; the stream ended after 3"
    assert delta(before, faulty.state.faults.counts()) == {"watch_cut": 1}


def test_a_watch_is_cut_after_t_seconds(faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str) -> None:
    before = faulty.state.faults.counts()
    faulty.set_faults({"watches": {"cut_after_seconds": 0.3}})
    started = time.monotonic()
    assert list(k8s_watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=30)) == []
    assert time.monotonic() - started < 30, "the stream ended before its own timeout"
    assert delta(before, faulty.state.faults.counts()) == {"watch_cut": 1}


def test_a_resumed_watch_gets_410_gone(faulty: ApiServerHandle, core: k8s.CoreV1Api, namespace: str) -> None:
    version = make_pods(core, namespace, 2)
    before = faulty.state.faults.counts()
    faulty.set_faults({"watches": {"gone_on_resume_rate": 1.0}})
    # With timeoutSeconds the official Watch does not re-watch: it raises the 410 at once.
    with pytest.raises(k8s.ApiException) as caught:
        list(
            k8s_watch.Watch().stream(
                core.list_namespaced_pod, namespace, resource_version=version, timeout_seconds=5
            )
        )
    assert caught.value.status == 410
    assert delta(before, faulty.state.faults.counts()) == {"watch_gone": 1}
    fresh = list(k8s_watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=1))
    assert [event["type"] for event in fresh] == ["ADDED", "ADDED"], "a watch from scratch is not resumed"


# --------------------------------------------------------------------------------------------
# Timed faults: outages and external deletions
# --------------------------------------------------------------------------------------------


def refused(url: str) -> bool:
    host, port = url.removeprefix("https://").rsplit(":", 1)
    try:
        socket.create_connection((host, int(port)), timeout=1).close()
    except ConnectionRefusedError:
        return True
    return False


def test_an_outage_refuses_connections_then_the_same_port_serves_the_same_objects(
    faulty: ApiServerHandle,
    client_factory: Callable[..., k8s.ApiClient],
    api_client: k8s.ApiClient,
    core: k8s.CoreV1Api,
    namespace: str,
) -> None:
    make_pods(core, namespace, 3)
    kept = {pod.metadata.name: pod.metadata.uid for pod in core.list_namespaced_pod(namespace).items}
    ended = threading.Event()

    def follow() -> None:
        try:
            list(k8s_watch.Watch().stream(core.list_namespaced_pod, namespace, timeout_seconds=60))
        except (urllib3.exceptions.HTTPError, k8s.ApiException):
            pass
        finally:
            ended.set()

    watcher = threading.Thread(target=follow, daemon=True)
    watcher.start()
    url = faulty.url
    call(api_client, "POST", "/sim/v1/faults", {"outages": [{"start": 0.2, "duration": 1.5}]})
    eventually(lambda: refused(url), timeout=5, message="the listener closes")
    assert ended.wait(5), "an open watch is dropped by the outage"
    with pytest.raises(urllib3.exceptions.HTTPError):
        k8s.CoreV1Api(client_factory(retries=False)).list_namespace()

    listing = eventually(lambda: core.list_namespaced_pod(namespace), timeout=10, message="back")
    assert faulty.url == url
    assert {pod.metadata.name: pod.metadata.uid for pod in listing.items} == kept
    assert faulty.state.faults.counts()["outage"] >= 1


def test_clearing_the_spec_ends_an_outage_in_progress(faulty: ApiServerHandle, core: k8s.CoreV1Api) -> None:
    faulty.set_faults({"outages": [{"start": 0, "duration": 600}]})
    eventually(lambda: refused(faulty.url), timeout=5, message="the listener closes")
    faulty.clear_faults()
    assert eventually(core.list_namespace, timeout=10, message="listening again").items


def test_external_deletions_happen_at_their_time(
    faulty: ApiServerHandle, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    def create(name: str, team: str) -> None:
        job = pytorchjob_manifest(name, metadata={"labels": {"team": team}})
        custom.create_namespaced_custom_object(*PYTORCH, namespace, "pytorchjobs", job)

    def names() -> set[str]:
        listing = custom.list_namespaced_custom_object(*PYTORCH, namespace, "pytorchjobs")
        return {item["metadata"]["name"] for item in listing["items"]}

    for name, team in [("train-1", "x"), ("a-1", "a"), ("a-2", "a"), ("b-1", "b")]:
        create(name, team)
    before = faulty.state.faults.counts()
    faulty.set_faults(
        {
            "deletions": [
                {"at": 0.3, "kind": "pytorchjob", "namespace": namespace, "name": "train-1"},
                {"at": 0.3, "kind": "pytorchjob", "namespace": namespace, "label_selector": "team=a"},
                {"at": 0.3, "kind": "pytorchjob", "namespace": namespace, "name": "absent"},
            ]
        }
    )
    eventually(lambda: names() == {"b-1"}, timeout=5, message="train-1 and team=a deleted")
    assert delta(before, faulty.state.faults.counts()) == {"deletion": 3}


# --------------------------------------------------------------------------------------------
# The REST endpoint and the metrics
# --------------------------------------------------------------------------------------------


def test_rest_endpoint_replaces_reads_and_clears_the_spec(
    faulty: ApiServerHandle, api_client: k8s.ApiClient
) -> None:
    spec = {"seed": 3, "errors": [{"verbs": ["delete"], "rate": 0.5, "status": 503}]}
    posted = call(api_client, "POST", "/sim/v1/faults", spec)
    assert posted["kind"] == "FaultInjection"
    assert posted["spec"] == {"seed": 3, "errors": [{"verbs": ["delete"], "rate": 0.5, "status": 503}]}
    assert set(posted["faults"]) == set(FAULT_KINDS)
    assert call(api_client, "GET", "/sim/v1/faults")["spec"] == posted["spec"]
    assert faulty.state.faults.spec == load_fault_spec(spec)

    with pytest.raises(k8s.ApiException) as caught:
        call(api_client, "POST", "/sim/v1/faults", {"errors": [{"status": 404}], "surprise": 1})
    assert caught.value.status == 422
    body = status_of(caught.value)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Invalid", 422)
    assert "errors[0].status" in body["message"]
    assert "surprise: unknown field" in body["message"]
    assert call(api_client, "GET", "/sim/v1/faults")["spec"] == posted["spec"], "a bad spec changes nothing"

    assert call(api_client, "DELETE", "/sim/v1/faults")["spec"] is None
    assert faulty.state.faults.spec is None


def test_metrics_report_fault_counters_beside_the_request_counts(
    faulty: ApiServerHandle, api_client: k8s.ApiClient, core: k8s.CoreV1Api
) -> None:
    faulty.set_faults({"errors": [{"verbs": ["list"], "resources": ["nodes"], "status": 500}]})
    with pytest.raises(k8s.ApiException):
        core.list_node()
    metrics = call(api_client, "GET", "/sim/v1/metrics")
    assert {"kind", "apiVersion", "total", "requests", "faults"} <= set(metrics)
    assert metrics["kind"] == "RequestMetrics"
    assert list(metrics["faults"]) == list(FAULT_KINDS)
    assert metrics["faults"]["error_500"] >= 1


# --------------------------------------------------------------------------------------------
# A whole cluster: controllers spared, node failures, outages survived
# --------------------------------------------------------------------------------------------


def gang_job(duration: float, replicas: int = 2) -> GangJobSpec:
    return GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=replicas - 1,
        resources={"nvidia.com/gpu": 1},
        gang_scheduling="provider",
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": str(duration)}}},
    )


def submit(custom: k8s.CustomObjectsApi, name: str, spec: GangJobSpec) -> None:
    podgroup = spec.build_podgroup(name, "default")
    assert podgroup is not None
    custom.create_namespaced_custom_object(*VOLCANO, "default", "podgroups", podgroup)
    custom.create_namespaced_custom_object(
        *PYTORCH, "default", "pytorchjobs", spec.build_pytorchjob(name, "default")
    )


def succeeded(custom: k8s.CustomObjectsApi, name: str) -> bool:
    return job_state(custom, name) == "Succeeded"


def test_controllers_are_not_faulted_by_default(tmp_path: Path) -> None:
    spec_file = tmp_path / "faults.yaml"
    spec_file.write_text(
        yaml.safe_dump(
            {"errors": [{"verbs": ["get", "list", "watch"], "resources": ["pods"], "status": 503}]}
        ),
        encoding="utf-8",
    )
    with SimCluster(nodes=1, gpus_per_node=2, schedule_period=0.2, faults=spec_file) as cluster:
        with cluster.api_client() as api:
            core, custom = k8s.CoreV1Api(api), k8s.CustomObjectsApi(api)
            submit(custom, "spared", gang_job(0.2))
            with pytest.raises(k8s.ApiException, match="503"):
                core.list_namespaced_pod("default")
            eventually(lambda: succeeded(custom, "spared"), timeout=30, message="job succeeded")
            metrics = call(api, "GET", "/sim/v1/metrics")
        controller_pod_requests = sum(
            entry["count"]
            for entry in metrics["requests"]
            if entry["userAgent"] == CONTROLLERS_USER_AGENT
            and entry["resource"] == "pods"
            and entry["verb"] in ("get", "list", "watch")
        )
        assert controller_pod_requests > 0
        assert cluster.fault_counts()["error_503"] == 1, "only the test's own list was faulted"


def test_a_node_failure_silences_the_node_and_its_pods_go_once_it_is_back() -> None:
    """A failed node's kubelet goes silent: the node lifecycle controller marks it Unknown, the
    taint eviction controller deletes its pod (which stays Terminating: nobody confirms), and
    the kubelet back confirms the deletion (tests/sim/disruptions has the details)."""
    with (
        SimCluster(nodes=2, gpus_per_node=1, schedule_period=0.2, node_monitor_grace_period=2.0) as cluster,
        cluster.api_client() as api,
    ):
        core = k8s.CoreV1Api(api)
        pod = pod_manifest("long", nodeName="sim-node-1")
        pod["metadata"]["annotations"] = {"sim.airflow-gang.io/duration": "600"}
        core.create_namespaced_pod("default", pod)
        eventually(
            lambda: core.read_namespaced_pod("long", "default").status.phase == "Running",
            timeout=10,
            message="pod running",
        )

        def ready(node: str) -> str:
            conditions = core.read_node(node).status.conditions
            return next(c.status for c in conditions if c.type == "Ready")

        # Back 8 s in, as in tests/sim/disruptions: the pod is Terminating 5 s in (grace 2 s +
        # toleration 3 s), seen before the kubelet returns to confirm it.
        cluster.set_faults({"node_failures": [{"at": 0, "node": "sim-node-1", "duration": 8}]})
        eventually(lambda: ready("sim-node-1") == "Unknown", timeout=10, message="node Unknown")
        terminating = eventually(
            lambda: (p := core.read_namespaced_pod("long", "default")).metadata.deletion_timestamp and p,
            timeout=10,
            message="pod Terminating",
        )
        assert terminating.status.phase == "Running", "no kubelet wrote its end"
        assert [c.reason for c in terminating.status.conditions if c.type == "DisruptionTarget"] == [
            "DeletionByTaintManager"
        ]
        assert ready("sim-node-2") == "True"
        eventually(lambda: ready("sim-node-1") == "True", timeout=15, message="node recovered")
        eventually(lambda: not core.list_namespaced_pod("default").items, timeout=10, message="pod gone")
        assert cluster.fault_counts()["node_failure"] == 1


def test_controllers_survive_an_outage_and_finish_a_job_submitted_before_it() -> None:
    with SimCluster(nodes=1, gpus_per_node=2, schedule_period=0.2) as cluster, cluster.api_client() as api:
        custom = k8s.CustomObjectsApi(api)
        submit(custom, "through-outage", gang_job(0.5))
        cluster.set_faults({"outages": [{"start": 0, "duration": 1.5}]})
        eventually(lambda: refused(cluster.url), timeout=5, message="the listener closes")
        eventually(lambda: succeeded(custom, "through-outage"), timeout=30, message="job succeeded")
        assert cluster.fault_counts()["outage"] == 1
        # And the controllers still react to new work afterwards.
        submit(custom, "after-outage", gang_job(0.2))
        eventually(lambda: succeeded(custom, "after-outage"), timeout=30, message="second job succeeded")


# --------------------------------------------------------------------------------------------
# The command line
# --------------------------------------------------------------------------------------------


def test_sim_commands_take_a_faults_flag(tmp_path: Path) -> None:
    parser = build_parser()
    inline = parser.parse_args(["sim", "apiserver", "--faults", '{"seed": 3}'])
    assert inline.faults == FaultSpec(seed=3)
    spec_file = tmp_path / "faults.json"
    spec_file.write_text(json.dumps({"outages": [{"start": 1, "duration": 1}]}), encoding="utf-8")
    assert parser.parse_args(["sim", "--faults", str(spec_file)]).faults.outages[0].duration == 1
    assert parser.parse_args(["sim"]).faults is None


def test_a_bad_faults_flag_stops_the_command_naming_the_field(tmp_path: Path) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "gang_sim.cli",
            "apiserver",
            "--faults",
            '{"errors": [{"status": 404}]}',
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert "errors[0].status" in result.stderr


def test_sim_with_faults_serves_a_cluster_that_injects_them(
    tmp_path: Path, client_factory: Callable[..., k8s.ApiClient]
) -> None:
    kubeconfig = tmp_path / "sim.kubeconfig"
    spec = json.dumps({"errors": [{"verbs": ["list"], "resources": ["namespaces"], "status": 503}]})
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "gang_sim.cli",
            "--nodes",
            "1",
            "--gpus-per-node",
            "1",
            "--kubeconfig",
            str(kubeconfig),
            "--faults",
            spec,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        eventually(kubeconfig.exists, timeout=30, message="kubeconfig written")
        core = k8s.CoreV1Api(client_factory(f"cli-test/{uuid.uuid4().hex[:6]}", kubeconfig=str(kubeconfig)))

        def list_refused_with_503() -> bool:
            try:
                core.list_namespace()
            except k8s.ApiException as error:
                return error.status == 503
            return False  # the spec applies once the cluster is ready

        eventually(list_refused_with_503, timeout=30, message="injected 503")
        assert core.read_namespace("default").metadata.name == "default"
        process.send_signal(signal.SIGTERM)
        out, err = process.communicate(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()
            process.communicate()
    assert process.returncode == 0, err
    assert "fault injection:" in out

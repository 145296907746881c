"""The simulated kubelet against the real API server, observed through the official client."""

from __future__ import annotations

import functools
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from gang_sim.apiserver.server import ApiServerHandle
from gang_sim.controllers.kubelet.kubelet import Kubelet
from gang_sim.controllers.manager import ControllerManager
from tests.waiting import eventually

Json = dict[str, Any]
StartNodes = Callable[..., tuple[ControllerManager, list[str]]]
GPU_NODE = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2"}


@pytest.fixture
def start_nodes(apiserver: ApiServerHandle, core: k8s.CoreV1Api) -> Iterator[StartNodes]:
    """Start one manager running kubelets for ``count`` fresh nodes; all stopped and deleted after."""
    managers: list[ControllerManager] = []
    nodes: list[str] = []

    def start(count: int = 1, **options: Any) -> tuple[ControllerManager, list[str]]:
        names = [f"node-{uuid.uuid4().hex[:8]}" for _ in range(count)]
        factories = [
            functools.partial(Kubelet, node_name=name, capacity=GPU_NODE, period=0.05, **options)
            for name in names
        ]
        manager = ControllerManager(apiserver.kubeconfig_path, factories).start()
        managers.append(manager)
        nodes.extend(names)
        for name in names:  # a kubelet registers its Node on its first round, just after start()
            eventually(functools.partial(core.read_node, name))
        return manager, names

    yield start
    for manager in managers:
        manager.stop()
    for name in nodes:  # the API server outlives this module: leave no node for other tests to use
        core.delete_node(name)


def pod_json(core: k8s.CoreV1Api, namespace: str, name: str) -> Json:
    response = core.read_namespaced_pod(name, namespace, _preload_content=False)
    return cast(Json, json.loads(response.data))


def phase(core: k8s.CoreV1Api, namespace: str, name: str) -> str:
    return str(pod_json(core, namespace, name)["status"]["phase"])


def gone(core: k8s.CoreV1Api, namespace: str, name: str) -> bool:
    try:
        core.read_namespaced_pod(name, namespace)
    except k8s.ApiException as error:
        return bool(error.status == 404)
    return False


def pod_log(core: k8s.CoreV1Api, name: str, namespace: str, **params: Any) -> str:
    # The official client turns a text/plain body into "b'...'" unless it is read raw.
    response = core.read_namespaced_pod_log(name, namespace, _preload_content=False, **params)
    return str(response.data.decode())


def main_state(pod: Json) -> Json:
    return cast(Json, pod["status"]["containerStatuses"][0])


def holds_for(probe: Callable[[], bool], seconds: float) -> None:
    """Assert ``probe`` stays true for a whole window (the opposite of `eventually`)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert probe()
        time.sleep(0.05)


def make_pod(
    name: str,
    node: str | None,
    *,
    annotations: dict[str, str] | None = None,
    restart_policy: str = "Never",
    job: Json | None = None,
    rank: int = 0,
    command: list[str] | None = None,
) -> Json:
    container: Json = {"name": "pytorch", "image": "ghcr.io/acme/train:1"}
    if command:
        container["command"] = command
    metadata: Json = {"name": name, "annotations": annotations or {}}
    if job is not None:
        job_name, world = job["metadata"]["name"], 2
        metadata["labels"] = {"training.kubeflow.org/job-name": job_name}
        metadata["ownerReferences"] = [
            {
                "apiVersion": "kubeflow.org/v1",
                "kind": "PyTorchJob",
                "name": job_name,
                "uid": job["metadata"]["uid"],
                "controller": True,
            }
        ]
        container["env"] = [  # what the training-operator sets (docs/architecture.md#pytorchjob)
            {"name": "PYTHONUNBUFFERED", "value": "1"},
            {"name": "MASTER_ADDR", "value": f"{job_name}-master-0"},
            {"name": "MASTER_PORT", "value": "23456"},
            {"name": "WORLD_SIZE", "value": str(world)},
            {"name": "RANK", "value": str(rank)},
        ]
    spec: Json = {"containers": [container], "restartPolicy": restart_policy}
    if node is not None:
        spec["nodeName"] = node
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": spec}


def make_job(custom: k8s.CustomObjectsApi, namespace: str, name: str, workers: int = 1) -> Json:
    def replica(count: int) -> Json:
        template = {"spec": {"containers": [{"name": "pytorch", "image": "ghcr.io/acme/train:1"}]}}
        return {"replicas": count, "restartPolicy": "Never", "template": template}

    specs = {"Master": replica(1), **({"Worker": replica(workers)} if workers else {})}
    body = {
        "apiVersion": "kubeflow.org/v1",
        "kind": "PyTorchJob",
        "metadata": {"name": name},
        "spec": {"pytorchReplicaSpecs": specs},
    }
    return cast(
        Json, custom.create_namespaced_custom_object("kubeflow.org", "v1", namespace, "pytorchjobs", body)
    )


def bind(api_client: k8s.ApiClient, namespace: str, pod: str, node: str) -> None:
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod}, "target": {"name": node}}
    api_client.call_api(
        f"/api/v1/namespaces/{namespace}/pods/{pod}/binding",
        "POST",
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=binding,
        auth_settings=["BearerToken"],
        _preload_content=False,
    )


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


# --- node ---------------------------------------------------------------------------------------


def test_kubelet_registers_a_ready_node_with_its_capacity(
    start_nodes: StartNodes, core: k8s.CoreV1Api
) -> None:
    _, (node,) = start_nodes()

    found = core.read_node(node)

    expected = {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "2", "pods": "110"}
    assert found.status.capacity == expected
    assert found.status.allocatable == expected
    assert found.metadata.labels["kubernetes.io/hostname"] == node
    ready = next(c for c in found.status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert ready.last_heartbeat_time is not None


def test_each_node_advertises_its_own_reachable_kubelet_api_and_renews_its_lease(
    start_nodes: StartNodes, api_client: k8s.ApiClient, core: k8s.CoreV1Api
) -> None:
    _, nodes = start_nodes(2)

    found = [core.read_node(node) for node in nodes]

    # Only an InternalIP: kube-apiserver would try a Hostname first, and no sim node name resolves.
    assert [[(a.type, a.address) for a in n.status.addresses] for n in found] == [
        [("InternalIP", "127.0.0.1")]
    ] * 2
    ports = [n.status.daemon_endpoints.kubelet_endpoint.port for n in found]
    assert len(set(ports)) == 2
    for port in ports:  # HTTPS (self-signed), answering as a kubelet does
        with pytest.raises(urllib.error.HTTPError) as caught:
            urllib.request.urlopen(
                f"https://127.0.0.1:{port}/containerLogs/default/nobody/main",
                context=ssl._create_unverified_context(),  # no CA to check, like kube-apiserver
                timeout=5,
            )
        assert (caught.value.code, caught.value.read()) == (404, b'pod "nobody" does not exist\n')
    for node, owner in zip(nodes, found, strict=True):
        lease = k8s.CoordinationV1Api(api_client).read_namespaced_lease(node, "kube-node-lease")
        assert (lease.spec.holder_identity, lease.spec.lease_duration_seconds) == (node, 40)
        assert lease.spec.renew_time is not None
        assert [(r.kind, r.name, r.uid) for r in lease.metadata.owner_references] == [
            ("Node", node, owner.metadata.uid)
        ]


# --- script runtime -----------------------------------------------------------------------------


def test_script_pod_runs_then_succeeds_with_its_log(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes()
    notes = {"sim.airflow-gang.io/duration": "0.6", "sim.airflow-gang.io/log": "one\ntwo\nthree"}
    core.create_namespaced_pod(namespace, make_pod("train", node, annotations=notes))

    running = eventually(
        lambda: (p := pod_json(core, namespace, "train"))["status"]["phase"] == "Running" and p
    )
    assert running["status"]["podIP"] == running["status"]["hostIP"] == "127.0.0.1"
    assert main_state(running)["state"]["running"]["startedAt"]
    assert main_state(running)["ready"] is True
    assert {c["type"]: c["status"] for c in running["status"]["conditions"]} == {
        "PodScheduled": "True",
        "Initialized": "True",
        "ContainersReady": "True",
        "Ready": "True",
    }

    eventually(lambda: phase(core, namespace, "train") == "Succeeded")
    terminated = main_state(pod_json(core, namespace, "train"))["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (0, "Completed")
    assert terminated["startedAt"] <= terminated["finishedAt"]
    assert pod_log(core, "train", namespace) == "one\ntwo\nthree\n"
    assert pod_log(core, "train", namespace, tail_lines=1) == "three\n"


def test_exit_code_annotation_fails_the_pod_with_an_error(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes()
    notes = {"sim.airflow-gang.io/duration": "0.1", "sim.airflow-gang.io/exit-code": "3"}
    core.create_namespaced_pod(namespace, make_pod("crash", node, annotations=notes))

    eventually(lambda: phase(core, namespace, "crash") == "Failed")

    terminated = main_state(pod_json(core, namespace, "crash"))["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert "simulated failure (exit code 3)" in pod_log(core, "crash", namespace)


def test_fail_attempts_count_across_recreated_pods(
    start_nodes: StartNodes, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    _, (node,) = start_nodes()
    # Runs count from the job's creation (a bare pod's own would restart the count each time).
    job = make_job(custom, namespace, "flaky", workers=0)
    notes = {"sim.airflow-gang.io/duration": "0", "sim.airflow-gang.io/fail-attempts": "2"}
    outcomes = []
    for _ in range(3):
        core.create_namespaced_pod(namespace, make_pod("flaky", node, annotations=notes, job=job))
        eventually(lambda: phase(core, namespace, "flaky") in ("Succeeded", "Failed"))
        outcomes.append(main_state(pod_json(core, namespace, "flaky"))["state"]["terminated"]["exitCode"])
        core.delete_namespaced_pod("flaky", namespace)
        eventually(lambda: gone(core, namespace, "flaky"))

    assert outcomes == [1, 1, 0]


def test_on_failure_restarts_the_container_in_place_until_it_succeeds(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes(restart_backoff=0.05)
    notes = {"sim.airflow-gang.io/duration": "0.05", "sim.airflow-gang.io/fail-attempts": "1"}
    core.create_namespaced_pod(
        namespace, make_pod("retry", node, annotations=notes, restart_policy="OnFailure")
    )

    eventually(lambda: phase(core, namespace, "retry") == "Succeeded")

    status = main_state(pod_json(core, namespace, "retry"))
    assert status["restartCount"] == 1
    assert status["state"]["terminated"]["exitCode"] == 0
    # Each run has its own log, as each container instance has on a real node.
    assert pod_log(core, "retry", namespace).splitlines()[-1] == "training complete"
    previous = pod_log(core, "retry", namespace, previous=True)
    assert previous.splitlines()[-1] == "RuntimeError: simulated failure (exit code 1)"
    assert "training complete" not in previous


def test_malformed_annotation_is_a_container_config_error(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes()
    core.create_namespaced_pod(
        namespace, make_pod("typo", node, annotations={"sim.airflow-gang.io/duration": "1s"})
    )

    waiting = eventually(lambda: main_state(pod_json(core, namespace, "typo"))["state"].get("waiting"))

    assert waiting["reason"] == "CreateContainerConfigError"
    assert "sim.airflow-gang.io/duration='1s'" in waiting["message"]
    assert phase(core, namespace, "typo") == "Pending"


def test_partially_placed_job_waits_at_rendezvous_across_nodes(
    start_nodes: StartNodes,
    core: k8s.CoreV1Api,
    custom: k8s.CustomObjectsApi,
    api_client: k8s.ApiClient,
    namespace: str,
) -> None:
    # Two managers: the kubelets share nothing but the API server.
    _, (first,) = start_nodes()
    _, (second,) = start_nodes()
    job = make_job(custom, namespace, "rdzv")
    notes = {"sim.airflow-gang.io/duration": "0.2"}
    core.create_namespaced_pod(namespace, make_pod("rdzv-master-0", first, annotations=notes, job=job))
    core.create_namespaced_pod(namespace, make_pod("rdzv-worker-0", None, annotations=notes, job=job, rank=1))

    eventually(
        lambda: "waiting for rendezvous: 1/2 replicas running" in pod_log(core, "rdzv-master-0", namespace)
    )
    holds_for(
        lambda: phase(core, namespace, "rdzv-master-0") == "Running", seconds=1.0
    )  # five times its duration

    bind(api_client, namespace, "rdzv-worker-0", second)

    eventually(
        lambda: (
            phase(core, namespace, "rdzv-master-0") == phase(core, namespace, "rdzv-worker-0") == "Succeeded"
        )
    )
    master_log = pod_log(core, "rdzv-master-0", namespace)
    assert master_log.count("waiting for rendezvous") == 1
    assert "starting training rank=0" in master_log


# --- node failure -------------------------------------------------------------------------------


def test_a_dead_machine_writes_nothing_and_back_fails_the_pods_it_lost(
    start_nodes: StartNodes, api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    """The kubelet's side of a node failure: a dead machine renews no Lease, posts no status and
    confirms no deletion (only the node lifecycle controller, not run here, marks the node, see
    tests/sim/disruptions); back, it posts Ready, confirms the deletion that waited, and a
    ``restartPolicy: Never`` pod whose container died with the machine ends Failed with the
    container reported as one it can no longer find, as a kubelet after a reboot."""
    manager, (node,) = start_nodes(lease_renew_interval=0.1)
    kubelet = cast(Kubelet, manager.controllers[0])
    for name in ("lost", "doomed"):
        core.create_namespaced_pod(
            namespace, make_pod(name, node, annotations={"sim.airflow-gang.io/duration": "60"})
        )
    eventually(lambda: phase(core, namespace, "lost") == phase(core, namespace, "doomed") == "Running")
    leases = k8s.CoordinationV1Api(api_client)

    kubelet.set_ready(False)

    time.sleep(0.3)  # a renewal already on its way may still land
    renewed = leases.read_namespaced_lease(node, "kube-node-lease").spec.renew_time
    core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=1)
    holds_for(lambda: leases.read_namespaced_lease(node, "kube-node-lease").spec.renew_time == renewed, 1.5)
    assert phase(core, namespace, "lost") == "Running", "nobody wrote the pod's end"
    assert pod_json(core, namespace, "doomed")["metadata"]["deletionTimestamp"], "nobody confirmed"
    assert "starting training" in pod_log(core, "lost", namespace), "the node keeps its logs"

    kubelet.set_ready(True)

    eventually(lambda: gone(core, namespace, "doomed"), timeout=10)
    eventually(lambda: phase(core, namespace, "lost") == "Failed", timeout=10)
    pod = pod_json(core, namespace, "lost")
    assert "reason" not in pod["status"]
    terminated = main_state(pod)["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (137, "ContainerStatusUnknown")
    assert leases.read_namespaced_lease(node, "kube-node-lease").spec.renew_time > renewed
    ready = next(c for c in core.read_node(node).status.conditions if c.type == "Ready")
    assert (ready.status, ready.reason) == ("True", "KubeletReady")
    assert not core.read_node(node).spec.taints, "the kubelet taints nothing itself"


# --- process runtime ----------------------------------------------------------------------------

CHECK_ENV = """
import os, socket, sys, time
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
addr, port = os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"])
print(f"RANK={rank} WORLD_SIZE={world} MASTER_ADDR={addr} MASTER_PORT={port}")
assert addr == "127.0.0.1" and port != 23456 and world == 2, "not localised"
if rank == 0:  # a real rendezvous: the worker must find the master on the same port
    server = socket.create_server((addr, port))
    connection, _ = server.accept()
    print("master got", connection.recv(16).decode())
else:
    for _ in range(200):
        try:
            socket.create_connection((addr, port)).sendall(b"hello")
            break
        except OSError:
            time.sleep(0.05)
    else:
        sys.exit("master not reachable")
print("done", file=sys.stderr)
"""


def test_process_runtime_runs_a_two_replica_job_with_local_env(
    start_nodes: StartNodes, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    _, (first,) = start_nodes(runtime="process")
    _, (second,) = start_nodes(runtime="process")
    job = make_job(custom, namespace, "ddp")
    command = python(CHECK_ENV)
    core.create_namespaced_pod(namespace, make_pod("ddp-master-0", first, job=job, command=command))
    core.create_namespaced_pod(namespace, make_pod("ddp-worker-0", second, job=job, rank=1, command=command))

    eventually(
        lambda: {phase(core, namespace, f"ddp-{r}-0") for r in ("master", "worker")} == {"Succeeded"}, 20
    )

    master, worker = (pod_log(core, f"ddp-{r}-0", namespace) for r in ("master", "worker"))
    port = master.split("MASTER_PORT=")[1].split()[0]
    assert f"RANK=0 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={port}" in master
    assert f"RANK=1 WORLD_SIZE=2 MASTER_ADDR=127.0.0.1 MASTER_PORT={port}" in worker
    assert "master got hello" in master
    assert "done" in worker  # stderr is part of the log too


def test_a_process_replica_starts_at_once_and_waits_for_its_peers_by_itself(
    start_nodes: StartNodes, core: k8s.CoreV1Api, custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    """As on a real node: the kubelet starts the container, the training code does the waiting."""
    _, (first,) = start_nodes(runtime="process")
    _, (second,) = start_nodes(runtime="process")
    job = make_job(custom, namespace, "early")
    command = python(CHECK_ENV)
    core.create_namespaced_pod(namespace, make_pod("early-master-0", first, job=job, command=command))

    # The worker does not exist yet: the master's process already runs and listens.
    eventually(lambda: "RANK=0 WORLD_SIZE=2" in pod_log(core, "early-master-0", namespace), 20)
    assert "waiting for rendezvous" not in pod_log(core, "early-master-0", namespace)
    assert phase(core, namespace, "early-master-0") == "Running"

    core.create_namespaced_pod(
        namespace, make_pod("early-worker-0", second, job=job, rank=1, command=command)
    )
    eventually(
        lambda: {phase(core, namespace, f"early-{r}-0") for r in ("master", "worker")} == {"Succeeded"}, 20
    )
    assert "master got hello" in pod_log(core, "early-master-0", namespace)


def test_process_exit_code_becomes_the_container_exit_code(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes(runtime="process")
    command = python("import sys; print('bad input', file=sys.stderr); sys.exit(3)")
    core.create_namespaced_pod(namespace, make_pod("exit3", node, command=command))

    eventually(lambda: phase(core, namespace, "exit3") == "Failed")

    terminated = main_state(pod_json(core, namespace, "exit3"))["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (3, "Error")
    assert pod_log(core, "exit3", namespace) == "bad input\n"


def test_missing_executable_is_a_start_error(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes(runtime="process")
    core.create_namespaced_pod(namespace, make_pod("noexec", node, command=["/nonexistent/train"]))

    eventually(lambda: phase(core, namespace, "noexec") == "Failed")

    terminated = main_state(pod_json(core, namespace, "noexec"))["state"]["terminated"]
    assert (terminated["exitCode"], terminated["reason"]) == (128, "StartError")


def sleeper(pid_file: Path) -> list[str]:
    return python(
        f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); print('up'); time.sleep(60)"
    )


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def test_a_deleted_pod_stays_until_its_kubelet_confirms_and_its_log_stream_ends(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str
) -> None:
    _, (node,) = start_nodes()
    core.create_namespaced_pod(
        namespace, make_pod("doomed", node, annotations={"sim.airflow-gang.io/duration": "60"})
    )
    eventually(lambda: "starting training" in pod_log(core, "doomed", namespace))
    stream = core.read_namespaced_pod_log("doomed", namespace, follow=True, _preload_content=False)

    marked = core.delete_namespaced_pod("doomed", namespace, grace_period_seconds=30)

    # The API server keeps it, marked; the kubelet stops the container, then deletes with grace 0.
    assert marked.metadata.deletion_timestamp is not None
    assert marked.metadata.deletion_grace_period_seconds == 30
    eventually(lambda: gone(core, namespace, "doomed"), timeout=10)
    assert b"starting training" in b"".join(stream.stream(1024))  # the stream ended with the pod


def test_deleting_a_running_process_pod_kills_the_process(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    _, (node,) = start_nodes(runtime="process")
    pid_file = tmp_path / "pid"
    core.create_namespaced_pod(namespace, make_pod("sleepy", node, command=sleeper(pid_file)))
    eventually(lambda: pod_log(core, "sleepy", namespace) == "up\n")
    pid = int(pid_file.read_text())

    core.delete_namespaced_pod("sleepy", namespace)

    eventually(lambda: gone(core, namespace, "sleepy"))
    assert not alive(pid)


def test_stopping_the_manager_leaves_no_process_behind(
    start_nodes: StartNodes, core: k8s.CoreV1Api, namespace: str, tmp_path: Path
) -> None:
    manager, (node,) = start_nodes(runtime="process")
    pid_file = tmp_path / "pid"
    core.create_namespaced_pod(namespace, make_pod("orphan", node, command=sleeper(pid_file)))
    eventually(lambda: pod_log(core, "orphan", namespace) == "up\n")
    pid = int(pid_file.read_text())

    manager.stop()

    assert not alive(pid)

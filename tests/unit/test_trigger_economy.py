"""What keeps a triggerer's event loop light with many deferred triggers (issue 33), without a server.

- `connection_lookup.resolve`: triggers starting together in one loop share one connection
  look-up; a trigger arriving after it finished looks again (and sees an edit);
- `StatusLines`: a phase change is one INFO line, a finer change a DEBUG line, no change nothing;
- `cache_projection.projected`: the shared cache keeps what a look reads and drops the bulk
  (pod specs, pod templates, managed fields).
"""

from __future__ import annotations

import asyncio
import copy
import gc
import logging
import threading
from typing import Any

import pytest
import structlog

from airflow_gang.job_kinds import PYTORCHJOB, TRAINJOB
from airflow_gang.model.gang_state import GangPhase, GangStatus, gang_status
from airflow_gang.model.naming import identity_labels
from airflow_gang.spec import GangJobSpec
from airflow_gang.trainjob_spec import TrainJobSpec
from airflow_gang.triggers import connection_lookup
from airflow_gang.triggers.cache_projection import projected
from airflow_gang.triggers.connection_lookup import Resolved
from airflow_gang.triggers.status_lines import StatusLines, written

JsonDict = dict[str, Any]

# --- connection_lookup.resolve ---------------------------------------------------------------


class FakeHook:
    """Stands in for `AsyncGangJobHook`: what the connection says when the hook was built."""

    def __init__(self, connection: JsonDict) -> None:
        self.extras = dict(connection["extras"])
        self._definition = str(connection["definition"])

    async def get_conn_extras(self) -> JsonDict:
        return self.extras

    async def definition(self) -> str:
        return self._definition


class Connection:
    """A connection the test edits, and the `new_hook` builder `resolve` calls to look it up.

    Each look-up waits for ``gate`` (open unless a test closes it), so a test decides when a
    look-up in flight ends; ``failing`` makes the builder raise instead.
    """

    def __init__(self) -> None:
        self.state: JsonDict = {"definition": "cluster-v1", "extras": {"kube_config_path": "/k/1"}}
        self.builds: list[JsonDict] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.failing: Exception | None = None

    async def new_hook(self) -> Any:
        self.builds.append(dict(self.state))
        await self.gate.wait()
        if self.failing is not None:
            raise self.failing
        return FakeHook(self.state)


HOOK_KWARGS = {"conn_id": "kubernetes_default"}


async def let_everyone_start() -> None:
    """Run every task already scheduled up to its first real wait."""
    for _ in range(3):
        await asyncio.sleep(0)


def test_fifty_callers_in_one_loop_share_one_look_up() -> None:
    async def scenario() -> tuple[int, list[Resolved]]:
        connection = Connection()
        connection.gate.clear()
        callers = [
            asyncio.create_task(connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook))
            for _ in range(50)
        ]
        await let_everyone_start()
        connection.gate.set()
        return len(connection.builds), await asyncio.gather(*callers)

    builds, resolved = asyncio.run(scenario())

    assert builds == 1
    first = resolved[0]
    assert all(each is first for each in resolved)
    assert (first.definition, first.extras) == ("cluster-v1", {"kube_config_path": "/k/1"})
    assert isinstance(first.hook, FakeHook)


def test_a_caller_after_the_look_up_ended_looks_again_and_sees_an_edit() -> None:
    async def scenario() -> tuple[int, Resolved, Resolved]:
        connection = Connection()
        before = await connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook)
        # The connection (or its kubeconfig) is edited while the first trigger waits.
        connection.state = {"definition": "cluster-v2", "extras": {"kube_config_path": "/k/2"}}
        after = await connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook)
        return len(connection.builds), before, after

    builds, before, after = asyncio.run(scenario())

    assert builds == 2
    assert (before.definition, before.extras) == ("cluster-v1", {"kube_config_path": "/k/1"})
    assert (after.definition, after.extras) == ("cluster-v2", {"kube_config_path": "/k/2"})
    assert after.hook is not before.hook


def test_different_hook_arguments_are_looked_up_separately() -> None:
    async def scenario() -> tuple[Connection, Connection, list[Resolved]]:
        here, there = Connection(), Connection()
        there.state = {"definition": "other-cluster", "extras": {"kube_config_path": "/other"}}
        here.gate.clear()
        there.gate.clear()
        callers = [
            asyncio.create_task(connection_lookup.resolve({"conn_id": "kubernetes_default"}, here.new_hook)),
            asyncio.create_task(connection_lookup.resolve({"conn_id": "other_cluster"}, there.new_hook)),
            asyncio.create_task(connection_lookup.resolve({"conn_id": "kubernetes_default"}, here.new_hook)),
            asyncio.create_task(
                # The same connection with an override is another look-up too.
                connection_lookup.resolve(
                    {"conn_id": "kubernetes_default", "cluster_context": "b"}, there.new_hook
                )
            ),
        ]
        await let_everyone_start()
        here.gate.set()
        there.gate.set()
        return here, there, list(await asyncio.gather(*callers))

    here, there, resolved = asyncio.run(scenario())

    assert (len(here.builds), len(there.builds)) == (1, 2)
    assert resolved[0] is resolved[2]
    assert [each.definition for each in resolved] == [
        "cluster-v1",
        "other-cluster",
        "cluster-v1",
        "other-cluster",
    ]
    assert resolved[1] is not resolved[3]


def test_cancelling_one_waiter_leaves_the_look_up_to_the_others() -> None:
    async def scenario() -> JsonDict:
        connection = Connection()
        connection.gate.clear()
        callers = [
            asyncio.create_task(connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook))
            for _ in range(3)
        ]
        await let_everyone_start()
        # The first trigger, whose builder runs the look-up, is cancelled (its task was killed).
        callers[0].cancel()
        await let_everyone_start()
        connection.gate.set()
        outcomes = await asyncio.gather(*callers, return_exceptions=True)
        return {"builds": len(connection.builds), "outcomes": outcomes}

    seen = asyncio.run(scenario())

    first, second, third = seen["outcomes"]
    assert isinstance(first, asyncio.CancelledError)
    assert isinstance(second, Resolved)
    assert second is third
    assert second.definition == "cluster-v1"
    assert seen["builds"] == 1


def test_a_failing_look_up_fails_every_waiter_and_the_next_caller_tries_again() -> None:
    async def scenario() -> JsonDict:
        problems: list[JsonDict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, context: problems.append(context))
        connection = Connection()
        connection.gate.clear()
        connection.failing = ConnectionError("the supervisor did not answer")
        callers = [
            asyncio.create_task(connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook))
            for _ in range(5)
        ]
        await let_everyone_start()
        connection.gate.set()
        outcomes = await asyncio.gather(*callers, return_exceptions=True)
        connection.failing = None
        retried = await connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook)
        del callers
        gc.collect()  # a failed task nobody looked at would complain now ("never retrieved")
        await let_everyone_start()
        return {
            "outcomes": outcomes,
            "retried": retried,
            "builds": len(connection.builds),
            "problems": problems,
        }

    seen = asyncio.run(scenario())

    assert [type(outcome) for outcome in seen["outcomes"]] == [ConnectionError] * 5
    assert all(str(outcome) == "the supervisor did not answer" for outcome in seen["outcomes"])
    assert seen["builds"] == 2
    assert seen["retried"].definition == "cluster-v1"
    assert seen["problems"] == []


def test_a_look_up_failing_after_its_only_waiter_left_troubles_no_one() -> None:
    """A trigger cancelled while its look-up runs, which then fails: nothing for the loop to log."""

    async def scenario() -> list[JsonDict]:
        problems: list[JsonDict] = []
        asyncio.get_running_loop().set_exception_handler(lambda _, context: problems.append(context))
        connection = Connection()
        connection.gate.clear()
        connection.failing = ConnectionError("refused")
        caller = asyncio.create_task(connection_lookup.resolve(dict(HOOK_KWARGS), connection.new_hook))
        await let_everyone_start()
        caller.cancel()
        await let_everyone_start()
        connection.gate.set()
        await let_everyone_start()
        del caller
        gc.collect()  # a failed task nobody looked at would complain now ("never retrieved")
        await let_everyone_start()
        return problems

    assert asyncio.run(scenario()) == []


# --- StatusLines ---------------------------------------------------------------------------------

LOGGER = "tests.unit.test_trigger_economy.status"


def gang(
    condition: str | None, podgroup_phase: str, bound: int, running: int = 0, message: str = ""
) -> GangStatus:
    """The status of a Master + 1 Worker gang in queue ``research`` as the cluster shows it."""
    conditions = [{"type": condition, "status": "True", "message": message}] if condition else []
    job = {
        "metadata": {"name": "train", "uid": "u"},
        "spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 1}, "Worker": {"replicas": 1}}},
        "status": {"conditions": conditions},
    }
    podgroup = {
        "metadata": {"name": "train"},
        "spec": {"minMember": 2, "queue": "research"},
        "status": {"phase": podgroup_phase},
    }
    pods = [
        {
            "metadata": {"name": f"train-{replica}-0"},
            "spec": {"nodeName": "node-0"} if index < bound else {},
            "status": {"phase": "Running" if index < running else "Pending"},
        }
        for index, replica in enumerate(("master", "worker"))
    ]
    return gang_status(job, podgroup, pods, "provider")


@pytest.fixture
def status_log(caplog: pytest.LogCaptureFixture) -> logging.Logger:
    caplog.set_level(logging.DEBUG, logger=LOGGER)
    return logging.getLogger(LOGGER)


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(record.levelname, record.getMessage()) for record in caplog.records if record.name == LOGGER]


def test_phases_are_info_lines_finer_changes_debug_and_repeats_nothing(
    status_log: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    statuses = [
        gang(None, "Pending", 0),
        gang(None, "Pending", 0),  # the same look again: nothing
        gang(None, "Inqueue", 1),  # queued still: the PodGroup's phase and one pod bound
        gang(None, "Running", 2),
        gang("Running", "Running", 2, running=2),
        gang("Running", "Running", 2, running=2),
        gang("Running", "Running", 2, running=2, message="PyTorchJob train is running."),
        gang("Succeeded", "Completed", 2, running=0, message="PyTorchJob train is successfully completed."),
    ]
    assert [status.phase for status in statuses] == [
        GangPhase.QUEUED,
        GangPhase.QUEUED,
        GangPhase.QUEUED,
        GangPhase.ADMITTED,
        GangPhase.RUNNING,
        GangPhase.RUNNING,
        GangPhase.RUNNING,
        GangPhase.SUCCEEDED,
    ]
    status_lines = StatusLines(status_log, "ml", "train")

    async def watch() -> None:
        for status in statuses:
            status_lines.saw(status)
        await written()

    asyncio.run(watch())

    prefix = "gang job ml/train: "
    assert lines(caplog) == [
        ("INFO", f"{prefix}queued podgroup=Pending queue=research bound=0/2"),
        ("DEBUG", f"{prefix}queued podgroup=Inqueue queue=research bound=1/2"),
        # The trigger announces the admission with its own "gang admitted ... at" line.
        ("DEBUG", f"{prefix}admitted podgroup=Running queue=research bound=2/2"),
        ("INFO", f"{prefix}running podgroup=Running queue=research bound=2/2"),
        (
            "DEBUG",
            f"{prefix}running podgroup=Running queue=research bound=2/2 | PyTorchJob train is running.",
        ),
        (
            "INFO",
            f"{prefix}succeeded podgroup=Completed queue=research bound=2/2"
            " | PyTorchJob train is successfully completed.",
        ),
    ]


def test_a_phase_seen_again_after_another_is_an_info_line_again(
    status_log: logging.Logger, caplog: pytest.LogCaptureFixture
) -> None:
    """A gang evicted back into the queue (a restart) is news, not a detail."""
    status_lines = StatusLines(status_log, "ml", "train")
    status = GangStatus(GangPhase.RUNNING, "Running", "research", 2, 2, 2, 2, "Running", "")
    requeued = GangStatus(GangPhase.QUEUED, "Pending", "research", 2, 2, 0, 0, "Restarting", "evicted")

    async def watch() -> None:
        for seen in (status, requeued, status):
            status_lines.saw(seen)
        await written()

    asyncio.run(watch())

    assert [level for level, _ in lines(caplog)] == ["INFO", "INFO", "INFO"]


class ThreadRecordingSink:
    """The end of a structlog logger: what was written, and on which thread."""

    def __init__(self) -> None:
        self.written: list[tuple[int, str]] = []

    def msg(self, message: str) -> None:
        self.written.append((threading.get_ident(), message))

    info = debug = warning = msg


def structlog_logger(sink: ThreadRecordingSink) -> Any:
    """A structlog logger at INFO, as Airflow's triggerer gives a trigger, writing into ``sink``."""
    return structlog.wrap_logger(
        sink,
        wrapper_class=structlog.make_filtering_bound_logger(logging.INFO),
        processors=[lambda _logger, _method, event: event["event"]],
    )


def test_with_a_structlog_logger_the_lines_are_written_off_the_event_loop_and_in_order() -> None:
    """Airflow's triggerer loggers are structlog's: a write blocked on a busy supervisor's socket
    must hold a worker thread, never the loop every trigger shares."""
    sink = ThreadRecordingSink()
    status_lines = StatusLines(structlog_logger(sink), "ml", "train")

    async def watch() -> int:
        status_lines.saw(gang(None, "Pending", 0))
        status_lines.saw(gang(None, "Inqueue", 1))  # DEBUG: below the logger's level
        running = gang("Running", "Running", 2, running=2)
        # The admission and the status it was seen in are one line: the next look adds none.
        status_lines.admitted(running, "2026-12-04T00:00:00+00:00")
        status_lines.saw(running)
        status_lines.saw(gang("Succeeded", "Completed", 2))
        await written()
        return threading.get_ident()

    loop_thread = asyncio.run(watch())

    assert [message for _, message in sink.written] == [
        "gang job ml/train: queued podgroup=Pending queue=research bound=0/2",
        "gang admitted job=ml/train queue=research at 2026-12-04T00:00:00+00:00: "
        "running podgroup=Running queue=research bound=2/2",
        "gang job ml/train: succeeded podgroup=Completed queue=research bound=2/2",
    ]
    assert all(thread != loop_thread for thread, _ in sink.written)


class BlockedSink(ThreadRecordingSink):
    """A sink whose writes wait, as a write into a full socket to a busy supervisor does."""

    def __init__(self) -> None:
        super().__init__()
        self.open = threading.Event()

    def msg(self, message: str) -> None:
        self.open.wait(10)
        super().msg(message)

    info = debug = warning = msg


def test_a_trigger_decides_while_its_lines_wait_and_they_are_written_before_it_goes_on() -> None:
    """A line waiting on a busy supervisor must not delay what the trigger decides; `written`
    (awaited before the trigger fires its event) returns only once the lines are out."""
    sink = BlockedSink()
    status_lines = StatusLines(structlog_logger(sink), "ml", "train")

    async def trigger() -> tuple[list[str], list[str]]:
        status_lines.saw(gang(None, "Pending", 0))
        status_lines.saw(gang("Succeeded", "Completed", 2))  # decided at once: nothing awaited
        before = [message for _, message in sink.written]
        flushing = asyncio.ensure_future(written())
        await asyncio.sleep(0.05)
        assert not flushing.done(), "written() returned while the lines still waited"
        sink.open.set()
        await flushing
        return before, [message for _, message in sink.written]

    before, after = asyncio.run(trigger())

    assert before == []
    assert after == [
        "gang job ml/train: queued podgroup=Pending queue=research bound=0/2",
        "gang job ml/train: succeeded podgroup=Completed queue=research bound=2/2",
    ]


# --- cache_projection.projected ------------------------------------------------------------------

MANAGED_FIELDS = [
    {
        "manager": "kube-scheduler",
        "operation": "Update",
        "apiVersion": "v1",
        "fieldsType": "FieldsV1",
        "fieldsV1": {"f:status": {"f:conditions": {}}},
    }
]


def realistic_pod(node: str | None) -> JsonDict:
    pod: JsonDict = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "train-worker-0",
            "namespace": "ml",
            "uid": "pod-uid",
            "resourceVersion": "4242",
            "creationTimestamp": "2025-01-01T00:00:00Z",
            "labels": {
                PYTORCHJOB.pod_job_label: "train",
                PYTORCHJOB.replica_type_label: "worker",
                PYTORCHJOB.replica_index_label: "0",
            },
            "annotations": {"scheduling.k8s.io/group-name": "train"},
            "ownerReferences": [{"apiVersion": "kubeflow.org/v1", "kind": "PyTorchJob", "name": "train"}],
            "managedFields": copy.deepcopy(MANAGED_FIELDS),
        },
        "spec": {
            "schedulerName": "volcano",
            "restartPolicy": "Never",
            "containers": [
                {
                    "name": "pytorch",
                    "image": "ghcr.io/acme/train:1",
                    "command": ["torchrun", "train.py"],
                    "env": [{"name": "MASTER_ADDR", "value": "train-master-0"}],
                    "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
            "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
            "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        },
        "status": {
            "phase": "Running",
            "conditions": [
                {"type": "PodScheduled", "status": "True", "lastTransitionTime": "2025-01-01T00:00:01Z"},
                {"type": "Ready", "status": "True", "lastTransitionTime": "2025-01-01T00:00:05Z"},
            ],
            "containerStatuses": [
                {
                    "name": "pytorch",
                    "ready": True,
                    "restartCount": 1,
                    "state": {"running": {"startedAt": "2025-01-01T00:00:04Z"}},
                    "lastState": {"terminated": {"exitCode": 137, "reason": "OOMKilled"}},
                }
            ],
        },
    }
    if node is not None:
        pod["spec"]["nodeName"] = node
    return pod


def without_managed_fields(obj: JsonDict) -> JsonDict:
    metadata = {key: value for key, value in obj["metadata"].items() if key != "managedFields"}
    return {**obj, "metadata": metadata}


def test_a_bound_pod_keeps_its_metadata_status_and_node_alone() -> None:
    pod = realistic_pod("node-3")
    original = copy.deepcopy(pod)

    kept = projected("pod", pod, PYTORCHJOB)

    assert kept is pod  # in place: the decoded event is the cache's own
    assert kept["metadata"] == without_managed_fields(original)["metadata"]
    assert kept["status"] == original["status"]
    assert kept["spec"] == {"nodeName": "node-3"}
    assert {key: kept[key] for key in ("apiVersion", "kind")} == {"apiVersion": "v1", "kind": "Pod"}


def test_an_unbound_pod_keeps_an_empty_spec() -> None:
    pod = realistic_pod(None)
    original = copy.deepcopy(pod)

    kept = projected("pod", pod, PYTORCHJOB)

    assert kept["spec"] == {}
    assert kept["status"] == original["status"]
    assert "managedFields" not in kept["metadata"]


def test_a_pytorchjob_keeps_its_replica_counts_and_run_policy_without_the_templates() -> None:
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=3,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "5"}}},
    )
    job = spec.build_pytorchjob("train", "ml", labels=identity_labels("d", "t", "r", -1, 1))
    job["metadata"].update({"uid": "job-uid", "resourceVersion": "7", "managedFields": MANAGED_FIELDS})
    job["status"] = {
        "conditions": [{"type": "Running", "status": "True", "message": "PyTorchJob train is running."}],
        "replicaStatuses": {"Master": {"active": 1}, "Worker": {"active": 3}},
    }
    original = copy.deepcopy(job)
    replicas = original["spec"]["pytorchReplicaSpecs"]
    assert all("template" in replica for replica in replicas.values())

    kept = projected("pytorchjob", job, PYTORCHJOB)

    expected_replicas = {
        replica_type: {key: value for key, value in replica.items() if key != "template"}
        for replica_type, replica in replicas.items()
    }
    assert kept["spec"]["pytorchReplicaSpecs"] == expected_replicas
    assert {replica["replicas"] for replica in expected_replicas.values()} == {1, 3}
    assert all("restartPolicy" in replica for replica in expected_replicas.values())
    # Everything else of the spec (the run policy: gang size, queue) stays.
    assert {key: value for key, value in kept["spec"].items() if key != "pytorchReplicaSpecs"} == {
        key: value for key, value in original["spec"].items() if key != "pytorchReplicaSpecs"
    }
    assert kept["spec"]["runPolicy"] == original["spec"]["runPolicy"]
    assert kept["metadata"] == without_managed_fields(original)["metadata"]
    assert kept["status"] == original["status"]
    # What a look reads of it is the same as from the whole job.
    assert (
        PYTORCHJOB.replica_counts(kept) == PYTORCHJOB.replica_counts(original) == {"Master": 1, "Worker": 3}
    )
    assert gang_status(kept, None, [], "provider") == gang_status(original, None, [], "provider")


def test_a_trainjob_keeps_its_trainer_and_runtime_patches() -> None:
    spec = TrainJobSpec(
        image="ghcr.io/acme/train:1",
        command=["torchrun", "train.py"],
        num_nodes=4,
        resources_per_node={"nvidia.com/gpu": 1},
        queue="research",
    )
    job = spec.build_trainjob("tj", "ml", extra_labels=identity_labels("d", "t", "r", -1, 1))
    job["metadata"].update({"uid": "tj-uid", "resourceVersion": "9", "managedFields": MANAGED_FIELDS})
    job["status"] = {"conditions": [{"type": "Created", "status": "True"}]}
    original = copy.deepcopy(job)
    assert original["spec"]["runtimePatches"]  # the queue travels there

    kept = projected("trainjob", job, TRAINJOB)

    assert kept["spec"]["trainer"] == original["spec"]["trainer"]
    assert kept["spec"]["runtimePatches"] == original["spec"]["runtimePatches"]
    assert kept["spec"] == original["spec"]
    assert kept["metadata"] == without_managed_fields(original)["metadata"]
    assert kept["status"] == original["status"]
    assert TRAINJOB.queue(kept) == TRAINJOB.queue(original) == "research"
    assert TRAINJOB.total_replicas(kept) == TRAINJOB.total_replicas(original)


def test_a_podgroup_is_kept_whole_but_its_managed_fields() -> None:
    spec = GangJobSpec(image="ghcr.io/acme/train:1", workers=1, resources={"nvidia.com/gpu": 1})
    podgroup = spec.build_podgroup("train", "ml")
    assert podgroup is not None
    podgroup["metadata"].update({"uid": "pg-uid", "resourceVersion": "8", "managedFields": MANAGED_FIELDS})
    podgroup["status"] = {
        "phase": "Inqueue",
        "conditions": [{"type": "Unschedulable", "status": "True", "message": "0/2 nodes are available"}],
    }
    original = copy.deepcopy(podgroup)

    kept = projected("podgroup", podgroup, PYTORCHJOB)

    assert kept == without_managed_fields(original)
    assert "managedFields" in original["metadata"]

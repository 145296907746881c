"""A TrainJob the task deletes is gone for good when the task's error is raised, in both waits.

The embedded cluster's Trainer behaves as Kubeflow Trainer v2.3.0 does (its reconcile never
checks ``deletionTimestamp`` and re-applies a missing JobSet or PodGroup; see
tests/sim/trainer_v2/test_trainer_source_facts.py), so a deletion that lets the TrainJob linger
(``Foreground`` propagation) or deletes Trainer's PodGroup behind its back brings children back.
Asserted after an admission timeout and after a failed node (``delete_on_finish="always"``):

- when the task has failed, nothing of its TrainJob is left: no TrainJob, JobSet, Job, PodGroup
  or pod;
- nothing was applied twice: one JobSet and one PodGroup were added for it while it existed (a
  watch from before the submission counts them against the resourceVersion of its deletion), so
  no pod of the try ran again while it was being deleted;
- the error says the job was deleted only because that was seen.

The provider before issue 32 failed these (a second PodGroup every time; after a failure a new
JobSet whose pods ran).
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s
from kubernetes import watch

from gang_sim.cluster import SimCluster
from tests.support.cluster import NOTHING, hold_one_gpu, leftovers
from tests.support.dag_runs import TRAINJOB_DAG, task_states
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")
MODES = pytest.mark.parametrize("deferrable", [False, True], ids=["sync", "deferrable"])
WATCHED = {
    "jobsets": ("jobset.x-k8s.io", "v1alpha2"),
    "podgroups": ("scheduling.volcano.sh", "v1beta1"),
    "trainjobs": ("trainer.kubeflow.org", "v1alpha1"),
}


class Additions:
    """What was added and deleted in ``default`` from the moment it starts: the resourceVersion of
    each JobSet and PodGroup added, and of each TrainJob's deletion (one sequence for all kinds)."""

    def __init__(self, cluster: SimCluster) -> None:
        self.added: dict[tuple[str, str], list[int]] = defaultdict(list)
        self.deleted: dict[str, int] = {}
        self.errors: list[str] = []
        self._stops: list[watch.Watch] = []
        self._clients: list[k8s.ApiClient] = []
        self._stopped = threading.Event()
        self._cluster = cluster

    def start(self) -> None:
        for plural, (group, version) in WATCHED.items():
            client = self._cluster.api_client()
            self._clients.append(client)
            custom = k8s.CustomObjectsApi(client)
            listed = custom.list_namespaced_custom_object(group, version, "default", plural)
            stream = watch.Watch()
            self._stops.append(stream)
            thread = threading.Thread(
                target=self._follow,
                args=(custom, stream, group, version, plural, listed["metadata"]["resourceVersion"]),
                daemon=True,
            )
            thread.start()

    def _follow(
        self, custom: k8s.CustomObjectsApi, stream: watch.Watch, group: str, version: str, plural: str,
        since: str,
    ) -> None:  # fmt: skip
        try:
            for event in stream.stream(
                custom.list_namespaced_custom_object, group, version, "default", plural,
                resource_version=since, timeout_seconds=120,
            ):  # fmt: skip
                self._note(plural, event)
        except Exception as error:  # the stream is cut when the test stops it or the cluster goes
            if not self._stopped.is_set():
                self.errors.append(f"{plural}: {error!r}")

    def _note(self, plural: str, event: dict[str, Any]) -> None:
        meta = event["object"]["metadata"]
        version_seen = int(meta["resourceVersion"])
        if plural == "trainjobs" and event["type"] == "DELETED":
            self.deleted[meta["name"]] = version_seen
        elif plural != "trainjobs" and event["type"] == "ADDED":
            self.added[(plural, meta["name"])].append(version_seen)

    def while_the_trainjob_existed(self, plural: str) -> dict[str, int]:
        """Per name, how many were added before its TrainJob was deleted. One added after (Trainer
        acting on a cache that still held the TrainJob, as controller-runtime's can) is dangling
        and the garbage collector's; one added before is Trainer re-applying a child."""
        return {
            name: sum(1 for version in versions if version < self.deleted.get(name, 1 << 62))
            for (kind, name), versions in self.added.items()
            if kind == plural
        }

    def stop(self) -> None:
        self._stopped.set()
        for stream in self._stops:
            stream.stop()
        for client in self._clients:
            client.close()


@pytest.fixture
def additions(cluster: SimCluster) -> Iterator[Additions]:
    recorder = Additions(cluster)
    recorder.start()
    yield recorder
    recorder.stop()


def run_to_failure(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    api: k8s.ApiClient,
    *,
    deferrable: bool,
    admission: float,
    nodes: int,
    annotations: dict[str, str],
) -> dict[str, list[str]]:
    """Run the DAG; the task must fail. Returns what was left at that moment."""
    dag = write_dag(
        TRAINJOB_DAG,
        deferrable=deferrable,
        out=str(tmp_path / "out.json"),
        runtime="torch-distributed",
        queue="research",
        admission=admission,
        nodes=nodes,
        annotations=annotations,
    )
    states = task_states(dag.test())
    left = leftovers(api)
    assert states["train"] == "failed"
    return left


def assert_applied_once(additions: Additions) -> None:
    jobsets = eventually(lambda: additions.while_the_trainjob_existed("jobsets"), message="a JobSet added")
    assert len(jobsets) == 1, f"one TrainJob was submitted: {jobsets}"
    (name,) = jobsets
    eventually(lambda: name in additions.deleted, message="the TrainJob's deletion seen by the watch")
    jobsets = additions.while_the_trainjob_existed("jobsets")
    podgroups = additions.while_the_trainjob_existed("podgroups")
    assert jobsets == {name: 1}, (
        f"its JobSet was applied again while the TrainJob was being deleted: {jobsets}"
    )
    assert podgroups == {name: 1}, f"its PodGroup was applied again: {podgroups}"
    assert additions.errors == [], "a watch broke: its counts may miss events"


@MODES
def test_after_an_admission_timeout_nothing_of_the_trainjob_is_left_or_comes_back(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    cluster: SimCluster,
    api: k8s.ApiClient,
    additions: Additions,
    deferrable: bool,
) -> None:
    """Four nodes on a 4-GPU pool with one GPU taken: the gang waits in its queue until the
    admission timeout deletes it."""
    release = hold_one_gpu(cluster)
    try:
        left = run_to_failure(
            write_dag, tmp_path, api, deferrable=deferrable, admission=3, nodes=4,
            annotations={"sim.airflow-gang.io/duration": "60"},
        )  # fmt: skip
    finally:
        release()
    assert left == {**NOTHING, "pods": ["gpu-hog"]}
    assert_applied_once(additions)
    logged = capfd.readouterr().out
    assert "GangAdmissionTimeout" in logged
    assert "by queue 'research'" in logged
    assert "it was deleted (seen gone, with its PodGroup and pods)" in logged
    assert "not confirmed deleted" not in logged


@MODES
def test_after_a_failed_node_nothing_of_the_trainjob_is_left_or_comes_back(
    write_dag: Callable[..., Any],
    tmp_path: Path,
    capfd: pytest.CaptureFixture[str],
    api: k8s.ApiClient,
    additions: Additions,
    deferrable: bool,
) -> None:
    """A node exits 3 until its Job's backoff limit: the TrainJob fails, and the task deletes it
    (``delete_on_finish="always"``), whose ``Failed`` condition Trainer drops before deciding."""
    annotations = {"sim.airflow-gang.io/duration": "0.3", "sim.airflow-gang.io/exit-code": "3"}
    left = run_to_failure(
        write_dag, tmp_path, api, deferrable=deferrable, admission=60, nodes=2, annotations=annotations
    )
    assert left == NOTHING
    assert_applied_once(additions)
    logged = capfd.readouterr().out
    assert "TrainJobFailed" in logged
    assert "not confirmed deleted" not in logged

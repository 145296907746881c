"""`GangJobTrigger` with its own watches, driven directly against the embedded cluster, faults or not.

Each test submits a short gang job with the provider's sync hook, rebuilds the trigger from its
serialized kwargs (as the triggerer does), runs it with ``asyncio.run`` and takes its first
event. Faults are injected by the simulator's API server (docs/fault-injection.md): the
simulator's own controllers are spared, so the job runs on while the trigger sees a flaky API.

What the tests hold the trigger to:

- with working watches it learns every change from them: no event is late although
  ``poll_interval`` is 10 minutes, and it re-reads the job only when something changed;
- with watches that fail it falls back to polling and still reports in time, and says so once
  per kind (the backoff grows; "is back" only once a watch really opened);
- with watches cut after every event and ``410 Gone`` on resumes it re-lists and carries on;
- an API outage shorter than ``api_unavailable_timeout`` is ridden out (one WARNING, one INFO,
  nothing deleted); a longer one ends the wait with ``api_unavailable``, nothing deleted.

The trigger logs through Airflow's structlog, which writes to standard output and not to the
``logging`` records pytest's ``caplog`` collects, so its log lines are read with ``capfd``.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.exceptions import GangApiUnavailable
from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.gang_state import last_true_condition
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.sensors.gang import PyTorchJobSensor
from airflow_gang.triggers.gang import GangJobTrigger
from gang_sim.cluster import SimCluster
from tests.support import submission
from tests.support.submission import Submitted, gang_spec
from tests.support.triggers import first_event, provider_requests
from tests.waiting import eventually

pytestmark = pytest.mark.usefixtures("kube_connection")

NAMESPACE = "default"
PYTORCHJOBS = ("kubeflow.org", "v1", NAMESPACE, "pytorchjobs")
JOB_RESOURCE = "pytorchjobs.kubeflow.org"
KINDS = ("pytorchjob", "podgroup", "pod")


@pytest.fixture(scope="module")
def cluster() -> Iterator[SimCluster]:
    """This module's own cluster (its fault counters count this module's faults only)."""
    with SimCluster(nodes=1, gpus_per_node=4, schedule_period=0.2) as running:
        yield running


@pytest.fixture
def submit(cluster: SimCluster, kube_connection: str) -> Iterator[Callable[[str, float], Submitted]]:
    """Create gang jobs (PodGroup, then PyTorchJob: Master + 1 Worker, 1 GPU each) through
    `GangJobHook`; at the end, faults off, every one deleted and confirmed gone."""
    hook = GangJobHook(conn_id="kubernetes_default")
    created: list[str] = []

    def create(name: str, duration: float) -> Submitted:
        created.append(name)  # before the creates: a half-made gang is deleted all the same
        job = submission.submit(name, gang_spec(duration), namespace=NAMESPACE)
        return Submitted(name, job["metadata"]["uid"])

    yield create
    cluster.clear_faults()
    for name in created:
        hook.delete_pytorchjob(name, NAMESPACE, propagation="Foreground")
        hook.delete_podgroup(name, NAMESPACE)
    for name in created:
        assert hook.wait_gone("pytorchjob", name, NAMESPACE, timeout=30), f"PyTorchJob {name} not deleted"
        assert hook.wait_gone("podgroup", name, NAMESPACE, timeout=30), f"PodGroup {name} not deleted"


def trigger_for(job: Submitted, **kwargs: Any) -> GangJobTrigger:
    """The trigger as the triggerer builds it: from the kwargs it serialized (a connection id).

    Its own watches (``watch="per_trigger"``): test_watch_cache.py tests the shared ones.
    """
    kwargs.setdefault("watch", "per_trigger")
    built = GangJobTrigger(
        name=job.name,
        namespace=NAMESPACE,
        uid=job.uid,
        gang_scheduling="provider",
        hook_kwargs=GangJobHook(conn_id="kubernetes_default").async_hook_kwargs(),
        **kwargs,
    )
    _, serialized = built.serialize()
    assert serialized["hook_kwargs"] == {"conn_id": "kubernetes_default"}, "no credentials in the kwargs"
    return GangJobTrigger(**serialized)


def run_trigger(trigger: GangJobTrigger) -> tuple[dict[str, Any], float]:
    """The trigger's first event and the seconds it took."""
    started = time.monotonic()
    event = asyncio.run(first_event(trigger))
    return event, time.monotonic() - started


def log_lines(output: str, level: str, text: str) -> list[str]:
    """The structlog lines of ``level`` whose message contains ``text``."""
    pattern = re.compile(rf"\[{level}\s*\] (.*)")
    return [
        match.group(1)
        for line in output.splitlines()
        if (match := pattern.search(line)) and text in match.group(1)
    ]


def pods_running(api: k8s.ApiClient, name: str, replicas: int = 2) -> bool:
    pods = (
        k8s.CoreV1Api(api)
        .list_namespaced_pod(NAMESPACE, label_selector=f"training.kubeflow.org/job-name={name}")
        .items
    )
    return len(pods) == replicas and all(pod.status.phase == "Running" for pod in pods)


def read_job(api: k8s.ApiClient, name: str) -> dict[str, Any]:
    job: dict[str, Any] = k8s.CustomObjectsApi(api).get_namespaced_custom_object(*PYTORCHJOBS, name)
    return job


# --- 1. working watches: every change arrives, nothing is polled ------------------------------

# One look is one GET of the job (plus one of the PodGroup and one pod list). A trigger looks when
# it starts, after each of its three lists and on each change (changes coming close together
# share a look): for one short job that is about 5 to 10 looks. One that polled every 0.2 s
# would make 20 or more during the 4 s it waits at least.
MAX_JOB_GETS = 15


def test_watches_deliver_admission_and_completion_without_polling(
    submit: Callable[[str, float], Submitted], api: k8s.ApiClient, capfd: pytest.CaptureFixture[str]
) -> None:
    """``poll_interval=600`` and a resync every 300 s: only the watches can tell the triggers
    anything within this test. Both report in time, and the API server counted one list and
    one watch per kind and a handful of GETs per trigger."""
    job = submit("watched", 6)
    created = time.monotonic()

    before = provider_requests(api)
    admitted, _ = run_trigger(trigger_for(job, wait_for="admission", poll_interval=600))
    middle = provider_requests(api)
    capfd.readouterr()
    done, waited = run_trigger(trigger_for(job, wait_for="both", poll_interval=600))
    after = provider_requests(api)

    assert admitted["status"] == "admitted"
    assert admitted["timeline"]["admitted_at"] is not None
    assert done["status"] == "succeeded"
    assert done["phase"] == "succeeded"
    assert time.monotonic() - created < 60
    # The second trigger started while the job had seconds left to run, and saw it running
    # before it saw it succeed: the second look came from a watch event.
    assert waited >= 4, f"the job should still have been running when the trigger started ({waited:.1f}s)"
    # Its status lines: the admission line carries the status it was seen in.
    lines = log_lines(capfd.readouterr().out, "info", f"{NAMESPACE}/{job.name}")
    lines = [line for line in lines if line.startswith(("gang job ", "gang admitted "))]
    assert any(": running " in line for line in lines), lines
    assert ": succeeded " in lines[-1], lines

    for requests in (middle - before, after - middle):
        for resource in (JOB_RESOURCE, "podgroups.scheduling.volcano.sh", "pods"):
            assert requests["watch", resource] == 1, f"one watch of {resource}, never re-opened: {requests}"
        assert requests["list", JOB_RESOURCE] == 1, requests
        assert 1 <= requests["get", JOB_RESOURCE] <= MAX_JOB_GETS, f"the trigger polled: {requests}"


# --- 2. failing watches: the poll fallback ------------------------------------------------------

WATCHES_FAIL = {"errors": [{"verbs": ["watch"], "rate": 1.0, "status": 503}]}


def test_a_trigger_whose_watches_all_fail_polls_to_the_outcome(
    submit: Callable[[str, float], Submitted], api: k8s.ApiClient, cluster: SimCluster
) -> None:
    job = submit("unwatched", 3)
    cluster.set_faults(WATCHES_FAIL)
    before, faults_before = provider_requests(api), cluster.fault_counts()["error_503"]

    event, _ = run_trigger(trigger_for(job, wait_for="both", poll_interval=1))

    assert event["status"] == "succeeded"
    finished = dt.datetime.fromisoformat(event["timeline"]["finished_at"])
    # completionTime has one-second resolution; the poll comes at most poll_interval later.
    assert (dt.datetime.now(dt.UTC) - finished).total_seconds() < 5
    requests = provider_requests(api) - before
    assert cluster.fault_counts()["error_503"] > faults_before
    assert requests["watch", JOB_RESOURCE] >= 1, requests
    assert requests["get", JOB_RESOURCE] >= 2, requests


def test_failing_watches_are_reported_once_per_kind(
    submit: Callable[[str, float], Submitted], cluster: SimCluster, capfd: pytest.CaptureFixture[str]
) -> None:
    job = submit("unwatched-log", 5)
    cluster.set_faults(WATCHES_FAIL)
    capfd.readouterr()

    event, _ = run_trigger(trigger_for(job, wait_for="both", poll_interval=1))

    assert event["status"] == "succeeded"
    output = capfd.readouterr().out
    warned = Counter(
        line.split()[2] for line in log_lines(output, "warning", f"for {NAMESPACE}/{job.name} failed")
    )
    assert warned == dict.fromkeys(KINDS, 1), f"one WARNING per kind and episode, got {dict(warned)}"
    back = log_lines(output, "info", f"for {NAMESPACE}/{job.name} is back")
    assert back == [], f"no watch of this trigger ever worked, yet {len(back)} 'is back' lines"


# --- 3. cut watches and 410 Gone ----------------------------------------------------------------


@pytest.mark.parametrize(
    ("resume_gone_rate", "cuts_expected"),
    [
        # Half the watches are 410 Gone; the others are cut after one event and resumed.
        pytest.param(0.5, True, id="cut-then-resumed-or-gone"),
        # Every ChangeFeed watch starts from a resourceVersion (its list's or its last event's),
        # so at rate 1 every one of them is 410 Gone at once, none streams, none is cut: the
        # trigger learns everything from its re-lists.
        pytest.param(1.0, False, id="always-gone"),
    ],
)
def test_cut_watches_and_410_gone_are_recovered_by_re_listing(
    submit: Callable[[str, float], Submitted],
    api: k8s.ApiClient,
    cluster: SimCluster,
    resume_gone_rate: float,
    cuts_expected: bool,
) -> None:
    job = submit(f"cut-{int(resume_gone_rate * 10)}", 3)
    cluster.set_faults(
        {"seed": 3, "watches": {"cut_after_events": 1, "gone_on_resume_rate": resume_gone_rate}}
    )
    before, faults_before = provider_requests(api), cluster.fault_counts()

    event, _ = run_trigger(trigger_for(job, wait_for="both", poll_interval=600))

    assert event["status"] == "succeeded"
    faults = cluster.fault_counts()
    gone = faults["watch_gone"] - faults_before["watch_gone"]
    cut = faults["watch_cut"] - faults_before["watch_cut"]
    assert gone > 0
    assert (cut > 0) == cuts_expected, f"watch_cut {cut}"
    requests = provider_requests(api) - before
    assert requests["list", JOB_RESOURCE] > 1, f"the trigger listed again after 410: {requests}"


# --- 4. API outages -------------------------------------------------------------------------------

API_DOWN = {"errors": [{"rate": 1.0, "status": 503}]}  # every client but the simulator's controllers
OUTAGE_SECONDS = 6.0


def test_an_outage_shorter_than_the_timeout_is_ridden_out(
    submit: Callable[[str, float], Submitted],
    api: k8s.ApiClient,
    cluster: SimCluster,
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The job runs 4 s; the API answers 503 from the moment both pods run, for 6 s. The job
    finishes during the outage, so the trigger (woken by its still-open watches) looks while the
    API is down, backs off, and reports the success once the API is back."""
    job = submit("outage-short", 4)
    trigger = trigger_for(job, wait_for="both", poll_interval=1, api_unavailable_timeout=30)
    capfd.readouterr()
    before = provider_requests(api)
    faults_before = cluster.fault_counts()["error_503"]

    def outage() -> None:
        cluster.set_faults(API_DOWN)
        time.sleep(OUTAGE_SECONDS)
        cluster.clear_faults()

    async def scenario() -> dict[str, Any]:
        waiting = asyncio.create_task(first_event(trigger))
        await asyncio.to_thread(eventually, lambda: pods_running(api, job.name), 20, 0.05, "job never ran")
        assert not waiting.done()
        thread = threading.Thread(target=outage, name="outage", daemon=True)
        thread.start()
        await asyncio.to_thread(thread.join)
        return await waiting

    event = asyncio.run(scenario())

    assert event["status"] == "succeeded"
    assert cluster.fault_counts()["error_503"] > faults_before
    found = read_job(api, job.name)
    assert found["metadata"]["uid"] == job.uid, "the job was replaced"
    assert (last_true_condition(found) or {}).get("type") == "Succeeded"
    requests = provider_requests(api) - before
    assert not [key for key in requests if key[0] in ("delete", "deletecollection")], requests
    output = capfd.readouterr().out
    what = f"while waiting for PyTorchJob {NAMESPACE}/{job.name} "
    assert len(log_lines(output, "warning", f"Kubernetes API unavailable {what}")) == 1, output
    assert len(log_lines(output, "info", "Kubernetes API reachable again")) == 1, output


def test_an_outage_longer_than_the_timeout_reports_api_unavailable_and_deletes_nothing(
    submit: Callable[[str, float], Submitted],
    api: k8s.ApiClient,
    cluster: SimCluster,
    capfd: pytest.CaptureFixture[str],
) -> None:
    job = submit("outage-long", 30)
    capfd.readouterr()
    before = provider_requests(api)
    cluster.set_faults(API_DOWN)
    try:
        event, waited = run_trigger(
            trigger_for(job, wait_for="both", poll_interval=1, api_unavailable_timeout=3)
        )
    finally:
        cluster.clear_faults()

    assert event["status"] == "api_unavailable"
    assert event["reason"] == "api_unavailable"
    assert "api_unavailable_timeout=3s" in event["message"]
    assert "Nothing was deleted" in event["message"]
    assert 3 <= waited < 20
    # The outage's real length travels to the task's GangApiUnavailable, operator and sensor alike.
    assert 3 <= event["unavailable_seconds"] <= waited
    assert "503" in event["last_error"]
    operator = PyTorchJobOperator(task_id="train", image="ghcr.io/acme/train:1", report_progress=False)
    sensor = PyTorchJobSensor(task_id="wait", job_name=job.name)
    for resume in (operator.execute_complete, sensor.execute_complete):
        with pytest.raises(GangApiUnavailable) as raised:
            resume({}, event)  # type: ignore[arg-type]
        assert raised.value.unavailable_seconds == event["unavailable_seconds"]
        assert raised.value.last_error == event["last_error"]
    found = read_job(api, job.name)
    assert found["metadata"]["uid"] == job.uid
    assert "deletionTimestamp" not in found["metadata"]
    requests = provider_requests(api) - before
    assert not [key for key in requests if key[0] in ("delete", "deletecollection")], requests
    output = capfd.readouterr().out
    assert len(log_lines(output, "warning", "Kubernetes API unavailable while waiting for PyTorchJob")) == 1

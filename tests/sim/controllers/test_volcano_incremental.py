"""What makes a session cheap under a long queue changes its cost, never its decisions.

A `SessionMemo` (with the controller's `Snapshot.changed`, the gangs whose objects changed) and
the enqueue gate's remembered answers must give, session after session, the statuses, bindings
and queue statuses a session without them gives, and state every condition and event that one
states at least once.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

from gang_sim.controllers.informer import Informer
from gang_sim.controllers.kinds import PODS
from gang_sim.controllers.volcano.session import SessionMemo, SessionResult, Snapshot, run_session
from tests.sim.volcano_objects import node, podgroup, pods, queue

JsonDict = dict[str, Any]
Key = tuple[str, str]


class Cluster:
    """A toy cluster the sessions act on: bindings bind, statuses are written as new objects
    (only when they change, as the controller writes them), pods run and finish."""

    def __init__(self, gangs: int, capability: str) -> None:
        self.nodes = [node("node-1"), node("node-2")]
        self.podgroups = {
            ("ml", f"job-{i:02d}"): podgroup(
                f"job-{i:02d}", 1, queue="bench", created=f"2026-01-01T00:00:{i:02d}Z"
            )
            for i in range(gangs)
        }
        self.pods = {("ml", p["metadata"]["name"]): p for i in range(gangs) for p in pods(f"job-{i:02d}", 1)}
        self.capability = capability
        self.queues = [queue("default"), queue("bench", capability={"nvidia.com/gpu": capability})]
        self.changed: set[Key] = set()

    def snapshot(self, *, incremental: bool) -> Snapshot:
        tasks: dict[Key, list[JsonDict]] = {}
        for pod in self.pods.values():
            group = pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]
            tasks.setdefault(("ml", group), []).append(pod)
        return Snapshot(
            self.nodes,
            list(self.pods.values()),
            list(self.podgroups.values()),
            self.queues,
            tasks_by_group=tasks if incremental else None,
            changed=set(self.changed) if incremental else None,
        )

    def open_queue(self, gpus: str) -> None:
        self.queues = [queue("default"), queue("bench", capability={"nvidia.com/gpu": gpus})]

    def apply(self, result: SessionResult) -> None:
        self.changed = set()
        for key, status in result.podgroup_status.items():
            current = self.podgroups[key]
            if (current.get("status") or {}) != status:
                self.podgroups[key] = {**current, "status": status}
                self.changed.add(key)
        for key, pod in list(self.pods.items()):
            group = ("ml", pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"])
            phase = pod["status"]["phase"]
            if pod["spec"].get("nodeName") and phase in ("Pending", "Running"):
                after = "Running" if phase == "Pending" else "Succeeded"
                self.pods[key] = {**pod, "status": {"phase": after}}
                self.changed.add(group)
        for namespace, name, node_name in result.bindings:
            pod = self.pods[(namespace, name)]
            self.pods[(namespace, name)] = {**pod, "spec": {**pod["spec"], "nodeName": node_name}}
            self.changed.add(("ml", pod["metadata"]["annotations"]["scheduling.k8s.io/group-name"]))


def _said(result: SessionResult) -> set[tuple[Any, ...]]:
    events = {(e.podgroup, e.type, e.reason, e.message) for e in result.events}
    pod_events = {(e.pod, e.type, e.reason, e.message) for e in result.pod_events}
    return events | pod_events | {(k, "PodScheduled", m) for k, m in result.pod_unschedulable.items()}


def test_sessions_with_a_memo_decide_as_sessions_without_and_say_everything_at_least_once() -> None:
    cluster = Cluster(gangs=30, capability="0")
    memo = SessionMemo()
    said_fresh: set[tuple[Any, ...]] = set()
    said_memo: set[tuple[Any, ...]] = set()
    for session in range(14):
        if session == 3:
            cluster.open_queue("4")  # 2 nodes x 2 GPUs: waves of 4 (the overcommit admits a 5th)
        fresh = run_session(cluster.snapshot(incremental=False))
        remembered = run_session(cluster.snapshot(incremental=True), memo=memo)
        assert remembered.podgroup_status == fresh.podgroup_status, f"session {session}"
        assert remembered.bindings == fresh.bindings, f"session {session}"
        assert remembered.queue_status == fresh.queue_status, f"session {session}"
        assert _said(remembered) <= _said(fresh), f"session {session}: nothing a fresh session would not say"
        said_fresh |= _said(fresh)
        said_memo |= _said(remembered)
        cluster.apply(fresh)
    assert said_memo == said_fresh
    phases = {status["phase"] for status in fresh.podgroup_status.values()}
    assert {"Completed", "Pending"} <= phases, "the run went through waves with gangs still queued"


def test_a_waiting_gang_is_told_its_rejection_once_while_it_stays_the_same() -> None:
    cluster = Cluster(gangs=3, capability="0")
    memo = SessionMemo()
    first = run_session(cluster.snapshot(incremental=True), memo=memo)
    rejection = "queue resource quota insufficient: insufficient nvidia.com/gpu"
    assert {e.podgroup for e in first.events if e.message == rejection} == set(cluster.podgroups)
    cluster.apply(first)  # its Pending status: a new PodGroup object, a gang to look at anew
    cluster.apply(run_session(cluster.snapshot(incremental=True), memo=memo))
    assert not cluster.changed
    again = run_session(cluster.snapshot(incremental=True), memo=memo)
    assert [e for e in again.events if e.message == rejection] == []
    assert again.unchanged == set(cluster.podgroups)


def test_the_gate_answers_anew_once_an_admission_moved_the_totals() -> None:
    # 4 GPUs x 1.2 = 4.8 may be promised. a-1 takes 2 of queue a's 2; a-2 asks 2 more and is
    # refused for the quota alone; b-1 is admitted in queue b (4 promised); a-3, asking what a-2
    # asked, is now refused for the overcommit too: the gate's answer to a-2 does not carry over.
    groups = [
        podgroup("a-1", 2, queue="a", created="2026-01-01T00:00:01Z"),
        podgroup("a-2", 2, queue="a", created="2026-01-01T00:00:02Z"),
        podgroup("b-1", 2, queue="b", created="2026-01-01T00:00:03Z"),
        podgroup("a-3", 2, queue="a", created="2026-01-01T00:00:04Z"),
    ]
    all_pods = [p for name in ("a-1", "a-2", "b-1", "a-3") for p in pods(name, 2)]
    queues = [queue("a", capability={"nvidia.com/gpu": "2"}), queue("b")]
    result = run_session(Snapshot([node("node-1", gpus=4)], all_pods, groups, queues))
    phases = {key[1]: status["phase"] for key, status in result.podgroup_status.items()}
    assert phases == {"a-1": "Inqueue", "a-2": "Pending", "b-1": "Inqueue", "a-3": "Pending"}

    def reasons(name: str) -> set[str]:
        return {e.message for e in result.events if e.podgroup == ("ml", name) and e.type == "Normal"}

    quota = "queue resource quota insufficient: insufficient nvidia.com/gpu"
    overused = "resource in cluster is overused: overused nvidia.com/gpu"
    assert reasons("a-2") == {quota}
    assert reasons("a-3") == {quota, overused}


class _NoClient:
    async def list_objects(self, kind: Any) -> JsonDict:
        return {"metadata": {"resourceVersion": "9"}, "items": [_pod("listed", "9")]}

    def watch(self, kind: Any, version: str) -> AsyncIterator[JsonDict]:
        raise NotImplementedError


def _pod(name: str, version: str) -> JsonDict:
    return {"metadata": {"name": name, "namespace": "ml", "resourceVersion": version}}


def test_store_listeners_see_every_change_of_the_cache_including_observed_writes() -> None:
    informer = Informer(_NoClient(), PODS)  # type: ignore[arg-type]
    seen: list[tuple[str | None, str | None]] = []

    def name(obj: JsonDict | None) -> str | None:
        return None if obj is None else f"{obj['metadata']['name']}@{obj['metadata']['resourceVersion']}"

    informer.subscribe_stores(lambda before, after: seen.append((name(before), name(after))))
    first, second = _pod("a", "1"), _pod("a", "2")
    informer.observe(first)
    informer.observe(second)
    informer.observe(first)  # older than the cached one: not taken, nothing to tell
    informer.forget(second)
    asyncio.run(informer._list())
    assert seen == [(None, "a@1"), ("a@1", "a@2"), ("a@2", None), (None, None)]

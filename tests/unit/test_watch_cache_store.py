"""The shared watch cache's store and wake-ups (`airflow_gang.triggers.watch_cache`), without a server.

Events and lists are fed to the followers as their watch and list would deliver them; the
cache must keep each job's objects findable by job name and wake exactly the triggers whose
objects changed.
"""

from __future__ import annotations

import asyncio
from typing import Any

from airflow_gang.job_kinds import TRAINJOB
from airflow_gang.triggers.watch_cache import JOB_NAME_LABEL, WatchCache


def obj(name: str, version: int, job: str | None = None) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "resourceVersion": str(version), "uid": f"uid-{name}"}
    if job is not None:
        metadata["labels"] = {JOB_NAME_LABEL: job}
    return {"metadata": metadata}


def cache() -> WatchCache:
    return WatchCache(("cluster", "default"), hook=None, namespace="default")  # type: ignore[arg-type]


def test_events_keep_each_jobs_objects_and_wake_only_its_triggers() -> None:
    async def scenario() -> dict[str, Any]:
        shared = cache()
        a, b = shared.subscribe("a"), shared.subscribe("b")
        jobs, pods = shared.followers["pytorchjob"], shared.followers["pod"]
        jobs._apply("ADDED", obj("a", 1))
        pods._apply("ADDED", obj("a-master-0", 2, job="a"))
        pods._apply("ADDED", obj("a-worker-0", 3, job="a"))
        woken = (a.changed.is_set(), b.changed.is_set())
        a.changed.clear()
        pods._apply("DELETED", obj("a-worker-0", 4, job="a"))
        job, _, remaining = shared.snapshot("a")
        return {"woken": woken, "a again": a.changed.is_set(), "job": job, "pods": remaining}

    seen = asyncio.run(scenario())
    assert seen["woken"] == (True, False)
    assert seen["a again"]
    assert seen["job"]["metadata"]["name"] == "a"
    assert [pod["metadata"]["name"] for pod in seen["pods"]] == ["a-master-0"]


def test_a_fresh_list_wakes_the_jobs_whose_objects_changed_meanwhile() -> None:
    async def scenario() -> dict[str, bool]:
        shared = cache()
        subscriptions = {name: shared.subscribe(name) for name in ("same", "changed", "gone", "new")}
        jobs = shared.followers["pytorchjob"]
        jobs._replace([obj("same", 1), obj("changed", 2), obj("gone", 3)])
        for subscription in subscriptions.values():
            subscription.changed.clear()
        # After a 410: the list shows what happened while nothing was watched.
        jobs._replace([obj("same", 1), obj("changed", 5), obj("new", 6)])
        return {name: subscription.changed.is_set() for name, subscription in subscriptions.items()}

    assert asyncio.run(scenario()) == {"same": False, "changed": True, "gone": True, "new": True}


def test_a_follower_losing_its_watch_makes_the_cache_unhealthy_and_wakes_everyone() -> None:
    async def scenario() -> list[tuple[bool, bool]]:
        shared = cache()
        subscription = shared.subscribe("x")
        states = []
        for follower in shared.followers.values():
            follower._set_watching(True)
        states.append((shared.healthy, await shared.ready(0.01)))
        subscription.changed.clear()
        shared.followers["pod"]._set_watching(False)
        states.append((shared.healthy, subscription.changed.is_set()))
        return states

    assert asyncio.run(scenario()) == [(True, True), (False, True)]


def test_waiting_for_a_cache_that_cannot_list_ends_at_its_first_failure() -> None:
    """A trigger that starts during an outage must poll (and time the outage) at once, not wait
    out its sync timeout for a cache that cannot list."""

    async def scenario() -> list[tuple[bool, float]]:
        shared = cache()
        loop = asyncio.get_running_loop()
        loop.call_later(0.05, shared.followers["pytorchjob"]._failed, 1, OSError("refused"))
        outcomes = []
        for _ in range(2):  # the second caller finds the episode under way
            started = loop.time()
            outcomes.append((await shared.ready(5.0), loop.time() - started))
        return outcomes

    (first_ready, first_waited), (second_ready, second_waited) = asyncio.run(scenario())
    assert (first_ready, second_ready) == (False, False)
    assert 0.04 < first_waited < 1.0
    assert second_waited < 0.05


def test_unsubscribed_triggers_are_forgotten() -> None:
    async def scenario() -> dict[str, Any]:
        shared = cache()
        first, second = shared.subscribe("x"), shared.subscribe("x")
        shared.unsubscribe(first)
        after_one = set(shared.subscribers)
        shared.unsubscribe(second)
        return {"after one": after_one, "after both": set(shared.subscribers)}

    assert asyncio.run(scenario()) == {"after one": {"x"}, "after both": set()}


def test_a_trainjob_cache_follows_trainjobs_and_finds_their_pods_by_jobset_name() -> None:
    async def scenario() -> dict[str, Any]:
        shared = WatchCache(
            ("cluster", "default", "TrainJob"), hook=None, namespace="default", job_kind=TRAINJOB
        )  # type: ignore[arg-type]
        subscription = shared.subscribe("tj")
        node = {
            "metadata": {
                "name": "tj-node-0-0-abcde",
                "resourceVersion": "2",
                "labels": {"jobset.sigs.k8s.io/jobset-name": "tj", JOB_NAME_LABEL: "other"},
            }
        }
        shared.followers["trainjob"]._apply("ADDED", obj("tj", 1))
        shared.followers["pod"]._apply("ADDED", node)
        job, _, pods = shared.snapshot("tj")
        return {
            "kinds": sorted(shared.followers),
            "job": job,
            "pods": pods,
            "woken": subscription.changed.is_set(),
        }

    seen = asyncio.run(scenario())
    assert seen["kinds"] == ["pod", "podgroup", "trainjob"]
    assert seen["job"]["metadata"]["name"] == "tj"
    assert [pod["metadata"]["name"] for pod in seen["pods"]] == ["tj-node-0-0-abcde"]
    assert seen["woken"]

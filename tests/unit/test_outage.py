"""How outages and failing watches are reported: a WARNING once per episode, a reminder every
`REMINDER_SECONDS` (5 min) while it lasts, and a new WARNING for a new episode after a recovery.

The clock is a fake one the tests move; nothing sleeps. The watch reporters are driven through
the callbacks their `ListWatch` calls (``on_failure``, ``on_back``), without a server.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from airflow_gang.exceptions import GangApiError, GangApiUnavailable
from airflow_gang.model.outage import Outage, ride_out
from airflow_gang.triggers.change_feed import ChangeFeed
from airflow_gang.triggers.watch_cache import WatchCache


class FakeClock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


class RecordingLog:
    def __init__(self) -> None:
        self.lines: list[tuple[str, str]] = []

    def warning(self, msg: Any, /, *args: Any) -> None:
        self.lines.append(("warning", str(msg) % args if args else str(msg)))

    def info(self, msg: Any, /, *args: Any) -> None:
        self.lines.append(("info", str(msg) % args if args else str(msg)))

    def take(self) -> list[tuple[str, str]]:
        lines, self.lines = self.lines, []
        return lines


def refused_connection() -> GangApiError:
    return GangApiError("get pytorchjobs default/train-1: connection refused", status=None)


def test_an_outage_warns_once_per_episode_then_every_reminder_interval() -> None:
    clock = FakeClock()
    outage = Outage("PyTorchJob default/train-1", timeout=None, clock=clock)

    first = outage.failed(refused_connection())
    assert first.warning is not None
    assert "Kubernetes API unavailable while waiting for PyTorchJob default/train-1" in first.warning
    assert "1 failed looks" in first.warning
    quiet = []
    for _ in range(20):  # 20 more failed looks within 299 s: not a word
        clock.advance(299 / 20)
        quiet.append(outage.failed(refused_connection()).warning)
    assert quiet == [None] * 20
    clock.advance(1.0)  # 300 s after the first WARNING
    reminder = outage.failed(refused_connection()).warning
    assert reminder is not None
    assert "(300s, 22 failed looks" in reminder
    clock.advance(299)
    assert outage.failed(refused_connection()).warning is None
    clock.advance(1)
    assert outage.failed(refused_connection()).warning is not None


def test_a_new_outage_after_a_recovery_warns_again_at_once() -> None:
    clock = FakeClock()
    outage = Outage("PyTorchJob default/train-1", timeout=60, clock=clock)
    assert outage.failed(refused_connection()).warning is not None
    clock.advance(10)
    assert outage.failed(refused_connection()).warning is None
    back = outage.recovered()
    assert back is not None
    assert "reachable again after 10s (2 failed looks)" in back
    assert outage.recovered() is None, "one all-clear per episode"
    clock.advance(5)
    again = outage.failed(refused_connection())
    assert again.warning is not None
    assert "(0s, 1 failed looks" in again.warning
    assert not again.exceeded


def test_ride_out_logs_one_warning_for_an_episode_and_gives_up_past_the_timeout() -> None:
    clock = FakeClock()
    log = RecordingLog()
    outage = Outage("PyTorchJob default/train-1", timeout=30, clock=clock)

    def sleep(seconds: float) -> None:
        clock.advance(max(seconds, 1.0))

    def always_down() -> None:
        raise refused_connection()

    with pytest.raises(GangApiUnavailable) as raised:
        ride_out(always_down, outage, log, sleep=sleep, name="train-1", namespace="default")
    assert raised.value.unavailable_seconds >= 30
    assert [level for level, _ in log.take()] == ["warning"]


def test_failing_watches_of_a_trigger_warn_once_per_episode_with_reminders() -> None:
    clock = FakeClock()
    log = RecordingLog()

    async def scenario() -> None:
        feed = ChangeFeed(None, "train-1", "ml", with_podgroup=True, log=log, clock=clock)  # type: ignore[arg-type]
        error = refused_connection()
        for _ in range(5):
            feed.failed("pod", error)
            clock.advance(30)
        assert feed.changed.is_set(), "a failed watch makes the trigger look"
        assert log.take() == [
            ("warning", f"watch of pod for ml/train-1 failed ({error}); polling until it is back")
        ]
        clock.advance(150)  # 300 s since the WARNING
        feed.failed("pod", error)
        feed.failed("podgroup", error)  # each kind has its own episode
        (reminder, other_kind) = log.take()
        assert reminder[0] == "warning"
        assert reminder[1].startswith("watch of pod for ml/train-1 still failing after 300s (6 failures;")
        assert other_kind[1].startswith("watch of podgroup for ml/train-1 failed")
        feed.trouble["pod"].back()
        assert log.take() == [("info", "watch of pod for ml/train-1 is back")]
        feed.failed("pod", error)  # a new episode, seconds later: warned again
        assert log.take() == [
            ("warning", f"watch of pod for ml/train-1 failed ({error}); polling until it is back")
        ]

    asyncio.run(scenario())


def test_failing_shared_watches_warn_once_per_episode_with_reminders() -> None:
    clock = FakeClock()
    log = RecordingLog()

    async def scenario() -> None:
        cache = WatchCache(("cluster", "ml"), hook=None, namespace="ml", logger=log, clock=clock)  # type: ignore[arg-type]
        pods = cache.followers["pod"]
        error = refused_connection()
        for failures in range(1, 11):
            pods._failed(failures, error)
            clock.advance(29)
        assert log.take() == [
            ("warning", f"shared watch of pod in ml failed ({error}); its triggers poll until it is back")
        ]
        clock.advance(10)  # 300 s since the WARNING
        pods._failed(11, error)
        ((level, reminder),) = log.take()
        assert level == "warning"
        assert reminder.startswith("shared watch of pod in ml still failing after 300s (11 failures;")
        pods.trouble.back()
        pods._failed(1, error)
        assert [level for level, _ in log.take()] == ["info", "warning"]

    asyncio.run(scenario())

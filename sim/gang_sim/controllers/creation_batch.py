"""Jobs submitted together get their first pods together: the creation batch of the training-operator
and of the Job controller.

A real controller's parallel workers interleave the pods of jobs submitted at once, so a
first-come first-fit scheduler sees the first pod of every job before any job's second. Here the
jobs of one submission arrive a few milliseconds apart, so a job that has no pods yet waits until
no other new job has appeared for ``window`` seconds (at most ``limit`` after the first of them),
which makes that interleaving, and the partial-placement deadlock it leads to without gang
scheduling, deterministic. A suspended job is not yet submitted as far as its pods go: jobs
resumed together get their pods together, like jobs created together. `rounds` is the order
the pods of a released batch then go out in: every job's first, then every job's second ...
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Collection, Iterable, Sequence
from typing import TypeVar

T = TypeVar("T")
BATCH_LIMIT = 1.0  # seconds a steady stream of new jobs may hold back the first ones' pods


class CreationBatch:
    """When each job was first seen unsuspended, and which new jobs still wait for the others."""

    def __init__(self, window: float, limit: float = BATCH_LIMIT) -> None:
        self.window = window
        self.limit = limit
        self._first_seen: dict[str, float] = {}  # job uid -> when first seen unsuspended

    def keep_only(self, live: Collection[str]) -> None:
        """Forget the jobs that are gone."""
        self._first_seen = {uid: seen for uid, seen in self._first_seen.items() if uid in live}

    def held(
        self, jobs: Iterable[tuple[str, bool]], fresh: Collection[str], wake: Callable[[], None]
    ) -> set[str]:
        """The ``fresh`` jobs (pods to create, none yet) whose pods wait; ``wake`` is called at release.

        :param jobs: ``(uid, suspended)`` of every job planned this round.
        """
        moment = time.monotonic()
        for uid, suspended in jobs:
            if suspended:
                self._first_seen.pop(uid, None)
            else:
                self._first_seen.setdefault(uid, moment)
        if not fresh or self.window <= 0:
            return set()
        newest = max(self._first_seen[uid] for uid in fresh)
        oldest = min(self._first_seen[uid] for uid in fresh)
        release = min(newest + self.window, oldest + self.limit)
        if moment >= release:
            return set()
        asyncio.get_running_loop().call_later(release - moment, wake)
        return set(fresh)


def rounds(queues: Sequence[Sequence[T]]) -> list[list[T]]:
    """The first item of each queue, then the second of each, ...: one list per round.

    A controller's parallel workers create the pods of jobs submitted together side by side, so
    a first-come first-fit scheduler sees the masters of every job before any job's second pod.
    Rounds go out one after another (inside a round, in parallel), which keeps the partial-
    placement deadlock deterministic without sending one pod at a time.
    """
    return [
        [queue[row] for queue in queues if row < len(queue)]
        for row in range(max((len(queue) for queue in queues), default=0))
    ]


def interleave(queues: Sequence[Sequence[T]]) -> list[T]:
    """`rounds`, flattened: round-robin over the queues."""
    return [item for row in rounds(queues) for item in row]

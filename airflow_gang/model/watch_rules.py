"""What a list + watch loop does when its watch fails, sync (the worker) or async (the triggerer).

- ``410 Gone``: the version was compacted; list again at once the first time, then more slowly
  (`relist_delay`), so a server answering 410 to every fresh version cannot spin the loop;
- any other failure: retry with capped, jittered exponential backoff (`retry_delay`);
- say it with `WatchTrouble`: a WARNING once per episode of failures, a reminder every few
  minutes while it lasts, an INFO when the watch is back.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

from airflow_gang.model.outage import REMINDER_SECONDS, Episode, OutageLog

RETRY_MAX_SECONDS = 30.0


def relist_delay(gone: int) -> float:
    """Seconds before listing again after the ``gone``-th ``410 Gone`` in a row."""
    return 0.0 if gone <= 1 else min(RETRY_MAX_SECONDS, 0.5 * gone)


def retry_delay(failures: int) -> float:
    """Seconds before retrying after the ``failures``-th failure in a row: half of a capped
    exponential step, plus up to the other half at random (so watches cut together spread out)."""
    base = min(RETRY_MAX_SECONDS, 0.5 * 2.0 ** min(failures, 8))
    return base / 2 + random.uniform(0, base / 2)


class WatchTrouble:
    """What the log says about one failing watch: once per episode, a reminder while it lasts.

    The first failure of an episode logs ``<what> failed (<error>); <meanwhile>`` at WARNING;
    while failures go on, ``<what> still failing ...`` is logged again every ``reminder_every``
    seconds (`airflow_gang.model.outage.Episode`, as for the waits' API outages); `back` ends the
    episode with an INFO, and the next failure warns again.

    :param what: the watch, e.g. ``watch of pod for ml/train-1``.
    :param meanwhile: what happens while it fails, e.g. ``polling until it is back``.
    """

    def __init__(
        self,
        log: OutageLog,
        what: str,
        meanwhile: str,
        *,
        reminder_every: float = REMINDER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log = log
        self.what = what
        self.meanwhile = meanwhile
        self.episode = Episode(reminder_every, clock)

    def failed(self, error: Exception) -> None:
        if not self.episode.failed():
            return
        if self.episode.failures == 1:
            self.log.warning("%s failed (%s); %s", self.what, error, self.meanwhile)
        else:
            self.log.warning(
                "%s still failing after %.0fs (%d failures; last: %s); %s",
                self.what,
                self.episode.seconds(),
                self.episode.failures,
                error,
                self.meanwhile,
            )

    def back(self) -> None:
        if self.episode.recovered():
            self.log.info("%s is back", self.what)

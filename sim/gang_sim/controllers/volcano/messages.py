"""The texts vc-scheduler writes into a gang's conditions and events.

``docs/architecture.md#volcano-messages`` has them as a real vc-scheduler writes them.

Cached: a thousand queued gangs of one shape share one text, restated every session.
"""

from __future__ import annotations

from collections import Counter
from functools import lru_cache

from gang_sim.controllers.volcano.model import Group


def histogram(group: Group, binding: int = 0) -> str:
    """``4 Pending, 4 minAvailable``: task counts by status (``binding`` of the pending ones
    counted as ``Binding``) and the gang size, sorted as vc-scheduler prints them."""
    return _histogram_text(group.counts, group.min_member, binding)


@lru_cache(maxsize=4096)
def _histogram_text(counts: tuple[tuple[str, int], ...], min_member: int, binding: int) -> str:
    # Cached: a thousand queued gangs of one shape share one text, restated every session.
    histogram = Counter(dict(counts))
    if binding:
        histogram["Pending"] -= binding
        histogram["Binding"] += binding
    return ", ".join(
        sorted([f"{n} {status}" for status, n in histogram.items() if n] + [f"{min_member} minAvailable"])
    )


def fit_error(group: Group, schedulable: int, unschedulable: int, origin: str | None) -> str:
    """vc-scheduler's ``JobInfo.FitError()`` for a gang that cannot be placed."""
    return _fit_error_text(histogram(group), schedulable, unschedulable, origin)


@lru_cache(maxsize=4096)
def _fit_error_text(histogram: str, schedulable: int, unschedulable: int, origin: str | None) -> str:
    message = f"pod group is not ready, {histogram}"
    pending = [
        f"{n} {label}" for n, label in ((schedulable, "Schedulable"), (unschedulable, "Unschedulable")) if n
    ]
    if pending:
        message += f"; Pending: {', '.join(pending)}"
    if origin:
        message += f". Origin reason is {origin}"
    return message


def unready_prefix(group: Group, ready: int) -> str:
    return f"{max(0, group.min_member - ready)}/{len(group.tasks)} tasks in gang unschedulable: "


def fit_message(group: Group, schedulable: int, unschedulable: int, origin: str | None) -> str:
    """The gang plugin's condition and event text: the unready count, then the fit error."""
    prefix = unready_prefix(group, group.scheduled + schedulable)
    return prefix + fit_error(group, schedulable, unschedulable, origin)


def counts_text(counts: tuple[tuple[str, int], ...], min_member: int) -> str:
    """The histogram of `histogram` from task counts by status rather than a `Group`'s own
    (a session's end state: ``Releasing``, ``Pipelined``, ``Allocated`` pods)."""
    return _histogram_text(counts, min_member, 0)


def fit_error_of(
    counts: tuple[tuple[str, int], ...],
    min_member: int,
    schedulable: int,
    unschedulable: int,
    origin: str | None,
) -> str:
    """``JobInfo.FitError()`` from task counts by status (see `counts_text`)."""
    return _fit_error_text(counts_text(counts, min_member), schedulable, unschedulable, origin)

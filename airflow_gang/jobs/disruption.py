"""Disruptions of a running gang: the pods it lost after admission, why, and what the wait does.

A shared pool takes GPUs back (`docs/disruptions.md` has what each cluster component does and
where in its source): Volcano's ``preempt`` and ``reclaim`` actions evict pods of running jobs,
nodes die or are drained, the kubelet evicts under memory pressure. Each leaves its mark on the
pod before the pod goes, and the pods are all this module reads (the provider's RBAC reads pods,
not Nodes or Events):

- the ``DisruptionTarget`` condition Kubernetes writes before it deletes a pod (reasons
  ``PreemptionByScheduler``, ``EvictionByEvictionAPI``, ``DeletionByTaintManager``,
  ``DeletionByPodGC``, ``TerminationByKubelet``);
- Volcano's evictor, which sets ``Ready=False`` reason ``Evict`` with "Pod is evicted, because
  of preempt" (or "reclaim"), and ``DisruptionTarget`` reason ``PreemptionByScheduler``, before
  it deletes the pod;
- the kubelet's own eviction: phase ``Failed``, ``status.reason: Evicted``.

A pod is *lost* when it held a node after the gang was admitted and is then deleting, gone, or
ended ``Failed`` with such a mark. A pod that failed on its own (an exit code) and that its
controller replaces is the job's restart policy at work, not a disruption; pods going while a
replica already ``Succeeded`` with no mark are the job's own cleanup. Nor are pods going with no
mark once one of the gang's pods failed on its own, or while the job says it is ``Restarting``:
that is its controller restarting it (Volcano's ``RestartJob`` deletes every pod of the job), until
the gang is whole again. One *episode* runs from the first pod
lost until nothing of the gang is terminating and it holds ``minMember`` pods again; pods lost
meanwhile belong to it (a node takes all its pods, one at a time). An episode is *requeued*
when the gang fell below ``minMember``: it waits in its queue again, like a new gang.

`DisruptionTracker` follows one try's wait and applies the user's policy (``on_disruption``):
``wait`` lets the job's own restart bring the gang back, within ``readmission_timeout`` of the
disruption; ``retry`` gives the job up at once, so Airflow's retry submits a fresh one;
``max_disruptions`` caps the episodes per try. Everything here is pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Literal

from airflow_gang.exceptions import GangSpecError
from airflow_gang.jobs.pod_losses import (
    STRENGTH,
    WORDS,
    DisruptionReason,
    PodLoss,
    deleted_loss,
    holds_node,
    pod_loss,
    pod_uid,
    ready,
)
from airflow_gang.model.gang_state import GangSnapshot
from airflow_gang.reports.timeline import parse_time

JsonDict = dict[str, Any]
OnDisruption = Literal["wait", "retry"]
ON_DISRUPTION_CHOICES: tuple[OnDisruption, ...] = ("wait", "retry")
DEFAULT_MAX_DISRUPTIONS = 3


def check_max_disruptions(value: Any) -> None:
    """`GangSpecError` naming ``max_disruptions`` unless it is None or a whole number >= 0."""
    if value is None or (isinstance(value, int) and not isinstance(value, bool) and value >= 0):
        return
    raise GangSpecError(
        f"max_disruptions={value!r} is invalid: use a whole number >= 0 (0 gives the job up at its "
        "first disruption), or None for no cap",
        field="max_disruptions",
    )


@dataclass
class Disruption:
    """One episode: a row of the job's history and of the Gang jobs page."""

    number: int
    reason: DisruptionReason
    detail: str
    started_at: str
    queue: str | None
    pods: list[str] = field(default_factory=list)
    nodes: list[str] = field(default_factory=list)
    requeued: bool = False  # the gang fell below minMember: back in its queue
    readmitted_at: str | None = None  # when it held minMember again, after being requeued
    ended_at: str | None = None

    def to_json(self) -> JsonDict:
        return {
            "number": self.number,
            "reason": self.reason.value,
            "detail": self.detail,
            "started_at": self.started_at,
            "queue": self.queue,
            "pods": list(self.pods),
            "nodes": list(self.nodes),
            "requeued": self.requeued,
            "readmitted_at": self.readmitted_at,
            "ended_at": self.ended_at,
        }

    @classmethod
    def from_json(cls, data: JsonDict) -> Disruption:
        try:
            reason = DisruptionReason(str(data.get("reason")))
        except ValueError:
            reason = DisruptionReason.DELETED
        return cls(
            number=int(data.get("number") or 0),
            reason=reason,
            detail=str(data.get("detail") or ""),
            started_at=str(data.get("started_at") or ""),
            queue=data.get("queue"),
            pods=[str(p) for p in data.get("pods") or []],
            nodes=[str(n) for n in data.get("nodes") or []],
            requeued=bool(data.get("requeued")),
            readmitted_at=data.get("readmitted_at"),
            ended_at=data.get("ended_at"),
        )

    def describe(self, replicas: int) -> str:
        """``node lost: 2 of 4 pods (a-worker-0, a-worker-1 on node-2): <detail>``."""
        where = f" on {', '.join(self.nodes)}" if self.nodes else ""
        lost = f"{len(self.pods)} of {replicas} pods" if replicas else f"{len(self.pods)} pods"
        text = f"{WORDS[self.reason]}: {lost} ({', '.join(self.pods)}{where})"
        return f"{text}: {self.detail}" if self.detail else text


@dataclass(frozen=True)
class GiveUp:
    """The policy ends the wait: delete the job and fail the try (retryable)."""

    kind: Literal["disrupted", "readmission_timeout"]
    message: str

    @property
    def end_state(self) -> str:
        """The state the job's history record ends in."""
        return "admission_timeout" if self.kind == "readmission_timeout" else "disrupted"


@dataclass(frozen=True)
class DisruptionStep:
    """What one look found: an episode that started, one that ended, the policy's verdict, and
    the re-admission deadline of a requeued episode (the wait must wake for it)."""

    started: Disruption | None = None
    requeued: Disruption | None = None
    ended: Disruption | None = None
    give_up: GiveUp | None = None
    deadline: dt.datetime | None = None


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def _whole_again(seen: GangSnapshot) -> bool:
    """Every replica of the gang holds a node and none is going: a restart is over (``minMember``
    is not enough: a gang smaller than its job holds it while its controller restarts it)."""
    pods = seen.pods
    going = any((pod.get("metadata") or {}).get("deletionTimestamp") for pod in pods)
    held = sum(1 for pod in pods if holds_node(pod))
    return not going and held >= max(seen.status.replicas, seen.status.min_member)


class DisruptionTracker:
    """Follows one try's wait, look after look.

    :param on_disruption: ``wait``, ``retry``, or None (report only: a sensor does not own the job).
    :param max_disruptions: episodes one try may see before it gives the job up; None: any.
    :param readmission_timeout: seconds a requeued gang may wait for re-admission (``wait``).
    """

    def __init__(
        self,
        on_disruption: str | None = None,
        max_disruptions: int | None = None,
        readmission_timeout: float | None = None,
    ) -> None:
        self.on_disruption = on_disruption
        self.max_disruptions = max_disruptions
        self.readmission_timeout = readmission_timeout
        self.episodes: list[Disruption] = []
        self._held: dict[str, JsonDict] = {}  # uid -> the pod as last seen holding a node
        self._counted: set[str] = set()  # uids of pods already counted as lost
        self._current: Disruption | None = None
        # A pod of the gang failed on its own (or the job said Restarting): pods deleted with no
        # mark are its controller's restart until every replica holds a node again.
        self._restarting = False

    @property
    def current(self) -> Disruption | None:
        return self._current

    def to_json(self) -> list[JsonDict]:
        return [episode.to_json() for episode in self.episodes]

    def progress(self) -> JsonDict:
        """Fields of the ``progress`` entry: the open episode and how many this try saw."""
        if not self.episodes:
            return {}
        return {
            "disruptions": len(self.episodes),
            "disruption": self._current.to_json() if self._current is not None else None,
        }

    def look(self, seen: GangSnapshot, *, admitted: bool, now: dt.datetime | None = None) -> DisruptionStep:
        now = now or _now()
        status = seen.status
        if seen.job is None or status.finished:
            if self._current is not None:  # the job ended (or went) during the episode
                self._current.ended_at, self._current = now.isoformat(), None
            return DisruptionStep()
        if not admitted:
            return DisruptionStep()
        if status.job_condition == "Restarting":
            self._restarting = True
        losses = self._losses(seen.pods)
        if self._restarting and not losses and _whole_again(seen):
            self._restarting = False
        started = requeued = ended = None
        if losses and self._current is None:
            started = self._start(losses, status.queue, now)
        elif losses and self._current is not None:
            self._add(self._current, losses)
        current = self._current
        if current is None:
            return DisruptionStep()
        alive = sum(1 for pod in seen.pods if ready(pod))
        terminating = any((pod.get("metadata") or {}).get("deletionTimestamp") for pod in seen.pods)
        if not current.requeued and alive < status.min_member:
            current.requeued = True
            requeued = current
        if not terminating and alive >= status.min_member and status.admitted:
            if current.requeued:
                current.readmitted_at = now.isoformat()
            current.ended_at = now.isoformat()
            ended, self._current = current, None
        give_up = self._verdict(started, current if ended is None else None, now)
        return DisruptionStep(
            started, requeued, ended, give_up, self._deadline(current if not ended else None)
        )

    def _losses(self, pods: Iterable[JsonDict]) -> list[PodLoss]:
        pods = list(pods)
        # A replica that finished means the job is ending: a pod going now with no mark is its
        # own cleanup (cleanPodPolicy), not a disruption. A marked one still is.
        ending = any((pod.get("status") or {}).get("phase") == "Succeeded" for pod in pods)
        if any((pod.get("status") or {}).get("phase") == "Failed" and pod_loss(pod) is None for pod in pods):
            self._restarting = True
        ending = ending or self._restarting
        losses: list[PodLoss] = []
        present = set()
        for pod in pods:
            uid = pod_uid(pod)
            present.add(uid)
            if holds_node(pod):
                self._held[uid] = pod
                continue
            held = self._held.pop(uid, None)
            mark = pod_loss(pod)
            deleting = (pod.get("metadata") or {}).get("deletionTimestamp")
            if held is None:
                # Taken before this wait first looked (a wait that just started or resumed):
                # its mark still tells, while the pod is there.
                if mark is not None and uid not in self._counted:
                    self._counted.add(uid)
                    losses.append(mark)
                continue
            self._counted.add(uid)
            if mark is not None:
                losses.append(mark)
            elif deleting and not ending and (pod.get("status") or {}).get("phase") != "Failed":
                losses.append(deleted_loss(pod))
            # else: Failed on its own (an exit code), replaced by the job's restart policy
        for uid in [uid for uid in self._held if uid not in present]:
            held = self._held.pop(uid)
            if (mark := pod_loss(held)) is not None or not ending:
                losses.append(mark or deleted_loss(held))
        return losses

    def _start(self, losses: list[PodLoss], queue: str | None, now: dt.datetime) -> Disruption:
        moments = sorted(loss.at for loss in losses if loss.at)
        episode = Disruption(
            number=len(self.episodes) + 1,
            reason=DisruptionReason.DELETED,
            detail="",
            started_at=moments[0] if moments else now.isoformat(),
            queue=queue,
        )
        self._add(episode, losses)
        self.episodes.append(episode)
        self._current = episode
        return episode

    @staticmethod
    def _add(episode: Disruption, losses: list[PodLoss]) -> None:
        for loss in losses:
            if loss.pod not in episode.pods:
                episode.pods.append(loss.pod)
            if loss.node and loss.node not in episode.nodes:
                episode.nodes.append(loss.node)
            if STRENGTH.index(loss.reason) < STRENGTH.index(episode.reason) or not episode.detail:
                episode.reason, episode.detail = loss.reason, loss.detail

    @property
    def deadline(self) -> dt.datetime | None:
        """When the open, requeued episode's re-admission time runs out (``wait``); else None."""
        return self._deadline(self._current)

    def _deadline(self, current: Disruption | None) -> dt.datetime | None:
        if current is None or not current.requeued or self.on_disruption != "wait":
            return None
        if not self.readmission_timeout:
            return None
        started = parse_time(current.started_at) or _now()
        return started + dt.timedelta(seconds=self.readmission_timeout)

    def _verdict(
        self, started: Disruption | None, current: Disruption | None, now: dt.datetime
    ) -> GiveUp | None:
        if self.on_disruption is None:
            return None
        if started is not None and self.on_disruption == "retry":
            return GiveUp("disrupted", f"disrupted ({WORDS[started.reason]}) with on_disruption='retry'")
        if started is not None and self.max_disruptions is not None and started.number > self.max_disruptions:
            return GiveUp(
                "disrupted",
                f"disrupted {started.number} times in this try, "
                f"more than max_disruptions={self.max_disruptions}",
            )
        deadline = self._deadline(current)
        if deadline is not None and now >= deadline:
            return GiveUp(
                "readmission_timeout",
                f"not re-admitted within {self.readmission_timeout:g}s of its disruption "
                f"({WORDS[current.reason] if current else 'disrupted'})",
            )
        return None

"""The training-operator's writes: idempotent verbs, and which failures requeue a job.

``AlreadyExists`` on create and ``NotFound`` on delete mean done (an earlier round made it,
someone deleted it). Any other failed write — a pod, a service, the status, a deletion — marks
its job in `JobWrites.failed`, which the controller requeues with the work queue's per-item
backoff. A refused PodGroup write is logged as the real operator logs it (``Sync PodGroup
...``); any other refusal once per object and message, the next rounds retrying quietly. What
is written goes into the cache at once, so the next round plans from it.
"""

from __future__ import annotations

import logging

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import PODGROUPS, PYTORCHJOBS, Kind, object_key
from gang_sim.controllers.training_operator.pytorchjob_watches import JobKey

log = logging.getLogger(__name__)

WRITE_ERRORS = (ApiError, aiohttp.ClientError, OSError, TimeoutError)


class JobWrites:
    """The operator's API writes for its jobs, remembering which jobs' writes failed this round."""

    def __init__(self, client: KubeClient, cache: Cache) -> None:
        self.client = client
        self.cache = cache
        self.failed: set[JobKey] = set()
        """The jobs with a failed write since the controller last emptied it (each round)."""
        self._reported: dict[tuple[str, str, str], str] = {}

    async def create(self, kind: Kind, body: JsonDict, key: JobKey) -> None:
        await self.write(kind, body, key, create=True, requeue=True)

    async def write(
        self, kind: Kind, body: JsonDict, key: JobKey, *, create: bool, requeue: bool
    ) -> JsonDict | None:
        """Create or replace ``body``; the stored object, or None when the write did not happen.

        A create answered ``AlreadyExists`` counts as done (an earlier round made it); with
        ``requeue`` a failure marks the job `failed`, else it is only logged.
        """
        namespace, _ = object_key(body)
        try:
            if create:
                written = await self.client.create(kind, body, namespace)
            else:
                written = await self.client.replace(kind, body)
        except WRITE_ERRORS as error:
            status = error.status if isinstance(error, ApiError) else None
            if create and status == 409:
                return None if kind == PODGROUPS else body
            if requeue and status != 404:
                self.failed.add(key)
            if kind == PODGROUPS:
                log.warning("Sync PodGroup %s/%s: unable to update a PodGroup: %s", *key, error)
            elif status not in (404, 409):
                self.report(kind, body, error)
            return None
        self.cache[kind].observe(written)
        return written

    async def delete(self, kind: Kind, namespace: str, name: str, key: JobKey) -> bool:
        """Delete; True when this call did it. A pod that now terminates stays in the cache."""
        cached = self.cache.get(kind, namespace, name)
        try:
            answer = await self.client.delete(kind, name, namespace)
        except WRITE_ERRORS as error:
            if isinstance(error, ApiError) and error.status == 404:
                if cached is not None:
                    self.cache[kind].forget(cached)
            else:
                self.failed.add(key)
                self.report(kind, cached or {"metadata": {"namespace": namespace, "name": name}}, error)
            return False
        if deep_get(answer, "metadata", "deletionTimestamp"):
            self.cache[kind].observe(answer)
        elif cached is not None:
            self.cache[kind].forget(cached)
        return True

    async def write_status(self, job: JsonDict, status: JsonDict) -> None:
        """Replace the job's ``/status``, logging the conditions it changes."""
        key = object_key(job)
        try:
            written = await self.client.replace(PYTORCHJOBS, {**job, "status": status}, subresource="status")
        except WRITE_ERRORS as error:
            # A conflict (someone wrote the job meanwhile) is an error like any other: the job
            # is requeued and decided again on fresh state.
            if not (isinstance(error, ApiError) and error.status == 404):
                self.failed.add(key)
                if not (isinstance(error, ApiError) and error.status == 409):
                    self.report(PYTORCHJOBS, job, error)
            return
        self.cache[PYTORCHJOBS].observe(written)
        for ctype, truth, reason in sorted(_conditions(status) - _conditions(job.get("status"))):
            log.info(
                "pytorchjob condition job=%s/%s type=%s status=%s reason=%s",
                *key,
                ctype,
                truth,
                reason,
            )

    def report(self, kind: Kind, obj: JsonDict, error: BaseException) -> None:
        """Log a refused write once per object and message; the next rounds retry quietly."""
        key = (kind.plural, *object_key(obj))
        if self._reported.get(key) != str(error):
            if len(self._reported) > 10_000:  # bounded: a forgotten entry only costs one more line
                self._reported.clear()
            self._reported[key] = str(error)
            log.warning("training-operator write refused %s/%s/%s: %s", *key, error)


def _conditions(status: JsonDict | None) -> set[tuple[str, str, str]]:
    return {(c.get("type"), c.get("status"), c.get("reason")) for c in (status or {}).get("conditions") or []}

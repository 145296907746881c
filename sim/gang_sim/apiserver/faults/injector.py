"""The API server's fault injector: holds the active `FaultSpec`, decides per request, counts.

Per-request decisions (errors, latency, watch faults) are made on the server's event loop by
`middleware` and ``../watch_stream.py``; each kind draws from its own ``random.Random`` seeded
from the spec's seed, so the same seed and the same sequence of faulted requests give the same
faults, and adding a latency rule does not change which requests get errors. Requests a spec
does not target (see `FaultInjector.targets`) draw nothing.

Timed faults (outages, deletions, node failures and deletions, kubelet evictions) run on a
`FaultClock` thread, their times counted from `apply`. Replacing or clearing the spec ends what
the old one started: a closed listener reopens and nodes it failed recover (deleted objects,
deleted Nodes included, stay deleted; evicted pods stay evicted).
"""

from __future__ import annotations

import functools
import logging
import random
import threading
from collections import Counter
from dataclasses import dataclass
from typing import Any, Protocol

from gang_sim.apiserver.faults.actions import (
    StoredObjects,
    delete_node,
    delete_objects,
    mark_node_failed,
    mark_pod_evicted,
)
from gang_sim.apiserver.faults.clock import FaultClock, Step
from gang_sim.apiserver.kubelet_proxy import LogStreams
from gang_sim.apiserver.store import Store
from gang_sim.conventions import CONTROLLERS_USER_AGENT
from gang_sim.faults import FAULT_KINDS, Deletion, ErrorRule, FaultSpec, KubeletEviction


class FaultTarget(StoredObjects, Protocol):
    """The parts of the API server's `ServerState` the injector acts on."""

    @property
    def store(self) -> Store: ...

    @property
    def log_streams(self) -> LogStreams: ...


log = logging.getLogger(__name__)
_CONTROLLERS_PRODUCT = CONTROLLERS_USER_AGENT.split("/", 1)[0] + "/"


class Interruptible(Protocol):
    """The listening side of the server, which an outage takes down and brings back."""

    def interrupt(self) -> None: ...

    def resume(self) -> None: ...


@dataclass(frozen=True)
class WatchFault:
    """What to do to one watch stream: answer ``410 Gone`` at once, or cut it short."""

    gone: bool = False
    cut_after_events: int | None = None
    cut_after_seconds: float | None = None


@dataclass(frozen=True)
class InjectedError:
    """An error to answer instead of serving the request; ``rule`` is its index in ``errors``."""

    status: int
    retry_after: int
    rule: int


class _Active:
    """An applied spec with one random stream per per-request fault kind."""

    def __init__(self, spec: FaultSpec) -> None:
        self.spec = spec
        self.errors = random.Random(f"{spec.seed}/errors")
        self.latency = random.Random(f"{spec.seed}/latency")
        self.watches = random.Random(f"{spec.seed}/watches")

    def targets(self, user_agent: str) -> bool:
        if self.spec.clients is None:
            return not user_agent.startswith(_CONTROLLERS_PRODUCT)
        return any(client in user_agent for client in self.spec.clients)


class FaultInjector:
    """One per API server (``ServerState.faults``); see the module docstring."""

    def __init__(self, state: FaultTarget) -> None:
        self._state = state
        self._lock = threading.Lock()
        self._active: _Active | None = None
        self._counts: Counter[str] = Counter()
        self._clock = FaultClock()
        self._listener: Interruptible | None = None
        # What timed steps changed and a new spec must undo; only the clock thread touches these.
        self._down = False
        self._failed_nodes: set[str] = set()

    def attach_listener(self, listener: Interruptible) -> None:
        """Give outages something to take down (without one, outages are skipped)."""
        self._listener = listener

    # --- the spec -----------------------------------------------------------------------------

    @property
    def active(self) -> bool:
        """Whether a spec is applied (requests pay for classification only then)."""
        return self._active is not None

    @property
    def spec(self) -> FaultSpec | None:
        active = self._active
        return active.spec if active is not None else None

    def apply(self, spec: FaultSpec) -> None:
        """Make ``spec`` the active one; its ``start``/``at`` times count from now."""
        with self._lock:
            self._active = _Active(spec)
        self._clock.replace([(0.0, self._restore), *self._timed_steps(spec)])
        log.info("fault injection: applied %s", spec.to_json())

    def clear(self, timeout: float = 30.0) -> None:
        """No more faults; what the active spec started ends now: returns once an outage in
        progress is over (the listener serves again) and failed nodes are back, or after
        ``timeout`` seconds."""
        with self._lock:
            self._active = None
        restored = threading.Event()

        def restore() -> None:
            try:
                self._restore()
            finally:
                restored.set()

        self._clock.replace([(0.0, restore)])
        restored.wait(timeout)

    def shutdown(self) -> None:
        """Stop the timed faults for good (the server is stopping)."""
        with self._lock:
            self._active = None
        self._clock.stop()

    def counts(self) -> dict[str, int]:
        """Injected faults so far (over the server's life), by kind; every kind is present."""
        with self._lock:
            return {kind: self._counts[kind] for kind in FAULT_KINDS}

    def count(self, kind: str, n: int = 1) -> None:
        with self._lock:
            self._counts[kind] += n

    def to_json(self) -> dict[str, Any]:
        spec = self.spec
        return {
            "kind": "FaultInjection",
            "apiVersion": "sim.airflow-gang.io/v1",
            "spec": spec.to_json() if spec is not None else None,
            "faults": self.counts(),
        }

    # --- per-request decisions (on the server's event loop) -----------------------------------

    def latency(self, verb: str, resource: str, user_agent: str) -> float:
        """Seconds to delay this request (0 for none)."""
        with self._lock:
            active = self._active
            if active is None or not active.spec.latency or not active.targets(user_agent):
                return 0.0
            for rule in active.spec.latency:
                if rule.matches(verb, resource):
                    if active.latency.random() < rule.rate:
                        self._counts["latency"] += 1
                        return rule.seconds
                    return 0.0
            return 0.0

    def error(self, verb: str, resource: str, user_agent: str) -> InjectedError | None:
        """The error to answer this request with, if any (first matching rule decides)."""
        with self._lock:
            active = self._active
            if active is None or not active.spec.errors or not active.targets(user_agent):
                return None
            for index, rule in enumerate(active.spec.errors):
                if rule.matches(verb, resource):
                    return self._draw_error(active, rule, index)
            return None

    def _draw_error(self, active: _Active, rule: ErrorRule, index: int) -> InjectedError | None:
        if active.errors.random() >= rule.rate:
            return None
        self._counts[f"error_{rule.status}"] += 1
        return InjectedError(rule.status, rule.retry_after, index)

    def watch(self, user_agent: str, *, resumed: bool) -> WatchFault | None:
        """The faults of one new watch; ``resumed`` when it starts from a resourceVersion."""
        with self._lock:
            active = self._active
            if active is None or not active.targets(user_agent):
                return None
            rules = active.spec.watches
            if (
                resumed
                and rules.gone_on_resume_rate > 0
                and active.watches.random() < rules.gone_on_resume_rate
            ):
                self._counts["watch_gone"] += 1
                return WatchFault(gone=True)
            if rules.cut_after_events is None and rules.cut_after_seconds is None:
                return None
            return WatchFault(
                cut_after_events=rules.cut_after_events, cut_after_seconds=rules.cut_after_seconds
            )

    # --- timed faults (on the clock thread) ---------------------------------------------------

    def _timed_steps(self, spec: FaultSpec) -> list[Step]:
        steps: list[Step] = []
        for outage in spec.outages:
            steps += [(outage.start, self._go_down), (outage.start + outage.duration, self._come_back)]
        for deletion in spec.deletions:
            steps.append((deletion.at, functools.partial(self._delete, deletion)))
        for failure in spec.node_failures:
            steps.append((failure.at, functools.partial(self._fail_node, failure.node)))
            if failure.duration is not None:
                at = failure.at + failure.duration
                steps.append((at, functools.partial(self._recover_node, failure.node)))
            if failure.delete_node_after is not None:
                at = failure.at + failure.delete_node_after
                steps.append((at, functools.partial(self._delete_node, failure.node)))
        for eviction in spec.kubelet_evictions:
            steps.append((eviction.at, functools.partial(self._evict, eviction)))
        return steps

    def _go_down(self) -> None:
        if self._listener is None:
            log.warning("fault injection: this API server cannot be taken down; outage skipped")
            return
        self.count("outage")
        self._down = True
        log.info("fault injection: outage begins")
        # End watches and log follows first, as a stopping server does; the drop cuts the rest.
        self._state.store.close_watchers()
        self._state.log_streams.close_all()
        self._listener.interrupt()

    def _come_back(self) -> None:
        if self._down and self._listener is not None:
            self._listener.resume()
            self._down = False
            log.info("fault injection: outage over, listening again")

    def _delete(self, deletion: Deletion) -> None:
        self.count("deletion", delete_objects(self._state, deletion))

    def _fail_node(self, node: str) -> None:
        if mark_node_failed(self._state, node, failed=True):
            self.count("node_failure")
            self._failed_nodes.add(node)

    def _recover_node(self, node: str) -> None:
        if node in self._failed_nodes:
            mark_node_failed(self._state, node, failed=False)
            self._failed_nodes.discard(node)

    def _delete_node(self, node: str) -> None:
        if delete_node(self._state, node):
            self.count("node_deletion")
        self._failed_nodes.discard(node)  # gone: there is nothing to recover

    def _evict(self, eviction: KubeletEviction) -> None:
        if mark_pod_evicted(self._state, eviction):
            self.count("kubelet_eviction")

    def _restore(self) -> None:
        self._come_back()
        for node in sorted(self._failed_nodes):
            self._recover_node(node)

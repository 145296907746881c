"""The simulated kubelet: one per node, it registers the Node and runs the pods bound to it.

A pod bound here goes Pending → Running (all its containers started), runs its main
container — a timed script from annotations (`script_runtime.py`, the default), held until its
job's rendezvous (`rendezvous.py`), or a real local process (`process_runtime.py`), started at
once and left to rendezvous by itself — and ends
Succeeded/Failed with the container's exit code (`pod.py`). All pod writes go through
``pods/status``; the Node side (registration, heartbeats, failure) is `node.py`.

Container output stays on the node, as on a real one (`logs.py`): each kubelet serves
its node's logs over HTTPS at ``/containerLogs/{namespace}/{pod}/{container}`` on a port of its
own (`server.py`), advertised on the Node, and ``pods/log`` of any API server — the
simulator's or a real kube-apiserver — proxies there. A pod's logs go when the pod goes.

Decisions worth knowing:

- **Restarts follow the pod's ``restartPolicy``, in place**, like the real kubelet: ``Never``
  ends the pod; ``OnFailure`` (non-zero exit) and ``Always`` restart the container after a
  back-off (``CrashLoopBackOff``, doubling from ``restart_backoff``), ``restartCount`` grows
  and the pod stays Running. (This is why the real training-operator counts container
  restarts against ``backoffLimit``.)
- **fail-attempts are counted through the API**, so a replica recreated on another node still
  knows its history: every container start posts a ``Started`` Event (its name derived from
  pod UID and restart count, so reposting is idempotent); a run's attempt number is how many
  other ``Started`` events the same pod name has had since its job was created.
- **A failed node is a dead machine** (`set_ready` False, or the fault spec's
  ``node_failures``): its containers die at once and its kubelet writes nothing more — no
  status, no heartbeat, no confirmation of a deletion. The rest of the cluster finds out as a
  real one does (``../core/node_lifecycle.py``, ``../core/taint_eviction.py``, ``../core/pod_gc.py``):
  the node goes ``Unknown`` and is tainted ``unreachable``, its pods are deleted once their
  toleration runs out and stay ``Terminating``, and go when the machine comes back or its Node
  is deleted.
  Back (`set_ready` True), the kubelet confirms the deletions that waited, ends ``Failed`` the
  ``restartPolicy: Never`` pods whose containers died with the machine (they are reported as
  containers it can no longer find, ``ContainerStatusUnknown``) and restarts the others
  (``restartCount`` + 1), as a kubelet does after a reboot.
- **Node-pressure eviction** (`KUBELET_EVICTION_ANNOTATION`, set by the fault spec's
  ``kubelet_evictions``): the pod's containers are killed and the pod ends ``Failed``, reason
  ``Evicted``, with the ``DisruptionTarget`` condition (``eviction.py``). The kubelet
  does not delete it.
- **Deleted pods**: the process gets SIGTERM, SIGKILL after the deletion's grace period, then
  the kubelet confirms with a delete of ``gracePeriodSeconds: 0``, as the real one does.
  Stopping the kubelet stops every process it started (``stop_grace`` seconds of SIGTERM).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import functools
import logging
import shutil
import tempfile
import time
from collections.abc import Callable, Coroutine
from typing import Any, Literal

import aiohttp

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import rfc3339, utc_now
from gang_sim.controllers.informer import Cache, deep_get
from gang_sim.controllers.kinds import EVENTS, PODS, PYTORCHJOBS, Kind, object_key
from gang_sim.controllers.kubelet import rendezvous
from gang_sim.controllers.kubelet.eviction import Pressure, evicted_event, evicted_status, eviction_message
from gang_sim.controllers.kubelet.logs import NodeLogs
from gang_sim.controllers.kubelet.node import LEASE_RENEW_SECONDS, NodeAgent
from gang_sim.controllers.kubelet.pod import PodRun
from gang_sim.controllers.kubelet.server import KubeletServer
from gang_sim.controllers.kubelet.status import HOST_IP, lost_containers_status, running_status
from gang_sim.controllers.retrying import retry_transient
from gang_sim.conventions import KUBELET_EVICTION_ANNOTATION

log = logging.getLogger(__name__)

LIVE_INDEX = "kubelet/live"
JOB_INDEX = "kubelet/job"

FINISHED = ("Succeeded", "Failed")
LOST = "lost"  # a run whose containers died with the machine
SWEEP_SECONDS = 2.0
_TRANSIENT = (ApiError, aiohttp.ClientError, OSError, TimeoutError)
Ending = Callable[[PodRun], Coroutine[Any, Any, None]]


class MachineDown(Exception):
    """The machine died while the kubelet was doing something: it does no more."""


class Kubelet(NodeAgent):
    """Runs the pods bound to ``node_name``; see the module docstring for the semantics.

    :param capacity: the node's capacity and allocatable (``cpu``, ``memory``, ``pods``,
        ``nvidia.com/gpu``; missing ones default to 8, 32Gi, 110 and 0).
    :param runtime: ``script`` (annotations decide) or ``process`` (run the container's command).
    :param register_node: create/adopt the Node, post heartbeats and renew its Lease; False
        when someone else owns the Node object (pods still run, and `set_ready` still kills
        them; the logs are served on ``kubelet_port``, which that owner must then advertise).
    :param workdir: the process runtime's working directory (default: a private temp dir).
    :param restart_backoff: first CrashLoopBackOff delay in seconds (doubles, up to 30 times it).
    :param stop_grace: SIGTERM → SIGKILL delay when the kubelet stops or a node fails.
    :param address: where the node's kubelet API listens, advertised as the Node's InternalIP;
        kube-apiserver must reach it for ``pods/log`` (loopback: an API server on this machine).
    :param lease_renew_interval: seconds between renewals of the node's Lease (10 upstream).
    """

    name = "kubelet"
    kinds = (PODS, PYTORCHJOBS)

    def __init__(
        self,
        client: KubeClient,
        cache: Cache,
        *,
        node_name: str,
        capacity: dict[str, str],
        runtime: Literal["script", "process"] = "script",
        register_node: bool = True,
        period: float | None = 0.2,
        clock: Callable[[], dt.datetime] = utc_now,
        workdir: str | None = None,
        restart_backoff: float = 0.5,
        stop_grace: float = 2.0,
        address: str = HOST_IP,
        lease_renew_interval: float = LEASE_RENEW_SECONDS,
    ) -> None:
        super().__init__(
            client,
            cache,
            node_name=node_name,
            capacity=capacity,
            register_node=register_node,
            period=period,
            clock=clock,
            address=address,
            lease_renew_interval=lease_renew_interval,
        )
        if runtime not in ("script", "process"):
            raise ValueError(f"runtime={runtime!r} is invalid: must be 'script' or 'process'")
        self.runtime: Literal["script", "process"] = runtime
        self.workdir = workdir
        self.restart_backoff = restart_backoff
        self.stop_grace = stop_grace
        self.runs: dict[str, PodRun] = {}
        self._next_sweep = 0.0
        self._local_jobs: set[str] = set()  # job_key of every unfinished pod this kubelet runs
        self._tempdir: str | None = None
        self.logs = NodeLogs()
        self.server = KubeletServer(self.logs, self._local_pod, address=address, clock=clock)
        cache[PODS].add_index(LIVE_INDEX, _live_on_node)
        cache[PODS].add_index(JOB_INDEX, _job_of)

    async def run(self) -> None:
        # Listening before the Node is registered, so the port it advertises always answers.
        self.kubelet_port = await self.server.start()
        try:
            await super().run()
        finally:
            await self._shutdown()

    # --- reconcile ------------------------------------------------------------------------------

    def wants(self, kind: Kind, obj: JsonDict) -> bool:
        # Every pod change of the cluster is offered to every kubelet: wake only for pods bound
        # here, and for the peers (and job) of those pods, whose state a rendezvous waits on.
        if kind == PODS:
            return deep_get(obj, "spec", "nodeName") == self.node_name or any(
                key in self._local_jobs for key in _job_of(obj)
            )
        group = rendezvous.pytorchjob_group(str(deep_get(obj, "metadata", "name")))
        return _job_key(object_key(obj)[0], group) in self._local_jobs

    async def reconcile(self) -> None:
        await self.sync_node()
        if not self.ready:
            if self.went_down():
                self._machine_down()
            return
        # Only pods with something left to do: a finished pod waits for its deletion, and a node
        # that ran thousands of them must not walk them all on every wake-up.
        live = self.cache[PODS].indexed(LIVE_INDEX, self.node_name)
        self._local_jobs = {key for pod in live for key in _job_of(pod)}
        seen = set()
        for pod in live:
            uid, phase = str(deep_get(pod, "metadata", "uid")), deep_get(pod, "status", "phase")
            seen.add(uid)
            run = self.runs.get(uid)
            pressure = _pressure(pod)
            if deep_get(pod, "metadata", "deletionTimestamp"):
                grace = float(deep_get(pod, "metadata", "deletionGracePeriodSeconds", default=0) or 0)
                self._end(pod, "deleted", functools.partial(self._confirm_deletion, grace=grace))
            elif phase in FINISHED:
                continue
            elif run is not None and run.ended == LOST:
                self._end(pod, "rebooted", self._after_reboot)
            elif pressure is not None:
                self._end(pod, "evicted", functools.partial(self._evict, pressure=pressure))
            elif run is None:
                run = self.runs[uid] = PodRun(self, *object_key(pod), uid, self.stop_grace)
                run.start()
            else:
                run.changed.set()  # the cache changed: a waiting rendezvous looks again
        # Runs of finished pods are checked for deletion (to drop their logs) now and then only.
        sweep = time.monotonic() >= self._next_sweep
        if sweep:
            self._next_sweep = time.monotonic() + SWEEP_SECONDS
        for uid in [uid for uid in self.runs if uid not in seen]:
            run = self.runs[uid]
            done = run.task is None or run.task.done()
            if (done and not sweep) or self._finished_here(run):
                continue  # a finished pod keeps its logs until it is deleted
            if done:
                del self.runs[uid]
                self.logs.forget(uid)
            elif run.ending is None:  # force-deleted (grace 0) while running: just stop it
                run.ending = asyncio.create_task(run.stop(self.stop_grace))

    def _finished_here(self, run: PodRun) -> bool:
        pod = self.cache.get(PODS, run.namespace, run.name)
        return (
            pod is not None
            and deep_get(pod, "metadata", "uid") == run.uid
            and deep_get(pod, "spec", "nodeName") == self.node_name
        )

    def _end(self, pod: JsonDict, kind: str, action: Ending) -> None:
        uid = str(deep_get(pod, "metadata", "uid"))
        run = self.runs.get(uid)
        if run is None:
            run = self.runs[uid] = PodRun(self, *object_key(pod), uid, self.stop_grace)
        if run.ended == kind or (run.ending is not None and not run.ending.done()):
            return
        run.ending = asyncio.create_task(self._ending(run, kind, action))

    async def _ending(self, run: PodRun, kind: str, action: Ending) -> None:
        try:
            await action(run)
            run.ended = kind
        except MachineDown:
            return  # the machine died meanwhile: what was left undone waits for its return
        except _TRANSIENT as error:  # the next reconcile tries again
            log.debug("kubelet %s: %s %s/%s: %s", self.node_name, kind, run.namespace, run.name, error)
            self.requeue()

    async def _confirm_deletion(self, run: PodRun, grace: float) -> None:
        await run.stop(grace)
        if not self.ready:
            raise MachineDown()
        options = {
            "apiVersion": "v1",
            "kind": "DeleteOptions",
            "gracePeriodSeconds": 0,
            "preconditions": {"uid": run.uid},
        }
        try:
            await self.client.request("DELETE", PODS.path(run.namespace, run.name), body=options)
        except ApiError as error:
            if error.status not in (404, 409):  # gone already, or a new pod took the name
                raise
        log.info("pod deleted pod=%s/%s node=%s", run.namespace, run.name, self.node_name)

    def _machine_down(self) -> None:
        """The machine died: every container dies with it, at once, and nothing is written."""
        for run in self.runs.values():
            busy = [task for task in (run.task, run.ending) if task is not None and not task.done()]
            if busy:
                for task in busy:
                    task.cancel()
                run.ending = asyncio.create_task(self._lose(run, busy))
        log.info("kubelet %s: machine down, %d pod(s) lost", self.node_name, len(self.runs))

    async def _lose(self, run: PodRun, tasks: list[asyncio.Task[None]]) -> None:
        await asyncio.gather(*tasks, return_exceptions=True)
        await run.stop(0)
        run.ended = LOST

    async def _after_reboot(self, run: PodRun) -> None:
        """Back from a dead machine: a pod its restart policy lets go is Failed, any other restarts."""
        pod = self.pod_of(run)
        if pod is None or deep_get(pod, "status", "phase") in FINISHED:
            return
        now = self.clock()
        lost = lost_containers_status(pod, now)
        if deep_get(pod, "spec", "restartPolicy", default="Always") == "Never":
            await self.write_status(run, lost)
            log.info(
                "pod failed pod=%s/%s: its containers died with node %s",
                run.namespace,
                run.name,
                self.node_name,
            )
            return
        last = lost["containerStatuses"][0]["state"] if lost["containerStatuses"] else None
        await self.write_status(run, running_status(pod, now, restarts=run.restarts + 1, last_state=last))
        del self.runs[run.uid]  # the next round starts it again, as a kubelet after a reboot
        self.requeue()

    async def _evict(self, run: PodRun, pressure: Pressure) -> None:
        """Node-pressure eviction: kill the containers (no grace: a hard threshold), end the pod."""
        await run.stop(0)
        pod = self.pod_of(run)
        if pod is None or deep_get(pod, "status", "phase") in FINISHED:
            return
        message = eviction_message(pod, pressure)
        now = self.clock()
        try:
            await self.client.create(
                EVENTS, evicted_event(pod, self.node_name, message, rfc3339(now)), run.namespace
            )
        except ApiError as error:  # best effort, as any event
            log.debug(
                "kubelet %s: no Evicted event for %s/%s: %s", self.node_name, run.namespace, run.name, error
            )
        await self.write_status(run, evicted_status(pod, now, restarts=run.restarts, message=message))
        log.info("pod evicted pod=%s/%s node=%s: %s", run.namespace, run.name, self.node_name, message)

    async def _shutdown(self) -> None:
        tasks = []
        for run in self.runs.values():
            run.kill_grace = self.stop_grace
            if run.process is not None:
                run.process.kill_grace = self.stop_grace
            tasks += [task for task in (run.task, run.ending) if task is not None and not task.done()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await self.server.stop()
        if self._tempdir is not None:
            shutil.rmtree(self._tempdir, ignore_errors=True)

    # --- what a PodRun needs (pod.Host) ---------------------------------------------------------

    def _local_pod(self, namespace: str, name: str) -> JsonDict | None:
        """A pod bound to this node (what the kubelet API may serve), from the cache."""
        pod = self.cache.get(PODS, namespace, name)
        return pod if pod is not None and deep_get(pod, "spec", "nodeName") == self.node_name else None

    def pod_of(self, run: PodRun) -> JsonDict | None:
        """The cached pod of ``run``: same name *and* UID, never a successor of the same name."""
        pod = self.cache.get(PODS, run.namespace, run.name)
        return pod if pod is not None and deep_get(pod, "metadata", "uid") == run.uid else None

    def job_of(self, pod: JsonDict) -> JsonDict | None:
        name = rendezvous.job_name(pod)
        return self.cache.get(PYTORCHJOBS, object_key(pod)[0], name) if name else None

    def job_pods(self, namespace: str, group: str) -> list[JsonDict]:
        """The pods of a rendezvous group (`rendezvous.group_of`) in ``namespace``."""
        return self.cache[PODS].indexed(JOB_INDEX, _job_key(namespace, group))

    def workdir_path(self) -> str:
        if self.workdir is not None:
            return self.workdir
        if self._tempdir is None:
            self._tempdir = tempfile.mkdtemp(prefix=f"gang-sim-{self.node_name}-")
        return self._tempdir

    async def write_status(self, run: PodRun, status: JsonDict) -> None:
        """Merge-patch ``pods/status``; the UID makes a real apiserver refuse a same-named successor.

        A dead machine's kubelet writes nothing.
        """
        if self.pod_of(run) is None or not self.ready:
            return
        body = {"metadata": {"uid": run.uid}, "status": status}
        try:
            # A pod's lifecycle has no later round to retry in: keep trying through an outage.
            result = await retry_transient(
                lambda: self.client.patch(PODS, run.name, body, run.namespace, subresource="status"),
                still_wanted=lambda: self.pod_of(run) is not None,
            )
        except ApiError as error:
            if error.status in (404, 409):
                return
            raise
        if result is not None:
            self.cache[PODS].observe(result)  # so this kubelet's next look (rendezvous) sees it at once


def _pressure(pod: JsonDict) -> Pressure | None:
    annotation = deep_get(pod, "metadata", "annotations", KUBELET_EVICTION_ANNOTATION)
    return Pressure.parse(annotation) if isinstance(annotation, str) else None


def _live_on_node(pod: JsonDict) -> list[str]:
    """The node of a bound pod that is unfinished or being deleted: the kubelet's work list."""
    node = deep_get(pod, "spec", "nodeName")
    if not node:
        return []
    finished = deep_get(pod, "status", "phase") in FINISHED
    return [str(node)] if not finished or deep_get(pod, "metadata", "deletionTimestamp") else []


def _job_key(namespace: str, group: str) -> str:
    return f"{namespace}/{group}"


def _job_of(pod: JsonDict) -> list[str]:
    group = rendezvous.group_of(pod)
    return [_job_key(object_key(pod)[0], group)] if group else []

"""One pod on one simulated kubelet: its containers' lifecycle, from start to last exit.

`PodRun.live` is the whole story of a pod the kubelet admitted: Pending → Running, wait for
the job's rendezvous (script runtime only: a real process waits by itself), run the main
container (script or process runtime), then end it or
restart it in place as ``restartPolicy`` says. `Kubelet` owns the PodRuns, decides when one
starts or is stopped, and supplies the API access through the `Host` protocol.

Container output goes to the node's logs (`logs.NodeLogs`), one log per container
instance (``restarts`` counts them, and names the instance's ID); an instance's log is closed
when it exits or is stopped, which ends the streams that follow it.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import logging
import time
from collections.abc import Iterable
from typing import Literal, Protocol

from gang_sim.controllers.client import ApiError, JsonDict, KubeClient
from gang_sim.controllers.clock import parse_time, rfc3339
from gang_sim.controllers.informer import deep_get
from gang_sim.controllers.kinds import EVENTS
from gang_sim.controllers.kubelet import rendezvous
from gang_sim.controllers.kubelet.logs import ContainerLog, NodeLogs
from gang_sim.controllers.kubelet.process_runtime import (
    ManagedProcess,
    container_argv,
    container_env,
    job_uid,
    master_port,
    port_is_free,
)
from gang_sim.controllers.kubelet.script_runtime import (
    ScriptError,
    fail_attempts,
    merged_annotations,
    plan_script,
)
from gang_sim.controllers.kubelet.status import (
    container_id,
    main_container,
    running_status,
    terminated_state,
    terminated_status,
    waiting_status,
)
from gang_sim.controllers.retrying import retry_transient

log = logging.getLogger(__name__)

Outcome = tuple[int, str | None, str | None]  # exit code, reason override, message


class Host(Protocol):
    """What a PodRun needs from its kubelet."""

    client: KubeClient
    node_name: str
    runtime: Literal["script", "process"]
    restart_backoff: float
    logs: NodeLogs

    def clock(self) -> dt.datetime: ...
    def pod_of(self, run: PodRun) -> JsonDict | None: ...
    def job_of(self, pod: JsonDict) -> JsonDict | None: ...
    def job_pods(self, namespace: str, group: str) -> list[JsonDict]: ...
    def workdir_path(self) -> str: ...
    async def write_status(self, run: PodRun, status: JsonDict) -> None: ...


def started_event_name(pod_name: str, uid: str, restarts: int) -> str:
    """Deterministic per container start, so posting it twice is a harmless 409."""
    return f"{pod_name}.{hashlib.sha256(f'{uid}/{restarts}'.encode()).hexdigest()[:16]}"


def earlier_starts(events: Iterable[JsonDict], own_event: str, since: dt.datetime | None) -> int:
    """How many other kubelet ``Started`` events (container starts) a pod name has since ``since``."""
    names = set()
    for event in events:
        name = deep_get(event, "metadata", "name")
        if event.get("reason") != "Started" or deep_get(event, "source", "component") != "kubelet":
            continue
        first = parse_time(event.get("firstTimestamp"))
        if name != own_event and (since is None or first is None or first >= since):
            names.add(name)
    return len(names)


class PodRun:
    """The kubelet's state for one pod UID: its lifecycle task, its process, how it is ending."""

    def __init__(self, host: Host, namespace: str, name: str, uid: str, kill_grace: float) -> None:
        self.host = host
        self.namespace = namespace
        self.name = name
        self.uid = uid
        self.kill_grace = kill_grace
        self.changed = asyncio.Event()
        self.task: asyncio.Task[None] | None = None
        self.ending: asyncio.Task[None] | None = None
        self.ended = ""
        self.process: ManagedProcess | None = None
        self.container = ""  # the main container's name, once the pod is read
        self.restarts = 0  # which instance of it runs (or ran last)

    async def append_log(self, lines: list[str]) -> None:
        """Output of the main container's current instance, kept on the node."""
        # The pod gone means its logs are gone too: never bring them back.
        if lines and self.container and self.host.pod_of(self) is not None:
            self._log().append(lines, self.host.clock())

    def _close_log(self) -> None:
        if self.container:
            self._log().close()

    def _log(self) -> ContainerLog:
        return self.host.logs.container(self.uid, container_id(self.uid, self.container, self.restarts))

    def start(self) -> None:
        self.task = asyncio.create_task(self._guarded(), name=f"pod {self.namespace}/{self.name}")

    async def stop(self, grace: float) -> None:
        """Stop the containers; returns once the process (if any) is gone."""
        self.kill_grace = grace
        if self.process is not None:
            self.process.kill_grace = grace
        if self.task is not None and not self.task.done():
            self.task.cancel()
            await asyncio.gather(self.task, return_exceptions=True)

    async def _guarded(self) -> None:
        try:
            await self.live()
        except asyncio.CancelledError:
            raise
        except Exception:  # a task has nobody to raise to; the pod stays as last written
            log.exception(
                "kubelet %s: running pod %s/%s failed", self.host.node_name, self.namespace, self.name
            )
        finally:
            self._close_log()  # stopped or ended: its followers get the end of the stream

    async def live(self) -> None:
        host = self.host
        pod = host.pod_of(self)
        if pod is None:
            return
        annotations = merged_annotations(
            deep_get(pod, "metadata", "annotations", default={}) or {},
            deep_get(host.job_of(pod) or {}, "metadata", "annotations", default={}) or {},
        )
        try:
            plan_script(annotations, attempt=0, pod_name=self.name)
        except ScriptError as error:  # as the real kubelet: the container never starts
            status = waiting_status(
                pod, host.clock(), reason="CreateContainerConfigError", message=str(error), phase="Pending"
            )
            await host.write_status(self, status)
            return
        container = main_container(pod)
        restarts = 0
        if deep_get(pod, "status", "phase") == "Pending":
            await host.write_status(self, running_status(pod, host.clock()))
            log.info("pod running pod=%s/%s node=%s", self.namespace, self.name, host.node_name)
        else:  # adopted after a kubelet restart: its old container is gone, a new one starts
            statuses = deep_get(pod, "status", "containerStatuses", default=[]) or []
            mine = [s for s in statuses if s.get("name") == container.get("name")]
            restarts = int(mine[0].get("restartCount", 0)) if mine else 0
        self.container, self.restarts = str(container.get("name")), restarts
        if host.runtime == "script":
            # A scripted replica cannot rendezvous itself, so the kubelet holds it until every
            # replica runs. A real process (process runtime) starts at once, as on a real node,
            # and waits in its own init_process_group.
            await self._rendezvous()
        backoff = host.restart_backoff
        last: JsonDict | None = None  # the previous run's end, once there was one
        while True:
            pod = host.pod_of(self) or pod
            started = rfc3339(host.clock())
            attempt = await self._record_start(pod, restarts, annotations)
            exit_code, reason, message = await self._execute(pod, container, annotations, attempt)
            self._close_log()
            pod = host.pod_of(self) or pod
            policy = deep_get(pod, "spec", "restartPolicy", default="Always")
            if not (policy == "Always" or (policy == "OnFailure" and exit_code != 0)):
                final = terminated_status(
                    pod,
                    host.clock(),
                    exit_code=exit_code,
                    started=started,
                    restarts=restarts,
                    reason=reason,
                    message=message,
                    last_state=last,
                )
                await host.write_status(self, final)
                log.info(
                    "pod finished pod=%s/%s exit_code=%d node=%s",
                    self.namespace,
                    self.name,
                    exit_code,
                    host.node_name,
                )
                return
            ended = container_id(self.uid, self.container, restarts)
            last = terminated_state(exit_code, started, rfc3339(host.clock()), message, ended)
            if reason:
                last["terminated"]["reason"] = reason
            note = (
                f"back-off {backoff:g}s restarting failed container={container.get('name')} "
                f"pod={self.name}_{self.namespace}({self.uid})"
            )
            waiting = waiting_status(
                pod, host.clock(), reason="CrashLoopBackOff", message=note, restarts=restarts, last_state=last
            )
            await host.write_status(self, waiting)
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 30 * host.restart_backoff)
            restarts += 1
            self.restarts = restarts
            restarted = running_status(
                host.pod_of(self) or pod, host.clock(), restarts=restarts, last_state=last
            )
            await host.write_status(self, restarted)

    async def _rendezvous(self) -> None:
        """Wait until every replica of the job has started; say so in the log once if it must wait."""
        said = False
        while True:
            pod = self.host.pod_of(self)
            if pod is None:
                return
            group = rendezvous.group_of(pod)
            counts = rendezvous.progress(
                pod, self.host.job_of(pod), self.host.job_pods(self.namespace, group) if group else []
            )
            if counts is not None and counts[0] >= counts[1]:
                return
            if not said and counts is not None:
                line = f"waiting for rendezvous: {counts[0]}/{counts[1]} replicas running"
                await self.append_log([line])
                said = True
            await self.changed.wait()
            self.changed.clear()

    async def _record_start(self, pod: JsonDict, restarts: int, annotations: dict[str, str]) -> int:
        """Post this run's ``Started`` event; return how many runs of this replica came before it."""
        host = self.host
        own = started_event_name(self.name, self.uid, restarts)
        earlier = 0
        if fail_attempts(annotations):
            listing = (
                await retry_transient(
                    lambda: host.client.list_objects(
                        EVENTS, self.namespace, fieldSelector=f"involvedObject.name={self.name}"
                    )
                )
                or {}
            )
            since = parse_time(deep_get(host.job_of(pod) or pod, "metadata", "creationTimestamp"))
            earlier = earlier_starts(listing.get("items", []), own, since)
        container = main_container(pod).get("name")
        stamp = rfc3339(host.clock())
        event = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": own, "namespace": self.namespace},
            "involvedObject": {
                "apiVersion": "v1",
                "kind": "Pod",
                "namespace": self.namespace,
                "name": self.name,
                "uid": self.uid,
                "fieldPath": f"spec.containers{{{container}}}",
            },
            "reason": "Started",
            "message": f"Started container {container}",
            "type": "Normal",
            "source": {"component": "kubelet", "host": host.node_name},
            "reportingComponent": "kubelet",
            "reportingInstance": host.node_name,
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
        }
        try:
            await retry_transient(lambda: host.client.create(EVENTS, event, self.namespace))
        except ApiError as error:
            if error.status != 409:
                raise
        return earlier

    async def _execute(
        self, pod: JsonDict, container: JsonDict, annotations: dict[str, str], attempt: int
    ) -> Outcome:
        """Run the main container once."""
        if self.host.runtime == "script":
            env = container_env(pod, container, None)
            rank = env.get("RANK") or env.get("PET_NODE_RANK")  # a TrainJob node has only PET_*
            plan = plan_script(annotations, attempt=attempt, pod_name=self.name, rank=rank)
            begin, offsets, index = time.monotonic(), plan.line_offsets(), 0
            while index < len(plan.lines):
                await asyncio.sleep(max(0.0, begin + offsets[index] - time.monotonic()))
                now = time.monotonic()
                due = [
                    line
                    for line, at in zip(plan.lines[index:], offsets[index:], strict=True)
                    if begin + at <= now
                ]
                due = due or [plan.lines[index]]
                await self.append_log(due)
                index += len(due)
            await asyncio.sleep(max(0.0, begin + plan.duration - time.monotonic()))
            return plan.exit_code, None, None
        return await self._execute_process(pod, container)

    async def _execute_process(self, pod: JsonDict, container: JsonDict) -> Outcome:
        declared = container_env(pod, container, None)
        # A PyTorchJob replica reads MASTER_PORT, a TrainJob node (torchrun) only PET_MASTER_PORT.
        distributed = "MASTER_PORT" in declared or "PET_MASTER_PORT" in declared
        port = master_port(job_uid(pod)) if distributed else None
        env = container_env(pod, container, port)
        argv = container_argv(container, env)
        if not argv:
            return 128, "StartError", "the process runtime runs the container's command, and it has none"
        leader = (env.get("RANK") or env.get("PET_NODE_RANK")) == "0"
        if port is not None and leader and not port_is_free(port):
            await self.append_log([f"kubelet: MASTER_PORT {port} is already in use"])
        process = ManagedProcess(argv, env, self.host.workdir_path(), self.append_log)
        process.kill_grace = self.kill_grace
        try:
            await process.start()
        except OSError as error:
            return 128, "StartError", f"failed to start container process {argv[0]!r}: {error}"
        self.process = process
        try:
            return await process.wait(), None, None
        finally:
            self.process = None

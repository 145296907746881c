"""The process runtime: a pod's main container run as a local subprocess.

The container's ``command`` + ``args`` run with the container's env vars (as the
training-operator set them), rewritten for one machine: ``MASTER_ADDR`` becomes 127.0.0.1 and
``MASTER_PORT`` a local port derived from the job, so a real DDP script rendezvouses for real.

**MASTER_PORT** is decided without any coordination: a hash of the job's UID picks a port in
20000-29999 (below Linux's ephemeral range, so outgoing connections never take it). Every
kubelet computes the same port for the same job, whichever node it simulates and in whichever
process it runs. The trade-off: two concurrently running process-runtime jobs collide with
probability ~1/10,000, and another local service may hold the port; the rank-0 replica's
kubelet checks that the port is free and says so in the pod log if it is not (the job then
fails like a real one whose port is taken), rather than silently choosing a port the other
replicas could not know.

Every process gets its own session (process group) so stopping it also stops what it spawned
(torchrun's workers), the way a container's processes all die with it; on Linux it also dies
with the kubelet's thread if the simulator itself is killed, so no process is ever orphaned.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import hashlib
import os
import re
import signal
import socket
import sys
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

JsonDict = dict[str, Any]
LOCALHOST = "127.0.0.1"
PORT_LOW, PORT_HIGH = 20000, 30000
_ADDR_VARS = ("MASTER_ADDR", "PET_MASTER_ADDR")
_PORT_VARS = ("MASTER_PORT", "PET_MASTER_PORT")
JOBSET_UID_LABEL = "jobset.sigs.k8s.io/jobset-uid"
_REFERENCE = re.compile(r"\$\$|\$\(([A-Za-z_][A-Za-z0-9_.-]*)\)")
_PR_SET_PDEATHSIG = 1
_LIBC = ctypes.CDLL(None, use_errno=True) if sys.platform.startswith("linux") else None

OutputSink = Callable[[list[str]], Awaitable[None]]


def master_port(job_uid: str) -> int:
    digest = hashlib.sha256(job_uid.encode()).digest()
    return PORT_LOW + int.from_bytes(digest[:4], "big") % (PORT_HIGH - PORT_LOW)


def port_is_free(port: int) -> bool:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            probe.bind((LOCALHOST, port))
        except OSError:
            return False
    return True


def job_uid(pod: JsonDict) -> str:
    """The UID of the pod's distributed job, read from the pod itself so no cache is needed: the
    owning PyTorchJob's or Volcano Job's, or the JobSet's (label ``jobset.sigs.k8s.io/jobset-uid``)
    for a TrainJob node, else the pod's own."""
    meta = pod.get("metadata") or {}
    for ref in meta.get("ownerReferences") or []:
        api_group = str(ref.get("apiVersion", "")).rpartition("/")[0]
        volcano_job = ref.get("kind") == "Job" and api_group == "batch.volcano.sh"
        if (ref.get("kind") == "PyTorchJob" or volcano_job) and ref.get("uid"):
            return str(ref["uid"])
    jobset_uid = (meta.get("labels") or {}).get(JOBSET_UID_LABEL)
    return str(jobset_uid or meta.get("uid", ""))


def _field(pod: JsonDict, path: str) -> str | None:
    meta, spec = pod.get("metadata") or {}, pod.get("spec") or {}
    simple = {
        "metadata.name": meta.get("name"),
        "metadata.namespace": meta.get("namespace"),
        "metadata.uid": meta.get("uid"),
        "spec.nodeName": spec.get("nodeName"),
        "spec.serviceAccountName": spec.get("serviceAccountName"),
        "status.podIP": LOCALHOST,
        "status.hostIP": LOCALHOST,
    }
    if path in simple:
        value = simple[path]
        return None if value is None else str(value)
    match = re.fullmatch(r"metadata\.(labels|annotations)\['(.+)'\]", path)
    if match:
        value = (meta.get(match.group(1)) or {}).get(match.group(2))
        return None if value is None else str(value)
    return None


def expand(text: str, env: Mapping[str, str]) -> str:
    """Kubernetes' ``$(VAR)`` expansion in command/args; unknown references stay as written."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        return env.get(match.group(1), match.group(0))

    return _REFERENCE.sub(replace, text)


def container_env(pod: JsonDict, container: JsonDict, port: int | None) -> dict[str, str]:
    """The process environment: PATH/HOME of the simulator, then the container's env, localised."""
    env = {
        "PATH": os.environ.get("PATH", os.defpath),
        "HOME": os.environ.get("HOME", "/"),
        "HOSTNAME": str((pod.get("metadata") or {}).get("name", "")),
    }
    for item in container.get("env") or []:
        name = item.get("name")
        if not name:
            continue
        if "value" in item:
            env[name] = expand(str(item["value"]), env)
        elif (ref := (item.get("valueFrom") or {}).get("fieldRef")) and (
            value := _field(pod, ref["fieldPath"])
        ):
            env[name] = value
    for key in _ADDR_VARS:
        if key in env:
            env[key] = LOCALHOST
    for key in _PORT_VARS:
        if key in env and port is not None:
            env[key] = str(port)
    env["PYTHONUNBUFFERED"] = "1"
    return env


def container_argv(container: JsonDict, env: Mapping[str, str]) -> list[str]:
    return [
        expand(str(part), env) for part in [*(container.get("command") or []), *(container.get("args") or [])]
    ]


def _die_with_parent() -> None:
    # Runs in the child between fork and exec: if the kubelet's thread dies, so does the process.
    if _LIBC is not None:
        _LIBC.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)


class ManagedProcess:
    """One container process: start, stream its output in batches, stop it with a grace period."""

    def __init__(
        self, argv: list[str], env: Mapping[str, str], cwd: str, sink: OutputSink, batch_seconds: float = 0.05
    ) -> None:
        self.argv = argv
        self.env = dict(env)
        self.cwd = cwd
        self.sink = sink
        self.batch_seconds = batch_seconds
        self.kill_grace = 2.0
        self._proc: asyncio.subprocess.Process | None = None
        self._pending: list[str] = []
        self._wakeup = asyncio.Event()
        self._eof = False

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    async def start(self) -> None:
        """Spawn; raises OSError (executable missing, not executable, bad cwd) like a runtime's StartError."""
        self._proc = await asyncio.create_subprocess_exec(
            *self.argv,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            env=self.env,
            cwd=self.cwd,
            start_new_session=True,
            preexec_fn=_die_with_parent,
        )

    async def wait(self) -> int:
        """Stream output until the process exits; returns its exit code (128+N for signal N).

        Cancelled (pod deleted, kubelet stopping): the process group gets SIGTERM, then SIGKILL
        after ``kill_grace`` seconds, before the cancellation propagates.
        """
        proc = self._proc
        assert proc is not None, "start() first"
        assert proc.stdout is not None
        assert proc.stderr is not None
        pumps = [asyncio.create_task(self._pump(stream)) for stream in (proc.stdout, proc.stderr)]
        flusher = asyncio.create_task(self._flush_loop())
        try:
            code = await proc.wait()
            self._signal_group(signal.SIGKILL)  # the container's other processes die with its PID 1
            await asyncio.gather(*pumps)
        except asyncio.CancelledError:
            # However often we are cancelled meanwhile, the process must be gone before we return.
            stopping = asyncio.ensure_future(self.stop(self.kill_grace))
            while not stopping.done():
                with contextlib.suppress(asyncio.CancelledError):
                    await asyncio.shield(stopping)
            for task in [*pumps, flusher]:
                task.cancel()
            await asyncio.gather(*pumps, flusher, return_exceptions=True)
            raise
        self._eof = True
        self._wakeup.set()
        await flusher
        return 128 - code if code < 0 else code

    async def stop(self, grace: float) -> None:
        proc = self._proc
        if proc is None:
            return
        if proc.returncode is None:
            self._signal_group(signal.SIGTERM)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(proc.wait(), grace)
        self._signal_group(signal.SIGKILL)
        await proc.wait()

    def _signal_group(self, signum: int) -> None:
        if self._proc is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self._proc.pid, signum)

    async def _pump(self, stream: asyncio.StreamReader) -> None:
        partial = b""
        while chunk := await stream.read(65536):
            *complete, partial = (partial + chunk).split(b"\n")
            if complete:
                self._pending.extend(line.decode("utf-8", "replace").rstrip("\r") for line in complete)
                self._wakeup.set()
        if partial:
            self._pending.append(partial.decode("utf-8", "replace"))
            self._wakeup.set()

    async def _flush_loop(self) -> None:
        while True:
            await self._wakeup.wait()
            self._wakeup.clear()
            if not self._eof:
                await asyncio.sleep(self.batch_seconds)  # let a burst of lines share one request
            if self._pending:
                lines, self._pending = self._pending, []
                await self.sink(lines)
            if self._eof and not self._pending:
                return

"""AsyncGangJobHook's pooled client: one per hook, built off the event loop, closed by close().

Against a real `SimCluster` over HTTPS, run in a child process (``airflow-gang sim``, niced):
in this process its API server and controllers would compete with the event loop for the GIL
and the CPU, and the blocking test would measure them instead of the hook. Connections are
counted where the API server sees them, by a TCP relay in front of it (TLS passes through
untouched; the simulator's certificate names 127.0.0.1, whatever the port).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import shutil
import signal
import ssl
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks import AsyncGangJobHook, GangJobHook, client_pool
from airflow_gang.spec import GangJobSpec
from airflow_gang.triggers.gang import GangJobTrigger
from tests.tcp_relay import TcpRelay
from tests.waiting import eventually

NS = "default"
CLI = str(Path(sys.executable).parent / "airflow-gang")
# What the sync `kubernetes` client (this test's setup calls) sends; the hooks' requests are
# the others.
SYNC_USER_AGENT = k8s.ApiClient().user_agent


# -- the simulator in a child process, and a connection-counting relay in front of it -----------


@dataclass
class Sim:
    kubeconfig_path: Path
    config: dict[str, Any]

    @property
    def cluster(self) -> dict[str, Any]:
        cluster: dict[str, Any] = self.config["clusters"][0]["cluster"]
        return cluster

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.cluster["server"].removeprefix("https://").rsplit(":", 1)
        return host, int(port)

    @property
    def ca_pem(self) -> bytes:
        return base64.b64decode(self.cluster["certificate-authority-data"])

    def kubeconfig(self, *, port: int | None = None, with_ca: bool = True) -> dict[str, Any]:
        """The simulator's kubeconfig, optionally through another port or without its CA."""
        config = json.loads(json.dumps(self.config))
        cluster = config["clusters"][0]["cluster"]
        if port is not None:
            cluster["server"] = f"https://127.0.0.1:{port}"
        if not with_ca:
            del cluster["certificate-authority-data"]
        return config

    def metrics(self) -> dict[tuple[str, str], int]:
        """Requests the API server has counted from the hooks (not this test's sync client)."""
        host, port = self.address
        request = urllib.request.Request(
            f"https://{host}:{port}/sim/v1/metrics",
            headers={"Authorization": f"Bearer {self.config['users'][0]['user']['token']}"},
        )
        context = ssl.create_default_context(cadata=self.ca_pem.decode())
        with urllib.request.urlopen(request, context=context, timeout=10) as response:
            body = json.load(response)
        counts: Counter[tuple[str, str]] = Counter()
        for entry in body["requests"]:
            if entry["userAgent"] != SYNC_USER_AGENT:
                counts[entry["verb"], entry["resource"]] += entry["count"]
        return dict(counts)


@pytest.fixture(scope="module")
def sim(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Sim]:
    """One node with 2 GPUs: one 2-replica gang runs, the others queue (their triggers wait)."""
    workdir = tmp_path_factory.mktemp("sim")
    kubeconfig, log = workdir / "kubeconfig", workdir / "sim.log"
    nice = [shutil.which("nice") or "nice", "-n", "10"] if shutil.which("nice") else []
    command = [*nice, CLI, "sim", "--nodes", "1", "--gpus-per-node", "2", "--kubeconfig", str(kubeconfig)]
    with log.open("wb") as output:
        process = subprocess.Popen(command, stdout=output, stderr=subprocess.STDOUT)
    try:
        eventually(
            lambda: (
                process.poll() is not None or "simulated cluster ready" in log.read_text(errors="replace")
            ),
            timeout=90,
            message="(simulator start)",
        )
        assert process.poll() is None, log.read_text(errors="replace")
        yield Sim(kubeconfig, yaml.safe_load(kubeconfig.read_text(encoding="utf-8")))
    finally:
        process.send_signal(signal.SIGTERM)
        try:
            process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=10)


@pytest.fixture
def relay(sim: Sim) -> Iterator[TcpRelay]:
    relay = TcpRelay(sim.address)
    yield relay
    relay.close()


HookFactory = Callable[[], AsyncGangJobHook]


@pytest.fixture(params=["config_file", "kube_config"])
def relayed_hook(request: pytest.FixtureRequest, sim: Sim, relay: TcpRelay, tmp_path: Path) -> HookFactory:
    """Makes hooks reaching the simulator through the relay, from a kubeconfig file or content."""
    text = yaml.safe_dump(sim.kubeconfig(port=relay.port))
    path = tmp_path / "relay.kubeconfig"
    path.write_text(text, encoding="utf-8")
    if request.param == "config_file":
        kwargs: dict[str, Any] = {"config_file": str(path), "connection_extras": {}}
    else:
        kwargs = {"connection_extras": {"kube_config": text}}
    return lambda: AsyncGangJobHook(conn_id=None, kubernetes_conn_id=None, **kwargs)


async def until(probe: Callable[[], bool], timeout: float = 10.0, message: str = "") -> None:
    """`eventually` for async tests: waits without blocking the loop."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise AssertionError(f"condition not met within {timeout}s {message}")
        await asyncio.sleep(0.02)


async def every_kind_of_call(hook: AsyncGangJobHook) -> None:
    """Each public read and delete once, checking the answers are what they always were."""
    queue = await hook.get_queue("default")
    assert queue is not None
    assert queue["metadata"]["name"] == "default"
    assert await hook.get_queue("no-such-queue") is None
    assert await hook.get_pytorchjob("no-such-job", NS) is None
    assert await hook.get_podgroup("no-such-job", NS) is None
    assert await hook.list_job_pods("no-such-job", NS) == []
    assert await hook.list_events(NS, "no-such-pod") == []
    _, version = await hook.list_with_version("pytorchjob", NS, field_selector="metadata.name=no-such-job")
    assert version
    async with contextlib.aclosing(
        hook.watch(
            "pytorchjob",
            NS,
            resource_version=version,
            field_selector="metadata.name=no-such-job",
            timeout_seconds=1,
        )
    ) as events:
        assert [event async for event in events if event["type"] != "BOOKMARK"] == []
    with pytest.raises(GangApiError) as missing:
        await hook.read_pod_log("no-such-pod", NS)
    assert missing.value.status == 404
    assert await hook.delete_pytorchjob("no-such-job", NS) is False


# -- one client, one connection ------------------------------------------------------------------


async def test_calls_through_one_hook_share_one_connection(
    relayed_hook: HookFactory, relay: TcpRelay
) -> None:
    hook = relayed_hook()
    for _ in range(3):
        await every_kind_of_call(hook)  # 33 requests, a watch among them

    assert relay.opened == 1
    assert relay.open_now == 1  # kept alive for the next call
    await hook.close()


async def test_concurrent_calls_reuse_the_pooled_connections(
    relayed_hook: HookFactory, relay: TcpRelay
) -> None:
    hook = relayed_hook()
    await asyncio.gather(*(hook.get_queue("default") for _ in range(8)))
    opened = relay.opened
    assert 1 <= opened <= 8

    results = await asyncio.gather(*(hook.get_queue("default") for _ in range(8)))

    assert all(queue is not None for queue in results)
    assert relay.opened == opened
    await hook.close()


async def test_close_releases_the_connection_and_a_closed_hook_connects_again(
    relayed_hook: HookFactory, relay: TcpRelay
) -> None:
    hook = relayed_hook()
    await hook.get_queue("default")
    assert relay.open_now == 1

    await hook.close()
    await until(lambda: relay.open_now == 0, message="(connection still open after close())")
    await hook.close()  # idempotent

    assert await hook.get_queue("default") is not None  # a closed hook builds a new client
    assert (relay.opened, relay.open_now) == (2, 1)
    await hook.close()
    await until(lambda: relay.open_now == 0, message="(connection still open after close())")


def test_a_hook_keeps_one_client_per_event_loop(relayed_hook: HookFactory, relay: TcpRelay) -> None:
    """Used from successive loops and from two loops at once, never sharing a client between them."""
    hook = relayed_hook()

    async def calls() -> None:
        for _ in range(3):
            assert await hook.get_queue("default") is not None

    asyncio.run(calls())
    # The loop's shutdown closed the client that was never closed explicitly.
    eventually(lambda: relay.open_now == 0, message="(the ended loop's connection is still open)")
    asyncio.run(calls())
    assert relay.opened == 2

    errors: list[BaseException] = []

    def in_thread() -> None:
        try:
            asyncio.run(calls())
        except BaseException as error:
            errors.append(error)

    threads = [threading.Thread(target=in_thread) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert errors == []
    assert relay.opened == 4
    eventually(lambda: relay.open_now == 0, message="(an ended loop's connection is still open)")


EXEC_PLUGIN = """\
import json, sys
with open(sys.argv[1], "a") as runs:
    runs.write("run\\n")
credential = {"token": sys.argv[2]}
print(json.dumps({"apiVersion": "client.authentication.k8s.io/v1beta1", "kind": "ExecCredential",
                  "status": credential}))
"""


async def test_exec_plugin_credentials_are_reloaded_on_the_pooled_connection(
    sim: Sim, relay: TcpRelay, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugin, runs = tmp_path / "plugin.py", tmp_path / "runs"
    plugin.write_text(EXEC_PLUGIN, encoding="utf-8")
    runs.touch()
    config = sim.kubeconfig(port=relay.port)
    token = config["users"][0]["user"].pop("token")
    config["users"][0]["user"]["exec"] = {
        "apiVersion": "client.authentication.k8s.io/v1beta1",
        "command": sys.executable,
        "args": [str(plugin), str(runs), token],
    }
    hook = AsyncGangJobHook(conn_id=None, kubernetes_conn_id=None, config_dict=config, connection_extras={})

    def plugin_runs() -> int:
        return len(runs.read_text(encoding="utf-8").splitlines())

    for _ in range(3):
        assert await hook.get_queue("default") is not None
    assert plugin_runs() == 1  # fresh for CREDENTIAL_REFRESH_SECONDS

    monkeypatch.setattr(client_pool, "CREDENTIAL_REFRESH_SECONDS", 0.0)
    for _ in range(3):
        assert await hook.get_queue("default") is not None

    assert plugin_runs() == 4  # reloaded before each call, in a worker thread
    assert relay.opened == 1  # on the same client and connection
    await hook.close()


def test_ssl_contexts_are_shared_until_their_files_change(sim: Sim, tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_bytes(sim.ca_pem)
    first, second = k8s_async_configuration(ca), k8s_async_configuration(ca)

    context = client_pool.ssl_context_for(first)
    assert client_pool.ssl_context_for(second) is context

    ca.write_bytes(sim.ca_pem + b"\n")  # a rotated CA file at the same path
    assert client_pool.ssl_context_for(second) is not context
    second.verify_ssl = False
    assert client_pool.ssl_context_for(second).verify_mode == ssl.CERT_NONE


def k8s_async_configuration(ca: Path) -> Any:
    from kubernetes_asyncio.client import Configuration

    configuration = Configuration()
    configuration.ssl_ca_cert = str(ca)
    return configuration


# -- the event loop is never blocked ---------------------------------------------------------------
#
# What stalled a loop running many hooks and triggers were these calls, made on the loop itself:
# the cncf hook's ``get_conn()`` loaded the kubeconfig and built a whole `kubernetes_asyncio`
# ApiClient (and with it an SSL context: the CA, or the system trust store, loaded from files)
# for every call (fixed by `client_pool`, commit 6a72292: 46 callbacks over 0.1 s before it),
# and a missing default connection made the cncf hook construct an ORM ``Connection``, whose
# first construction in a process configures every SQLAlchemy mapper of Airflow (1.2 s; fixed
# in `AsyncGangJobHook.get_conn_extras`, commit 540b2cd). The test below records the thread
# each of those calls runs on instead of timing the loop: how long they take depends on the
# machine, where they run does not. How long the loop stalls under many triggers is measured by
# `benchmarks/bench_triggerer.py` (its loop probe and Airflow's "async thread was blocked").

HOOKS = 50
TRIGGERS = 50


@dataclass(frozen=True)
class Blocking:
    """A blocking call that must never run on the event loop's thread."""

    owner: Any  # the class whose attribute is wrapped
    attribute: str
    what: str


def blocking_calls() -> list[Blocking]:
    from kubernetes_asyncio.client.api_client import ApiClient
    from kubernetes_asyncio.client.rest import RESTClientObject
    from kubernetes_asyncio.config import kube_config
    from sqlalchemy.orm import Mapper

    return [
        # An SSL context's certificates: loaded from files (the trust store here: ~0.3 MB of PEM).
        Blocking(ssl.SSLContext, "load_verify_locations", "SSL context: loading CA certificates"),
        Blocking(ssl.SSLContext, "set_default_verify_paths", "SSL context: loading the system trust store"),
        Blocking(ssl.SSLContext, "load_cert_chain", "SSL context: loading a client certificate"),
        # kubernetes_asyncio's own client constructors build that SSL context themselves (the
        # pooled client subclasses them and builds neither).
        Blocking(ApiClient, "__init__", "kubernetes_asyncio ApiClient()"),
        Blocking(RESTClientObject, "__init__", "kubernetes_asyncio RESTClientObject() (its SSL context)"),
        # Loading a kubeconfig: reading its file, parsing it, writing its *-data to files.
        Blocking(kube_config.KubeConfigMerger, "load_config", "kubeconfig: reading a file"),
        Blocking(kube_config.KubeConfigLoader, "__init__", "kubeconfig: parsing it"),
        Blocking(kube_config.FileOrData, "_create_temp_file_with_content", "kubeconfig: writing *-data"),
        # Every ORM object's construction checks the mappers; the first one configures them all.
        Blocking(Mapper, "_check_configure", "SQLAlchemy: an ORM object (configures the mappers)"),
    ]


@dataclass(frozen=True)
class Call:
    what: str
    thread: int
    thread_name: str


class BlockingCallLog:
    """Records, for every call of `blocking_calls`, what was called and on which thread."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.calls: list[Call] = []  # appended from any thread (list.append is atomic)
        for blocking in blocking_calls():
            original = getattr(blocking.owner, blocking.attribute)
            monkeypatch.setattr(blocking.owner, blocking.attribute, self._recording(blocking.what, original))

    def _recording(self, what: str, original: Callable[..., Any]) -> Callable[..., Any]:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            thread = threading.current_thread()
            self.calls.append(Call(what, threading.get_ident(), thread.name))
            return original(*args, **kwargs)

        return recorded

    def on(self, thread: int) -> Counter[str]:
        return Counter(call.what for call in self.calls if call.thread == thread)

    def off(self, thread: int) -> Counter[str]:
        return Counter(call.what for call in self.calls if call.thread != thread)


@pytest.fixture
def queued_jobs(sim: Sim) -> Iterator[list[tuple[str, str]]]:
    """TRIGGERS gangs of 2 GPUs each on a 2-GPU cluster: one runs (long), the rest queue."""
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=str(sim.kubeconfig_path))
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        command=["python", "train.py"],
        workers=1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "600"}}},
    )
    tag = uuid.uuid4().hex[:6]
    jobs = []
    for index in range(TRIGGERS):
        name = f"pool-{tag}-{index}"
        podgroup = spec.build_podgroup(name, NS)
        assert podgroup is not None
        hook.create_podgroup(podgroup, NS)
        job = hook.create_pytorchjob(spec.build_pytorchjob(name, NS), NS)
        jobs.append((name, job["metadata"]["uid"]))
    yield jobs
    for name, _ in jobs:
        hook.delete_pytorchjob(name, NS, propagation="Background")
        hook.delete_podgroup(name, NS)


async def wait_for_requests(sim: Sim, wanted: Callable[[dict[tuple[str, str], int]], bool]) -> None:
    """Wait until the API server has counted the wanted requests (asked for off the loop)."""
    deadline = time.monotonic() + 90
    while not wanted(counts := await asyncio.to_thread(sim.metrics)):
        assert time.monotonic() < deadline, f"the triggers did not make their first reads: {counts}"
        await asyncio.sleep(0.2)


async def test_fifty_hooks_and_fifty_triggers_never_block_the_event_loop(
    sim: Sim, queued_jobs: list[tuple[str, str]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every client is built at once, in one loop, with the cluster CA in the system trust store,
    and none of the blocking calls that once stalled the loop (`blocking_calls`) runs on it.

    That is what a kubeconfig without ``certificate-authority-data`` uses (an API server with
    a publicly trusted certificate), and the costliest SSL context to build: the trust store
    here is the system bundle plus the simulator's CA. Half the hooks read their kubeconfig from
    a file, half get its content in ``connection_extras``; the triggers get what
    `GangJobHook.async_hook_kwargs` hands them on a worker, which names no connection: they
    resolve ``kubernetes_default``, which does not exist here (the cncf hook's ORM
    ``Connection``). Each trigger then gets its event when its job is deleted.
    """
    system_bundle = ssl.get_default_verify_paths().cafile
    bundle = tmp_path / "trust-store.pem"
    bundle.write_bytes((Path(system_bundle).read_bytes() + b"\n" if system_bundle else b"") + sim.ca_pem)
    monkeypatch.setenv("SSL_CERT_FILE", str(bundle))
    monkeypatch.delenv("AIRFLOW_CONN_KUBERNETES_DEFAULT", raising=False)
    caless = tmp_path / "kubeconfig"
    caless.write_text(yaml.safe_dump(sim.kubeconfig(with_ca=False)), encoding="utf-8")
    hook_kwargs: list[dict[str, Any]] = [
        {"config_file": str(caless), "connection_extras": {}},
        {"connection_extras": {"kube_config": caless.read_text(encoding="utf-8")}},
    ]
    trigger_kwargs = GangJobHook(
        conn_id=None, kubernetes_conn_id=None, config_file=str(caless)
    ).async_hook_kwargs()
    json.dumps(trigger_kwargs)
    hooks = [
        AsyncGangJobHook(conn_id=None, kubernetes_conn_id=None, **hook_kwargs[index % 2])
        for index in range(HOOKS)
    ]
    job_name, _ = queued_jobs[0]

    async def use(hook: AsyncGangJobHook) -> None:
        for _ in range(3):
            assert await hook.get_queue("default") is not None
            assert await hook.get_pytorchjob(job_name, NS) is not None
            await hook.list_job_pods(job_name, NS)

    before = await asyncio.to_thread(sim.metrics)

    def first_reads_done(counts: dict[tuple[str, str], int]) -> bool:
        def new(verb: str, resource: str) -> int:
            return counts.get((verb, resource), 0) - before.get((verb, resource), 0)

        watches = sum(count - before.get(key, 0) for key, count in counts.items() if key[0] == "watch")
        return new("get", "pytorchjobs.kubeflow.org") >= HOOKS * 3 + TRIGGERS and watches >= TRIGGERS

    def delete_jobs() -> None:
        hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=str(sim.kubeconfig_path))
        for name, _ in queued_jobs:
            hook.delete_pytorchjob(name, NS, propagation="Background")

    loop_thread = threading.get_ident()
    log = BlockingCallLog(monkeypatch)

    await asyncio.gather(*(use(hook) for hook in hooks))
    await asyncio.gather(*(hook.close() for hook in hooks))

    runs = [
        # Each with its own client and watches: the shared cache would build one client only.
        GangJobTrigger(
            name,
            NS,
            uid,
            poll_interval=30.0,
            kubernetes_conn_id=None,
            hook_kwargs=trigger_kwargs,
            watch="per_trigger",
        ).run()
        for name, uid in queued_jobs
    ]
    waiting = [asyncio.ensure_future(anext(run)) for run in runs]
    try:
        await wait_for_requests(sim, first_reads_done)  # every trigger looked and watches
        assert not any(task.done() for task in waiting), [task.result() for task in waiting if task.done()]
        await asyncio.to_thread(delete_jobs)
        # A hang guard only: each event follows its job's deletion by a watch event.
        events = await asyncio.wait_for(asyncio.gather(*waiting), timeout=120)
    finally:
        for task in waiting:
            task.cancel()
        await asyncio.gather(*waiting, return_exceptions=True)
        for run in runs:
            await run.aclose()

    assert sorted((event.payload["name"], event.payload["status"]) for event in events) == sorted(
        (name, "lost") for name, _ in queued_jobs
    )
    on_loop = log.on(loop_thread)
    assert not on_loop, f"blocking calls made on the event loop's thread: {dict(on_loop)}"
    # The wrappers saw the real work, done in worker threads: a client per hook and per trigger.
    off_loop = log.off(loop_thread)
    assert off_loop["kubeconfig: parsing it"] >= HOOKS + TRIGGERS
    assert off_loop["kubeconfig: reading a file"] >= HOOKS // 2 + TRIGGERS
    assert off_loop["SSL context: loading the system trust store"] >= 1  # shared: built once per file

"""One keep-alive `kubernetes_asyncio` ApiClient per hook and event loop, built off the loop.

Building a `kubernetes_asyncio` client blocks: loading the kubeconfig reads files, parses
YAML and writes the ``*-data`` certificates to temporary files; looking up the Airflow
connection goes to the metadata database or the supervisor; and the client's constructor
(`RESTClientObject`) makes an SSL context synchronously, loading the CA (the whole system
bundle when the kubeconfig names none: about 30 ms) and the client certificate. The cncf
`AsyncKubernetesHook.get_conn()` does the last part on the event loop for every call and
then opens a new TLS connection; a triggerer running many triggers stalls on it.

`LoopClientPool` does the blocking part in a worker thread (`asyncio.to_thread`), once, and
then builds the client on the loop from the prepared SSL context: only the aiohttp session,
which must be created on the loop it serves, is made there. The client is reused by every
call until `LoopClientPool.close`, so its connections are kept alive too.

One client per running event loop: aiohttp sessions belong to the loop that created them, so
a hook used from two loops (tests do that) gets one client in each. Close the pool when done;
if that is forgotten, the loop closes the client when it shuts down (``asyncio.run`` does),
through a parked async generator (`_close_with_loop`). A pool dropped unclosed while its loop
runs on is left to aiohttp, which closes the connections when they are garbage-collected and
logs "Unclosed connector".

Short-lived credentials (kubeconfig ``exec`` plugins: EKS, GKE) are reloaded off the loop
at most every `CREDENTIAL_REFRESH_SECONDS` into the same configuration, which the pooled
client reads on every request; the cncf hook instead reloaded them on every call.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import ssl
import threading
import time
from collections import OrderedDict
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass, field
from typing import Any, Literal, NamedTuple

import aiohttp
from kubernetes_asyncio.client import ApiClient, Configuration
from kubernetes_asyncio.client.rest import RESTClientObject

import airflow_gang
from airflow_gang.hooks.connection_identity import client_fingerprint

# Watch events carrying large objects can exceed aiohttp's default read buffer (etcd allows
# requests up to 1.5 MiB); kubernetes_asyncio sizes its sessions the same way.
READ_BUFFER_BYTES = 2**21
# How often exec-plugin credentials are reloaded. Such tokens live 15 min (EKS) to 1 h (GKE).
CREDENTIAL_REFRESH_SECONDS = 60.0
USER_AGENT = f"airflow-gang/{airflow_gang.__version__} (kubernetes_asyncio)"
# Distinct SSL contexts kept (one per cluster CA and client certificate in practice).
SSL_CONTEXT_CACHE_SIZE = 16
_ssl_contexts: OrderedDict[tuple[Any, ...], ssl.SSLContext] = OrderedDict()
_ssl_contexts_lock = threading.Lock()


class LoadedConfig(NamedTuple):
    """A loaded client configuration and whether its credentials expire (reload them)."""

    configuration: Configuration
    reload_credentials: bool


def ssl_context_for(configuration: Configuration) -> ssl.SSLContext:
    """The client SSL context ``configuration`` asks for. Blocking: run it off the event loop.

    Contexts are shared process-wide by everything they are made from (the CA, client
    certificate and key files, with their sizes and modification times, and the verification
    flags), so a triggerer running many triggers against one cluster loads its trust store
    once. An SSL context may serve any number of connections, threads and loops (aiohttp
    shares its own default one the same way).
    """
    key = _ssl_context_key(configuration)
    with _ssl_contexts_lock:  # one build at a time; waiters for the same key then find it
        context = _ssl_contexts.get(key)
        if context is None:
            context = _ssl_contexts[key] = _new_ssl_context(configuration)
            while len(_ssl_contexts) > SSL_CONTEXT_CACHE_SIZE:
                _ssl_contexts.popitem(last=False)
        _ssl_contexts.move_to_end(key)
        return context


def _new_ssl_context(configuration: Configuration) -> ssl.SSLContext:
    """A new SSL context, from the same settings `kubernetes_asyncio`'s own client reads.

    ``ssl_ca_cert`` (the default trust store when None), ``cert_file``/``key_file``,
    ``verify_ssl`` and ``disable_strict_ssl_verification``, with the same meaning.
    """
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    if configuration.cert_file:
        context.load_cert_chain(configuration.cert_file, keyfile=configuration.key_file)
    if not configuration.verify_ssl:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    if configuration.disable_strict_ssl_verification:
        context.verify_flags &= ~ssl.VERIFY_X509_STRICT
    return context


def _file_version(path: str | None) -> tuple[str, int, int, int] | None:
    if not path:
        return None
    try:
        stat = os.stat(path)
    except OSError:
        return None  # the build then fails with the real error, and nothing is cached
    return path, stat.st_ino, stat.st_size, stat.st_mtime_ns


def _ssl_context_key(configuration: Configuration) -> tuple[Any, ...]:
    ca_file = configuration.ssl_ca_cert
    if ca_file is None:
        # The default trust store: where OpenSSL finds it (SSL_CERT_FILE and SSL_CERT_DIR move it).
        defaults = ssl.get_default_verify_paths()
        trust: tuple[Any, ...] = ("default", _file_version(defaults.cafile), defaults.capath)
    else:
        trust = ("file", _file_version(ca_file))
    return (
        *trust,
        _file_version(configuration.cert_file),
        _file_version(configuration.key_file),
        configuration.verify_ssl,
        configuration.disable_strict_ssl_verification,
    )


def _tls_inputs(configuration: Configuration) -> tuple[Any, ...]:
    """What `ssl_context_for` reads: a client must be rebuilt when any of it changes."""
    return (
        configuration.ssl_ca_cert,
        configuration.cert_file,
        configuration.key_file,
        configuration.verify_ssl,
        configuration.disable_strict_ssl_verification,
    )


class _PreparedRESTClient(RESTClientObject):
    """`RESTClientObject` around an SSL context made beforehand.

    The base constructor is not called: it would build the SSL context itself, on the loop.
    What its ``request()`` reads is set here: ``pool_manager``, ``proxy``, ``proxy_headers``
    and ``server_hostname`` (each may be None, which the stubs do not say).
    """

    def __init__(self, configuration: Configuration, ssl_context: ssl.SSLContext) -> None:
        self.server_hostname = configuration.tls_server_name  # type: ignore[assignment]
        self.proxy = configuration.proxy  # type: ignore[assignment]
        self.proxy_headers = configuration.proxy_headers  # type: ignore[assignment]
        self.pool_manager = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(limit=configuration.connection_pool_maxsize, ssl=ssl_context),
            trust_env=True,  # proxy settings from the environment, as kubernetes_asyncio does
            read_bufsize=READ_BUFFER_BYTES,
        )


class PooledApiClient(ApiClient):
    """A `kubernetes_asyncio` ApiClient whose SSL context was built off the event loop.

    Construct it on the loop it will serve. ``ApiClient.__init__`` is not called, since it
    would build a `RESTClientObject` (and its SSL context) itself; the attributes it sets are
    set here. Requests identify themselves with `USER_AGENT`.
    """

    def __init__(self, configuration: Configuration, ssl_context: ssl.SSLContext) -> None:
        self.configuration = configuration
        self.pool_threads = 1
        self.rest_client = _PreparedRESTClient(configuration, ssl_context)
        self.default_headers: dict[str, str] = {}
        self.cookie = None  # type: ignore[assignment]  # no cookie header (the stubs say str)
        self.user_agent = USER_AGENT
        self.client_side_validation = configuration.client_side_validation


@dataclass
class _Pooled:
    client: PooledApiClient
    tls: tuple[Any, ...]
    reload_credentials: bool
    loaded_at: float
    fingerprint: str  # connection_identity.client_fingerprint: what the client talks to and trusts


class _Prepared(NamedTuple):
    """A configuration loaded off the loop, with what building its client needs."""

    loaded: LoadedConfig
    ssl_context: ssl.SSLContext
    fingerprint: str


@dataclass
class _Slot:
    """The client of one event loop."""

    lock: asyncio.Lock = field(default_factory=asyncio.Lock)
    pooled: _Pooled | None = None
    # Clients replaced after a credential reload changed the certificates; calls started on
    # them (watches) may still be running, so they are closed with the pool.
    retired: list[PooledApiClient] = field(default_factory=list)
    guard: AsyncGenerator[None, None] | None = None

    def take_clients(self) -> list[PooledApiClient]:
        clients = [*self.retired, *([self.pooled.client] if self.pooled else [])]
        self.pooled, self.retired = None, []
        return clients

    async def guard_with_loop(self) -> None:
        """Have the loop close this slot's clients if `LoopClientPool.close` is never called."""
        if self.guard is None:
            self.guard = _close_with_loop(self)
            await anext(self.guard)

    async def close(self) -> None:
        clients, guard, self.guard = self.take_clients(), self.guard, None
        await _close_all(clients)
        if guard is not None:
            await guard.aclose()


async def _close_all(clients: list[PooledApiClient]) -> None:
    for client in clients:
        await client.close()


async def _close_with_loop(slot: _Slot) -> AsyncGenerator[None, None]:
    """Started and left suspended while ``slot`` has clients, so its loop knows about it.

    A loop closes the async generators started on it when it shuts down (``asyncio.run`` and
    pytest-asyncio call ``shutdown_asyncgens``): this one then closes the slot's clients, on
    their own loop, while it still runs.
    """
    try:
        yield
    finally:
        slot.guard = None
        await _close_all(slot.take_clients())


class LoopClientPool:
    """Builds, hands out and closes one `PooledApiClient` per running event loop.

    :param load_config: loads the client configuration; blocking, called in a worker thread
        (never two at once). Called again to reload expiring credentials: it must then update
        the configuration it returned before, in place (the pooled client reads its token from
        it on every request).
    """

    def __init__(self, load_config: Callable[[], LoadedConfig]) -> None:
        self._load_config = load_config
        self._load_lock = threading.Lock()
        self._slots: dict[asyncio.AbstractEventLoop, _Slot] = {}
        # Bumped whenever `reload` switches a client: a call that failed on an older one retries.
        self.generation = 0

    def _load(self) -> LoadedConfig:
        with self._load_lock:
            return self._load_config()

    def _prepare(self, load: Callable[[], LoadedConfig] | None = None) -> _Prepared:
        with self._load_lock:
            loaded = (load or self._load_config)()
        fingerprint = client_fingerprint(loaded.configuration, reloads_credentials=loaded.reload_credentials)
        return _Prepared(loaded, ssl_context_for(loaded.configuration), fingerprint)

    def _slot(self, loop: asyncio.AbstractEventLoop) -> _Slot:
        for other in [other for other in self._slots if other.is_closed()]:
            del self._slots[other]
        slot = self._slots.get(loop)
        if slot is None:
            slot = self._slots[loop] = _Slot()
        return slot

    async def client(self) -> ApiClient:
        """This loop's client, built on first use (and after `close`)."""
        loop = asyncio.get_running_loop()
        while True:
            slot = self._slot(loop)
            pooled = slot.pooled
            if pooled is not None and not self._expired(pooled):
                return pooled.client
            async with slot.lock:
                if self._slots.get(loop) is not slot:
                    continue  # closed while this call waited for the lock: start over
                if slot.pooled is None:
                    slot.pooled = self._pooled(await asyncio.to_thread(self._prepare))
                    await slot.guard_with_loop()
                elif self._expired(slot.pooled):
                    await self._reload_credentials(slot, slot.pooled)
                return slot.pooled.client

    @staticmethod
    def _pooled(prepared: _Prepared) -> _Pooled:
        loaded = prepared.loaded
        return _Pooled(
            client=PooledApiClient(loaded.configuration, prepared.ssl_context),
            tls=_tls_inputs(loaded.configuration),
            reload_credentials=loaded.reload_credentials,
            loaded_at=time.monotonic(),
            fingerprint=prepared.fingerprint,
        )

    async def reload(self, load: Callable[[], LoadedConfig]) -> Literal["kept", "switched", "built"]:
        """Load the configuration afresh with ``load`` (blocking: run in a worker thread) and
        switch this loop's client if what it talks to or trusts changed.

        ``kept``: the same place and trust, the client stays (the fresh configuration is dropped);
        ``switched``: a connection edited, a kubeconfig rewritten or a CA rotated, so the calls
        after this one go to the new place with the new trust, and the old client is retired
        (closed with the pool: calls started on it may still be running); ``built``: this loop
        had no client yet, so it now has one from the fresh configuration.
        """
        slot = self._slot(asyncio.get_running_loop())
        async with slot.lock:
            prepared = await asyncio.to_thread(self._prepare, load)
            if slot.pooled is not None and slot.pooled.fingerprint == prepared.fingerprint:
                return "kept"
            outcome: Literal["switched", "built"] = "built" if slot.pooled is None else "switched"
            if slot.pooled is not None:
                slot.retired.append(slot.pooled.client)
                self.generation += 1
            slot.pooled = self._pooled(prepared)
            await slot.guard_with_loop()
            return outcome

    @staticmethod
    def _expired(pooled: _Pooled) -> bool:
        return pooled.reload_credentials and time.monotonic() - pooled.loaded_at >= CREDENTIAL_REFRESH_SECONDS

    async def _reload_credentials(self, slot: _Slot, pooled: _Pooled) -> None:
        loaded = await asyncio.to_thread(self._load)
        same_client = loaded.configuration is pooled.client.configuration
        if same_client and _tls_inputs(loaded.configuration) == pooled.tls:
            pooled.loaded_at = time.monotonic()  # the new token is in the shared configuration
            pooled.reload_credentials = loaded.reload_credentials
            return
        # The plugin handed out another client certificate: a new SSL context, a new client.
        prepared = await asyncio.to_thread(self._prepare, lambda: loaded)
        slot.retired.append(pooled.client)
        slot.pooled = self._pooled(prepared)

    async def close(self) -> None:
        """Close every client of this pool; idempotent. A later `client` call builds a new one.

        Calls still running on a client (an open watch) fail when it closes. Clients of other
        loops that are still running are closed on their loop, without waiting; those of
        stopped loops are left to their loop's shutdown (see `_close_with_loop`).
        """
        loop = asyncio.get_running_loop()
        for other, slot in list(self._slots.items()):
            if other is loop:
                continue
            del self._slots[other]
            if other.is_running():
                with contextlib.suppress(RuntimeError):  # it closed meanwhile
                    asyncio.run_coroutine_threadsafe(slot.close(), other)
        own = self._slots.get(loop)
        if own is None:
            return
        async with own.lock:  # lets a build in progress finish, then closes its client
            if self._slots.get(loop) is own:
                del self._slots[loop]
            await own.close()

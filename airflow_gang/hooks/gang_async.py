"""`AsyncGangJobHook`: the provider's Kubernetes API calls on ``kubernetes_asyncio``, for triggers.

The cncf `AsyncKubernetesHook` it extends brings the connection handling (including building
from ``connection_extras`` without a connection lookup, as `KubernetesPodTrigger` does) but
no custom-object calls, so those are made here with ``kubernetes_asyncio``'s
`CustomObjectsApi`. Same contract as `GangJobHook`: wire dicts, retries, 404 as None/False,
`GangApiError` for everything else.

Unlike the cncf hook's ``get_conn()``, which builds (and closes) a new client for every call
on the event loop, the calls here share one client per hook, built off the loop on first use
and closed by `AsyncGangJobHook.close` (see `airflow_gang.hooks.client_pool`).
"""

from __future__ import annotations

import asyncio
import json
import time
import weakref
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar, cast

import aiohttp
from airflow.providers.cncf.kubernetes.hooks.kubernetes import AsyncKubernetesHook
from kubernetes_asyncio.client import (
    ApiClient,
    CoreV1Api,
    CustomObjectsApi,
    V1DeleteOptions,
    V1Preconditions,
)

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.async_watches import WATCH_TIMEOUT_SLACK, AsyncWatchesMixin, list_call, read_body
from airflow_gang.hooks.client_pool import LoadedConfig, LoopClientPool
from airflow_gang.hooks.connection_identity import definition_fingerprint, file_digest, kubeconfig_path
from airflow_gang.hooks.errors import ApiRequest
from airflow_gang.hooks.kinds import (
    EVENTS,
    POD_LOG_RESOURCE,
    PODGROUPS,
    PODS,
    PYTORCHJOBS,
    QUEUES,
    Kind,
)
from airflow_gang.hooks.retrying import REQUEST_TIMEOUT, RetryPolicy, acall_with_retries
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind
from airflow_gang.outage import may_mean_moved

T = TypeVar("T")
JsonDict = dict[str, Any]
# At most one fresh look at the connection per hook in this many seconds: during a real outage
# every failing call would otherwise ask the triggerer's supervisor for it again.
REFRESH_MIN_SECONDS = 30.0


class AsyncGangJobHook(AsyncWatchesMixin, AsyncKubernetesHook):
    """Asynchronous API calls for gang-scheduled PyTorchJobs (used by `GangJobTrigger`).

    Constructor as `AsyncKubernetesHook`: ``conn_id``, ``connection_extras`` (given, no
    connection is looked up: pass `GangJobHook.async_hook_kwargs()` from the worker),
    ``config_dict``, ``config_file``, ``in_cluster``, ``cluster_context``.

    All calls share one `kubernetes_asyncio` client and its keep-alive connections, built on
    first use with everything blocking (connection lookup, kubeconfig loading, certificate
    files, SSL context) in a worker thread. ``await hook.close()`` when done with the hook: it
    closes the client and its connections. A closed hook stays usable: its next call builds a
    new client. Used from several event loops, the hook keeps one client per loop.
    """

    retry_policy: RetryPolicy = RetryPolicy()

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._clients = LoopClientPool(self._load_client_config)
        # Extras handed in (from the worker: `GangJobHook.async_hook_kwargs`) are all this hook
        # may know; extras it looked up itself it looks up again in `refresh_connection`.
        self._extras_given = self._extras is not None
        self._refreshed_at = -REFRESH_MIN_SECONDS
        # The kubeconfig file's digest at the last look (`file_digest`).
        self._kubeconfig_looked_at: str | None = None
        self._refresh_locks: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, asyncio.Lock] = (
            weakref.WeakKeyDictionary()
        )

    def reuse_lookup(self, extras: dict[str, Any]) -> None:
        """Start from what an earlier lookup of this hook's connection returned (no second lookup
        now); `refresh_connection` still looks it up afresh."""
        self._extras = extras

    async def definition(self) -> str:
        """`connection_identity.definition_fingerprint` of this hook's connection (looked up once)."""
        extras = await self.get_conn_extras()
        return await asyncio.to_thread(definition_fingerprint, extras, self._overrides())

    def _overrides(self) -> dict[str, Any]:
        return {
            "conn_id": self.conn_id,
            "config_file": self.config_file,
            "cluster_context": self.cluster_context,
            "in_cluster": self.in_cluster,
            "config_dict": self.config_dict,
        }

    async def _kubeconfig_digest(self) -> str | None:
        path = kubeconfig_path(self._extras or {}, self._overrides())
        return await asyncio.to_thread(file_digest, path)

    @property
    def connection_generation(self) -> int:
        """Changes whenever `refresh_connection` switches the client: pass it back as ``since``."""
        return self._clients.generation

    async def refresh_connection(self, since: int | None = None) -> bool:
        """Resolve the connection again and follow it if it now points elsewhere; whether the
        calls from now on go elsewhere than those made at generation ``since``.

        The connection is looked up afresh (unless its extras were handed in), its kubeconfig
        loaded again, and the client switched when the server, the trust or static credentials
        changed (`LoopClientPool.reload`). One look at a time, at most once per
        `REFRESH_MIN_SECONDS` unless the kubeconfig file changed since the last look (a CA
        rotated on the server first and in the kubeconfig seconds later is followed at once):
        calls failing together (three watches cut at once) wait for the first one's look and
        retry on the client it switched to.
        """
        lock = self._refresh_locks.setdefault(asyncio.get_running_loop(), asyncio.Lock())
        async with lock:
            if since is not None and self._clients.generation != since:
                return True
            return await self._refresh_now()

    async def _refresh_now(self) -> bool:
        now = time.monotonic()
        kubeconfig = await self._kubeconfig_digest()
        if now - self._refreshed_at < REFRESH_MIN_SECONDS and kubeconfig == self._kubeconfig_looked_at:
            return False
        self._refreshed_at, self._kubeconfig_looked_at = now, kubeconfig
        before = (self._extras, self.client_configuration, self._config_loaded, self._is_exec_auth)
        if not self._extras_given and self.conn_id:
            self._extras = None
            try:
                await self.get_conn_extras()
            except Exception as error:  # the lookup itself failing changes nothing
                self.log.debug("looking up connection %s again failed: %s", self.conn_id, error)
                self._extras = before[0]
                return False
        self.client_configuration, self._config_loaded, self._is_exec_auth = None, False, None
        try:
            outcome = await self._clients.reload(self._load_client_config)
        except Exception as error:  # e.g. a kubeconfig half-written: keep what works
            self.log.debug("loading connection %s again failed: %s", self.conn_id, error)
            outcome = "kept"
        if outcome == "kept":
            # The client in use stays, and with it the configuration an exec plugin refreshes.
            self._extras, self.client_configuration, self._config_loaded, self._is_exec_auth = before
            return False
        if outcome == "switched":
            self.log.info(
                "connection %s changed: calls now go to %s",
                self.conn_id or "(inline)",
                self.client_configuration.host if self.client_configuration else "?",
            )
        return outcome == "switched"

    def _load_client_config(self) -> LoadedConfig:
        """Load the client configuration as `AsyncKubernetesHook` does. Blocking: a worker thread runs it.

        The cncf loader is a coroutine that blocks inside (it reads the kubeconfig, writes
        certificate files, and looks up the connection unless ``connection_extras`` were
        given), so it runs to completion on a private event loop in this thread. The cncf hook
        caches static credentials after the first load; exec-plugin ones it loads again on
        every call, into the same configuration object.
        """
        asyncio.run(self._load_config())  # type: ignore[no-untyped-call]
        configuration = self.client_configuration
        assert configuration is not None  # _load_config creates it
        return LoadedConfig(configuration, reload_credentials=bool(self._is_exec_auth))

    def _timeout(self) -> float:
        """One request's timeout: `REQUEST_TIMEOUT`, cut to the time left under the policy's deadline."""
        return self.retry_policy.request_timeout(REQUEST_TIMEOUT)

    async def close(self) -> None:
        """Close the hook's client and its connections (idempotent); calls still running fail."""
        await self._clients.close()

    async def get_conn_extras(self) -> dict[str, Any]:
        """The connection's extras, ``{}`` for a default connection that does not exist.

        For that case the cncf hook builds an ORM ``Connection`` on the caller's loop, which
        configures every SQLAlchemy mapper of Airflow the first time in a process: more than a
        second with the triggerer's loop stalled (a triggerer that never used the ORM, with
        in-cluster or default-kubeconfig credentials and no ``kubernetes_default``).
        """
        if getattr(self, "_extras", None) is None and self.conn_id and self.conn_id == self.default_conn_name:
            from airflow.providers.common.compat.connection import get_async_connection
            from airflow.providers.common.compat.sdk import AirflowNotFoundException

            try:
                connection = await get_async_connection(self.conn_id)
            except AirflowNotFoundException:
                self._extras = {}
            else:
                self._extras = connection.extra_dejson
        return cast(dict[str, Any], await super().get_conn_extras())

    async def _get_field(self, field_name: str) -> Any:
        # AsyncKubernetesHook reads kube_config_path from the connection only and ignores
        # config_file; honour the explicit argument first, as the sync KubernetesHook does.
        if field_name == "kube_config_path" and self.config_file:
            return self.config_file
        return await super()._get_field(field_name)  # type: ignore[no-untyped-call]

    async def _call(self, request: ApiRequest, call: Callable[[ApiClient], Awaitable[T]]) -> T:
        generation = self.connection_generation
        api = await self._clients.client()
        try:
            return await acall_with_retries(lambda: call(api), request, self.retry_policy, self.log)
        except GangApiError as error:
            if not (may_mean_moved(error) and await self.refresh_connection(since=generation)):
                raise
        api = await self._clients.client()  # the connection moved: once more, where it points now
        return await acall_with_retries(lambda: call(api), request, self.retry_policy, self.log)

    async def _call_or_none(self, request: ApiRequest, call: Callable[[ApiClient], Awaitable[T]]) -> T | None:
        try:
            return await self._call(request, call)
        except GangApiError as error:
            if error.status == 404:
                return None
            raise

    async def _get(self, kind: Kind, name: str, namespace: str) -> JsonDict | None:
        return await self._call_or_none(
            ApiRequest("get", kind.resource, name, namespace),
            lambda api: CustomObjectsApi(api).get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, _request_timeout=self._timeout()
            ),
        )

    async def _delete(self, kind: Kind, name: str, namespace: str, propagation: str, uid: str | None) -> bool:
        options = V1DeleteOptions(
            propagation_policy=propagation, preconditions=V1Preconditions(uid=uid) if uid else None
        )
        deleted = await self._call_or_none(
            ApiRequest("delete", kind.resource, name, namespace),
            lambda api: CustomObjectsApi(api).delete_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                body=options,
                _request_timeout=self._timeout(),
            ),
        )
        if deleted is not None:
            self.log.info("deleting %s %s/%s propagation=%s", kind.kind, namespace, name, propagation)
        return deleted is not None

    async def _list(self, kind: Kind, namespace: str, **params: Any) -> JsonDict:
        async def listed(api: ApiClient) -> JsonDict:
            response = await list_call(api, kind, namespace, _request_timeout=self._timeout(), **params)
            parsed: JsonDict = json.loads(await read_body(response))
            return parsed

        return await self._call(ApiRequest("list", kind.resource, None, namespace), listed)

    async def get_pytorchjob(self, name: str, namespace: str) -> JsonDict | None:
        """The PyTorchJob, or None if it does not exist.

        :param name: job name.
        :param namespace: job namespace.
        """
        return await self._get(PYTORCHJOBS, name, namespace)

    async def get_job(self, job_kind: JobKind, name: str, namespace: str) -> JsonDict | None:
        """The gang job of ``job_kind`` (PyTorchJob, TrainJob), or None if it does not exist."""
        return await self._get(Kind.of(job_kind), name, namespace)

    async def get_podgroup(self, name: str, namespace: str) -> JsonDict | None:
        """The PodGroup, or None if it does not exist.

        :param name: PodGroup name.
        :param namespace: its namespace.
        """
        return await self._get(PODGROUPS, name, namespace)

    async def get_queue(self, name: str) -> JsonDict | None:
        """The cluster-scoped Volcano Queue, or None if it does not exist.

        :param name: queue name.
        """
        return await self._call_or_none(
            ApiRequest("get", QUEUES.resource, name, None),
            lambda api: CustomObjectsApi(api).get_cluster_custom_object(
                QUEUES.group, QUEUES.version, QUEUES.plural, name, _request_timeout=self._timeout()
            ),
        )

    async def list_job_pods(
        self, name: str, namespace: str, job_kind: JobKind = DEFAULT_JOB_KIND
    ) -> list[JsonDict]:
        """The job's pods (a PyTorchJob's by ``training.kubeflow.org/job-name=<name>``), as wire dicts.

        :param name: job name.
        :param namespace: job namespace.
        :param job_kind: the job's kind, whose pod label finds its pods.
        """
        listed = await self._list(PODS, namespace, label_selector=job_kind.pod_selector(name))
        return list(listed.get("items") or [])

    async def list_events(self, namespace: str, involved_name: str) -> list[JsonDict]:
        """Core events about one object, in the server's order.

        :param namespace: namespace of the object.
        :param involved_name: the object's name (field selector ``involvedObject.name``).
        """
        listed = await self._list(EVENTS, namespace, field_selector=f"involvedObject.name={involved_name}")
        return list(listed.get("items") or [])

    async def delete_pytorchjob(
        self, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        """Delete a PyTorchJob; False if it was already gone.

        :param name: job name.
        :param namespace: job namespace.
        :param propagation: ``Foreground`` (default), ``Background`` or ``Orphan``.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return await self._delete(PYTORCHJOBS, name, namespace, propagation, uid)

    async def delete_job(
        self,
        job_kind: JobKind,
        name: str,
        namespace: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete a gang job of ``job_kind``; False if it was already gone (as `delete_pytorchjob`)."""
        return await self._delete(Kind.of(job_kind), name, namespace, propagation, uid)

    async def delete_podgroup(self, name: str, namespace: str, *, uid: str | None = None) -> bool:
        """Delete a PodGroup; False if it was already gone.

        In the background: nothing depends on a PodGroup (its pods are owned by their job), so it
        goes at once, where a foreground delete would leave it, marked, until the garbage
        collector's next pass, and a PodGroup of the same name created meanwhile would collide.

        :param name: PodGroup name.
        :param namespace: its namespace.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return await self._delete(PODGROUPS, name, namespace, "Background", uid)

    async def read_pod_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str = "pytorch",
        tail_lines: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log so far, as text.

        :param pod: pod name.
        :param namespace: pod namespace.
        :param container: container name.
        :param tail_lines: only the last N lines.
        :param previous: the log of the container's previous run (it restarted after a failure).
        """

        async def read(api: ApiClient) -> str:
            response = await CoreV1Api(api).read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                tail_lines=tail_lines,  # type: ignore[arg-type]  # None leaves the parameter out
                previous=previous or None,  # type: ignore[arg-type]
                _preload_content=False,
                _request_timeout=self._timeout(),
            )
            # With _preload_content=False the "str" the stubs promise is the raw aiohttp response.
            return (await read_body(cast(aiohttp.ClientResponse, response))).decode("utf-8", errors="replace")

        return await self._call(ApiRequest("get", POD_LOG_RESOURCE, pod, namespace), read)


__all__ = ["WATCH_TIMEOUT_SLACK", "AsyncGangJobHook"]

"""`GangJobHook`: every synchronous Kubernetes API call of the provider.

Built on the cncf.kubernetes `KubernetesHook`, so it takes the same ``kubernetes`` connection
(extras ``kube_config_path``, ``kube_config``, ``in_cluster``, ``cluster_context``,
``namespace``) and the same constructor arguments. `AsyncGangJobHook` (for triggers) lives in
`airflow_gang.hooks.gang_async` and is re-exported here. The class reads top-down: how every
request is made (retries, outage riding, errors), the jobs of any kind, the PyTorchJob and
PodGroup calls, pods, events and logs, list + watch.

Contract of every method: objects cross as plain JSON dicts in wire (camelCase) form; transient
failures are retried (`retrying`); a 404 on a get or delete is ``None``/``False``; any other
failure raises a `GangApiError` naming verb, resource and namespace (`GangPermissionError` for
RBAC denials). Each request carries an explicit ``_request_timeout`` so a half-open TCP
connection cannot hang a worker; only the follow-mode log stream has no read timeout.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import yaml
from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes import watch
from kubernetes.client import ApiClient
from kubernetes.watch.watch import iter_resp_lines

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import (
    VOLCANO_API,
    ApiRequest,
    ApiRequirement,
    evaluate_discovery,
    unreachable_error,
)
from airflow_gang.hooks.gang_async import WATCH_TIMEOUT_SLACK, AsyncGangJobHook
from airflow_gang.hooks.kinds import (
    CLUSTER_TRAINING_RUNTIMES,
    EVENTS,
    KINDS_BY_NAME,
    POD_LOG_RESOURCE,
    PODGROUPS,
    PODS,
    PYTORCHJOBS,
    QUEUES,
    REQUIRED_PERMISSIONS,
    TRAINING_RUNTIMES,
    DeletableKind,
    Kind,
    WatchKind,
    delete_options,
    owner_reference_patch,
)
from airflow_gang.hooks.retrying import CONNECTION_ERRORS, REQUEST_TIMEOUT, RetryPolicy, call_with_retries
from airflow_gang.hooks.watches import WatchStream
from airflow_gang.kinds import DEFAULT_JOB_KIND, PYTORCHJOB, JobKind
from airflow_gang.model.outage import Outage, ride_out

__all__ = ["REQUIRED_PERMISSIONS", "AsyncGangJobHook", "GangJobHook"]

T = TypeVar("T")
JsonDict = dict[str, Any]

# A follow-mode log stream may be silent for as long as a training step takes, so it gets a
# connect timeout only; a half-open connection is still detected by the TCP keepalive that
# KubernetesHook enables on its client (unless the connection sets disable_tcp_keepalive).
LOG_STREAM_TIMEOUT = (10.0, None)


def read_json(response: Any) -> Any:
    """The JSON body of a (urllib3) response requested with ``_preload_content=False``."""
    try:
        return json.loads(response.data)
    finally:
        response.release_conn()


@dataclass(frozen=True)
class _Riding:
    """An outage the calls of ``hook`` ride out in the current context (thread or task)."""

    hook: GangJobHook
    outage: Outage
    name: str | None
    namespace: str | None
    sleep: Callable[[float], None]


# A context variable, not an attribute: the log follower's thread shares the operator's hook
# and must fail fast on its own, and a kill's cleanup runs in the same thread as the wait.
_riding: contextvars.ContextVar[_Riding | None] = contextvars.ContextVar("airflow_gang_riding", default=None)


class GangJobHook(KubernetesHook):
    """Synchronous API calls for gang-scheduled PyTorchJobs: the job, its PodGroup, queue, pods, logs.

    Constructor arguments and connection extras are `KubernetesHook`'s (``conn_id``,
    ``config_file``, ``in_cluster``, ``cluster_context``, ``config_dict``, ...).
    ``retry_policy`` may be replaced per instance or subclass.
    """

    retry_policy: RetryPolicy = RetryPolicy()

    hook_name = "Gang-scheduled PyTorchJob (Kubernetes)"

    # -- calls: retries, outage riding, errors every request goes through -------------------------

    def get_conn(self) -> ApiClient:
        """The cncf hook's client, with urllib3's own retries off.

        urllib3 retries a refused or broken connection three times by itself and logs a WARNING
        for each attempt; the hook's retry policy (and the waits' outage handling, one WARNING
        per episode) retry instead, so an outage reads as one story in the task log.
        """
        api = super().get_conn()
        api.rest_client.pool_manager.connection_pool_kw["retries"] = False
        return api

    @contextlib.contextmanager
    def retries(self, policy: RetryPolicy) -> Iterator[GangJobHook]:
        """Use ``policy`` for this hook's calls inside the block (the waits use `WAIT_RETRY_POLICY`)."""
        had_own = "retry_policy" in vars(self)
        previous = self.retry_policy
        self.retry_policy = policy
        try:
            yield self
        finally:
            if had_own:
                self.retry_policy = previous
            else:
                del self.retry_policy

    @contextlib.contextmanager
    def riding_out(
        self,
        outage: Outage | None,
        *,
        name: str | None = None,
        namespace: str | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ) -> Iterator[GangJobHook]:
        """Inside the block, a call that cannot reach the API waits until it can (`outage`).

        Each call then rides out what outlasts its retries: one WARNING per episode, and
        `GangApiUnavailable` once ``api_unavailable_timeout`` is exceeded (``name`` and
        ``namespace`` say for which job). A refusal (403, 404, 422...) is raised at once, as
        always. ``outage=None`` turns riding off inside an outer block: bounded work (deleting
        on a kill, a log tail) must fail fast rather than wait.
        """
        riding = _Riding(self, outage, name, namespace, sleep) if outage is not None else None
        token = _riding.set(riding)
        try:
            yield self
        finally:
            _riding.reset(token)

    def _call(self, request: ApiRequest, call: Callable[[], T]) -> T:
        attempt = partial(call_with_retries, call, request, self.retry_policy, self.log)
        riding = _riding.get()
        if riding is None or riding.hook is not self:
            return attempt()
        return ride_out(
            attempt, riding.outage, self.log, sleep=riding.sleep, name=riding.name, namespace=riding.namespace
        )

    def _call_or_none(self, request: ApiRequest, call: Callable[[], T]) -> T | None:
        try:
            return self._call(request, call)
        except GangApiError as error:
            if error.status == 404:
                return None
            raise

    def _create(self, kind: Kind, body: JsonDict, namespace: str) -> JsonDict:
        name = (body.get("metadata") or {}).get("name")
        request = ApiRequest("create", kind.resource, name, namespace)
        created: JsonDict = self._call(
            request,
            lambda: self.custom_object_client.create_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, body, _request_timeout=self._timeout()
            ),
        )
        self.log.info(
            "created %s %s/%s uid=%s", kind.kind, namespace, name, (created.get("metadata") or {}).get("uid")
        )
        return created

    def _get(self, kind: Kind, name: str, namespace: str) -> JsonDict | None:
        return self._call_or_none(
            ApiRequest("get", kind.resource, name, namespace),
            lambda: self.custom_object_client.get_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, name, _request_timeout=self._timeout()
            ),
        )

    def _list(
        self, kind: Kind, namespace: str, label_selector: str | None, field_selector: str | None = None
    ) -> list[JsonDict]:
        selector = {"label_selector": label_selector} if label_selector else {}
        if field_selector:
            selector["field_selector"] = field_selector
        listed: JsonDict = self._call(
            ApiRequest("list", kind.resource, None, namespace),
            lambda: self.custom_object_client.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, _request_timeout=self._timeout(), **selector
            ),
        )
        return list(listed.get("items") or [])

    def _merge_patch(self, kind: Kind, name: str, namespace: str, patch: JsonDict) -> JsonDict:
        patched: JsonDict = self._call(
            ApiRequest("patch", kind.resource, name, namespace),
            lambda: self.custom_object_client.patch_namespaced_custom_object(
                kind.group,
                kind.version,
                namespace,
                kind.plural,
                name,
                patch,
                _content_type="application/merge-patch+json",
                _request_timeout=self._timeout(),
            ),
        )
        return patched

    def _delete(self, kind: Kind, name: str, namespace: str, propagation: str, uid: str | None) -> bool:
        options = delete_options(propagation, uid)
        deleted = self._call_or_none(
            ApiRequest("delete", kind.resource, name, namespace),
            lambda: self.custom_object_client.delete_namespaced_custom_object(
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

    def _timeout(self, preferred: float = REQUEST_TIMEOUT) -> float:
        """One request's timeout: ``preferred``, cut to the time left under the policy's deadline."""
        return self.retry_policy.request_timeout(preferred)

    # -- gang jobs of any kind, and Trainer v2 runtimes -------------------------------------------

    def create_job(self, job_kind: JobKind, body: JsonDict, namespace: str) -> JsonDict:
        """Create a gang job of ``job_kind``; as `create_pytorchjob` (retries, 409 for the caller)."""
        return self._create(Kind.of(job_kind), body, namespace)

    def get_job(self, job_kind: JobKind, name: str, namespace: str) -> JsonDict | None:
        """The gang job of ``job_kind``, or None if it does not exist."""
        return self._get(Kind.of(job_kind), name, namespace)

    def list_jobs(
        self, job_kind: JobKind, namespace: str, label_selector: str | None = None
    ) -> list[JsonDict]:
        """Gang jobs of ``job_kind`` in a namespace, optionally matching ``label_selector``."""
        return self._list(Kind.of(job_kind), namespace, label_selector)

    def delete_job(
        self,
        job_kind: JobKind,
        name: str,
        namespace: str,
        *,
        propagation: str = "Foreground",
        uid: str | None = None,
    ) -> bool:
        """Delete a gang job of ``job_kind``; False if it was already gone (as `delete_pytorchjob`)."""
        return self._delete(Kind.of(job_kind), name, namespace, propagation, uid)

    def list_job_children(self, job_kind: JobKind, name: str, namespace: str) -> list[str]:
        """What is left of the job's `JobKind.children` (a TrainJob's JobSet and batch Jobs), as
        ``"JobSet ns/name"``; empty for a kind without children or when all are gone."""
        left: list[str] = []
        for child in job_kind.children:
            kind = Kind.child(child)
            # Listed also when named, so RBAC needs `list` alone.
            labels = job_kind.pod_selector(name) if child.labelled else None
            fields = None if child.labelled else f"metadata.name={name}"
            found = [str(item["metadata"]["name"]) for item in self._list(kind, namespace, labels, fields)]
            left.extend(f"{child.kind} {namespace}/{found_name}" for found_name in found)
        return left

    def set_job_suspended(self, job_kind: JobKind, name: str, namespace: str, suspended: bool) -> JsonDict:
        """Suspend or resume a gang job: a PyTorchJob's ``spec.runPolicy.suspend``, a TrainJob's
        ``spec.suspend`` (the Trainer then suspends its JobSet, whose Jobs delete their pods)."""
        return self._merge_patch(Kind.of(job_kind), name, namespace, job_kind.suspend_patch(suspended))

    def get_training_runtime(self, name: str, kind: str, namespace: str) -> JsonDict | None:
        """A Trainer v2 runtime, or None if it does not exist.

        :param name: its name.
        :param kind: ``ClusterTrainingRuntime`` (cluster-scoped) or ``TrainingRuntime``.
        :param namespace: where a ``TrainingRuntime`` lives (the TrainJob's namespace).
        """
        if kind == TRAINING_RUNTIMES.kind:
            return self._get(TRAINING_RUNTIMES, name, namespace)
        runtimes = CLUSTER_TRAINING_RUNTIMES
        return self._call_or_none(
            ApiRequest("get", runtimes.resource, name, None),
            lambda: self.custom_object_client.get_cluster_custom_object(
                runtimes.group, runtimes.version, runtimes.plural, name, _request_timeout=self._timeout()
            ),
        )

    # -- PyTorchJob -------------------------------------------------------------------------------

    def create_pytorchjob(self, body: JsonDict, namespace: str) -> JsonDict:
        """Create a PyTorchJob; returns the stored object (with ``metadata.uid``).

        Retried on 429/5xx/connection errors. A 409 raises `GangApiError` with ``status=409``
        (after a retry it may be this call's own object whose reply was lost): the caller
        adopts the existing job if its identity labels are its own.

        :param body: the ``kubeflow.org/v1`` PyTorchJob manifest.
        :param namespace: where to create it.
        """
        return self._create(PYTORCHJOBS, body, namespace)

    def get_pytorchjob(self, name: str, namespace: str) -> JsonDict | None:
        """The PyTorchJob, or None if it does not exist.

        :param name: job name.
        :param namespace: job namespace.
        """
        return self._get(PYTORCHJOBS, name, namespace)

    def find_pytorchjobs(self, namespace: str, label_selector: str) -> list[JsonDict]:
        """PyTorchJobs matching a label selector (the operator finds an earlier try's job so).

        :param namespace: namespace to search.
        :param label_selector: e.g. ``airflow-gang.io/dag-id=d,airflow-gang.io/task-id=t``.
        """
        return self._list(PYTORCHJOBS, namespace, label_selector)

    def list_pytorchjobs(self, namespace: str, label_selector: str | None = None) -> list[JsonDict]:
        """Every PyTorchJob of a namespace, or those matching ``label_selector`` (read-only).

        :param namespace: namespace to list.
        :param label_selector: optional, e.g. ``airflow-gang.io/managed-by=airflow-gang``.
        """
        return self._list(PYTORCHJOBS, namespace, label_selector)

    def delete_pytorchjob(
        self, name: str, namespace: str, *, propagation: str = "Foreground", uid: str | None = None
    ) -> bool:
        """Delete a PyTorchJob; False if it was already gone.

        :param name: job name.
        :param namespace: job namespace.
        :param propagation: ``Foreground`` (default: the job stays, marked for deletion, until its
            pods and owned PodGroup are gone), ``Background`` or ``Orphan``.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return self._delete(PYTORCHJOBS, name, namespace, propagation, uid)

    def set_pytorchjob_suspended(self, name: str, namespace: str, suspended: bool) -> JsonDict:
        """Suspend or resume a PyTorchJob (``spec.runPolicy.suspend``, training-operator >= 1.7).

        A suspended job keeps its PodGroup (the provider's) but has no pods; resuming lets the
        training-operator create them. Jobs submitted suspended and resumed together reach the
        schedulers at the same moment (the `gang_vs_deadlock` example DAG does so).

        :param name: job name.
        :param namespace: job namespace.
        :param suspended: True to suspend, False to resume.
        """
        return self.set_job_suspended(PYTORCHJOB, name, namespace, suspended)

    # -- PodGroup and Queue -----------------------------------------------------------------------

    def create_podgroup(self, body: JsonDict, namespace: str) -> JsonDict:
        """Create a Volcano PodGroup (same retry and 409 behaviour as `create_pytorchjob`).

        :param body: the ``scheduling.volcano.sh/v1beta1`` PodGroup manifest.
        :param namespace: where to create it.
        """
        return self._create(PODGROUPS, body, namespace)

    def get_podgroup(self, name: str, namespace: str) -> JsonDict | None:
        """The PodGroup, or None if it does not exist.

        :param name: PodGroup name (the job's name).
        :param namespace: its namespace.
        """
        return self._get(PODGROUPS, name, namespace)

    def set_podgroup_owner(self, name: str, namespace: str, job: JsonDict) -> JsonDict:
        """Make the PyTorchJob own the PodGroup, so deleting the job garbage-collects it.

        A merge patch replaces ``metadata.ownerReferences`` with the one reference: the PodGroup
        is the provider's own and has no other owner. The job is its controller (a gang-enabled
        training-operator wakes the job on the group's changes only through that reference, see
        `owner_reference_patch`) and ``blockOwnerDeletion`` is True, so a Foreground delete of
        the job waits for the PodGroup.

        :param name: PodGroup name.
        :param namespace: its namespace.
        :param job: the PyTorchJob as returned by `create_pytorchjob` (needs ``metadata.uid``).
        """
        return self._merge_patch(PODGROUPS, name, namespace, owner_reference_patch(job))

    def delete_podgroup(self, name: str, namespace: str, *, uid: str | None = None) -> bool:
        """Delete a PodGroup; False if it was already gone.

        In the background: nothing depends on a PodGroup (its pods are owned by their job), so it
        goes at once, where a foreground delete would leave it, marked, until the garbage
        collector's next pass, and a PodGroup of the same name created meanwhile would collide.

        :param name: PodGroup name.
        :param namespace: its namespace.
        :param uid: delete only if the object has this uid; otherwise `GangApiError` 409.
        """
        return self._delete(PODGROUPS, name, namespace, "Background", uid)

    def get_queue(self, name: str) -> JsonDict | None:
        """The cluster-scoped Volcano Queue, or None if it does not exist.

        :param name: queue name.
        """
        return self._call_or_none(
            ApiRequest("get", QUEUES.resource, name, None),
            lambda: self.custom_object_client.get_cluster_custom_object(
                QUEUES.group, QUEUES.version, QUEUES.plural, name, _request_timeout=self._timeout()
            ),
        )

    def list_podgroups(self, namespace: str, label_selector: str | None = None) -> list[JsonDict]:
        """Every Volcano PodGroup of a namespace, or those matching ``label_selector`` (read-only).

        :param namespace: namespace to list.
        :param label_selector: optional label selector.
        """
        return self._list(PODGROUPS, namespace, label_selector)

    def list_queues(self) -> list[JsonDict]:
        """Every cluster-scoped Volcano Queue (read-only; needs ``list`` on queues in a ClusterRole)."""
        listed: JsonDict = self._call(
            ApiRequest("list", QUEUES.resource, None, None),
            lambda: self.custom_object_client.list_cluster_custom_object(
                QUEUES.group, QUEUES.version, QUEUES.plural, _request_timeout=self._timeout()
            ),
        )
        return list(listed.get("items") or [])

    def list_pods(self, namespace: str, label_selector: str | None = None) -> list[JsonDict]:
        """Pods of a namespace matching ``label_selector``, as wire dicts (read-only).

        `list_job_pods` reads one job's replicas; this reads many jobs' at once, e.g. with
        the selector ``training.kubeflow.org/job-name`` (every training-operator pod).

        :param namespace: namespace to list.
        :param label_selector: optional label selector.
        """
        selector = {"label_selector": label_selector} if label_selector else {}
        listed = self._get_json(
            ApiRequest("list", PODS.resource, None, namespace),
            lambda: self.core_v1_client.list_namespaced_pod(
                namespace, _preload_content=False, _request_timeout=self._timeout(), **selector
            ),
        )
        return list(listed.get("items") or [])

    def list_namespace_events(self, namespace: str) -> list[JsonDict]:
        """Every core event of a namespace (read-only; `list_events` reads one object's).

        The UI plugin reads them once per refresh to explain queued gangs whose PodGroup carries
        no condition yet: Volcano reports a failed enqueue (queue quota, cluster overused) only
        as an ``Unschedulable`` event on the PodGroup.

        :param namespace: namespace to list.
        """
        listed = self._get_json(
            ApiRequest("list", EVENTS.resource, None, namespace),
            lambda: self.core_v1_client.list_namespaced_event(
                namespace, _preload_content=False, _request_timeout=self._timeout()
            ),
        )
        return list(listed.get("items") or [])

    # -- pods, events and logs --------------------------------------------------------------------

    def _get_json(self, request: ApiRequest, call: Callable[[], Any]) -> Any:
        return self._call(request, lambda: read_json(call()))

    def list_job_pods(
        self, name: str, namespace: str, job_kind: JobKind = DEFAULT_JOB_KIND
    ) -> list[JsonDict]:
        """The job's pods (a PyTorchJob's by label ``training.kubeflow.org/job-name=<name>``).

        :param name: job name.
        :param namespace: job namespace.
        :param job_kind: the job's kind, whose pod label finds its pods.
        """
        listed = self._get_json(
            ApiRequest("list", PODS.resource, None, namespace),
            lambda: self.core_v1_client.list_namespaced_pod(
                namespace,
                label_selector=job_kind.pod_selector(name),
                _preload_content=False,
                _request_timeout=self._timeout(),
            ),
        )
        return list(listed.get("items") or [])

    def list_events(self, namespace: str, involved_name: str) -> list[JsonDict]:
        """Core events about one object (any kind), in the server's order.

        :param namespace: namespace of the object.
        :param involved_name: the object's name (field selector ``involvedObject.name``).
        """
        listed = self._get_json(
            ApiRequest("list", EVENTS.resource, None, namespace),
            lambda: self.core_v1_client.list_namespaced_event(
                namespace,
                field_selector=f"involvedObject.name={involved_name}",
                _preload_content=False,
                _request_timeout=self._timeout(),
            ),
        )
        return list(listed.get("items") or [])

    def read_pod_log(
        self,
        pod: str,
        namespace: str,
        *,
        container: str = "pytorch",
        tail_lines: int | None = None,
        since_seconds: int | None = None,
        previous: bool = False,
    ) -> str:
        """A container's log so far, as text.

        :param pod: pod name.
        :param namespace: pod namespace.
        :param container: container name (the training-operator's is ``pytorch``).
        :param tail_lines: only the last N lines.
        :param since_seconds: only lines from the last N seconds.
        :param previous: the log of the container's previous run (it restarted after a failure).
        """

        def read() -> str:
            # Preloaded, kubernetes 36 returns str(bytes) ("b'...'") for logs; read the raw body.
            response = self.core_v1_client.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                tail_lines=tail_lines,
                since_seconds=since_seconds,
                previous=previous or None,
                _preload_content=False,
                _request_timeout=self._timeout(),
            )
            try:
                return str(response.data.decode("utf-8", errors="replace"))
            finally:
                response.release_conn()

        return self._call(ApiRequest("get", POD_LOG_RESOURCE, pod, namespace), read)

    def stream_pod_log(self, pod: str, namespace: str, *, container: str = "pytorch") -> Iterator[str]:
        """Follow a container's log, yielding lines (without newline) until the container ends.

        Opening the stream is retried; a stream that breaks midway raises `GangApiError`
        (re-reading from a known point is the caller's choice, e.g. with ``since_seconds``).

        :param pod: pod name.
        :param namespace: pod namespace.
        :param container: container name.
        """
        request = ApiRequest("get", POD_LOG_RESOURCE, pod, namespace)
        response = self._call(
            request,
            lambda: self.core_v1_client.read_namespaced_pod_log(
                pod,
                namespace,
                container=container,
                follow=True,
                _preload_content=False,
                _request_timeout=LOG_STREAM_TIMEOUT,
            ),
        )
        try:
            yield from iter_resp_lines(response)
        except CONNECTION_ERRORS as error:
            raise unreachable_error(error, request, 1) from error
        finally:
            # Closed, not just released: a stream abandoned midway still has unread bytes, and a
            # pooled connection with leftovers would corrupt the next request on it.
            response.close()
            response.release_conn()

    # -- list + watch -----------------------------------------------------------------------------

    def _raw_list(self, kind: Kind, namespace: str, **params: Any) -> Any:
        if kind.group:
            return self.custom_object_client.list_namespaced_custom_object(
                kind.group, kind.version, namespace, kind.plural, _preload_content=False, **params
            )
        return self.core_v1_client.list_namespaced_pod(namespace, _preload_content=False, **params)

    def list_with_version(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        field_selector: str | None = None,
        label_selector: str | None = None,
    ) -> tuple[list[JsonDict], str]:
        """Items and the list's resourceVersion: where a following `open_watch` starts.

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to list.
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        """
        info = KINDS_BY_NAME[kind]
        selectors = {"field_selector": field_selector, "label_selector": label_selector}

        def listed() -> JsonDict:
            response = self._raw_list(
                info,
                namespace,
                **{key: value for key, value in selectors.items() if value},
                _request_timeout=self._timeout(),
            )
            try:
                parsed: JsonDict = json.loads(response.data)
            finally:
                response.release_conn()
            return parsed

        body = self._call(ApiRequest("list", info.resource, None, namespace), listed)
        version = str((body.get("metadata") or {}).get("resourceVersion") or "")
        return list(body.get("items") or []), version

    def open_watch(
        self,
        kind: WatchKind,
        namespace: str,
        *,
        resource_version: str,
        field_selector: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
    ) -> WatchStream:
        """Open a watch after ``resource_version`` (retried like any call); read its `events`.

        :param kind: ``pytorchjob``, ``podgroup`` or ``pod``.
        :param namespace: namespace to watch.
        :param resource_version: start after this version (from a list or the last event).
        :param field_selector: e.g. ``metadata.name=train-1``.
        :param label_selector: e.g. ``training.kubeflow.org/job-name=train-1``.
        :param timeout_seconds: server-side duration of this watch.
        """
        info = KINDS_BY_NAME[kind]
        request = ApiRequest("watch", info.resource, None, namespace)
        selectors = {"field_selector": field_selector, "label_selector": label_selector}

        def opened() -> Any:
            return self._raw_list(
                info,
                namespace,
                watch=True,
                # Bookmarks keep the resourceVersion fresh on quiet streams, so the next watch
                # rarely starts from a compacted version.
                allow_watch_bookmarks=True,
                resource_version=resource_version,
                timeout_seconds=timeout_seconds,
                _request_timeout=(REQUEST_TIMEOUT, timeout_seconds + WATCH_TIMEOUT_SLACK),
                **{key: value for key, value in selectors.items() if value},
            )

        return WatchStream(self._call(request, opened), request)

    # -- cluster checks ---------------------------------------------------------------------------

    def check_api(self, *, require_volcano: bool = False, job_kind: JobKind = DEFAULT_JOB_KIND) -> None:
        """Fail early, with the fix, when the cluster does not serve the kinds the job needs.

        :param require_volcano: also require Volcano's ``podgroups`` and ``queues`` (gang modes
            ``provider`` and ``training-operator``, and gang-scheduling Trainer runtimes).
        :param job_kind: the job's kind (PyTorchJob: the training-operator; TrainJob: Trainer v2).
        :raises GangCRDNotInstalled: naming the missing API and how to install it.
        """
        job_api = ApiRequirement.of(job_kind)
        requirements = [job_api, VOLCANO_API] if require_volcano else [job_api]
        for requirement in requirements:
            # Discovery of the group/version: 404 when no CRD of the group is installed, a list
            # without our plural when only some are.
            resources = self._call_or_none(
                ApiRequest("get", f"/apis/{requirement.group_version}"),
                partial(self._api_resources, requirement.group, requirement.version),
            )
            missing = evaluate_discovery(requirement, resources)
            if missing is not None:
                raise missing

    def _api_resources(self, group: str, version: str) -> JsonDict:
        listed: JsonDict = read_json(
            self.custom_object_client.get_api_resources(
                group, version, _preload_content=False, _request_timeout=self._timeout()
            )
        )
        return listed

    def wait_deleted(self, kind: DeletableKind, name: str, namespace: str, timeout: float) -> bool:
        """Wait until the object is gone (Foreground deletes take a while); False on timeout.

        :param kind: ``pytorchjob`` or ``podgroup``.
        :param name: object name.
        :param namespace: its namespace.
        :param timeout: seconds to wait at most.
        """
        return self.wait_gone(kind, name, namespace, timeout=timeout)

    def wait_gone(
        self, kind: DeletableKind, name: str, namespace: str, *, timeout: float, uid: str | None = None
    ) -> bool:
        """Wait until the object (the one of ``uid``, if given) is gone; False after ``timeout`` s.

        Confirmed by a watch of that one object from its current resourceVersion, so a Foreground
        delete costs a GET and one open stream, not a poll loop. If the watch cannot be opened
        or breaks, the object is polled every second instead.

        :param kind: ``pytorchjob`` or ``podgroup``.
        :param name: object name.
        :param namespace: its namespace.
        :param timeout: seconds to wait at most.
        :param uid: only this object counts: a new one under the same name is not waited for.
        """
        info = KINDS_BY_NAME[kind]
        deadline = time.monotonic() + timeout
        while True:
            found = self._get(info, name, namespace)
            if found is None or (uid is not None and found["metadata"].get("uid") != uid):
                return True
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            try:
                if self._watch_until_deleted(info, name, namespace, found["metadata"], remaining):
                    return True
            except Exception as error:  # any broken watch: fall back to a slow poll
                self.log.debug("watch of %s %s/%s failed (%s); polling", info.kind, namespace, name, error)
                time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))

    def _watch_until_deleted(
        self, kind: Kind, name: str, namespace: str, metadata: JsonDict, seconds: float
    ) -> bool:
        stream = watch.Watch().stream(
            self.custom_object_client.list_namespaced_custom_object,
            kind.group,
            kind.version,
            namespace,
            kind.plural,
            field_selector=f"metadata.name={name}",
            resource_version=metadata.get("resourceVersion"),
            timeout_seconds=max(1, int(seconds)),
            _request_timeout=self._timeout(max(1.0, seconds) + WATCH_TIMEOUT_SLACK),
        )
        for event in stream:
            if event.get("type") == "ERROR":
                raise GangApiError(f"watch of {kind.kind} {namespace}/{name} failed: {event.get('object')}")
            uid = ((event.get("object") or {}).get("metadata") or {}).get("uid")
            if event.get("type") == "DELETED" and uid == metadata.get("uid"):
                return True
        return False

    # -- handing over to the triggerer ------------------------------------------------------------

    def async_hook_kwargs(self) -> JsonDict:
        """JSON-safe kwargs for `AsyncGangJobHook` in the triggerer: what to look up, never credentials.

        They are stored in Airflow's trigger table, so by default they name the connection (the
        triggerer looks it up through its supervisor) plus this hook's non-secret overrides
        (``config_file`` path, ``cluster_context``, ``in_cluster``). A ``config_dict`` given to
        this hook has no connection to name and travels as is.

        ``[gang] kubeconfig_to_triggerer = True`` is for deployments whose kubeconfig *file*
        exists on the workers alone: the file's content and the connection's extras then travel
        in the kwargs. Airflow 3.3.2 stores the kwargs of a task's deferral as plain JSON in the
        ``trigger`` table (the Execution API does not encrypt them), so that puts readable
        credentials into the metadata database: prefer a file the triggerer can read too.
        Certificates referenced by relative paths in such a kubeconfig do not travel: use
        ``*-data`` fields.
        """
        from airflow.configuration import conf

        kwargs: JsonDict = {"conn_id": self.conn_id}
        for key, value in (
            ("config_file", self.config_file),
            ("cluster_context", self.cluster_context),
            ("in_cluster", self.in_cluster),
            ("config_dict", self.config_dict),
        ):
            if value is not None:
                kwargs[key] = value
        if not conf.getboolean("gang", "kubeconfig_to_triggerer", fallback=False):
            return kwargs
        extras: JsonDict = dict(self.conn_extras)
        path = (
            self.config_file
            or extras.get("kube_config_path")
            or extras.get("extra__kubernetes__kube_config_path")
        )
        if path:
            kwargs["config_dict"] = yaml.safe_load(Path(path).expanduser().read_text(encoding="utf-8"))
            kwargs.pop("config_file", None)
            for key in ("kube_config_path", "extra__kubernetes__kube_config_path"):
                extras.pop(key, None)
        kwargs["connection_extras"] = extras
        return kwargs

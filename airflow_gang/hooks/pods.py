"""`JobPodsMixin`: the synchronous reads of a job's pods, their events and their logs.

Mixed into `GangJobHook`, which provides ``core_v1_client`` (from `KubernetesHook`) and the
retrying ``_call``. Core objects are requested with ``_preload_content=False`` and parsed as
JSON, so they cross as wire dicts (camelCase) like the custom objects do, and no models are
built that nobody reads.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes.watch.watch import iter_resp_lines

from airflow_gang.hooks.errors import ApiRequest, unreachable_error
from airflow_gang.hooks.kinds import EVENTS, POD_LOG_RESOURCE, PODS
from airflow_gang.hooks.retrying import CONNECTION_ERRORS, REQUEST_TIMEOUT, RetryPolicy
from airflow_gang.kinds import DEFAULT_JOB_KIND, JobKind

if TYPE_CHECKING:
    from kubernetes.client import CoreV1Api

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


class JobPodsMixin:
    """Pods, events and logs of a PyTorchJob, for `GangJobHook`."""

    if TYPE_CHECKING:
        retry_policy: RetryPolicy

        @property
        def core_v1_client(self) -> CoreV1Api: ...

        def _call(self, request: ApiRequest, call: Callable[[], T]) -> T: ...

        def _timeout(self, preferred: float = REQUEST_TIMEOUT) -> float: ...

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

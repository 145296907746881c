"""The synchronous hook's calls: retries, riding out outages, and the custom-object verbs.

`CallingHook` is the base of `airflow_gang.hooks.gang.GangJobHook`: every request of the hook
goes through `CallingHook._call`, which retries transient failures (`retrying`) and, inside a
`CallingHook.riding_out` block, waits through an API outage (`airflow_gang.outage`).
"""

from __future__ import annotations

import contextlib
import contextvars
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from functools import partial
from typing import Any, TypeVar

from airflow.providers.cncf.kubernetes.hooks.kubernetes import KubernetesHook
from kubernetes.client import ApiClient

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import ApiRequest
from airflow_gang.hooks.kinds import Kind, delete_options
from airflow_gang.hooks.retrying import REQUEST_TIMEOUT, RetryPolicy, call_with_retries
from airflow_gang.outage import Outage, ride_out

T = TypeVar("T")
JsonDict = dict[str, Any]


@dataclass(frozen=True)
class _Riding:
    """An outage the calls of ``hook`` ride out in the current context (thread or task)."""

    hook: CallingHook
    outage: Outage
    name: str | None
    namespace: str | None
    sleep: Callable[[float], None]


# A context variable, not an attribute: the log follower's thread shares the operator's hook
# and must fail fast on its own, and a kill's cleanup runs in the same thread as the wait.
_riding: contextvars.ContextVar[_Riding | None] = contextvars.ContextVar("airflow_gang_riding", default=None)


class CallingHook(KubernetesHook):
    """`KubernetesHook` whose calls retry, ride out outages on request, and raise `GangApiError`.

    ``retry_policy`` may be replaced per instance or subclass.
    """

    retry_policy: RetryPolicy = RetryPolicy()

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
    def retries(self, policy: RetryPolicy) -> Iterator[CallingHook]:
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
    ) -> Iterator[CallingHook]:
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

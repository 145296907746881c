"""`GangJobHook`: every synchronous Kubernetes API call of the provider.

Built on the cncf.kubernetes `KubernetesHook`, so it takes the same ``kubernetes`` connection
(extras ``kube_config_path``, ``kube_config``, ``in_cluster``, ``cluster_context``,
``namespace``) and the same constructor arguments. `AsyncGangJobHook` (for triggers) lives in
`airflow_gang.hooks.gang_async` and is re-exported here; the pod, event and log reads come
from `airflow_gang.hooks.pods`, the retries and outage riding every call goes through from
`airflow_gang.hooks.calls`.

Contract of every method: objects cross as plain JSON dicts in wire (camelCase) form; transient
failures are retried (`retrying`); a 404 on a get or delete is ``None``/``False``; any other
failure raises a `GangApiError` naming verb, resource and namespace (`GangPermissionError` for
RBAC denials). Each request carries an explicit ``_request_timeout`` so a half-open TCP
connection cannot hang a worker; only the follow-mode log stream has no read timeout.
"""

from __future__ import annotations

import time
from functools import partial
from pathlib import Path
from typing import Any, TypeVar

import yaml
from kubernetes import watch

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import (
    VOLCANO_API,
    ApiRequest,
    ApiRequirement,
    evaluate_discovery,
)
from airflow_gang.hooks.gang_async import WATCH_TIMEOUT_SLACK, AsyncGangJobHook
from airflow_gang.hooks.job_objects import JobObjectsHook
from airflow_gang.hooks.kinds import (
    EVENTS,
    KINDS_BY_NAME,
    PODGROUPS,
    PODS,
    PYTORCHJOBS,
    QUEUES,
    REQUIRED_PERMISSIONS,
    DeletableKind,
    Kind,
    owner_reference_patch,
)
from airflow_gang.hooks.pods import JobPodsMixin, read_json
from airflow_gang.hooks.watches import SyncWatchesMixin
from airflow_gang.kinds import DEFAULT_JOB_KIND, PYTORCHJOB, JobKind

__all__ = ["REQUIRED_PERMISSIONS", "AsyncGangJobHook", "GangJobHook"]

T = TypeVar("T")
JsonDict = dict[str, Any]


class GangJobHook(JobPodsMixin, SyncWatchesMixin, JobObjectsHook):
    """Synchronous API calls for gang-scheduled PyTorchJobs: the job, its PodGroup, queue, pods, logs.

    Constructor arguments and connection extras are `KubernetesHook`'s (``conn_id``,
    ``config_file``, ``in_cluster``, ``cluster_context``, ``config_dict``, ...).
    ``retry_policy`` may be replaced per instance or subclass.
    """

    hook_name = "Gang-scheduled PyTorchJob (Kubernetes)"

    # -- PyTorchJob ----------------------------------------------------------------------------

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

    # -- PodGroup and Queue --------------------------------------------------------------------

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

    # -- cluster checks ------------------------------------------------------------------------

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

    # -- handing over to the triggerer ---------------------------------------------------------

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

"""Reads what `airflow_gang.model.capacity` needs, through `GangJobHook`, and only reads.

Queues, PodGroups and the shown namespaces' pods come from the hook's own list calls. Nodes,
the bound pods of every namespace and PriorityClasses are cluster-scoped reads the hook has no
method for: they go through the hook's official client, retried by the hook's policy like its
own calls. A cluster may deny them to the page's service account (403): the page then shows
what could be read, plus a warning naming the ClusterRole rule to add, instead of failing.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from functools import partial
from typing import Any

from kubernetes import client as k8s

from airflow_gang.exceptions import GangApiError
from airflow_gang.hooks.errors import ApiRequest
from airflow_gang.hooks.gang import GangJobHook, read_json
from airflow_gang.hooks.retrying import call_with_retries
from airflow_gang.model.capacity import ClusterCapacity, compute_capacity

JsonDict = dict[str, Any]

# The read-only rules these reads add to deploy/rbac.yaml's ClusterRole (tests/deploy/test_rbac.py).
CLUSTER_READ_PERMISSIONS: tuple[tuple[str, str, str], ...] = (
    ("", "nodes", "list"),
    ("", "pods", "list"),
    ("scheduling.k8s.io", "priorityclasses", "list"),
)
# What kube-scheduler itself watches as "assigned pods": bound and not finished, i.e. holding
# resources. Both fields are pod field selectors every kube-apiserver serves.
HOLDING_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"


def read_capacity(hook: GangJobHook, namespaces: Sequence[str]) -> ClusterCapacity:
    """Cluster totals, queues and the waiting gangs of ``namespaces``, from one round of reads.

    :param hook: the hook to read with (e.g. `ClusterReader`'s, with its fast-failing retry policy).
    :param namespaces: the namespaces whose PodGroups the page shows.
    """
    warnings: list[str] = []
    core = hook.core_v1_client
    nodes = _cluster_list(
        hook,
        ApiRequest("list", "nodes"),
        lambda timeout: core.list_node(_preload_content=False, _request_timeout=timeout),
        warnings,
        "cluster totals and free resources are unknown",
    )
    holding = _cluster_list(
        hook,
        ApiRequest("list", "pods"),
        lambda timeout: core.list_pod_for_all_namespaces(
            field_selector=HOLDING_PODS, _preload_content=False, _request_timeout=timeout
        ),
        warnings,
        f"only pods of {', '.join(namespaces)} are counted as allocated",
    )
    scheduling = k8s.SchedulingV1Api(hook.api_client)
    priority_classes = _cluster_list(
        hook,
        ApiRequest("list", "priorityclasses.scheduling.k8s.io"),
        lambda timeout: scheduling.list_priority_class(_preload_content=False, _request_timeout=timeout),
        warnings,
        "gangs are ordered as if every priority were 0",
    )
    queues: list[JsonDict] = _volcano_list(hook.list_queues, "Queues", warnings) or []
    podgroups: list[JsonDict] = []
    pods = {_pod_key(pod): pod for pod in holding or []}
    for namespace in namespaces:
        read_podgroups = partial(hook.list_podgroups, namespace)
        podgroups += _volcano_list(read_podgroups, f"PodGroups of {namespace}", warnings) or []
        # Unbound pods too: a PodGroup without minResources is weighed by its pods' requests.
        pods.update((_pod_key(pod), pod) for pod in hook.list_pods(namespace))
    return compute_capacity(
        nodes=nodes,
        pods=list(pods.values()),
        queues=queues,
        podgroups=podgroups,
        priority_classes=priority_classes or [],
        warnings=warnings,
    )


def _pod_key(pod: JsonDict) -> tuple[str, str]:
    return str(pod["metadata"].get("namespace")), str(pod["metadata"]["name"])


def _cluster_list(
    hook: GangJobHook,
    request: ApiRequest,
    call: Callable[[float], Any],
    warnings: list[str],
    consequence: str,
) -> list[JsonDict] | None:
    """The items of a cluster-wide list, or None (and a warning naming the rule) when denied."""
    try:
        listed = call_with_retries(
            lambda: read_json(call(hook.retry_policy.request_timeout())), request, hook.retry_policy, hook.log
        )
    except GangApiError as error:
        if error.status != 403:
            raise
        warnings.append(f"missing RBAC rule {request.resource}: {request.verb} (ClusterRole): {consequence}")
        return None
    return list(listed.get("items") or [])


def _volcano_list(
    call: Callable[[], list[JsonDict]], what: str, warnings: list[str]
) -> list[JsonDict] | None:
    """A Volcano list, or None (and a warning) when Volcano is not installed or the read is denied."""
    try:
        return call()
    except GangApiError as error:
        if error.status not in (403, 404):
            raise
        warnings.append(f"cannot read Volcano {what} (HTTP {error.status}): {error}")
        return None

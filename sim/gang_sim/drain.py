"""``kubectl drain --ignore-daemonsets --delete-emptydir-data`` from Python, for tests and the CLI.

What ``k8s.io/kubectl`` does at ``kubernetes-1.36.3`` (``pkg/cmd/drain/drain.go`` ``RunDrain``,
``pkg/drain``), through any API server — the simulator's or a real one:

1. Cordon (``pkg/cmd/drain/drain.go:325-335``): ``spec.unschedulable: true``, a strategic
   merge patch (``pkg/drain/cordon.go:81-100``); the node lifecycle controller then adds the
   ``node.kubernetes.io/unschedulable:NoSchedule`` taint.
2. List the node's pods (field selector ``spec.nodeName``) and filter them as
   ``pkg/drain/filters.go:152-161`` does: DaemonSet pods that have not finished and mirror pods
   are skipped (``--ignore-daemonsets``); pods using ``emptyDir`` go too
   (``--delete-emptydir-data``); pods with no controller stop the drain unless ``force``
   (``--force``), before any is evicted. Finished pods are evicted like the others, as kubectl
   does.
3. Evict each through the Eviction API with the pod's own grace period (``--grace-period -1``)
   or ``grace_period_seconds``. A 429 (a PodDisruptionBudget says no) is retried every
   ``retry_interval`` seconds (kubectl's ``EvictErrorRetryDelay``, 5 s,
   ``pkg/drain/drain.go:311-314``), a 404 counts as done, anything else stops the drain.
4. Wait for every evicted pod to be gone (or replaced by a pod of another UID), looking every
   second, as kubectl does (``pkg/drain/drain.go:341-354``).

Unlike kubectl, which fails when ``--timeout`` passes, `drain_node` returns a `DrainResult`
saying which pods were evicted, which a budget still blocked at ``timeout`` and which were
evicted but not gone yet (a pod on a dead node stays ``Terminating``). ``airflow-gang sim drain``
and ``sim uncordon`` are the command-line form (``gang_sim.cli``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

from kubernetes import client as k8s

DAEMONSET_KIND = "DaemonSet"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
WAIT_INTERVAL = 1.0  # kubectl polls for an evicted pod's deletion every second


class DrainError(RuntimeError):
    """The drain cannot go on (pods without a controller and no ``force``, an unexpected error)."""


@dataclass
class DrainResult:
    """What a drain did; pods are named ``namespace/name``."""

    node: str
    evicted: list[str] = field(default_factory=list)
    blocked: list[str] = field(default_factory=list)  # still refused (429) when time ran out
    terminating: list[str] = field(default_factory=list)  # evicted, still there when time ran out
    skipped: list[str] = field(default_factory=list)  # DaemonSet and mirror pods

    @property
    def complete(self) -> bool:
        """Every pod that had to go is gone: what ``kubectl drain`` reports as ``drained``."""
        return not self.blocked and not self.terminating


def cordon(core_v1: k8s.CoreV1Api, node: str, unschedulable: bool = True) -> None:
    """``kubectl cordon`` (``uncordon`` with False)."""
    core_v1.patch_node(node, {"spec": {"unschedulable": unschedulable or None}})


def _key(pod: k8s.V1Pod) -> str:
    return f"{pod.metadata.namespace}/{pod.metadata.name}"


def _controller(pod: k8s.V1Pod) -> k8s.V1OwnerReference | None:
    return next((ref for ref in pod.metadata.owner_references or [] if ref.controller), None)


def _sort_pods(pods: list[k8s.V1Pod], force: bool) -> tuple[list[k8s.V1Pod], list[str]]:
    """(pods to evict, pods skipped), as kubectl's filters sort them."""
    evict, skipped, unmanaged = [], [], []
    for pod in pods:
        controller = _controller(pod)
        finished = (pod.status.phase if pod.status else None) in ("Succeeded", "Failed")
        if controller is not None and controller.kind == DAEMONSET_KIND and not finished:
            skipped.append(_key(pod))  # "ignoring DaemonSet-managed Pods"
        elif MIRROR_ANNOTATION in (pod.metadata.annotations or {}):
            skipped.append(_key(pod))
        else:
            if controller is None and not finished and not force:
                unmanaged.append(_key(pod))
            evict.append(pod)
    if unmanaged:
        raise DrainError(
            "cannot delete Pods that declare no controller (use --force to override): " + ", ".join(unmanaged)
        )
    return evict, skipped


def drain_node(
    core_v1: k8s.CoreV1Api,
    node: str,
    *,
    timeout: float,
    retry_interval: float = 5.0,
    grace_period_seconds: int | None = None,
    force: bool = False,
    echo: Callable[[str], None] | None = None,
) -> DrainResult:
    """Cordon ``node`` and evict its pods as ``kubectl drain --ignore-daemonsets
    --delete-emptydir-data`` does (see the module docstring); returns within ``timeout`` seconds.

    :param grace_period_seconds: the evictions' grace period (None: each pod's own).
    :param force: evict pods that have no controller too (kubectl's ``--force``).
    :param echo: called with kubectl's progress lines ("evicting pod ...", the 429 retries).
    :raises DrainError: pods without a controller and no ``force``, or an eviction refused for
        another reason than a disruption budget.
    """
    say = echo or (lambda line: None)
    deadline = time.monotonic() + timeout
    cordon(core_v1, node)
    say(f"node/{node} cordoned")
    listed = core_v1.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={node}").items
    pods, skipped = _sort_pods(listed, force)
    result = DrainResult(node, skipped=skipped)
    if skipped:
        say(f"Warning: ignoring DaemonSet-managed and mirror Pods: {', '.join(skipped)}")
    waiting = {_key(pod): pod for pod in pods}
    evicted: dict[str, str] = {}  # key -> UID
    while waiting:
        for key, pod in list(waiting.items()):
            say(f"evicting pod {key}")
            if _evict(core_v1, pod, grace_period_seconds, retry_interval, say):
                evicted[key] = pod.metadata.uid
                del waiting[key]
        remaining = deadline - time.monotonic()
        if not waiting or remaining <= 0:
            break
        time.sleep(min(retry_interval, remaining))
    result.evicted = sorted(evicted)
    result.blocked = sorted(waiting)
    result.terminating = _wait_gone(core_v1, evicted, deadline)
    for key in result.evicted:
        if key not in result.terminating:
            say(f"pod/{key.split('/', 1)[1]} evicted")
    if result.complete:
        say(f"node/{node} drained")
    return result


def _evict(
    core_v1: k8s.CoreV1Api,
    pod: k8s.V1Pod,
    grace_period_seconds: int | None,
    retry_interval: float,
    say: Callable[[str], None],
) -> bool:
    """One eviction; True when the pod is evicted (or gone), False when a budget refused it."""
    name, namespace = pod.metadata.name, pod.metadata.namespace
    options = k8s.V1DeleteOptions(grace_period_seconds=grace_period_seconds)
    body = k8s.V1Eviction(
        metadata=k8s.V1ObjectMeta(name=name, namespace=namespace),
        delete_options=options if grace_period_seconds is not None else None,
    )
    try:
        core_v1.create_namespaced_pod_eviction(name, namespace, body)
    except k8s.ApiException as error:
        if error.status == 404:
            return True
        if error.status == 429:
            say(
                f'error when evicting pods/"{name}" -n "{namespace}" (will retry after {retry_interval:g}s): '
                f"{_message(error)}"
            )
            return False
        raise DrainError(f'error when evicting pods/"{name}" -n "{namespace}": {_message(error)}') from error
    return True


def _message(error: k8s.ApiException) -> str:
    try:
        return str(json.loads(error.body).get("message") or error.reason)
    except (TypeError, ValueError):
        return str(error.reason)


def _wait_gone(core_v1: k8s.CoreV1Api, evicted: dict[str, str], deadline: float) -> list[str]:
    """Wait until each evicted pod is gone or replaced; those still there at ``deadline``."""
    left = dict(evicted)
    while left:
        for key, uid in list(left.items()):
            namespace, name = key.split("/", 1)
            try:
                current = core_v1.read_namespaced_pod(name, namespace)
            except k8s.ApiException as error:
                if error.status != 404:
                    raise
                del left[key]
                continue
            if current.metadata.uid != uid:
                del left[key]
        remaining = deadline - time.monotonic()
        if not left or remaining <= 0:
            break
        time.sleep(min(WAIT_INTERVAL, remaining))
    return sorted(left)

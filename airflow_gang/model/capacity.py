"""How full the cluster and each Volcano queue are, and how far each waiting gang is from starting.

Pure: wire-form dicts in (nodes, pods, Volcano Queues, PodGroups, PriorityClasses, as the API
returns them), typed results out, no I/O. The "Gang jobs" page shows them so that a user can tell
why a gang waits and how many gangs Volcano will consider before it (Volcano's enqueue checks
and order: ``docs/architecture.md#volcano-session``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields, is_dataclass
from decimal import Decimal
from typing import Any

from airflow_gang.model.quantity import QuantityError, format_quantity, parse_quantity

JsonDict = dict[str, Any]
Resources = dict[str, Decimal]
Key = tuple[str, str]

GPU = "nvidia.com/gpu"
SHOWN_RESOURCES = (GPU, "cpu", "memory")
GROUP_ANNOTATION = "scheduling.k8s.io/group-name"  # the only pod -> PodGroup link Volcano reads
FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
WAITING_PHASES = frozenset({"", "Pending", "Inqueue"})
_UNKNOWN_AGE = dt.datetime.max.replace(tzinfo=dt.UTC)


def parse_resources(amounts: Mapping[str, Any] | None) -> Resources:
    """A ResourceList as exact decimals; a value the API server let through but we cannot read is skipped."""
    parsed: Resources = {}
    for name, amount in (amounts or {}).items():
        try:
            parsed[name] = parse_quantity(amount)
        except QuantityError:
            continue
    return parsed


def _sum(resource_lists: Iterable[Mapping[str, Decimal]]) -> Resources:
    total: Resources = {}
    for resources in resource_lists:
        for name, amount in resources.items():
            total[name] = total.get(name, Decimal(0)) + amount
    return total


def pod_request(pod: JsonDict) -> Resources:
    """What a scheduler reserves for a pod: its containers' requests summed (a limit stands in for a
    missing request, as the API server defaults it), or its largest init container's if larger."""
    spec = pod.get("spec") or {}

    def request(container: JsonDict) -> Resources:
        resources = container.get("resources") or {}
        return parse_resources({**(resources.get("limits") or {}), **(resources.get("requests") or {})})

    total = _sum(request(container) for container in spec.get("containers") or [])
    for init in spec.get("initContainers") or []:
        for name, amount in request(init).items():
            total[name] = max(total.get(name, Decimal(0)), amount)
    return total


def holds_resources(pod: JsonDict) -> bool:
    """A pod bound to a node holds its requests until it finishes, whoever scheduled it."""
    phase = (pod.get("status") or {}).get("phase")
    return bool((pod.get("spec") or {}).get("nodeName")) and phase not in FINISHED_POD_PHASES


def node_is_schedulable(node: JsonDict) -> bool:
    """Cordoned and NotReady nodes are left out of Volcano's session snapshot, so out of the totals."""
    if (node.get("spec") or {}).get("unschedulable"):
        return False
    conditions = (node.get("status") or {}).get("conditions") or []
    ready = next((c for c in conditions if c.get("type") == "Ready"), None)
    return ready is None or ready.get("status") == "True"


def priority_values(priority_classes: Iterable[JsonDict]) -> tuple[dict[str, int], int]:
    """PriorityClass name -> value, and the value of a group naming no (or an unknown) class:
    the globalDefault class's, else 0 — as vc-scheduler's cache resolves a job's priority."""
    classes = list(priority_classes)
    values = {str(pc["metadata"]["name"]): int(pc.get("value") or 0) for pc in classes}
    default = next((int(pc.get("value") or 0) for pc in classes if pc.get("globalDefault")), 0)
    return values, default


def _priority(podgroup: JsonDict, values: Mapping[str, int], default: int) -> int:
    return values.get(str((podgroup.get("spec") or {}).get("priorityClassName") or ""), default)


def _created(podgroup: JsonDict) -> dt.datetime:
    stamp = (podgroup.get("metadata") or {}).get("creationTimestamp")
    try:
        created = dt.datetime.fromisoformat(str(stamp))
    except ValueError:
        return _UNKNOWN_AGE
    return created if created.tzinfo else created.replace(tzinfo=dt.UTC)


def _key(obj: JsonDict) -> Key:
    return str(obj["metadata"].get("namespace") or ""), str(obj["metadata"]["name"])


def admission_order(podgroups: Iterable[JsonDict], priority_classes: Iterable[JsonDict]) -> list[JsonDict]:
    """PodGroups in the order Volcano's enqueue considers them within a queue: higher priority
    first, then older (creationTimestamp, 1 s resolution), then namespace/name."""
    values, default = priority_values(priority_classes)
    return sorted(podgroups, key=lambda pg: (-_priority(pg, values, default), _created(pg), _key(pg)))


class _Json:
    def to_json(self) -> JsonDict:
        """Plain JSON: snake_case keys, quantities as Kubernetes strings ("4", "500m", "64Gi")."""
        return dict(_jsonable(self, ""))


@dataclass(frozen=True)
class ResourceUse:
    """One resource over the schedulable nodes; ``allocatable`` and ``free`` are None when the
    nodes could not be read."""

    allocatable: Decimal | None
    allocated: Decimal
    free: Decimal | None

    def to_json(self, resource: str = "") -> JsonDict:
        """Amounts as quantity strings of ``resource`` (its name picks binary units for memory)."""
        return dict(_jsonable(self, resource))


@dataclass(frozen=True)
class QueueCapacity(_Json):
    """A Volcano queue: its limits, what its gangs hold and wait for, and what it could still start.

    ``allocated`` is, per resource, the larger of what bound pods of the queue's PodGroups hold
    now and Volcano's ``status.allocated``: the pods are fresher than the status (written once a
    session), the status also counts PodGroups in namespaces the page does not read.
    ``free`` = min(capability - allocated, cluster free) per resource; a resource missing from it
    is unknown (no capability and no readable nodes). ``capability`` None means unlimited.
    """

    name: str
    state: str | None
    capability: Resources | None
    deserved: Resources | None
    guarantee: Resources | None
    allocated: Resources
    pending: Resources
    free: Resources
    waiting_gangs: int


@dataclass(frozen=True)
class WaitingGang(_Json):
    """A PodGroup not yet admitted, where it stands in its queue, and that said in one sentence."""

    namespace: str
    name: str
    queue: str
    phase: str
    priority: int
    priority_class: str | None
    created: str | None
    needs: Resources
    gangs_ahead: int
    never_fits: bool
    summary: str


@dataclass
class ClusterCapacity(_Json):
    """Cluster totals, every queue, and the waiting gangs (each queue's in admission order)."""

    resources: dict[str, ResourceUse]
    queues: list[QueueCapacity]
    waiting: list[WaitingGang]
    warnings: list[str] = field(default_factory=list)

    def gang(self, namespace: str, name: str) -> WaitingGang | None:
        return next((g for g in self.waiting if (g.namespace, g.name) == (namespace, name)), None)


def _jsonable(value: Any, resource: str) -> Any:
    """Dataclasses to dicts; a Decimal rendered as the quantity of ``resource``, the key of the
    mapping it sits in (resource lists and the per-resource totals are keyed by resource)."""
    if isinstance(value, Decimal):
        return _number(resource, value)
    if is_dataclass(value):
        return {f.name: _jsonable(getattr(value, f.name), resource) for f in fields(value)}
    if isinstance(value, Mapping):
        return {key: _jsonable(value[key], key) for key in _display_order(value)}
    if isinstance(value, list):
        return [_jsonable(item, resource) for item in value]
    return value


def compute_capacity(
    *,
    nodes: Sequence[JsonDict] | None,
    pods: Sequence[JsonDict],
    queues: Sequence[JsonDict],
    podgroups: Sequence[JsonDict],
    priority_classes: Sequence[JsonDict] = (),
    warnings: Sequence[str] = (),
) -> ClusterCapacity:
    """Totals, queues and waiting gangs from one read of the cluster.

    :param nodes: every Node, or None when they could not be read (cluster totals unknown).
    :param pods: every pod that may hold resources, of all namespaces: pods the default
        kube-scheduler placed and pods of no PodGroup hold GPUs too.
    :param queues: every Volcano Queue.
    :param podgroups: the PodGroups of the namespaces shown.
    :param priority_classes: every PriorityClass (none: every gang at priority 0).
    :param warnings: what could not be read, passed on to the page.
    """
    members: dict[Key, list[JsonDict]] = {}
    for pod in pods:
        group = ((pod.get("metadata") or {}).get("annotations") or {}).get(GROUP_ANNOTATION)
        if group:
            members.setdefault((_key(pod)[0], str(group)), []).append(pod)
    waiting = [pg for pg in podgroups if _is_waiting(pg, members.get(_key(pg), []))]
    needs = {_key(pg): _needs(pg, members.get(_key(pg), [])) for pg in waiting}
    capped = {r for q in queues for r in parse_resources((q.get("spec") or {}).get("capability"))}
    names = _display_order(
        {*SHOWN_RESOURCES, *capped, *(r for need in needs.values() for r in need)} - {"pods"}
    )
    totals = _cluster_totals(nodes, pods, names)
    queue_capacity = {
        str(q["metadata"]["name"]): _queue_capacity(q, podgroups, members, needs, totals) for q in queues
    }
    values, default = priority_values(priority_classes)
    gangs: list[WaitingGang] = []
    for queue in sorted({_queue_of(pg) for pg in waiting}):
        in_line = admission_order([pg for pg in waiting if _queue_of(pg) == queue], priority_classes)
        for ahead, podgroup in enumerate(in_line):
            need = needs[_key(podgroup)]
            summary, never = explain(need, queue, queue_capacity.get(queue), totals, ahead)
            gangs.append(
                WaitingGang(
                    *_key(podgroup),
                    queue=queue,
                    phase=(podgroup.get("status") or {}).get("phase") or "Pending",
                    priority=_priority(podgroup, values, default),
                    priority_class=(podgroup.get("spec") or {}).get("priorityClassName"),
                    created=podgroup["metadata"].get("creationTimestamp"),
                    needs=need,
                    gangs_ahead=ahead,
                    never_fits=never,
                    summary=summary,
                )
            )
    return ClusterCapacity(totals, list(queue_capacity.values()), gangs, list(warnings))


def _queue_of(podgroup: JsonDict) -> str:
    return str((podgroup.get("spec") or {}).get("queue") or "default")


def _is_waiting(podgroup: JsonDict, members: list[JsonDict]) -> bool:
    """Not past the enqueue gate, or past it without ``minMember`` pods bound (as in `gang_status`)."""
    phase = (podgroup.get("status") or {}).get("phase") or ""
    bound = sum(1 for pod in members if (pod.get("spec") or {}).get("nodeName"))
    return phase in WAITING_PHASES and bound < int((podgroup.get("spec") or {}).get("minMember") or 0)


def _needs(podgroup: JsonDict, members: list[JsonDict]) -> Resources:
    """What the enqueue gate weighs: ``minResources``, else what the member pods request."""
    declared = parse_resources((podgroup.get("spec") or {}).get("minResources"))
    return declared or _sum(pod_request(pod) for pod in members)


def _cluster_totals(
    nodes: Sequence[JsonDict] | None, pods: Sequence[JsonDict], names: list[str]
) -> dict[str, ResourceUse]:
    holding = [pod for pod in pods if holds_resources(pod)]
    allocatable: Resources | None = None
    if nodes is not None:
        counted = [n for n in nodes if node_is_schedulable(n)]
        statuses = [n.get("status") or {} for n in counted]
        allocatable = _sum(parse_resources(s.get("allocatable") or s.get("capacity")) for s in statuses)
        # A pod on a cordoned node holds that node's resources, which the totals leave out too.
        counted_names = {n["metadata"]["name"] for n in counted}
        holding = [pod for pod in holding if pod["spec"]["nodeName"] in counted_names]
    allocated = _sum(pod_request(pod) for pod in holding)
    totals = {}
    for name in names:
        held = allocated.get(name, Decimal(0))
        total = None if allocatable is None else allocatable.get(name, Decimal(0))
        totals[name] = ResourceUse(total, held, None if total is None else max(Decimal(0), total - held))
    return totals


def _queue_capacity(
    queue: JsonDict,
    podgroups: Sequence[JsonDict],
    members: Mapping[Key, list[JsonDict]],
    needs: Mapping[Key, Resources],
    totals: Mapping[str, ResourceUse],
) -> QueueCapacity:
    name, spec, status = str(queue["metadata"]["name"]), queue.get("spec") or {}, queue.get("status") or {}
    own = [pg for pg in podgroups if _queue_of(pg) == name]
    held = _sum(pod_request(p) for pg in own for p in members.get(_key(pg), []) if holds_resources(p))
    reported = parse_resources(status.get("allocated"))
    allocated = {r: max(held.get(r, Decimal(0)), reported.get(r, Decimal(0))) for r in {*held, *reported}}
    capability = parse_resources(spec["capability"]) if spec.get("capability") is not None else None
    free: Resources = {}
    for resource, use in totals.items():
        limits = [] if use.free is None else [use.free]
        if capability is not None and resource in capability:
            limits.append(max(Decimal(0), capability[resource] - allocated.get(resource, Decimal(0))))
        if limits:
            free[resource] = min(limits)
    guarantee = (spec.get("guarantee") or {}).get("resource")
    waiting = [needs[_key(pg)] for pg in own if _key(pg) in needs]
    return QueueCapacity(
        name=name,
        state=status.get("state"),
        capability=capability,
        deserved=parse_resources(spec["deserved"]) if spec.get("deserved") is not None else None,
        guarantee=parse_resources(guarantee) if guarantee is not None else None,
        allocated=allocated,
        pending=_sum(waiting),
        free=free,
        waiting_gangs=len(waiting),
    )


def explain(
    needs: Resources,
    queue_name: str,
    queue: QueueCapacity | None,
    cluster: Mapping[str, ResourceUse],
    ahead: int,
) -> tuple[str, bool]:
    """One sentence on why a gang waits, and whether it can never start as things are configured."""
    if queue is None:
        return f"queue {queue_name} does not exist: it can never start", True
    wanted = {r: a for r, a in needs.items() if a > 0}
    for resource in _display_order(wanted):
        need = f"needs {_amount(resource, wanted[resource])}"
        total = cluster[resource].allocatable if resource in cluster else None
        if total is not None and wanted[resource] > total:
            return f"{need}; the cluster has {_number(resource, total)} in all: it can never start", True
        cap = (queue.capability or {}).get(resource)
        if cap is not None and wanted[resource] > cap:
            return (
                f"{need}; queue {queue_name} is capped at {_number(resource, cap)}: it can never start",
                True,
            )
    state = f"queue {queue_name} is {queue.state}; " if queue.state not in (None, "Open") else ""
    in_line = "no gang ahead" if ahead == 0 else f"{ahead} gang{'s' if ahead > 1 else ''} ahead"
    if not wanted:
        return f"{state}needs no resources Volcano can see yet (no minResources, no pods); {in_line}", False
    short = [r for r in _display_order(wanted) if r in queue.free and wanted[r] > queue.free[r]]
    focus = short or ([GPU] if GPU in wanted else _display_order(wanted))
    unknown = [r for r in focus if r not in queue.free]
    if unknown:
        free = f"free {' and '.join(_noun(r) for r in unknown)} unknown (nodes not readable)"
    elif len(focus) == 1:
        free = f"{_number(focus[0], queue.free[focus[0]])} free in queue {queue_name}"
    else:
        free = f"{' and '.join(_amount(r, queue.free[r]) for r in focus)} free in queue {queue_name}"
    if not unknown and not any(r in (queue.capability or {}) for r in focus):
        free += " (capability unlimited)"  # the cluster, not the queue, is what is short
    return f"{state}needs {' and '.join(_amount(r, wanted[r]) for r in focus)}; {free}; {in_line}", False


def _display_order(names: Iterable[str]) -> list[str]:
    """GPUs, CPUs, memory first (what a page reader looks for), then the rest by name."""
    unique = set(names)
    return [r for r in SHOWN_RESOURCES if r in unique] + sorted(unique - set(SHOWN_RESOURCES))


def _number(resource: str, amount: Decimal) -> str:
    return format_quantity(amount, binary=resource == "memory" or "storage" in resource)


def _noun(resource: str, plural: bool = True) -> str:
    names = {GPU: "GPU", "cpu": "CPU"}
    return f"{names[resource]}{'s' if plural else ''}" if resource in names else resource


def _amount(resource: str, amount: Decimal) -> str:
    return f"{_number(resource, amount)} {_noun(resource, plural=amount != 1 and amount % 1 == 0)}"

"""Defaulting, admission and validation of the built-in kinds (pods, services, namespaces...).

These are the hooks the rows in ``../resources.py`` name. They reproduce what real clients see:
a new pod comes back ``Pending`` with ``restartPolicy: Always``, ``dnsPolicy: ClusterFirst``,
``schedulerName: default-scheduler``, a QoS class, requests copied from limits and its
priority resolved from its PriorityClass (the Priority admission plugin); a service gets a
cluster IP; pod specs are immutable apart from the few fields upstream allows.
"""

from __future__ import annotations

import copy
import random
from typing import Any

from gang_sim.apiserver.errors import Cause, Forbidden, forbidden, invalid, not_supported, required
from gang_sim.apiserver.registry import ClusterView, Operation
from gang_sim.apiserver.validation import dns1123_label_errors

JsonDict = dict[str, Any]

SYSTEM_PRIORITY_CLASSES = {"system-cluster-critical": 2000000000, "system-node-critical": 2000001000}
MAX_USER_PRIORITY = 1000000000
_RESTART_POLICIES = ["Always", "OnFailure", "Never"]


# --- pods -------------------------------------------------------------------------------------


def _default_container(container: JsonDict) -> None:
    container.setdefault("terminationMessagePath", "/dev/termination-log")
    container.setdefault("terminationMessagePolicy", "File")
    image = str(container.get("image") or "")
    tag = image.rpartition(":")[2] if ":" in image.rpartition("/")[2] else ""
    if "@" not in image:
        container.setdefault("imagePullPolicy", "Always" if tag in ("", "latest") else "IfNotPresent")
    else:
        container.setdefault("imagePullPolicy", "IfNotPresent")
    resources = container.setdefault("resources", {})
    for kind in ("limits", "requests"):
        if isinstance(resources.get(kind), dict):
            # Quantities are serialised as strings by the API (``1`` comes back as ``"1"``).
            resources[kind] = {name: str(value) for name, value in resources[kind].items()}
    limits = resources.get("limits") or {}
    if limits:
        # Upstream defaulting: a resource with a limit and no request requests its limit.
        requests = resources.setdefault("requests", {})
        for name, value in limits.items():
            requests.setdefault(name, value)
    for port in container.get("ports") or []:
        port.setdefault("protocol", "TCP")


def qos_class(spec: JsonDict) -> str:
    containers = [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]
    any_set = False
    guaranteed = True
    for c in containers:
        resources = c.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        if requests or limits:
            any_set = True
        for name in ("cpu", "memory"):
            if name not in limits or str(requests.get(name, limits.get(name))) != str(limits[name]):
                guaranteed = False
    if not any_set:
        return "BestEffort"
    return "Guaranteed" if guaranteed else "Burstable"


# kube-apiserver's --default-not-ready-toleration-seconds and --default-unreachable-toleration-seconds
# (the DefaultTolerationSeconds admission plugin); the simulator's API server defaults to
# `SIM_TOLERATION_SECONDS` instead (`ServerConfig`), so that a failed node's pods go in seconds.
UPSTREAM_TOLERATION_SECONDS = 300
SIM_TOLERATION_SECONDS = 3
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
UNREACHABLE_TAINT = "node.kubernetes.io/unreachable"


def default_pod(
    op: Operation,
    pod: JsonDict,
    old: JsonDict | None,
    view: ClusterView,
    *,
    not_ready_seconds: int = UPSTREAM_TOLERATION_SECONDS,
    unreachable_seconds: int = UPSTREAM_TOLERATION_SECONDS,
) -> None:
    if op != "CREATE":
        return
    spec = pod.setdefault("spec", {})
    spec.setdefault("restartPolicy", "Always")
    spec.setdefault("dnsPolicy", "ClusterFirst")
    spec.setdefault("schedulerName", "default-scheduler")
    spec.setdefault("terminationGracePeriodSeconds", 30)
    spec.setdefault("securityContext", {})
    spec.setdefault("enableServiceLinks", True)
    for container in [*(spec.get("containers") or []), *(spec.get("initContainers") or [])]:
        if isinstance(container, dict):
            _default_container(container)
    tolerations = spec.setdefault("tolerations", [])
    # The DefaultTolerationSeconds admission plugin, on by default in real clusters: a pod that
    # has no NoExecute toleration of its own for a key gets one for so many seconds.
    for key, seconds in ((NOT_READY_TAINT, not_ready_seconds), (UNREACHABLE_TAINT, unreachable_seconds)):
        if not any(_tolerates_no_execute(t, key) for t in tolerations if isinstance(t, dict)):
            tolerations.append(
                {"key": key, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": seconds}
            )
    pod["status"] = {"phase": "Pending", "qosClass": qos_class(spec)}


def _tolerates_no_execute(toleration: JsonDict, key: str) -> bool:
    """The plugin's test: the toleration has the key (or none) and NoExecute (or no effect)."""
    return toleration.get("key") in (key, None, "") and toleration.get("effect") in ("NoExecute", None, "")


def global_default_class(view: ClusterView) -> JsonDict | None:
    defaults = [pc for pc in view.objects("scheduling.k8s.io", "priorityclasses") if pc.get("globalDefault")]
    # Upstream picks the lowest value when several exist (possible only through races).
    return min(defaults, key=lambda pc: int(pc.get("value", 0)), default=None)


def admit_pod_priority(op: Operation, pod: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    """The Priority admission plugin: resolve ``priorityClassName`` into ``priority``."""
    if op != "CREATE":
        return
    spec = pod.setdefault("spec", {})
    name = (pod.get("metadata") or {}).get("name", "")
    class_name = spec.get("priorityClassName")
    value, policy = 0, "PreemptLowerPriority"
    if class_name:
        found = view.lookup("scheduling.k8s.io", "priorityclasses", "", class_name)
        if found is None:
            raise Forbidden("pods", name, f"no PriorityClass with name {class_name} was found")
        value, policy = int(found.get("value", 0)), found.get("preemptionPolicy", policy)
    else:
        default = global_default_class(view)
        if default is not None:
            spec["priorityClassName"] = default["metadata"]["name"]
            value, policy = int(default.get("value", 0)), default.get("preemptionPolicy", policy)
    if "priority" in spec and spec["priority"] != value:
        raise Forbidden(
            "pods",
            name,
            f"the integer value of priority ({spec['priority']}) must not be provided in "
            f"pod spec; priority admission controller computed {value} from the given PriorityClass name",
        )
    spec["priority"] = value
    spec.setdefault("preemptionPolicy", policy)


def _container_causes(containers: Any, path: str, must_exist: bool) -> list[Cause]:
    if not isinstance(containers, list) or (must_exist and not containers):
        return [required(path)] if must_exist else []
    causes: list[Cause] = []
    seen: set[str] = set()
    for index, container in enumerate(containers):
        here = f"{path}[{index}]"
        if not isinstance(container, dict):
            causes.append(invalid(here, container, "must be an object"))
            continue
        name = container.get("name") or ""
        if not name:
            causes.append(required(f"{here}.name"))
        else:
            errors = dns1123_label_errors(name)
            if errors:
                causes.append(invalid(f"{here}.name", name, ", ".join(errors)))
            if name in seen:
                causes.append(Cause("FieldValueDuplicate", f"{here}.name", f'Duplicate value: "{name}"'))
            seen.add(name)
        if not container.get("image"):
            causes.append(required(f"{here}.image"))
        for p_index, port in enumerate(container.get("ports") or []):
            number = port.get("containerPort") if isinstance(port, dict) else None
            if not isinstance(number, int) or not 0 < number < 65536:
                causes.append(
                    invalid(
                        f"{here}.ports[{p_index}].containerPort",
                        number,
                        "must be between 1 and 65535, inclusive",
                    )
                )
    return causes


# Pod spec fields an update may change (ValidatePodUpdate); everything else is immutable.
_MUTABLE_POD_FIELDS = ("activeDeadlineSeconds", "tolerations", "terminationGracePeriodSeconds")


def _comparable_spec(spec: JsonDict) -> JsonDict:
    spec = copy.deepcopy(spec)
    for name in _MUTABLE_POD_FIELDS:
        spec.pop(name, None)
    for key in ("containers", "initContainers"):
        for container in spec.get(key) or []:
            if isinstance(container, dict):
                container.pop("image", None)
    return spec


def validate_pod(pod: JsonDict, old: JsonDict | None) -> list[Cause]:
    spec = pod.get("spec") or {}
    causes = _container_causes(spec.get("containers"), "spec.containers", must_exist=True)
    causes += _container_causes(spec.get("initContainers"), "spec.initContainers", must_exist=False)
    if spec.get("restartPolicy") not in _RESTART_POLICIES:
        causes.append(not_supported("spec.restartPolicy", spec.get("restartPolicy"), _RESTART_POLICIES))
    if old is not None and _comparable_spec(spec) != _comparable_spec(old.get("spec") or {}):
        causes.append(
            forbidden(
                "spec",
                "pod updates may not change fields other than `spec.containers[*].image`,"
                "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` (only "
                "additions to existing tolerations),`spec.terminationGracePeriodSeconds` (allow it to be set "
                "to 1 if it was previously negative)",
            )
        )
    return causes


# --- services ---------------------------------------------------------------------------------


def default_service(op: Operation, svc: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    spec = svc.setdefault("spec", {})
    spec.setdefault("type", "ClusterIP")
    spec.setdefault("sessionAffinity", "None")
    spec.setdefault("internalTrafficPolicy", "Cluster")
    for port in spec.get("ports") or []:
        if isinstance(port, dict):
            port.setdefault("protocol", "TCP")
            port.setdefault("targetPort", port.get("port"))
    if old is not None:
        # The allocated IP survives updates that omit it, as the allocator keeps it.
        old_spec = old.get("spec") or {}
        spec.setdefault("clusterIP", old_spec.get("clusterIP"))
        spec.setdefault("clusterIPs", old_spec.get("clusterIPs"))
    elif spec["type"] != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = f"10.96.{random.randint(0, 255)}.{random.randint(1, 254)}"
        spec.setdefault("clusterIPs", [spec["clusterIP"]])
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
    svc.setdefault("status", {"loadBalancer": {}})


def validate_service(svc: JsonDict, old: JsonDict | None) -> list[Cause]:
    spec = svc.get("spec") or {}
    causes: list[Cause] = []
    ports = spec.get("ports") or []
    if not ports and spec.get("clusterIP") != "None" and spec.get("type") != "ExternalName":
        causes.append(required("spec.ports"))
    for index, port in enumerate(ports):
        number = port.get("port") if isinstance(port, dict) else None
        if not isinstance(number, int) or not 0 < number < 65536:
            causes.append(
                invalid(f"spec.ports[{index}].port", number, "must be between 1 and 65535, inclusive")
            )
        if len(ports) > 1 and isinstance(port, dict) and not port.get("name"):
            causes.append(required(f"spec.ports[{index}].name"))
    if old is not None and (old.get("spec") or {}).get("clusterIP") != spec.get("clusterIP"):
        causes.append(invalid("spec.clusterIPs[0]", spec.get("clusterIP"), "may not change once set"))
    return causes


# --- namespaces, priority classes -------------------------------------------------------------


def default_namespace(op: Operation, ns: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    meta = ns.setdefault("metadata", {})
    # Upstream sets this label so namespace selectors can match a namespace by name.
    meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = meta.get("name", "")
    if op == "CREATE":
        ns["spec"] = {"finalizers": ["kubernetes"]}
        ns["status"] = {"phase": "Active"}


def default_priority_class(op: Operation, pc: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    pc.setdefault("preemptionPolicy", "PreemptLowerPriority")
    pc.setdefault("value", 0)


def admit_priority_class(op: Operation, pc: JsonDict, old: JsonDict | None, view: ClusterView) -> None:
    """Only one PriorityClass may be the global default (a 403 from the Priority plugin)."""
    if not pc.get("globalDefault"):
        return
    current = global_default_class(view)
    name = pc["metadata"]["name"]
    if current is not None and current["metadata"]["name"] != name:
        raise Forbidden(
            "priorityclasses.scheduling.k8s.io",
            name,
            f"PriorityClass {current['metadata']['name']} is already marked as default. "
            "Only one default can exist",
        )


def validate_priority_class(pc: JsonDict, old: JsonDict | None) -> list[Cause]:
    name = (pc.get("metadata") or {}).get("name") or ""
    value = pc.get("value")
    causes: list[Cause] = []
    if not isinstance(value, int) or isinstance(value, bool):
        causes.append(invalid("value", value, "must be an integer"))
        return causes
    if name in SYSTEM_PRIORITY_CLASSES:
        if value != SYSTEM_PRIORITY_CLASSES[name]:
            causes.append(forbidden("value", f"value of {name} must be {SYSTEM_PRIORITY_CLASSES[name]}"))
    elif name.startswith("system-"):
        causes.append(invalid("metadata.name", name, "name cannot begin with 'system-'"))
    elif value > MAX_USER_PRIORITY:
        causes.append(
            forbidden("value", f"maximum allowed value of a user defined priority is {MAX_USER_PRIORITY}")
        )
    if old is not None and old.get("value") != value:
        causes.append(forbidden("value", "may not be changed in an update."))
    if pc.get("preemptionPolicy") not in ("PreemptLowerPriority", "Never"):
        causes.append(
            not_supported("preemptionPolicy", pc.get("preemptionPolicy"), ["Never", "PreemptLowerPriority"])
        )
    return causes

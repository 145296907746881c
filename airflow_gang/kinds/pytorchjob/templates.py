"""``job_template`` and ``pod_template``: loading them and checking the shape of what we merge.

A template is user YAML; before the builders read or merge it, every part they touch is checked
so a wrong shape becomes a `GangSpecError` naming the exact path (``pod_template.spec.containers[0].env``),
never a ``TypeError`` deep inside a builder.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from airflow_gang.model.k8s_objects import to_wire
from airflow_gang.model.quantity import QuantityError, parse_quantity
from airflow_gang.model.validation import error, short


def load_job_template(value: Any) -> dict[str, Any] | None:
    """Accept a PyTorchJob as a dict, a client model, YAML text, or a path to a YAML/JSON file."""
    if value is None:
        return None
    if isinstance(value, Path) or (
        isinstance(value, str) and "\n" not in value and value.strip().endswith((".yaml", ".yml", ".json"))
    ):
        path = Path(value)
        try:
            value = path.read_text(encoding="utf-8")
        except OSError as problem:
            raise error(
                f"job_template={str(value)!r} could not be read: {problem.strerror or problem} "
                "(pass an existing YAML file, YAML text, or a dict)",
                "job_template",
            ) from problem
    if isinstance(value, str):
        try:
            value = yaml.safe_load(value)
        except yaml.YAMLError as problem:
            raise error(f"job_template is not valid YAML: {problem}", "job_template") from problem
    template = strip_nulls(to_wire(value))
    if not isinstance(template, dict):
        raise error(
            f"job_template={short(value)} is invalid: expected a PyTorchJob manifest (a mapping with "
            "kind: PyTorchJob)",
            "job_template",
        )
    return _check_job_template(template)


def _check_job_template(template: dict[str, Any]) -> dict[str, Any]:
    kind = template.get("kind", "PyTorchJob")
    if kind != "PyTorchJob":
        raise error(
            f"job_template kind={kind!r} is invalid: only PyTorchJob is supported (set kind: PyTorchJob "
            "and apiVersion: kubeflow.org/v1)",
            "job_template",
        )
    api_version = template.get("apiVersion", "kubeflow.org/v1")
    if api_version != "kubeflow.org/v1":
        raise error(
            f"job_template apiVersion={api_version!r} is invalid: use 'kubeflow.org/v1'", "job_template"
        )
    # strip_nulls already removed nulls, so a present value of the wrong type (even an empty
    # list) is an error rather than "absent".
    metadata = template.get("metadata", {})
    if not isinstance(metadata, dict) or not all(
        isinstance(metadata.get(key, {}), dict) for key in ("labels", "annotations")
    ):
        raise error(
            "job_template metadata must be a mapping (with mappings for labels and annotations)",
            "job_template",
        )
    spec = template.get("spec", {})
    if not isinstance(spec, dict):
        raise error("job_template spec must be a mapping", "job_template")
    run_policy = spec.get("runPolicy", {})
    if not isinstance(run_policy, dict) or not isinstance(run_policy.get("schedulingPolicy", {}), dict):
        raise error(
            "job_template spec.runPolicy (and its schedulingPolicy) must be a mapping", "job_template"
        )
    replicas = spec.get("pytorchReplicaSpecs", {})
    if not isinstance(replicas, dict):
        raise error(
            "job_template spec.pytorchReplicaSpecs must be a mapping of Master/Worker", "job_template"
        )
    normalised: dict[str, Any] = {}
    for key, replica in replicas.items():
        replica_type = str(key).capitalize()
        if replica_type not in {"Master", "Worker"}:
            raise error(
                f"job_template spec.pytorchReplicaSpecs has {key!r}: only 'Master' and 'Worker' are allowed",
                "job_template",
            )
        if not isinstance(replica, dict):
            raise error(
                f"job_template spec.pytorchReplicaSpecs.{replica_type} must be a mapping", "job_template"
            )
        count = replica.get("replicas", 1)
        if (
            not isinstance(count, int)
            or isinstance(count, bool)
            or count < (1 if replica_type == "Master" else 0)
        ):
            raise error(
                f"job_template spec.pytorchReplicaSpecs.{replica_type}.replicas={count!r} is invalid: "
                + (
                    "a PyTorchJob has exactly 1 Master"
                    if replica_type == "Master"
                    else "must be a whole number >= 0"
                ),
                "job_template",
            )
        if replica_type == "Master" and count != 1:
            raise error(
                f"job_template spec.pytorchReplicaSpecs.Master.replicas={count} is invalid: a PyTorchJob has "
                "exactly 1 Master (put the other replicas under Worker)",
                "job_template",
            )
        replica_template = replica.get("template")
        if replica_template is not None:
            check_pod_template(
                replica_template, f"job_template.spec.pytorchReplicaSpecs.{replica_type}.template"
            )
        normalised[replica_type] = replica
    if replicas:
        spec["pytorchReplicaSpecs"] = normalised
        template["spec"] = spec
    return template


# --- pod template shape ----------------------------------------------------------------------

_NAMED_LISTS = ("containers", "initContainers", "volumes", "imagePullSecrets")


def _expect(
    value: Any, kind: type | tuple[type, ...], where: str, what: str, *, optional: bool = True
) -> None:
    # A null field is "absent" in a manifest (and "delete" in a pod_template overlay); a null
    # list item or name is simply wrong.
    if (value is not None or not optional) and not isinstance(value, kind):
        raise error(f"{where}={short(value)} is invalid: must be {what}", _field_of(where))


def _field_of(where: str) -> str:
    """The argument a path belongs to: ``pod_template.spec.containers[0]`` -> ``pod_template``."""
    return re.split(r"[.\[]", where, maxsplit=1)[0]


def strip_nulls(value: Any) -> Any:
    """Drop null mapping values recursively: in a Kubernetes manifest null means absent."""
    if isinstance(value, dict):
        return {key: strip_nulls(item) for key, item in value.items() if item is not None}
    if isinstance(value, list):
        return [strip_nulls(item) for item in value]
    return value


def check_pod_template(template: Any, where: str) -> None:
    """Check the parts of a pod template the builders read or merge, naming the exact path."""
    _expect(template, dict, where, "a pod template mapping with 'metadata' and 'spec'")
    metadata = template.get("metadata")
    _expect(metadata, dict, f"{where}.metadata", "a mapping")
    for key in ("labels", "annotations"):
        items = (metadata or {}).get(key)
        _expect(items, dict, f"{where}.metadata.{key}", "a mapping of strings")
        for item_key, item in (items or {}).items():
            _expect(item, str, f"{where}.metadata.{key}[{item_key!r}]", "a string")
    pod = template.get("spec")
    _expect(pod, dict, f"{where}.spec", "a pod spec mapping")
    pod = pod or {}
    for key in _NAMED_LISTS:
        items = pod.get(key)
        _expect(items, list, f"{where}.spec.{key}", "a list")
        for index, item in enumerate(items or []):
            _expect(item, dict, f"{where}.spec.{key}[{index}]", "a mapping", optional=False)
            _expect(item.get("name"), str, f"{where}.spec.{key}[{index}].name", "a string", optional=False)
    for key, kind, what in (("nodeSelector", dict, "a mapping"), ("tolerations", list, "a list")):
        _expect(pod.get(key), kind, f"{where}.spec.{key}", what)
    _expect(pod.get("schedulerName"), str, f"{where}.spec.schedulerName", "a string")
    for index, container in enumerate(pod.get("containers") or []):
        _check_container(container, f"{where}.spec.containers[{index}]")


def _check_container(container: dict[str, Any], where: str) -> None:
    for key in ("env", "ports", "volumeMounts"):
        items = container.get(key)
        _expect(items, list, f"{where}.{key}", "a list")
        for index, item in enumerate(items or []):
            _expect(item, dict, f"{where}.{key}[{index}]", "a mapping", optional=False)
    for key in ("command", "args"):
        _expect(container.get(key), list, f"{where}.{key}", "a list of strings")
    _expect(container.get("image"), str, f"{where}.image", "a string")
    resources = container.get("resources")
    _expect(resources, dict, f"{where}.resources", "a mapping with 'requests' and 'limits'")
    for key in ("requests", "limits"):
        amounts = (resources or {}).get(key)
        _expect(amounts, dict, f"{where}.resources.{key}", "a mapping of resource quantities")
        for name, amount in (amounts or {}).items():
            try:
                parse_quantity(amount)
            except QuantityError as problem:
                raise error(
                    f"{where}.resources.{key}[{name!r}]={amount!r} is invalid: {problem}", _field_of(where)
                ) from problem


def check_pod_template_field(value: dict[str, Any] | None) -> dict[str, Any] | None:
    if value is not None:
        check_pod_template(value, "pod_template")
    return value

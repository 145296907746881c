"""Checks on job arguments, each raising `GangSpecError` with the field, the value and the fix.

Pure functions used as pydantic validators by `airflow_gang.spec.GangJobSpec`. They run before
anything reaches a cluster, so a typo costs a second, not a trip through a GPU queue.
"""

from __future__ import annotations

import datetime as dt
import difflib
import re
from collections.abc import Mapping, Sequence
from typing import Any

from pydantic import ValidationError, ValidationInfo

from airflow_gang.exceptions import GangSpecError
from airflow_gang.model.k8s_objects import to_wire
from airflow_gang.model.naming import (
    is_dns_1035_label,
    is_dns_1123_label,
    is_dns_1123_subdomain,
    is_qualified_key,
)
from airflow_gang.model.quantity import Quantity, QuantityError, parse_quantity

_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Set by the training-operator on every replica; a user value would silently fight with it.
RESERVED_ENV = frozenset(
    {"MASTER_ADDR", "MASTER_PORT", "WORLD_SIZE", "RANK", "PET_MASTER_ADDR", "PET_MASTER_PORT"}
)
_POD_SUFFIX_WORST = len("-worker-")

_FIELD_FIXES: dict[str, str] = {
    "workers": "pass a whole number >= 0 (workers=0 runs the master only)",
    "min_available": "pass a whole number between 1 and the number of replicas, or leave it unset",
    "master_port": "pass a TCP port number between 1 and 65535",
    "gang_scheduling": "use 'provider', 'training-operator' or 'disabled'",
    "restart_policy": "use 'OnFailure', 'Never', 'Always' or 'ExitCode'",
    "nproc_per_node": "pass a whole number >= 1, or 'auto', 'cpu' or 'gpu'",
    "clean_pod_policy": "use 'All', 'Running' or 'None'",
    "backoff_limit": "pass a whole number >= 0",
    "active_deadline_seconds": "pass a whole number of seconds >= 1",
    "ttl_seconds_after_finished": "pass a whole number of seconds >= 0",
    "image": "pass an image reference such as 'ghcr.io/acme/train:1'",
}


def error(message: str, field: str | None = None) -> GangSpecError:
    """A `GangSpecError`; raised inside a validator, pydantic carries it to `spec_error_from`."""
    return GangSpecError(message, field=field)


def spec_error_from(
    validation_error: ValidationError, known: Sequence[str] = (), operator: str = "PyTorchJobOperator"
) -> GangSpecError:
    """One `GangSpecError` for all problems pydantic found, each worded field=value: why (fix).

    :param known: the argument names an unknown one may be a misspelling of.
    :param operator: the operator whose arguments an unknown one is pointed to.
    """
    problems: list[str] = []
    first_field: str | None = None
    for detail in validation_error.errors(include_url=False):
        location = _location(detail["loc"])
        original = (detail.get("ctx") or {}).get("error")
        if isinstance(original, GangSpecError):
            first_field = first_field or original.field or location or None
            problems.append(str(original))
            continue
        first_field = first_field or location or None
        if detail["type"] == "extra_forbidden":
            problems.append(_unknown_argument(location, known, operator))
        elif detail["type"] == "missing":
            problems.append(f"{location} is required")
        else:
            field = location.split(".")[0].split("[")[0]
            leaf = location.rsplit(".", 1)[-1]
            fix = _FIELD_FIXES.get(leaf) or _FIELD_FIXES.get(field)
            message = f"{location}={short(detail.get('input'))} is invalid: {_lower_first(detail['msg'])}"
            problems.append(f"{message} ({fix})" if fix else message)
    return GangSpecError("; ".join(dict.fromkeys(problems)), field=first_field)


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        elif part in {"int", "str", "literal['auto','cpu','gpu']", "dict[str,any]"} or part.startswith(
            ("function-", "constrained-", "literal[")
        ):
            continue  # pydantic's union branch tags are noise to a DAG author
        else:
            text += f".{part}" if text else str(part)
    return text


def _unknown_argument(name: str, known: Sequence[str], operator: str) -> str:
    leaf = name.rsplit(".", 1)[-1]
    close = difflib.get_close_matches(leaf, list(known), n=1)
    hint = f"did you mean {close[0]!r}?" if close else f"see the {operator} arguments"
    return f"{name} is not a known argument ({hint})"


def short(value: Any, limit: int = 80) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _lower_first(text: str) -> str:
    return text[:1].lower() + text[1:]


# --- before-validators: accept what Airflow users already have ------------------------------


def to_wire_before(value: Any) -> Any:
    return None if value is None else to_wire(value)


# --- field validators ------------------------------------------------------------------------


def check_image(value: str | None) -> str | None:
    if value is None:
        return None
    if not value.strip() or any(ch.isspace() for ch in value):
        raise error(
            f"image={value!r} is invalid: must be a non-empty image reference without spaces "
            "(e.g. 'ghcr.io/acme/train:1')",
            "image",
        )
    return value


def check_string_list(value: Any, info: ValidationInfo) -> Any:
    field = info.field_name
    if value is None:
        return None
    if isinstance(value, str):
        example = value.split() or ["python", "train.py"]
        raise error(f"{field}={value!r} is invalid: must be a list of strings, e.g. {example!r}", field)
    if not isinstance(value, list | tuple):
        raise error(f"{field}={short(value)} is invalid: must be a list of strings", field)
    items = []
    for index, item in enumerate(value):
        if isinstance(item, bool) or not isinstance(item, str | int | float):
            raise error(
                f"{field}[{index}]={short(item)} is invalid: must be a string (or a number, which is "
                "converted to one)",
                field,
            )
        items.append(str(item))
    return items


def check_env(value: Any) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise error(f"env={short(value)} is invalid: must be a dict of NAME -> value", "env")
    checked: dict[str, Any] = {}
    for name, item in value.items():
        if not isinstance(name, str) or not _ENV_NAME.fullmatch(name):
            raise error(
                f"env name {name!r} is invalid: must be a valid identifier (letters, digits and '_', not "
                "starting with a digit), e.g. 'LEARNING_RATE'",
                "env",
            )
        if name in RESERVED_ENV:
            raise error(
                f"env name {name!r} is reserved: the training-operator sets it on every replica "
                "(use master_port= for the rendezvous port, workers= for the world size)",
                "env",
            )
        if isinstance(item, bool):
            checked[name] = "true" if item else "false"
        elif isinstance(item, str | int | float):
            checked[name] = str(item)
        elif isinstance(item, Mapping):
            checked[name] = dict(to_wire(item.get("valueFrom", item)))
        else:
            raise error(
                f"env[{name!r}]={short(item)} is invalid: must be a string, a number, or a valueFrom "
                "source such as {'secretKeyRef': {'name': 'creds', 'key': 'token'}}",
                "env",
            )
    return checked


def _is_extended(resource: str) -> bool:
    # Extended resources (nvidia.com/gpu, amd.com/gpu, ...) are whole units with limit == request.
    return "/" in resource and not resource.split("/", 1)[0].endswith("kubernetes.io")


def check_resource_list(value: Any, field: str, *, gpus_positive: bool) -> dict[str, Quantity]:
    if value is None:
        return {}
    value = to_wire(value)
    if not isinstance(value, Mapping):
        raise error(
            f"{field}={short(value)} is invalid: must be a dict such as "
            "{'cpu': '4', 'memory': '16Gi', 'nvidia.com/gpu': 1}",
            field,
        )
    checked: dict[str, Quantity] = {}
    for name, amount in value.items():
        if not isinstance(name, str) or not is_qualified_key(name):
            raise error(
                f"{field} key {name!r} is not a valid resource name (e.g. 'cpu', 'nvidia.com/gpu')", field
            )
        try:
            quantity = parse_quantity(amount)
        except QuantityError as problem:
            raise error(f"{field}[{name!r}]={amount!r} is invalid: {problem}", field) from problem
        if quantity < 0:
            raise error(f"{field}[{name!r}]={amount!r} is invalid: must not be negative", field)
        if _is_extended(name):
            what = "GPU count" if name.endswith("/gpu") else "extended resource count"
            if quantity != quantity.to_integral_value() or (gpus_positive and quantity < 1):
                raise error(
                    f"{field}[{name!r}]={amount!r} is invalid: a {what} must be a whole number"
                    + (" >= 1 (omit the key to run without it)" if gpus_positive else " >= 0"),
                    field,
                )
            checked[name] = int(quantity)
        else:
            checked[name] = str(amount) if isinstance(amount, float) else amount
    return checked


def check_resources(value: Any) -> dict[str, Quantity]:
    return check_resource_list(value, "resources", gpus_positive=True)


def check_min_resources(value: Any) -> dict[str, Quantity] | None:
    return None if value is None else check_resource_list(value, "min_resources", gpus_positive=False)


def requests_and_limits(resources: Mapping[str, Quantity]) -> tuple[dict[str, Quantity], dict[str, Quantity]]:
    """Per-replica requests, plus limits for extended resources (Kubernetes requires them equal)."""
    requests = {name: _wire_quantity(amount) for name, amount in resources.items()}
    limits = {name: amount for name, amount in requests.items() if _is_extended(name)}
    return requests, limits


def _wire_quantity(amount: Quantity) -> Quantity:
    return amount if isinstance(amount, int | str) else str(amount)


def check_nproc_per_node(value: int | str | None) -> int | str | None:
    if isinstance(value, int) and value < 1:
        raise error(
            f"nproc_per_node={value} is invalid: must be >= 1, or 'auto', 'cpu' or 'gpu'", "nproc_per_node"
        )
    return value


def check_object_name(value: str | None, info: ValidationInfo) -> str | None:
    if value is not None and not is_dns_1123_subdomain(value):
        raise error(
            f"{info.field_name}={value!r} is invalid: must be a lower-case DNS-1123 name "
            "(a-z, 0-9, '-', '.'; start and end with a letter or digit), e.g. 'research'",
            info.field_name,
        )
    return value


def check_built_job(job: Mapping[str, Any]) -> None:
    """Checks that need the merged manifest: image present, mounts backed by volumes."""
    for replica_type, replica in job["spec"]["pytorchReplicaSpecs"].items():
        pod = replica["template"].get("spec") or {}
        pytorch = next((c for c in pod.get("containers") or [] if c.get("name") == "pytorch"), None)
        if pytorch is None:
            raise error(
                f"the {replica_type} replica has no container named 'pytorch' after pod_template was merged: "
                "the training-operator requires it (do not remove spec or spec.containers in pod_template)",
                "pod_template",
            )
        if not pytorch.get("image"):
            raise error(
                f"image is required: the {replica_type} replica's 'pytorch' container has no image "
                "(pass image='registry/repo:tag' or set it in job_template)",
                "image",
            )
        volumes = {volume.get("name") for volume in pod.get("volumes") or []}
        for container in pod.get("containers") or []:
            for mount in container.get("volumeMounts") or []:
                if mount.get("name") not in volumes:
                    raise error(
                        f"volume_mounts name={mount.get('name')!r} has no matching volume in the "
                        f"{replica_type} pod: add it to volumes=[{{'name': ..., ...}}]",
                        "volume_mounts",
                    )


def check_job_name(name: str, workers: int) -> None:
    """A job name must be DNS-1035 and leave room for ``-worker-<index>`` in pod/service names."""
    longest_index = len(str(max(workers - 1, 0)))
    limit = 63 - _POD_SUFFIX_WORST - longest_index
    if not isinstance(name, str) or not is_dns_1035_label(name, max_length=63):
        raise error(
            f"job_name={name!r} is invalid: must be a lower-case DNS-1035 label (a-z, 0-9 and '-', starting "
            "with a letter, ending with a letter or digit), e.g. 'train-resnet'",
            "job_name",
        )
    if len(name) > limit:
        raise error(
            f"job_name={name!r} is too long ({len(name)} characters): with {workers} workers the pod name "
            f"'{name}-worker-{max(workers - 1, 0)}' would exceed 63; use at most {limit} characters",
            "job_name",
        )


def check_namespace(namespace: str) -> None:
    if not isinstance(namespace, str) or not is_dns_1123_label(namespace):
        raise error(
            f"namespace={namespace!r} is invalid: must be a lower-case DNS-1123 label, e.g. 'ml-team'",
            "namespace",
        )


def env_var(name: str, value: str | dict[str, Any]) -> dict[str, Any]:
    """A container env entry: a literal value or a ``valueFrom`` source."""
    return {"name": name, "value": value} if isinstance(value, str) else {"name": name, "valueFrom": value}


def positive_seconds(value: Any, field: str, *, none_means: str = "waits forever") -> float | None:
    """A timeout given as seconds (a number, or text when templated) or a timedelta; None: no limit.

    Anything else, zero or negative raises `GangSpecError` naming ``field``.

    :param none_means: what None does, for the message (``waits forever``).
    """
    if value in (None, "", "None"):
        return None
    try:
        seconds = value.total_seconds() if isinstance(value, dt.timedelta) else float(value)
    except (TypeError, ValueError):
        seconds = 0.0
    if not seconds > 0:
        raise GangSpecError(
            f"{field}={value!r} is invalid: must be a positive number of seconds or a timedelta "
            f"(None {none_means})",
            field=field,
        )
    return float(seconds)

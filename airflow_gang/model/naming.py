"""Deterministic job names and the Airflow identity labels put on every object we create.

A task instance try always maps to the same job name, so a retried submission after a worker
crash collides (HTTP 409) with its own job instead of creating a twin; the identity labels let a
later try find and adopt that job. Everything here is pure.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata

LABEL_PREFIX = "airflow-gang.io/"
DAG_ID_LABEL = LABEL_PREFIX + "dag-id"
TASK_ID_LABEL = LABEL_PREFIX + "task-id"
RUN_ID_LABEL = LABEL_PREFIX + "run-id"
MAP_INDEX_LABEL = LABEL_PREFIX + "map-index"
TRY_NUMBER_LABEL = LABEL_PREFIX + "try-number"
MANAGED_BY_LABEL = LABEL_PREFIX + "managed-by"
MANAGED_BY_VALUE = "airflow-gang"

MAX_JOB_NAME_LENGTH = 45
"""Derived names stay this short so that `<name>-worker-NNN` pod and service names fit in 63."""

_HASH_HEX_LENGTH = 8
_LABEL_VALUE_MAX = 63
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_DNS_1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS_1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")


def _digest(*parts: object, length: int) -> str:
    payload = json.dumps(parts, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(payload.encode("utf-8")).hexdigest()[:length]


def _ascii_fold(text: str) -> str:
    return unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")


def slugify_dns_1035(text: str, *, max_length: int) -> str:
    """Lower-case DNS-1035 slug of ``text`` (letters first, dashes inside), or ``""`` if none is left."""
    slug = re.sub(r"[^a-z0-9]+", "-", _ascii_fold(text).lower())
    slug = re.sub(r"^[^a-z]+", "", slug)  # DNS-1035 labels start with a letter
    return slug[:max_length].rstrip("-")


def job_name(dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int) -> str:
    """The PyTorchJob (and PodGroup) name of one task instance try.

    ``<task_id slug>-<8 hex>``, lower-case DNS-1035, at most 45 characters. The hash covers
    the task id as well as dag, run, map index and try, so two task ids that slug alike
    (``train_a`` and ``train-a``) still get different names.
    """
    suffix = _digest(dag_id, task_id, run_id, int(map_index), int(try_number), length=_HASH_HEX_LENGTH)
    slug = slugify_dns_1035(task_id, max_length=MAX_JOB_NAME_LENGTH - _HASH_HEX_LENGTH - 1) or "job"
    return f"{slug}-{suffix}"


def is_dns_1035_label(text: str, *, max_length: int = 63) -> bool:
    """Whether ``text`` is a valid DNS-1035 label no longer than ``max_length``."""
    return len(text) <= max_length and _DNS_1035_LABEL.fullmatch(text) is not None


def is_dns_1123_label(text: str) -> bool:
    """Whether ``text`` is a valid DNS-1123 label (namespace names)."""
    return len(text) <= 63 and _DNS_1123_LABEL.fullmatch(text) is not None


def is_dns_1123_subdomain(text: str) -> bool:
    """Whether ``text`` is a valid DNS-1123 subdomain (most object names: queues, secrets, ...)."""
    return len(text) <= 253 and _DNS_1123_SUBDOMAIN.fullmatch(text) is not None


def is_qualified_key(text: str) -> bool:
    """Whether ``text`` is a valid label or annotation key: ``[prefix/]name``."""
    prefix, _, name = text.rpartition("/")
    if "/" in text and not (prefix and is_dns_1123_subdomain(prefix)):
        return False
    return len(name) <= 63 and _QUALIFIED_NAME.fullmatch(name) is not None


def is_label_value(text: str) -> bool:
    """Whether ``text`` is a valid Kubernetes label value."""
    return len(text) <= _LABEL_VALUE_MAX and _LABEL_VALUE.fullmatch(text) is not None


def safe_label_value(text: str) -> str:
    """``text`` itself when it is a valid label value, else a readable prefix plus a hash of it.

    The result is deterministic, so selectors built from the same Airflow ids always match.
    """
    if is_label_value(text):
        return text
    digest = _digest(text, length=10)
    prefix = re.sub(r"[^A-Za-z0-9_.-]+", "-", _ascii_fold(text))
    prefix = re.sub(r"^[^A-Za-z0-9]+", "", prefix)[: _LABEL_VALUE_MAX - len(digest) - 1]
    prefix = re.sub(r"[^A-Za-z0-9]+$", "", prefix)
    return f"{prefix}-{digest}" if prefix else digest


def identity_labels(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> dict[str, str]:
    """Labels that tie a job, its PodGroup and its pods to one Airflow task instance try.

    ``map-index`` is left out for unmapped tasks (map index -1): "-1" is not a valid label
    value, and an absent label selects just as precisely (``!airflow-gang.io/map-index``).
    """
    labels = {
        DAG_ID_LABEL: safe_label_value(dag_id),
        TASK_ID_LABEL: safe_label_value(task_id),
        RUN_ID_LABEL: safe_label_value(run_id),
        MAP_INDEX_LABEL: str(int(map_index)),
        TRY_NUMBER_LABEL: str(int(try_number)),
        MANAGED_BY_LABEL: MANAGED_BY_VALUE,
    }
    if int(map_index) < 0:
        del labels[MAP_INDEX_LABEL]
    return labels


def identity_selector(labels: dict[str, str], *, include_try_number: bool = False) -> str:
    """A label selector for the task instance the identity ``labels`` describe.

    Reattaching looks across tries (a job submitted by try 1 is adopted by try 2 after a
    worker crash), so the try number is left out unless asked for.
    """
    keys = [DAG_ID_LABEL, TASK_ID_LABEL, RUN_ID_LABEL, MAP_INDEX_LABEL, MANAGED_BY_LABEL]
    if include_try_number:
        keys.append(TRY_NUMBER_LABEL)
    return ",".join(f"{key}={labels[key]}" if key in labels else f"!{key}" for key in keys)

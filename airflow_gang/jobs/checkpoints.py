"""Where a task's training code keeps its checkpoints: one place per task instance, every try.

A gang given up after a disruption (``on_disruption="retry"``), an admission timeout or a failed
try is submitted again as a fresh job; training should go on from its last checkpoint, not start
over. So every replica of every try of one task instance is told the same location in
``GANG_CHECKPOINT_DIR``: the operator's ``checkpoint_dir`` (templated; the user keeps it free of
``try_number``), or ``<[gang] checkpoint_root>/<dag_id>/<task_id>/<run_id>[/<map_index>]``. The
provider never reads or writes there: the training code does (`docs/disruptions.md` shows how,
and ``examples/train_digits.py`` does it). Pure.
"""

from __future__ import annotations

import re
from typing import Any, TypeVar

CHECKPOINT_ENV = "GANG_CHECKPOINT_DIR"
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")
Spec = TypeVar("Spec")


def _part(text: str) -> str:
    """One path segment from an Airflow id (a run id holds ``:`` and ``+``)."""
    return _UNSAFE.sub("_", text).strip("_") or "_"


def checkpoint_location(
    given: str | None,
    root: str | None,
    *,
    dag_id: str,
    task_id: str,
    run_id: str,
    map_index: int = -1,
) -> str | None:
    """``given`` when set, else the task instance's place under ``root``; None without either."""
    if given:
        return given
    if not root:
        return None
    parts = [root.rstrip("/"), _part(dag_id), _part(task_id), _part(run_id)]
    if map_index >= 0:
        parts.append(str(map_index))
    return "/".join(parts)


def with_checkpoint_env(spec: Spec, location: str | None) -> Spec:
    """``spec`` (a job spec with ``env``) whose replicas are told ``location``; an
    ``env`` of the user's that already sets ``GANG_CHECKPOINT_DIR`` wins."""
    env: dict[str, Any] = dict(getattr(spec, "env", None) or {})
    if location is None or CHECKPOINT_ENV in env:
        return spec
    return spec.model_copy(update={"env": {**env, CHECKPOINT_ENV: location}})  # type: ignore[attr-defined, no-any-return]

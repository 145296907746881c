"""The script runtime: a pod's behaviour read from its annotations, as a pure plan.

Annotations (on the pod, or on the owning PyTorchJob for the whole job; the pod wins):

- ``sim.airflow-gang.io/duration``: seconds the container runs once its clock starts (float,
  default 1).
- ``sim.airflow-gang.io/exit-code``: the container's exit code (default 0).
- ``sim.airflow-gang.io/log``: the container's output, one log line per text line (default: a
  few training-like lines).
- ``sim.airflow-gang.io/fail-attempts``: N; the first N runs of this replica exit non-zero
  (the exit-code annotation if non-zero, else 1) and later runs exit 0. A run is one container
  start: a restart in place or a recreated pod of the same name both count.

A malformed value is a configuration error of the container, reported the way the real kubelet
reports one (`ScriptError` becomes ``CreateContainerConfigError``), so a typo never passes as
a default.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

PREFIX = "sim.airflow-gang.io/"
DURATION = PREFIX + "duration"
EXIT_CODE = PREFIX + "exit-code"
LOG = PREFIX + "log"
FAIL_ATTEMPTS = PREFIX + "fail-attempts"
DEFAULT_DURATION = 1.0


class ScriptError(ValueError):
    """An annotation that cannot be understood."""


@dataclass(frozen=True)
class ScriptPlan:
    duration: float
    exit_code: int
    lines: tuple[str, ...]

    def line_offsets(self) -> list[float]:
        """When each line is printed, seconds after the clock starts: spread over the run."""
        count = len(self.lines)
        return [self.duration * index / count for index in range(count)]


def merged_annotations(
    pod_annotations: Mapping[str, str], job_annotations: Mapping[str, str]
) -> dict[str, str]:
    """Job-level settings overridden by the pod's own (the template's, copied by the operator)."""
    return {
        key: str(value)
        for key, value in {**job_annotations, **pod_annotations}.items()
        if key.startswith(PREFIX)
    }


def _number(annotations: Mapping[str, str], key: str, default: float, *, integer: bool) -> float:
    raw = annotations.get(key)
    if raw is None or not str(raw).strip():
        return default
    try:
        value = int(raw) if integer else float(raw)
    except ValueError as error:
        kind = "an integer" if integer else "a number of seconds"
        raise ScriptError(f"annotation {key}={raw!r} is invalid: must be {kind}") from error
    if not math.isfinite(value) or value < 0:
        raise ScriptError(f"annotation {key}={raw!r} is invalid: must be >= 0")
    return value


def fail_attempts(annotations: Mapping[str, str]) -> int:
    return int(_number(annotations, FAIL_ATTEMPTS, 0, integer=True))


def default_lines(pod_name: str, rank: str | None, exit_code: int) -> list[str]:
    who = f"rank={rank}" if rank is not None else f"pod={pod_name}"
    # Deterministic but pod-specific numbers, so two replicas' logs are told apart at a glance.
    loss = 0.25 + (sum(map(ord, pod_name)) % 500) / 1000
    lines = [f"starting training {who}", f"epoch 1/1 loss={loss:.4f}"]
    if exit_code:
        lines.append(f"RuntimeError: simulated failure (exit code {exit_code})")
    else:
        lines.append("training complete")
    return lines


def plan_script(
    annotations: Mapping[str, str], *, attempt: int, pod_name: str, rank: str | None = None
) -> ScriptPlan:
    """The run for the ``attempt``-th start (0-based) of a replica.

    :param annotations: the merged ``sim.airflow-gang.io/*`` annotations.
    :param attempt: how many runs of this replica started before this one.
    :raises ScriptError: an annotation is malformed.
    """
    duration = _number(annotations, DURATION, DEFAULT_DURATION, integer=False)
    exit_code = int(_number(annotations, EXIT_CODE, 0, integer=True))
    if exit_code > 255:
        raise ScriptError(f"annotation {EXIT_CODE}={exit_code} is invalid: must be 0..255")
    failures = fail_attempts(annotations)
    if failures:
        exit_code = (exit_code or 1) if attempt < failures else 0
    text = annotations.get(LOG)
    lines = text.splitlines() if text is not None else default_lines(pod_name, rank, exit_code)
    return ScriptPlan(duration=duration, exit_code=exit_code, lines=tuple(lines))

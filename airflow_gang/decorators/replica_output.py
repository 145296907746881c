"""What a ``@task.pytorchjob`` replica left in its log: rank 0's return value, or an error block.

The bootstrap (`replica_bootstrap`) prints the return value as JSON on numbered marker lines
(``[airflow-gang] return value 1/2: <chunk>``) and a failure as one block from
``[airflow-gang] error on rank N: <summary>`` to ``[airflow-gang] end of error``. Only the last
complete value or block counts: a container restarted in place logs a new attempt after the old.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from airflow_gang.decorators.replica_bootstrap import ERROR_END, ERROR_MARK, RESULT_MARK

_RESULT_LINE = re.compile(rf"^{re.escape(RESULT_MARK)} (\d+)/(\d+): (.*)$")
_ERROR_LINE = re.compile(rf"^{re.escape(ERROR_MARK)} on ([^:]+): (.*)$")


class NoReturnValue(LookupError):
    """The log holds no complete return value."""


def return_value(log: str) -> Any:
    """The last complete return value in ``log``; `NoReturnValue` if there is none."""
    chunks: list[str] = []
    found: str | None = None
    for line in log.splitlines():
        match = _RESULT_LINE.match(line)
        if match is None:
            continue
        index, total, chunk = int(match.group(1)), int(match.group(2)), match.group(3)
        if index == 1:
            chunks = []
        if index != len(chunks) + 1:  # a gap: this set is incomplete
            chunks = []
            continue
        chunks.append(chunk)
        if index == total:
            found = "".join(chunks)
            chunks = []
    if found is None:
        raise NoReturnValue("no return value line")
    return json.loads(found)


@dataclass(frozen=True)
class ReplicaError:
    """A failure the bootstrap reported: where (``rank 1``), a one-line summary, the traceback."""

    where: str
    summary: str
    details: str


def replica_error(log: str) -> ReplicaError | None:
    """The last error block in ``log`` (cut short by the log tail: what is there), or None."""
    found: ReplicaError | None = None
    current: tuple[str, str, list[str]] | None = None
    for line in log.splitlines():
        match = _ERROR_LINE.match(line)
        if match is not None:
            current = (match.group(1), match.group(2), [])
            continue
        if current is None:
            continue
        if line == ERROR_END:
            found, current = ReplicaError(current[0], current[1], "\n".join(current[2])), None
        else:
            current[2].append(line)
    if current is not None:  # the end line is past the tail that was read
        found = ReplicaError(current[0], current[1], "\n".join(current[2]))
    return found

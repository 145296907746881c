"""Airflow 3's structured task log (``/logs/{try_number}`` JSON) as plain text lines."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

_SHOWN_ELSEWHERE = ("timestamp", "event", "level", "logger")
# Repeated on every line of a task's log: the task instance it belongs to, the code location.
_OMITTED = ("dag_id", "run_id", "task_id", "map_index", "try_number", "ti_id", "filename", "lineno")


def log_line(message: Any) -> str:
    """``[timestamp] LEVEL - event key=value ... source=logger``; strings pass through.

    The keys that only repeat the task instance's identity or the code location are left out.

    A ``sources`` list (where the log was read from) becomes one line per source.
    """
    if not isinstance(message, dict):
        return str(message)
    parts = []
    if message.get("timestamp"):
        parts.append(f"[{message['timestamp']}]")
    if message.get("level"):
        parts.append(f"{str(message['level']).upper()} -")
    parts.append(str(message.get("event", "")))
    extras = {key: value for key, value in message.items() if key not in (*_SHOWN_ELSEWHERE, *_OMITTED)}
    sources = extras.pop("sources", None)
    parts.extend(f"{key}={value}" for key, value in extras.items())
    if message.get("logger"):
        parts.append(f"source={message['logger']}")
    line = " ".join(part for part in parts if part)
    if isinstance(sources, list):
        line = "\n".join([line, *(f"  {source}" for source in sources)])
    return line


def log_text(messages: Iterable[Any]) -> list[str]:
    return [log_line(message) for message in messages]

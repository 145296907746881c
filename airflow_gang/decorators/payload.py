"""What ``@task.pytorchjob``/``@task.trainjob`` send to their replicas: an environment variable, a command.

The payload (the bootstrap's source, the function's source, its arguments) is JSON, compressed
with zlib and base64-encoded into `PAYLOAD_ENV` on every replica; the command is
``<python> -c <entry program>``. It works on any cluster: no volume, no ConfigMap, no image
change. Its limit, `MAX_PAYLOAD_BYTES`, stays below what Linux allows one environment variable
(128 KiB), and leaves room in the PyTorchJob (every replica template carries a copy; etcd takes
objects up to 1.5 MiB). Arguments are checked before anything is sent: each must be JSON, and
an error names the argument and where in it the problem is.
"""

from __future__ import annotations

import base64
import inspect
import json
import zlib
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_gang.decorators import replica_bootstrap
from airflow_gang.decorators.function_source import FunctionSource, PythonVersion
from airflow_gang.decorators.replica_bootstrap import (
    DEFAULT_DECORATOR,
    PAYLOAD_ENV,
    NotJsonError,
    to_json_value,
)
from airflow_gang.exceptions import GangSpecError

MAX_PAYLOAD_BYTES = 96 * 1024
BOOTSTRAP_SOURCE = Path(replica_bootstrap.__file__).read_text(encoding="utf-8")
__all__ = ["MAX_PAYLOAD_BYTES", "PAYLOAD_ENV", "call_arguments", "encode_payload", "replica_command"]


def call_arguments(
    function: Callable[..., Any],
    op_args: Collection[Any],
    op_kwargs: Mapping[str, Any],
    context: Mapping[str, Any],
    context_keys: frozenset[str],
    *,
    decorator: str = DEFAULT_DECORATOR,
) -> tuple[list[Any], dict[str, Any]]:
    """The call's arguments as plain JSON values; `GangSpecError` names the first that is not.

    Parameters named like task context keys (``ds``, ``params``, ``run_id``...) and not passed
    get the context's value, as with ``@task``; it must be JSON too.
    """
    name = getattr(function, "__name__", "function")
    parameters = inspect.signature(function).parameters
    positional = [
        parameter.name
        for parameter in parameters.values()
        if parameter.kind in (parameter.POSITIONAL_ONLY, parameter.POSITIONAL_OR_KEYWORD)
    ]
    var_positional = next(
        (parameter.name for parameter in parameters.values() if parameter.kind is parameter.VAR_POSITIONAL),
        "args",
    )
    kwargs = dict(op_kwargs)
    given_by_position = set(positional[: len(op_args)])
    for key in parameters:
        if key in context_keys and key in context and key not in kwargs and key not in given_by_position:
            kwargs[key] = context[key]

    def plain(value: Any, parameter: str) -> Any:
        try:
            return to_json_value(value, f"argument {parameter!r}")
        except NotJsonError as error:
            raise GangSpecError(
                f"{error}: {decorator} sends the arguments of {name}() to the replicas as JSON; "
                "pass numbers, strings, lists and dicts (for data or a model, a path or URL the replicas "
                "can read)",
                field=parameter,
            ) from None

    args = [
        plain(
            value,
            positional[index] if index < len(positional) else f"*{var_positional}[{index - len(positional)}]",
        )
        for index, value in enumerate(list(op_args))
    ]
    return args, {key: plain(value, key) for key, value in kwargs.items()}


def encode_payload(
    source: FunctionSource,
    args: list[Any],
    kwargs: dict[str, Any],
    *,
    min_python: PythonVersion,
    backend: str | None,
    decorator: str = DEFAULT_DECORATOR,
) -> str:
    """The value of `PAYLOAD_ENV`; `GangSpecError` past `MAX_PAYLOAD_BYTES`, naming the biggest argument."""
    payload = {
        "bootstrap": BOOTSTRAP_SOURCE,
        "function": source.name,
        "source": source.text,
        "filename": source.filename,
        "first_line": source.first_line,
        "min_python": list(min_python),
        "backend": backend,
        "decorator": decorator,
        "args": args,
        "kwargs": kwargs,
    }
    encoded = _encode(payload)
    if len(encoded) > MAX_PAYLOAD_BYTES:
        sizes = {f"positional argument {index + 1}": len(_encode(value)) for index, value in enumerate(args)}
        sizes.update({f"argument {key!r}": len(_encode(value)) for key, value in kwargs.items()})
        biggest = max(sizes, key=lambda label: sizes[label]) if sizes else None
        detail = f"; the biggest is {biggest} ({sizes[biggest]} bytes encoded)" if biggest else ""
        raise GangSpecError(
            f"{source.name}()'s source and arguments take {len(encoded)} bytes once encoded, over the "
            f"{MAX_PAYLOAD_BYTES}-byte limit of {decorator}{detail}. They travel in the {PAYLOAD_ENV} "
            "environment variable of every replica (Linux refuses one over 128 KiB): pass big inputs by "
            "reference (a path or URL the replicas read) and move big code into a module of the image "
            "that the function imports",
            field="op_kwargs",
        )
    return encoded


def _encode(value: Any) -> str:
    text = json.dumps(value, separators=(",", ":"))
    return base64.b64encode(zlib.compress(text.encode("utf-8"), 9)).decode("ascii")


def replica_command(python: str, min_python: PythonVersion, decorator: str = DEFAULT_DECORATOR) -> list[str]:
    """``<python> -c <entry program>``: the container's command on every replica."""
    return [python, "-c", replica_bootstrap.entry_program(min_python, decorator)]


def parse_min_python(value: str | Sequence[int] | None) -> PythonVersion | None:
    """``"3.11"`` or ``(3, 11)`` as a version tuple; `GangSpecError` otherwise."""
    if value is None:
        return None
    parts = value.split(".") if isinstance(value, str) else list(value)
    try:
        major, minor = (int(part) for part in parts)
    except (TypeError, ValueError):
        raise GangSpecError(
            f"min_python={value!r} is invalid: use a version such as '3.11'", field="min_python"
        ) from None
    return major, minor

"""One connection look-up for the triggers that start together, instead of one per trigger.

A sweep defers hundreds of `GangJobTrigger` instances at once, and the triggerer starts them in
batches (up to 50 per pass of its loop). Each needs to know what its connection resolves to now
(`AsyncGangJobHook.definition`: the extras, the kubeconfig's bytes), which costs a hook, a
request to the triggerer's supervisor and a kubeconfig read; done per trigger, a thousand of
them added a tenth of a second of the event loop's time in small pieces, and a thousand hooks
(each in a reference cycle with its client pool) for the garbage collector to walk (issue 33).

`resolve` shares one look-up among the triggers of one event loop asking for the same hook
arguments while it is in flight: a trigger arriving after it finished starts a new one, so a
trigger started after the connection (or its kubeconfig) was edited still sees the edit, as
before. The look-up runs in a task of its own, in a fresh context (a trigger's log binding is
its own), so a trigger cancelled while it waits does not cancel it for the others.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import weakref
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from airflow_gang.hooks.gang_async import AsyncGangJobHook


@dataclass(frozen=True)
class Resolved:
    """A connection as one look-up found it."""

    hook: AsyncGangJobHook
    """The hook the look-up was made with (its client is built only when used)."""
    definition: str
    """`AsyncGangJobHook.definition`: what the shared watch cache is keyed by."""
    extras: dict[str, Any]
    """The connection's extras, for a later hook of the same trigger (`reuse_lookup`)."""


_IN_FLIGHT: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, dict[str, asyncio.Task[Resolved]]] = (
    weakref.WeakKeyDictionary()
)


def _key(hook_kwargs: dict[str, Any]) -> str:
    return json.dumps(hook_kwargs, sort_keys=True, default=str)


async def resolve(
    hook_kwargs: dict[str, Any], new_hook: Callable[[], Awaitable[AsyncGangJobHook]]
) -> Resolved:
    """What the connection of ``hook_kwargs`` resolves to now, looked up once for every trigger
    of this loop asking while the look-up runs.

    :param hook_kwargs: the `AsyncGangJobHook` arguments (connection id, overrides).
    :param new_hook: builds a hook for them and looks its connection up (its extras cached).
    """
    in_flight = _IN_FLIGHT.setdefault(asyncio.get_running_loop(), {})
    key = _key(hook_kwargs)
    task = in_flight.get(key)
    if task is None:

        async def look_up() -> Resolved:
            try:
                hook = await new_hook()
                extras = await hook.get_conn_extras()
                return Resolved(hook, await hook.definition(), dict(extras))
            finally:
                in_flight.pop(key, None)

        task = asyncio.create_task(look_up(), context=contextvars.Context())
        # Every waiter may be cancelled before it ends: its failure is theirs, never the loop's log.
        task.add_done_callback(lambda done: done.cancelled() or done.exception())
        in_flight[key] = task
    return await asyncio.shield(task)

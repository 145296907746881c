"""The default allocate action: the pending pods of admitted gangs placed first fit, all or nothing.

Without ``preempt`` or ``reclaim`` configured, allocate places the pending pods of each admitted
gang, in the session's order, first-fit on a scratch copy of the nodes' free resources; the
placement is committed (the pods bound) only if the gang then has ``minMember`` pods placed —
all or nothing. With either configured, allocate pipelines as well (`allocate_pipelining`).
"""

from __future__ import annotations

from decimal import Decimal

from gang_sim.controllers import capacity
from gang_sim.controllers.volcano.model import Fit, Group, JsonDict, Key, SessionResult, Snapshot


def allocate(
    snapshot: Snapshot, placeable: list[Group], result: SessionResult
) -> tuple[set[Key], dict[Key, Fit], dict[Key, dict[Key, str]]]:
    """Place the pending pods of admitted gangs, all or nothing per gang; bindings go to ``result``.

    Returns the gangs placed whole, the fit of each gang tried (the others': `Group.waiting`),
    and where the pods of a gang that could not be placed whole would have gone.
    """
    nodes = sorted((n for n in snapshot.nodes), key=lambda n: n["metadata"]["name"])
    free = capacity.node_free(nodes, snapshot.pods)
    ready_groups: set[Key] = set()
    fit: dict[Key, Fit] = {}
    could_go: dict[Key, dict[Key, str]] = {}
    for group in placeable:
        pending = group.pending
        scratch = {name: dict(amounts) for name, amounts in free.items()}
        placed: list[tuple[JsonDict, str]] = []
        origin: str | None = None
        for task in pending:
            node, why = capacity.place(task, nodes, scratch)
            if node is None:
                origin = (
                    origin or f"{task['metadata']['name']}: {why.replace('are available', 'are unavailable')}"
                )
                continue
            scratch[node] = capacity.subtract(
                scratch[node], {**capacity.pod_requests(task), "pods": Decimal(1)}
            )
            placed.append((task, node))
        if group.scheduled + len(placed) >= group.min_member and (placed or group.scheduled):
            free = scratch
            ready_groups.add(group.key)
            result.bindings += [(t["metadata"]["namespace"], t["metadata"]["name"], n) for t, n in placed]
            fit[group.key] = (len(placed), len(pending) - len(placed), None)
        else:
            fit[group.key] = (len(placed), len(pending) - len(placed), origin)
            could_go[group.key] = {
                (task["metadata"]["namespace"], task["metadata"]["name"]): node for task, node in placed
            }
    return ready_groups, fit, could_go

"""The default allocate action: the pending pods of admitted gangs placed first fit, all or nothing.

Without ``preempt`` or ``reclaim`` configured, allocate places the pending pods of each admitted
gang, in the session's order, first-fit on a scratch copy of the nodes' free resources; the
placement is committed (the pods bound) only if the gang then has ``minMember`` pods placed —
all or nothing. With either configured, allocate pipelines as well (`allocate_pipelining`).

A gang smaller than its job (``minMember`` < its pods) is not placed whole in one go, as Volcano
v1.16.0-alpha.1 does it (``pkg/scheduler/actions/allocate/allocate.go``):
``allocateResourcesForTasks`` stops taking a job's tasks as soon as the job is ready (lines
849-851), ``allocateResources`` commits that and puts the job back among the queue's jobs while
it has tasks left (lines 343-356), and the gang plugin's job order puts jobs that are not ready
before those that are (``pkg/scheduler/plugins/gang/gang.go`` lines 139-163). So the jobs take
turns: each not-ready job first gets its ``minMember`` pods, then the ready ones get one more
pod per turn, in the session's order. Several such jobs on a small pool each end up holding
part of it.
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
    order = {group.key: index for index, group in enumerate(placeable)}
    left = {group.key: list(group.pending) for group in placeable}
    scheduled = {group.key: group.scheduled for group in placeable}
    placed_here = dict.fromkeys(order, 0)
    turns = list(placeable)

    def is_ready(group: Group) -> bool:
        return scheduled[group.key] >= group.min_member and scheduled[group.key] > 0

    while turns:
        # Not-ready jobs first (gang's job order), then the session's order.
        group = min(turns, key=lambda g: (is_ready(g), order[g.key]))
        turns.remove(group)
        scratch = {name: dict(amounts) for name, amounts in free.items()}
        placed: list[tuple[JsonDict, str]] = []
        origin: str | None = None
        tried = 0
        for task in left[group.key]:
            tried += 1
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
            if scheduled[group.key] + len(placed) >= group.min_member:
                break  # the job is ready: its other tasks wait for its next turn
        total = placed_here[group.key] + len(placed)
        if scheduled[group.key] + len(placed) >= group.min_member and (placed or scheduled[group.key]):
            free = scratch
            ready_groups.add(group.key)
            result.bindings += [(t["metadata"]["namespace"], t["metadata"]["name"], n) for t, n in placed]
            scheduled[group.key] += len(placed)
            placed_here[group.key] = total
            # Tasks tried are taken off the job's list, placed or not (Volcano pops them).
            left[group.key] = left[group.key][tried:]
            fit[group.key] = (total, len(group.pending) - total, None)
            if placed and left[group.key]:
                turns.append(group)
        else:
            fit[group.key] = (total, len(group.pending) - total, origin)
            could_go[group.key] = {
                (task["metadata"]["namespace"], task["metadata"]["name"]): node for task, node in placed
            }
    return ready_groups, fit, could_go

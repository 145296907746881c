"""Each queue's status as a session leaves it: state, what its gangs hold, their phases counted.

``status.state`` is the queue's (``Closing`` becomes ``Closed`` once none of its gangs is
Inqueue, Running or Unknown); ``allocated`` sums what its gangs' pods hold; ``pending``,
``inqueue``, ``running``, ``unknown`` and ``completed`` count its PodGroups by the phase the
session gives them (the scheduler adds the settled Completed ones it left out).
"""

from __future__ import annotations

from collections import Counter

from gang_sim.controllers import capacity
from gang_sim.controllers.capacity import Resources
from gang_sim.controllers.volcano.gate import queue_state
from gang_sim.controllers.volcano.model import Group, JsonDict, Snapshot
from gang_sim.quantity import format_quantity


class QueueTally:
    """Per queue, its gangs' phases as the session leaves them and what they hold."""

    def __init__(self) -> None:
        self.phases: dict[str, Counter[str]] = {}
        self.allocated: dict[str, list[Resources]] = {}

    def count(self, group: Group, status: JsonDict) -> None:
        phases = self.phases.get(group.queue)
        if phases is None:
            phases = self.phases[group.queue] = Counter()
        phases[status["phase"]] += 1
        if group.allocated:
            self.allocated.setdefault(group.queue, []).append(group.allocated)


def _render(resources: Resources) -> dict[str, str]:
    return {
        name: format_quantity(amount, binary="memory" in name or "storage" in name)
        for name, amount in sorted(resources.items())
        if amount
    }


def queue_statuses(snapshot: Snapshot, tally: QueueTally) -> dict[str, JsonDict]:
    statuses: dict[str, JsonDict] = {}
    for queue in snapshot.queues:
        name = queue["metadata"]["name"]
        phases = tally.phases.get(name) or Counter()
        state = queue_state(queue)
        if state == "Closing" and not any(phases[p] for p in ("Inqueue", "Running", "Unknown")):
            state = "Closed"
        statuses[name] = {
            "state": state,
            "allocated": _render(capacity.total(tally.allocated.get(name, []))),
            "pending": phases["Pending"],
            "inqueue": phases["Inqueue"],
            "running": phases["Running"],
            "unknown": phases["Unknown"],
            "completed": phases["Completed"],
        }
    return statuses

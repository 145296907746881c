"""Operational metrics through Airflow's own metrics facade (``[metrics]``: StatsD, DogStatsD or
OpenTelemetry, whatever the deployment configured; nothing when metrics are off).

=================================== ======= ===================================================
name (Airflow adds its prefix,       type    what
``airflow.`` by default)
=================================== ======= ===================================================
``gang.queue_wait``                 timer   submission to admission of a gang, when its job
                                            ends or is given up
``gang.run_time``                   timer   admission to the end, for a job that ran
``gang.admission_timeout``          counter a job deleted because its queue did not admit it
``gang.admission_timeout_retry``    counter a try that starts after its previous try's job
                                            hit its admission timeout
``gang.reaper_deletion``            counter the orphan reaper deleted a job
``gang.api_outage``                 counter an API outage a wait rode out (one per episode)
``gang.api_outage_seconds``         timer   how long that outage lasted
``gang.disruptions``                counter a running gang lost pods (one per episode;
                                            tag ``reason``: preempted, reclaimed, node_lost,
                                            evicted, deleted)
``gang.disruption_seconds``         timer   from a disruption that requeued the gang to its
                                            re-admission
=================================== ======= ===================================================

Tags: ``queue``, ``dag_id``, ``task_id`` (the reaper's and disruptions' also ``reason``). Plain
StatsD has no tags, so there only the names arrive; with ``statsd_influxdb_enabled``, DogStatsD
or OpenTelemetry the tags do too.

Each Airflow process sets up one facade: a task process the Task SDK's, the scheduler,
triggerer and API server Airflow core's (`_facade`). A metric never fails a job: every error
is swallowed and logged at DEBUG.
"""

from __future__ import annotations

import datetime as dt
import logging
from typing import Any

log = logging.getLogger(__name__)
PREFIX = "gang."


def _facade() -> Any:
    """The metrics module this process's Airflow component set up, or None when metrics are off.

    A task process sets up the Task SDK's, the scheduler, triggerer and API server Airflow
    core's (and whatever imports the SDK's serde sets that one up too, from the same
    ``[metrics]``). The first one with a real backend wins. Airflow 3.3 has no public "is it
    set up" question, so this asks the modules' own state.
    """
    modules = []
    from airflow.sdk._shared.observability.metrics import stats as sdk_stats

    modules.append(sdk_stats)
    try:
        from airflow._shared.observability.metrics import stats as core_stats
    except ImportError:  # a task image without Airflow core
        pass
    else:
        modules.append(core_stats)
    for module in modules:
        if getattr(module, "_factory", None) is None:
            continue
        if type(module._get_backend()).__name__ != "NoStatsLogger":
            return module
    return None


def _tags(**values: Any) -> dict[str, str]:
    return {key: str(value) for key, value in values.items() if value not in (None, "")}


def _incr(name: str, **tags: Any) -> None:
    try:
        if (facade := _facade()) is not None:
            facade.incr(PREFIX + name, tags=_tags(**tags))
    except Exception as error:
        log.debug("metric %s not sent: %s", name, error)


def _timing(name: str, seconds: float, **tags: Any) -> None:
    try:
        if (facade := _facade()) is not None:
            facade.timing(PREFIX + name, dt.timedelta(seconds=max(0.0, seconds)), tags=_tags(**tags))
    except Exception as error:
        log.debug("metric %s not sent: %s", name, error)


def try_ended(record: dict[str, Any], *, dag_id: str | None, task_id: str | None) -> None:
    """The metrics of a job whose record just closed (`airflow_gang.state.history.ended`)."""
    where = {"queue": record.get("queue"), "dag_id": dag_id, "task_id": task_id}
    queued, ran = record.get("queued_seconds"), record.get("run_seconds")
    if record.get("state") == "admission_timeout":
        _incr("admission_timeout", **where)
    elif record.get("admitted_at") and queued is not None:
        _timing("queue_wait", float(queued), **where)
    if ran is not None and record.get("state") in ("succeeded", "failed"):
        _timing("run_time", float(ran), **where)


def try_started(previous: dict[str, Any] | None, *, dag_id: str | None, task_id: str | None) -> None:
    """A new try's job: a retry after an admission timeout when ``previous`` (the task
    instance's record before it) ended so."""
    if previous is not None and previous.get("state") == "admission_timeout":
        _incr("admission_timeout_retry", queue=previous.get("queue"), dag_id=dag_id, task_id=task_id)


def reaper_deletion(*, reason: str, dag_id: str | None, task_id: str | None) -> None:
    _incr("reaper_deletion", reason=reason, dag_id=dag_id, task_id=task_id)


def api_outage_ridden(seconds: float) -> None:
    _incr("api_outage")
    _timing("api_outage_seconds", seconds)


def disruption_started(
    reason: str, queue: str | None, *, dag_id: str | None = None, task_id: str | None = None
) -> None:
    _incr("disruptions", reason=reason, queue=queue, dag_id=dag_id, task_id=task_id)


def disruption_readmitted(
    seconds: float, reason: str, queue: str | None, *, dag_id: str | None = None, task_id: str | None = None
) -> None:
    _timing("disruption_seconds", seconds, reason=reason, queue=queue, dag_id=dag_id, task_id=task_id)

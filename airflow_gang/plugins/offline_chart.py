"""The Gang jobs page's timeline chart in one self-contained HTML file, for a DAG run's report.

The page draws its charts in the browser (``timelineChart`` in ``static/gang.js``) from
``GET /gang/api/timeline``. A report has no server to ask, so `render_html` writes the page's own
shell (``static/page.html``) in its ``report`` view with ``gang.css``, ``theme.js`` and
``gang.js`` inlined and the timeline embedded as JSON in the shape that route answers: the file
opens from disk (``file://``), with no server and no network, and the same code draws the same
chart (light or dark as the browser is, times in the zone picked in its header). gang.js is the
only chart renderer; `airflow_gang.reports.timeline.format_table` is the text table for logs.

`timeline_data` turns job timelines (`JobTimeline`, what a DAG reads off the cluster) into that shape,
`write_html` writes the file and `embedded_data` reads the data back out of one. Standard
library only, besides `airflow_gang.reports.timeline`: a DAG's task imports it.
"""

from __future__ import annotations

import base64
import datetime as dt
import html
import json
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from airflow_gang.reports.timeline import TIMED_OUT, JobTimeline

STATIC_DIR = Path(__file__).resolve().parent / "static"
DATA_ID = "gang-report-data"
NO_QUEUE = "(no queue)"  # as the page API names the timeline of jobs without a queue
# The page's word for a job deleted by its admission timeout (its bar's colour).
ADMISSION_TIMEOUT = "admission_timeout"
JsonDict = dict[str, Any]

_DATA = re.compile(rf'<script type="application/json" id="{DATA_ID}">(?P<json>.*?)</script>', flags=re.DOTALL)


def _iso(moment: dt.datetime | None) -> str | None:
    return moment.isoformat() if moment else None


def _entry(timeline: JobTimeline, gave_up_after: float | None) -> JsonDict:
    """One job as ``/gang/api/timeline`` gives it (a ``TimelineRow``).

    A job deleted by its admission timeout ended ``gave_up_after`` seconds after it was queued
    (when known; else the chart marks its end unknown). A job neither finished nor deleted is
    live: its bar grows to the report's ``now``.
    """
    entry = timeline.to_json()
    if timeline.state == TIMED_OUT:
        finished = timeline.finished_at
        if finished is None and gave_up_after is not None:
            finished = timeline.queued_at + dt.timedelta(seconds=gave_up_after)
        waited = f" within {gave_up_after:g}s" if gave_up_after is not None else ""
        entry.update(
            finished_at=_iso(finished),
            live=False,
            gang_state=ADMISSION_TIMEOUT,
            reason=f"not admitted{waited}: deleted by its admission timeout",
        )
    else:
        entry.update(live=timeline.finished_at is None, gang_state=timeline.state, reason=None)
    entry["last_seen_at"] = None
    return entry


def timeline_data(
    timelines: Sequence[JobTimeline], *, now: dt.datetime | None = None, gave_up_after: float | None = None
) -> JsonDict:
    """The jobs as ``GET /gang/api/timeline`` answers (``TimelinePage``): per queue, by name, its
    jobs in submission order.

    :param now: where a live job's bar ends (default: now).
    :param gave_up_after: the admission timeout (seconds): how long a timed-out job queued.
    """
    queues: dict[str, list[JobTimeline]] = {}
    for timeline in timelines:
        queues.setdefault(timeline.queue or NO_QUEUE, []).append(timeline)
    return {
        "queues": [
            {
                "queue": queue,
                "jobs": [
                    _entry(t, gave_up_after)
                    for t in sorted(queues[queue], key=lambda t: (t.queued_at, t.name))
                ],
            }
            for queue in sorted(queues)
        ],
        "now": (now or dt.datetime.now(dt.UTC)).isoformat(),
        "warnings": [],
    }


def _static(name: str) -> str:
    return (STATIC_DIR / name).read_text(encoding="utf-8")


def _replace_once(page: str, old: str, new: str) -> str:
    if page.count(old) != 1:
        raise ValueError(f"static/page.html no longer has exactly one {old!r}: update offline_chart.py")
    return page.replace(old, new)


def _inline(tag: str, text: str, attributes: str = "") -> str:
    if f"</{tag}" in text.lower():
        raise ValueError(f"cannot inline a text holding </{tag}")
    return f"<{tag}{attributes}>\n{text}</{tag}>"


def _json_for_html(data: Mapping[str, Any]) -> str:
    """JSON that cannot end its ``<script>`` element early (``<``, ``>``, ``&`` escaped)."""
    text = json.dumps(data, separators=(",", ":"), ensure_ascii=False)
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def render_html(data: Mapping[str, Any], *, title: str) -> str:
    """The page in its report view, every file it needs inlined, drawing ``data`` (`timeline_data`).

    Times are shown in UTC by default, as the text table is.
    """
    page = _static("page.html")
    for key, value in {"ROOT": "", "VIEW": "report", "NAMESPACE": "", "NAME": "", "TIMEZONE": "UTC"}.items():
        page = page.replace("{{" + key + "}}", html.escape(value, quote=True))
    icon = base64.b64encode((STATIC_DIR / "icon.svg").read_bytes()).decode("ascii")
    report = _json_for_html({"title": title, "timeline": dict(data)}) + "\n"
    embedded = _inline("script", report, f' type="application/json" id="{DATA_ID}"')
    for old, new in (
        ("<title>Gang jobs</title>", f"<title>{html.escape(title)}</title>"),
        (
            '<link rel="icon" href="/static/icon.svg">',
            f'<link rel="icon" href="data:image/svg+xml;base64,{icon}">',
        ),
        ('<link rel="stylesheet" href="/static/gang.css">', _inline("style", _static("gang.css"))),
        ('<script src="/static/theme.js"></script>', _inline("script", _static("theme.js"))),
        ('<script src="/static/gang.js"></script>', f"{embedded}\n  {_inline('script', _static('gang.js'))}"),
    ):
        page = _replace_once(page, old, new)
    return page


def write_html(
    path: Path,
    timelines: Sequence[JobTimeline],
    *,
    title: str,
    gave_up_after: float | None = None,
    now: dt.datetime | None = None,
) -> Path:
    """Write the timeline chart of ``timelines`` to ``path`` (e.g. ``timeline.html``); returns it."""
    data = timeline_data(timelines, now=now, gave_up_after=gave_up_after)
    path.write_text(render_html(data, title=title), encoding="utf-8")
    return path


def embedded_data(page: str) -> JsonDict:
    """What `render_html` embedded: ``{"title": ..., "timeline": <timeline_data>}``."""
    found = _DATA.search(page)
    if found is None:
        raise ValueError(f"no <script id={DATA_ID!r}> in this page")
    data: JsonDict = json.loads(found.group("json"))
    return data

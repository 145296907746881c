"""A report's timeline chart as one HTML file: the page's own shell and scripts inlined, the
timeline embedded in the shape of ``/gang/api/timeline`` (drawn in Chromium by
tests/plugins/test_offline_chart_browser.py)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

from airflow_gang.plugins.offline_chart import (
    DATA_ID,
    STATIC_DIR,
    embedded_data,
    render_html,
    timeline_data,
    write_html,
)
from airflow_gang.plugins.schemas import TimelinePage
from airflow_gang.reports.timeline import JobTimeline, timed_out

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)


def after(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


DONE = JobTimeline("a", "ml", "default", "succeeded", T0, after(4), after(4), after(9))
RUNNING = JobTimeline("b", "ml", "research", "running", after(1), after(2), after(2))
STUCK = timed_out("c", "ml", "default", after(1))
NO_QUEUE = JobTimeline("d", "ml", None, "queued", after(3))


def test_the_data_is_the_timeline_apis_per_queue_in_submission_order() -> None:
    data = timeline_data([STUCK, NO_QUEUE, RUNNING, DONE], now=after(20), gave_up_after=30)
    assert data["now"] == after(20).isoformat()
    assert data["warnings"] == []
    assert [(q["queue"], [job["name"] for job in q["jobs"]]) for q in data["queues"]] == [
        ("(no queue)", ["d"]),
        ("default", ["a", "c"]),
        ("research", ["b"]),
    ]
    TimelinePage.model_validate(data)  # what the page API answers, to the key
    rows = {job["name"]: job for queue in data["queues"] for job in queue["jobs"]}
    assert rows["a"] == {
        **DONE.to_json(),
        "live": False,
        "last_seen_at": None,
        "gang_state": "succeeded",
        "reason": None,
    }
    assert (rows["b"]["live"], rows["b"]["gang_state"]) == (True, "running")  # grows to `now`
    assert (rows["d"]["live"], rows["d"]["gang_state"]) == (True, "queued")


def test_a_timed_out_job_ends_at_its_admission_timeout_in_the_pages_colour() -> None:
    (queue,) = timeline_data([STUCK], now=after(60), gave_up_after=30)["queues"]
    (row,) = queue["jobs"]
    assert row["state"] == "timed out"  # as timeline.json says it
    assert row["gang_state"] == "admission_timeout"  # the page's bar-admission_timeout
    assert row["live"] is False
    assert row["finished_at"] == after(31).isoformat()
    assert row["reason"] == "not admitted within 30s: deleted by its admission timeout"
    (unknown,) = timeline_data([STUCK])["queues"][0]["jobs"]
    assert unknown["finished_at"] is None  # drawn to its last known moment, its end marked unknown


def test_the_file_holds_the_pages_own_files_and_asks_for_nothing(tmp_path: Path) -> None:
    path = write_html(
        tmp_path / "timeline.html", [DONE, STUCK], title="2 jobs", gave_up_after=30, now=after(40)
    )
    page = path.read_text(encoding="utf-8")
    assert page.startswith("<!doctype html>")
    assert "{{" not in page
    assert 'data-view="report"' in page
    # gang.css, theme.js and gang.js as they are, nothing fetched: no src=, no linked file.
    for name in ("gang.css", "theme.js", "gang.js"):
        assert (STATIC_DIR / name).read_text(encoding="utf-8") in page, name
    assert not re.search(r"\ssrc=", page)
    assert not re.search(r'<link[^>]*href="(?!data:)', page)
    assert embedded_data(page) == {
        "title": "2 jobs",
        "timeline": timeline_data([DONE, STUCK], now=after(40), gave_up_after=30),
    }
    assert "<title>2 jobs</title>" in page


def test_text_in_the_data_cannot_end_its_script_element() -> None:
    hostile = JobTimeline("</script><script>alert(1)</script>", "ml", "default", "queued", T0)
    data = timeline_data([hostile], now=T0)
    page = render_html(data, title="<b>&</b>")
    assert "<script>alert(1)" not in page
    assert page.count(f'<script type="application/json" id="{DATA_ID}">') == 1
    assert embedded_data(page)["timeline"]["queues"][0]["jobs"][0]["name"] == hostile.name
    assert embedded_data(page)["title"] == "<b>&</b>"
    assert "<title>&lt;b&gt;&amp;&lt;/b&gt;</title>" in page

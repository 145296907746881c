"""A report's timeline.html (airflow_gang/plugins/offline_chart.py), opened from disk in headless
Chromium with no server: the page's own gang.js draws the embedded timeline.

The jobs are those of a deadlocked run without gang scheduling (dags/gang_vs_deadlock.py): six
jobs submitted together in queue ``default``, four deleted by a 15 s admission timeout, the
other two run one after the other; and one job still running in queue ``research``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

from airflow_gang.plugins.offline_chart import write_html
from airflow_gang.reports.timeline import JobTimeline, timed_out
from tests.plugins.conftest import css, script_errors, wait_for

T0 = dt.datetime(2026, 11, 30, 12, 0, 0, tzinfo=dt.UTC)
VICTIMS = [f"submit-{index}" for index in range(4)]
WINNERS = ["submit-4", "submit-5"]
TITLE = "6 jobs, gang_scheduling=disabled"


def after(seconds: float) -> dt.datetime:
    return T0 + dt.timedelta(seconds=seconds)


def deadlocked_run() -> list[JobTimeline]:
    return [
        *(timed_out(name, "ml", "default", T0) for name in VICTIMS),
        JobTimeline("submit-4", "ml", "default", "succeeded", T0, after(16), after(16), after(19)),
        JobTimeline("submit-5", "ml", "default", "succeeded", T0, after(20), after(20), after(23)),
        JobTimeline("other", "ml", "research", "running", after(5), after(6), after(6)),
    ]


def bars(chart: Any) -> dict[str, list[tuple[str, str]]]:
    """Per job (``namespace/name``), its bars: (class, tooltip)."""
    drawn = {}
    for link in chart.find_elements("css selector", "a[data-job]"):
        drawn[link.get_attribute("data-job")] = [
            (
                rect.get_attribute("class"),
                rect.find_element("css selector", "title").get_attribute("textContent"),
            )
            for rect in link.find_elements("css selector", "rect")
        ]
    return drawn


def test_the_report_file_draws_every_job_and_one_admission_timeout_bar_per_victim(
    browser: Any, tmp_path: Path
) -> None:
    path = write_html(
        tmp_path / "timeline.html", deadlocked_run(), title=TITLE, gave_up_after=15, now=after(30)
    )

    browser.get(path.as_uri())
    wait_for(
        browser, lambda d: len(css(d, "svg.timeline-svg")) == 2, "the charts of queues default and research"
    )

    charts = {chart.get_attribute("data-queue"): chart for chart in css(browser, "svg.timeline-svg")}
    drawn = bars(charts["default"])
    assert sorted(drawn) == sorted(f"ml/{name}" for name in [*VICTIMS, *WINNERS])
    assert len(charts["default"].find_elements("css selector", "rect.bar")) == 8
    for name in VICTIMS:  # never admitted: one bar, in the admission timeout's colour, to 15 s
        ((kind, tooltip),) = drawn[f"ml/{name}"]
        assert kind == "bar bar-admission_timeout"
        assert tooltip == (
            f"{name}: admission_timeout 15s — not admitted within 15s: deleted by its admission timeout"
        )
    for name, queued in zip(WINNERS, ("16s", "20s"), strict=True):  # queued, then ran 3 s
        assert [kind for kind, _ in drawn[f"ml/{name}"]] == ["bar bar-queued", "bar bar-succeeded"]
        assert drawn[f"ml/{name}"][0][1] == f"{name}: queued {queued}"
        assert drawn[f"ml/{name}"][1][1] == f"{name}: succeeded 3.0s"
    assert charts["default"].get_attribute("data-open") == "false"  # every job ended: the axis stops
    # A job still running when the report was written grows to that moment.
    assert [kind for kind, _ in bars(charts["research"])["ml/other"]] == ["bar bar-queued", "bar bar-running"]
    assert charts["research"].get_attribute("data-open") == "true"
    assert charts["research"].get_attribute("data-end") == "2026-11-30T12:00:30.000Z"

    # Only the timeline: no live part of the page, no link anywhere, nothing failed.
    assert TITLE in css(browser, "#report-about")[0].text
    assert browser.title == TITLE
    for selector in ("#filters", "#jobs-table", "#queues", "#pause", "#refreshed"):
        assert not css(browser, selector)[0].is_displayed(), selector
    assert css(browser, "a[href]") == []
    assert script_errors(browser) == []

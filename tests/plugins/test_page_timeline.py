"""Bars that end: a job that is not live and has no end is drawn to when it was last seen, with a
faded, dashed stub saying its end is unknown, and a chart whose jobs are all ended or not live
stops at their latest moment instead of growing with the clock.

The scenario's cluster (conftest.py) has only live jobs, so the API's answers are taken from the
real app and three of its jobs are turned into what the page gets for jobs whose objects went
away before their tasks recorded an end (the shape the API gives such rows: ``live: false``,
``finished_at: null``, ``last_seen_at``):

- ``train`` (admitted, running): ``gone``, last seen three seconds after its admission;
- ``waiting[1]`` (queued): ``gone``, last seen one second after its submission;
- ``waiting[0]`` (queued): ``ending``, never seen after its submission (``last_seen_at: null``).

Queue ``default`` then holds no job that is live and unfinished; queue ``research`` (``capped``,
queued for ever) still does.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from fastapi import FastAPI, Request
from fastapi.testclient import TestClient

from airflow_gang.plugins.app import create_app
from tests.plugins.conftest import Scenario, css, script_errors, served, wait_for

JsonDict = dict[str, Any]


def moment(iso: str | None) -> dt.datetime | None:
    return dt.datetime.fromisoformat(iso.replace("Z", "+00:00")) if iso else None


def later(iso: str, seconds: float) -> str:
    value = moment(iso)
    assert value is not None
    return (value + dt.timedelta(seconds=seconds)).isoformat()


class Unseen:
    """What the page is told of the three jobs (by name): state, ``last_seen_at``."""

    def __init__(self, scenario: Scenario, rows: list[JsonDict]) -> None:
        by_name = {row["name"]: row for row in rows}
        train, waiting0, waiting1 = (by_name[scenario.name(k)] for k in ("train", "waiting[0]", "waiting[1]"))
        assert train["admitted_at"] is not None
        self.changes: dict[str, JsonDict] = {
            train["name"]: {"state": "gone", "last_seen_at": later(train["admitted_at"], 3)},
            waiting1["name"]: {"state": "gone", "last_seen_at": later(waiting1["queued_at"], 1)},
            waiting0["name"]: {"state": "ending", "last_seen_at": None},
        }

    def row(self, row: JsonDict) -> JsonDict:
        change = self.changes.get(row["name"])
        if change is None or row["namespace"] != "default":
            return row
        return {**row, "live": False, "finished_at": None, "deleting": False, **change}

    def entry(self, entry: JsonDict) -> JsonDict:
        change = self.changes.get(entry["name"])
        if change is None or entry["namespace"] != "default":
            return entry
        return {
            **entry,
            "finished_at": None,
            "gang_state": change["state"],
            "state": change["state"],
            "last_seen_at": change["last_seen_at"],
        }


@pytest.fixture(scope="module")
def page_url(scenario: Scenario) -> Iterator[tuple[str, Unseen]]:
    """The real app at /gang, its answers about the three jobs changed on the way to the page."""
    app = create_app(authenticate=False)
    with TestClient(app) as real:
        unseen = Unseen(scenario, real.get("/api/jobs").json()["jobs"])
        root = FastAPI()

        def ask(path: str, request: Request) -> JsonDict:
            answer = real.get(path, params=list(request.query_params.multi_items()))
            assert answer.status_code == 200, answer.text
            return dict(answer.json())

        @root.get("/gang/api/jobs")
        def jobs(request: Request) -> JsonDict:
            data = ask("/api/jobs", request)
            data["jobs"] = [unseen.row(row) for row in data["jobs"]]
            data["live"] = sum(1 for row in data["jobs"] if row["live"])
            if "ending" not in data["states"]:
                data["states"] = [*data["states"], "ending"]
            return data

        @root.get("/gang/api/timeline")
        def timeline(request: Request) -> JsonDict:
            data = ask("/api/timeline", request)
            for queue in data["queues"]:
                queue["jobs"] = [unseen.entry(entry) for entry in queue["jobs"]]
            return data

        @root.get("/gang/api/jobs/{namespace}/{name}")
        def job(namespace: str, name: str, request: Request) -> JsonDict:
            data = ask(f"/api/jobs/{namespace}/{name}", request)
            data["job"] = unseen.row(data["job"])
            if data.get("timeline"):
                data["timeline"] = unseen.entry({**data["timeline"], "namespace": namespace, "name": name})
            return data

        root.mount("/gang", app)
        with served(root, "gang-ui-unseen") as url:
            yield f"{url}/gang", unseen


def chart(browser: Any, queue: str) -> Any:
    return css(browser, f'svg.timeline-svg[data-queue="{queue}"]')[0]


def right_edge(rect: Any) -> float:
    return float(rect.get_attribute("x")) + float(rect.get_attribute("width"))


def open_jobs_page(browser: Any, url: str) -> None:
    browser.get(f"{url}/?refresh=30")
    wait_for(browser, lambda d: len(css(d, "svg.timeline-svg")) == 2, "two timeline charts")
    unknown = 'svg[data-queue="default"] a[data-end="unknown"]'
    wait_for(browser, lambda d: len(css(d, unknown)) == 3, "the three jobs whose end is unknown")
    css(browser, "#pause")[0].click()


def axis(svg: Any) -> tuple[dt.datetime, dt.datetime]:
    start, end = moment(svg.get_attribute("data-start")), moment(svg.get_attribute("data-end"))
    assert start is not None
    assert end is not None
    return start, end


def test_a_chart_without_live_unfinished_jobs_ends_at_their_latest_moment_not_now(
    browser: Any, page_url: tuple[str, Unseen], scenario: Scenario, tmp_path: Any
) -> None:
    url, _ = page_url
    open_jobs_page(browser, url)
    # Queue default: nothing live and unfinished on it, so no "now" line, and its axis ends at the
    # latest moment of its jobs (one of the three's last sighting, or an end), before now.
    default = chart(browser, "default")
    assert default.get_attribute("data-open") == "false"
    assert not css(browser, 'svg[data-queue="default"] line.now-line')
    timeline = browser.execute_script(
        "return fetch(arguments[0]).then((r) => r.json())", f"{url}/api/timeline"
    )
    (entries,) = [queue["jobs"] for queue in timeline["queues"] if queue["queue"] == "default"]
    latest = max(
        value
        for entry in entries
        for key in ("queued_at", "admitted_at", "finished_at", "last_seen_at")
        if (value := moment(entry.get(key))) is not None
    )
    _, axis_end = axis(default)
    assert abs(axis_end - latest) < dt.timedelta(milliseconds=1)
    now = moment(timeline["now"])
    assert now is not None
    assert axis_end < now
    # Queue research: capped is live and queued, so it still runs to now.
    assert chart(browser, "research").get_attribute("data-open") == "true"
    assert css(browser, 'svg[data-queue="research"] line.now-line')
    browser.save_screenshot(str(tmp_path / "unseen-jobs.png"))
    assert script_errors(browser) == []


def test_a_job_not_live_without_an_end_is_drawn_to_its_last_sighting_then_a_dashed_stub(
    browser: Any, page_url: tuple[str, Unseen], scenario: Scenario
) -> None:
    url, unseen = page_url
    open_jobs_page(browser, url)
    start, end = axis(chart(browser, "default"))

    def x(iso: str) -> float:  # where the chart puts a moment (label 230, plot 750 wide)
        at = moment(iso)
        assert at is not None
        return 230 + 750 * (at - start) / (end - start)

    def job(key: str) -> str:
        return f'svg[data-queue="default"] a[data-job="default/{scenario.name(key)}"]'

    def seen(key: str) -> str:
        return str(unseen.changes[scenario.name(key)]["last_seen_at"])

    # train: its run drawn to when it was last seen, then the faded, dashed stub.
    (run,) = css(browser, f"{job('train')} rect.bar-gone")
    assert not css(browser, f"{job('train')} rect.bar-running")
    assert right_edge(run) == pytest.approx(x(seen("train")), abs=0.5)
    (stub,) = css(browser, f"{job('train')} rect.bar-end-unknown")
    assert float(stub.get_attribute("x")) == pytest.approx(right_edge(run))
    tip = stub.find_element("css selector", "title").get_attribute("textContent")
    assert tip.startswith(f"{scenario.name('train')}: gone, end unknown — last seen ")
    assert 'url("#gang-end-unknown-fade")' in stub.value_of_css_property("fill")
    assert stub.value_of_css_property("stroke-dasharray") not in ("none", "")
    # waiting[1]: never admitted; its wait ends at its last sighting, one second in.
    (wait,) = css(browser, f"{job('waiting[1]')} rect.bar-gone")
    assert right_edge(wait) == pytest.approx(x(seen("waiting[1]")), abs=0.5)
    assert css(browser, f"{job('waiting[1]')} rect.bar-end-unknown")
    # waiting[0]: "ending", never seen after its submission: nothing drawn past it.
    (ending,) = css(browser, f"{job('waiting[0]')} rect.bar-ending")
    assert float(ending.get_attribute("width")) == pytest.approx(2)
    (stub0,) = css(browser, f"{job('waiting[0]')} rect.bar-end-unknown")
    assert "not seen after" in stub0.find_element("css selector", "title").get_attribute("textContent")
    assert script_errors(browser) == []


def test_ending_is_not_live_and_has_a_badge_of_its_own(
    browser: Any, page_url: tuple[str, Unseen], scenario: Scenario
) -> None:
    url, _ = page_url
    open_jobs_page(browser, url)
    rows = {row.get_attribute("data-job"): row for row in css(browser, "#jobs-table tbody tr")}
    ending = rows[f"default/{scenario.name('waiting[0]')}"]
    assert (ending.get_attribute("data-state"), ending.get_attribute("data-live")) == ("ending", "false")
    assert not ending.find_elements("css selector", "button[data-action]")
    badge = ending.find_element("css selector", ".badge.state-ending")
    gone = rows[f"default/{scenario.name('train')}"].find_element("css selector", ".badge.state-gone")
    assert badge.value_of_css_property("border-top-style") == "dashed"
    assert badge.value_of_css_property("background-color") != gone.value_of_css_property("background-color")
    options = [option.get_attribute("value") for option in css(browser, "select[name=state] option")]
    assert "ending" in options
    assert script_errors(browser) == []


def test_the_job_page_of_a_job_not_live_without_an_end_says_when_it_was_last_seen(
    browser: Any, page_url: tuple[str, Unseen], scenario: Scenario, tmp_path: Any
) -> None:
    url, unseen = page_url
    train = scenario.name("train")
    browser.get(f"{url}/jobs/default/{train}?refresh=30")
    wait_for(browser, lambda d: css(d, "#job-state")[0].text == "gone", "the gone job")
    wait_for(browser, lambda d: css(d, "#job-timeline svg"), "its timeline")
    css(browser, "#pause")[0].click()
    svg = css(browser, "#job-timeline svg")[0]
    assert svg.get_attribute("data-open") == "false"
    axis_end = moment(svg.get_attribute("data-end"))
    last_seen = moment(unseen.changes[train]["last_seen_at"])
    assert axis_end is not None
    assert last_seen is not None
    assert abs(axis_end - last_seen) < dt.timedelta(milliseconds=1)
    assert css(browser, "#job-timeline rect.bar-end-unknown")
    assert not css(browser, "#job-timeline line.now-line")
    cards = css(browser, "#job-cards")[0].text
    assert "last seen" in cards
    browser.save_screenshot(str(tmp_path / "unseen-job.png"))
    assert script_errors(browser) == []

"""The page in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by selenium) against the plugin app served by uvicorn, reading the embedded cluster with
jobs in every phase (conftest.py). Screenshots go to the test's tmp dir.

Where Chromium is missing, the setup installs it with apt-get when it runs as root; otherwise
the tests are skipped, saying why. No browser is ever downloaded by selenium itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from fastapi import FastAPI

from airflow_gang.plugins.app import create_app
from tests.plugins.conftest import (
    ADMITTED_PHASES,
    Scenario,
    css,
    free_port,
    script_errors,
    served,
    wait_for,
)
from tests.plugins.test_api import EXPECTED_STATES, ti_url


@pytest.fixture(scope="module")
def base_url(scenario: Scenario) -> Iterator[str]:
    """The plugin app mounted at /gang, as the API server mounts it, served by uvicorn."""
    root = FastAPI()
    root.mount("/gang", create_app(authenticate=False))
    with served(root, "gang-ui-server") as url:
        yield url


def open_jobs_page(browser: Any, base_url: str) -> None:
    """Load the jobs page, wait for the table and the charts, then pause the live refresh so
    the checks read one rendering (a refresh replaces the rows)."""
    browser.get(f"{base_url}/gang/?refresh=2")
    wait_for(browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 7, "seven job rows")
    wait_for(browser, lambda d: len(css(d, "svg.timeline-svg")) == 2, "two timeline charts")
    css(browser, "#pause")[0].click()
    wait_for(browser, lambda d: css(d, "#pause")[0].get_attribute("aria-pressed") == "true")


def test_jobs_page_table_queues_and_timeline(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    open_jobs_page(browser, base_url)

    # The table: one row per job, in its phase, with queue, reason and the link to Airflow.
    names = {name: key for key, name in scenario.jobs.items()}
    rows = {row.get_attribute("data-job"): row for row in css(browser, "#jobs-table tbody tr")}
    states = {names[job.split("/")[1]]: row.get_attribute("data-state") for job, row in rows.items()}
    assert states == EXPECTED_STATES
    capped = rows[f"default/{scenario.name('capped')}"]
    assert "research" in capped.text
    reason = capped.find_element(By.CSS_SELECTOR, "td.reason").get_attribute("title")
    assert "insufficient nvidia.com/gpu" in reason
    link = rows[f"default/{scenario.name('sweep[1]')}"].find_element(By.CSS_SELECTOR, "a.ti-link")
    assert link.get_attribute("href") == f"{base_url}{ti_url(scenario, 'sweep', 1)}"
    assert link.get_attribute("target") == "_top"
    badges = {badge.text for badge in css(browser, "#jobs-table .badge")}
    assert badges == {"queued", "running", "succeeded", "failed"}

    # Queues and the timeline: one chart per queue, a bar per phase of each job.
    queues = {card.get_attribute("data-queue") for card in css(browser, ".card.queue")}
    assert queues == {"root", "default", "research"}
    # Capacity as the cluster has it: four GPUs, all held by ``train``; where each gang waits.
    assert "GPUs: 4" in css(browser, ".card.cluster .cluster-allocatable")[0].text
    assert "GPUs: 0" in css(browser, ".card.cluster .cluster-free")[0].text
    research = css(browser, '.card.queue[data-queue="research"]')[0].text
    assert "GPUs: 4 (1 gang)" in research
    positions = [cell.text for cell in css(browser, '#jobs-table tr[data-state="queued"] .position')]
    assert len(positions) == 3
    assert any(text.endswith("1 gang ahead") for text in positions)
    assert any("it can never start" in text for text in positions)
    charts = {svg.get_attribute("data-queue"): svg for svg in css(browser, "svg.timeline-svg")}
    assert set(charts) == {"default", "research"}
    assert charts["default"].size["width"] > 500
    assert charts["default"].size["height"] > 100

    def bars(queue: str, kind: str) -> int:
        return len(css(browser, f'svg[data-queue="{queue}"] rect.bar-{kind}'))

    assert (bars("default", "queued"), bars("default", "succeeded")) == (6, 2)
    assert (bars("default", "failed"), bars("default", "running")) == (1, 1)
    assert bars("research", "queued") == 1
    labels = [text.text for text in css(browser, 'svg[data-queue="default"] text.label')]
    assert scenario.name("train") in labels
    assert not css(browser, "#banner")[0].is_displayed()
    browser.save_screenshot(str(tmp_path / "gang-jobs.png"))

    # Live refresh: resumed, the page polls the API again and says when it last did.
    first = css(browser, "#refreshed")[0].text
    css(browser, "#pause")[0].click()
    wait_for(browser, lambda d: css(d, "#refreshed")[0].text not in ("", first), "a refresh")

    # Filters narrow the table (and stay in the URL).
    from selenium.webdriver.support.ui import Select

    Select(css(browser, "select[name=state]")[0]).select_by_value("queued")
    wait_for(
        browser,
        lambda d: [r.get_attribute("data-state") for r in css(d, "#jobs-table tbody tr")] == ["queued"] * 3,
        "only the three queued jobs",
    )
    assert "state=queued" in browser.current_url
    assert script_errors(browser) == []


def test_clicking_a_job_opens_its_page(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    from selenium.webdriver.common.by import By

    open_jobs_page(browser, base_url)
    train = scenario.name("train")
    browser.find_element(By.LINK_TEXT, train).click()

    wait_for(browser, lambda d: d.current_url == f"{base_url}/gang/jobs/default/{train}", "the job page")
    wait_for(browser, lambda d: len(css(d, "#job-pods tbody tr")) == 4, "four pods")
    css(browser, "#pause")[0].click()
    assert css(browser, "#job-title")[0].text == f"default/{train}"
    assert css(browser, "#job-state")[0].text == "running"
    pods = [row.text for row in css(browser, "#job-pods tbody tr")]
    assert all("Running" in pod and "sim-node-" in pod for pod in pods), pods
    progress = json.loads(css(browser, "#progress-value")[0].text)
    assert progress["phase"] in ADMITTED_PHASES
    # Written when the task saw the gang admitted (at bind time): all bound, running is a race.
    assert progress["replicas_bound"] == 4
    ti_link = css(browser, "#job-airflow a.ti-link")[0]
    assert ti_link.get_attribute("href") == f"{base_url}{ti_url(scenario, 'train')}"
    assert "Running" in css(browser, "#job-conditions")[0].text
    assert "Running" in css(browser, "#job-podgroup")[0].text
    assert len(css(browser, "#job-events tbody tr")) >= 4
    assert len(css(browser, "#job-timeline rect.bar-running")) == 1
    browser.save_screenshot(str(tmp_path / "gang-job.png"))
    assert script_errors(browser) == []
    print(f"screenshots in {tmp_path}")


def test_queued_job_page_says_why_it_waits(browser: Any, base_url: str, scenario: Scenario) -> None:
    browser.get(f"{base_url}/gang/jobs/default/{scenario.name('capped')}")
    wait_for(browser, lambda d: css(d, "#job-state")[0].text == "queued", "the queued job")
    assert "queue resource quota insufficient" in css(browser, "#job-reason")[0].text
    assert "queue research is capped at 2: it can never start" in css(browser, "#job-position")[0].text
    assert css(browser, "#progress-reason")[0].text.startswith("no progress entry")
    assert "unbound" in css(browser, "#job-pods")[0].text


def test_error_banner_when_the_cluster_is_unreachable(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    config = yaml.safe_load(Path(scenario.cluster.kubeconfig_path).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{free_port()}"
    path = tmp_path / "unreachable.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    monkeypatch.setenv(
        "AIRFLOW_CONN_KUBERNETES_DEFAULT",
        json.dumps({"conn_type": "kubernetes", "extra": {"kube_config_path": str(path)}}),
    )

    browser.get(f"{base_url}/gang/")
    wait_for(browser, lambda d: css(d, "#banner")[0].is_displayed(), "the error banner")
    assert css(browser, "#banner-title")[0].text == "Kubernetes cluster unreachable."
    assert "the Kubernetes API was unreachable" in css(browser, "#banner-message")[0].text
    assert "Traceback" not in browser.page_source
    browser.save_screenshot(str(tmp_path / "gang-error.png"))

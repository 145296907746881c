"""The page in a real browser: headless Chromium (Debian's ``chromium`` and ``chromium-driver``,
driven by selenium) against the plugin app served by uvicorn, reading the embedded cluster with
jobs in every phase (conftest.py). Screenshots go to the test's tmp dir; the four of the docs
(the jobs page and a job's page, light and dark; test_history.py writes three more) go to
``$GANG_SCREENSHOTS_DIR`` when it is set (``make screenshots``: docs/screenshots).

Light and dark: the page follows Airflow's theme when Airflow's UI frames it (a same-origin
parent whose root says ``color-scheme: dark`` / class ``dark``, as Airflow 3's UI marks it),
else the browser's ``prefers-color-scheme`` (emulated here through the DevTools protocol).

Where Chromium is missing, the setup installs it with apt-get when it runs as root; otherwise
the tests are skipped, saying why. No browser is ever downloaded by selenium itself.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote
from zoneinfo import ZoneInfo

import httpx
import pytest
import yaml
from fastapi import FastAPI
from fastapi.responses import HTMLResponse

from airflow_gang.plugins.app import create_app
from airflow_gang.plugins.settings import UiSettings
from tests.plugins.conftest import (
    ADMITTED_PHASES,
    OTHER_NAMESPACE,
    Scenario,
    css,
    docs_screenshot,
    free_port,
    script_errors,
    served,
    wait_for,
)
from tests.support.pages import EXPECTED_STATES, ti_url

# Airflow 3's UI frames an external view (url_route) in an iframe sandboxed like this.
AIRFLOW_SANDBOX = "allow-scripts allow-same-origin allow-forms"
# Where Airflow's [core] default_timezone is Europe/Paris (a second app, below).
PARIS = "Europe/Paris"


def airflow_ui(theme: str) -> str:
    """A stand-in for Airflow's UI: its root marked as Chakra UI's next-themes marks it (class and
    ``color-scheme``), the Gang jobs page in a same-origin, sandboxed iframe."""
    return f"""<!doctype html>
<html lang="en" class="{theme}" style="color-scheme: {theme}">
<head><meta charset="utf-8"><title>Airflow</title><link rel="icon" href="data:,"></head>
<body style="margin: 0; height: 100vh">
  <iframe id="view" title="Gang jobs" sandbox="{AIRFLOW_SANDBOX}" src="/gang/?refresh=30"
          style="border: none; width: 100%; height: 100%"></iframe>
</body>
</html>"""


@pytest.fixture(scope="module")
def base_url(scenario: Scenario) -> Iterator[str]:
    """The plugin app mounted at /gang, as the API server mounts it, served by uvicorn; beside it
    /airflow-ui?theme=dark|light, a parent page that frames it as Airflow's UI does, and /paris,
    the same app where Airflow's ``[core] default_timezone`` is Europe/Paris (and namespace team-b
    is shown too), /system where it is ``system`` (the browser's zone)."""
    root = FastAPI()

    @root.get("/airflow-ui", response_class=HTMLResponse)
    def framing_page(theme: str = "dark") -> HTMLResponse:
        return HTMLResponse(airflow_ui("light" if theme == "light" else "dark"))

    paris = UiSettings(namespaces=("default", OTHER_NAMESPACE), timezone=PARIS)
    root.mount("/paris", create_app(authenticate=False, settings_loader=lambda: paris))
    root.mount(
        "/system", create_app(authenticate=False, settings_loader=lambda: UiSettings(timezone="system"))
    )
    root.mount("/gang", create_app(authenticate=False))
    with served(root, "gang-ui-server") as url:
        yield url


# -- screenshots and colours ---------------------------------------------------------------------


def prefer_color_scheme(browser: Any, scheme: str) -> None:
    """What the browser tells pages the user prefers (the OS's dark mode), via DevTools."""
    browser.execute_cdp_cmd(
        "Emulation.setEmulatedMedia", {"features": [{"name": "prefers-color-scheme", "value": scheme}]}
    )


def theme(browser: Any) -> str:
    return str(browser.execute_script("return document.documentElement.dataset.theme || ''"))


# The colours an element shows: its text (or an SVG shape's fill) and the background behind it
# (its own, else its nearest ancestor's that is not transparent).
COLOURS_JS = r"""
const node = arguments[0];
const style = getComputedStyle(node);
const clear = (c) => !c || c === "transparent" || /^rgba\(.*,\s*0\)$/.test(c);
let ground = node, back = style.backgroundColor;
while (clear(back) && ground.parentElement) {
  ground = ground.parentElement;
  back = getComputedStyle(ground).backgroundColor;
}
return {text: style.color, fill: style.fill, background: back};
"""


def rgb(css_colour: str) -> tuple[float, float, float]:
    """``rgb(1, 2, 3)`` / ``rgba(1, 2, 3, 1)`` -> (1, 2, 3)."""
    numbers = re.findall(r"[\d.]+", css_colour)
    assert len(numbers) >= 3, css_colour
    red, green, blue = (float(n) for n in numbers[:3])
    return red, green, blue


def luminance(css_colour: str) -> float:
    """WCAG 2 relative luminance."""

    def channel(value: float) -> float:
        c = value / 255
        return c / 12.92 if c <= 0.03928 else ((c + 0.055) / 1.055) ** 2.4

    red, green, blue = (channel(v) for v in rgb(css_colour))
    return 0.2126 * red + 0.7152 * green + 0.0722 * blue


def contrast(one: str, other: str) -> float:
    """WCAG 2 contrast ratio (1 to 21)."""
    light, dark = sorted((luminance(one), luminance(other)), reverse=True)
    return (light + 0.05) / (dark + 0.05)


def colours(browser: Any, selector: str) -> list[dict[str, str]]:
    return [browser.execute_script(COLOURS_JS, node) for node in css(browser, selector)]


# Text the page shows, in both palettes: each must meet WCAG AA (4.5:1) on what is behind it.
JOBS_PAGE_TEXT = (
    "body",
    ".top .brand",
    ".top .muted",
    "#jobs-table th",
    "#jobs-table td.reason",
    "#jobs-table a.job-link",
    "#jobs-table .badge",
    ".card.queue dt",
    ".card.cluster dd",
    "#filters label",
    "#tz-select",
    ".legend",
)
JOB_PAGE_TEXT = (
    "body",
    "#job-title",
    "#job-state",
    "#job-cards dt",
    "#job-cards dd",
    "#job-pods td",
    "#job-events td",
)


def check_text_contrast(browser: Any, selectors: tuple[str, ...]) -> dict[str, float]:
    ratios = {}
    for selector in selectors:
        found = colours(browser, selector)
        assert found, f"nothing matches {selector}"
        ratios[selector] = min(contrast(c["text"], c["background"]) for c in found)
    low = {selector: round(ratio, 2) for selector, ratio in ratios.items() if ratio < 4.5}
    assert not low, f"text below WCAG AA (4.5:1) in the {theme(browser)} palette: {low}"
    return ratios


def palette(browser: Any) -> dict[str, str]:
    """The page's ground and text, and the fill of each kind of bar on its charts."""
    page = browser.execute_script(COLOURS_JS, css(browser, "body")[0])
    bars = {}
    for kind in ("queued", "running", "succeeded", "failed"):
        found = css(browser, f"svg.timeline-svg rect.bar-{kind}")
        if found:
            bars[kind] = browser.execute_script(COLOURS_JS, found[0])["fill"]
    return {"background": page["background"], "text": page["text"], **bars}


def check_charts_stand_out(browser: Any, colours_now: dict[str, str], shapes: bool) -> None:
    """The charts' axis text against the page's ground (4.5:1) and, with ``shapes``, their bars
    (3:1, WCAG's non-text contrast: the dark palette's; the light one keeps its pale "queued")."""
    ground = colours_now["background"]
    for kind in ("queued", "running", "succeeded", "failed"):
        if shapes and kind in colours_now:
            assert contrast(colours_now[kind], ground) >= 3, (kind, colours_now[kind], ground)
    for text in css(browser, "svg.timeline-svg text")[:3]:
        fill = browser.execute_script(COLOURS_JS, text)["fill"]
        assert contrast(fill, ground) >= 4.5, (fill, ground)


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


# -- light and dark ------------------------------------------------------------------------------


def color_scheme(browser: Any) -> str:
    return str(browser.execute_script("return getComputedStyle(document.documentElement).colorScheme"))


def check_dark_against_light(light: dict[str, str], dark: dict[str, str]) -> None:
    assert luminance(light["background"]) > 0.9
    assert luminance(dark["background"]) < 0.02  # dark really dark
    assert contrast(dark["text"], dark["background"]) >= 7
    for key, colour in light.items():
        assert dark[key] != colour, f"{key} is {colour} in both palettes"


def test_screenshots_of_the_jobs_page_light_and_dark(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    open_jobs_page(browser, base_url)
    assert theme(browser) == "light"
    assert browser.execute_script("return document.documentElement.dataset.themeSource") == "browser"
    assert color_scheme(browser) == "light"
    light = palette(browser)
    assert {"queued", "running", "succeeded", "failed"} <= set(light)
    check_text_contrast(browser, JOBS_PAGE_TEXT)
    check_charts_stand_out(browser, light, shapes=False)
    docs_screenshot(browser, tmp_path, "gang-jobs-light.png")

    # The user's system turns dark: the page follows at once, without a reload.
    prefer_color_scheme(browser, "dark")
    wait_for(browser, lambda d: theme(d) == "dark", "the dark palette")
    assert color_scheme(browser) == "dark"  # form controls and scrollbars too
    dark = palette(browser)
    check_dark_against_light(light, dark)
    check_text_contrast(browser, JOBS_PAGE_TEXT)
    check_charts_stand_out(browser, dark, shapes=True)
    hatch = css(browser, "#gang-disruption-hatch .hatch-ground")[0]
    assert (
        contrast(browser.execute_script(COLOURS_JS, hatch)["fill"], dark["background"]) < 2
    )  # a dark ground
    docs_screenshot(browser, tmp_path, "gang-jobs-dark.png")

    prefer_color_scheme(browser, "light")
    wait_for(browser, lambda d: theme(d) == "light", "the light palette again")
    assert palette(browser) == light
    assert script_errors(browser) == []


def test_screenshots_of_a_job_page_light_and_dark(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    train = scenario.name("train")
    browser.get(f"{base_url}/gang/jobs/default/{train}?refresh=30")
    wait_for(browser, lambda d: len(css(d, "#job-pods tbody tr")) == 4, "four pods")
    wait_for(browser, lambda d: css(d, "#job-timeline rect.bar-running"), "its timeline")
    css(browser, "#pause")[0].click()
    light = palette(browser)
    check_text_contrast(browser, JOB_PAGE_TEXT)
    docs_screenshot(browser, tmp_path, "gang-job-light.png")

    prefer_color_scheme(browser, "dark")
    wait_for(browser, lambda d: theme(d) == "dark", "the dark palette")
    dark = palette(browser)
    check_dark_against_light(light, dark)
    check_text_contrast(browser, JOB_PAGE_TEXT)
    check_charts_stand_out(browser, dark, shapes=True)
    card = browser.execute_script(COLOURS_JS, css(browser, "#job-cards .card")[0])
    assert luminance(card["background"]) < 0.05
    docs_screenshot(browser, tmp_path, "gang-job-dark.png")
    assert script_errors(browser) == []


def in_parent(browser: Any, script: str) -> None:
    """Run ``script`` in the framing page (Airflow's UI), then come back into the frame."""
    browser.switch_to.default_content()
    browser.execute_script(script)
    browser.switch_to.frame(css(browser, "iframe#view")[0])


def test_framed_by_airflows_ui_the_page_follows_airflows_theme(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    # Airflow's UI is dark; the browser itself prefers light: Airflow's theme wins.
    browser.get(f"{base_url}/airflow-ui?theme=dark")
    browser.switch_to.frame(wait_for(browser, lambda d: css(d, "iframe#view"), "the frame")[0])
    wait_for(browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 7, "the framed jobs page")
    wait_for(browser, lambda d: theme(d) == "dark", "Airflow's dark theme")
    assert browser.execute_script("return document.documentElement.dataset.themeSource") == "airflow"
    assert luminance(palette(browser)["background"]) < 0.02
    check_text_contrast(browser, JOBS_PAGE_TEXT)
    browser.save_screenshot(str(tmp_path / "framed-dark.png"))

    # The user switches Airflow to light (next-themes rewrites the root's class and color-scheme)
    # while the system prefers dark: the page follows Airflow, without a reload.
    prefer_color_scheme(browser, "dark")
    in_parent(
        browser, "const r = document.documentElement; r.className = 'light'; r.style.colorScheme = 'light';"
    )
    wait_for(browser, lambda d: theme(d) == "light", "Airflow's light theme")
    assert luminance(palette(browser)["background"]) > 0.9
    # A root marked by its class only: the class says it.
    in_parent(browser, "const r = document.documentElement; r.style.colorScheme = ''; r.className = 'dark';")
    wait_for(browser, lambda d: theme(d) == "dark", "the class's dark theme")

    # The frame is sandboxed without allow-modals (window.confirm() is ignored there): an action
    # asks in the page's own dialog, naming the job by its kind; Cancel does nothing.
    train = scenario.name("train")
    row = css(browser, f'#jobs-table tr[data-job="default/{train}"]')[0]
    row.find_element("css selector", 'button[data-action="delete"]').click()
    wait_for(browser, lambda d: css(d, "dialog#confirm")[0].get_attribute("open") is not None, "the dialog")
    question = css(browser, "#confirm-text")[0].text
    assert question.startswith(f"Delete PyTorchJob default/{train} and its PodGroup?"), question
    browser.save_screenshot(str(tmp_path / "framed-confirm.png"))
    css(browser, "#confirm-cancel")[0].click()
    wait_for(
        browser, lambda d: css(d, "dialog#confirm")[0].get_attribute("open") is None, "the dialog closed"
    )
    assert not css(browser, "#rows-action-note")[0].is_displayed()
    assert (
        css(browser, f'#jobs-table tr[data-job="default/{train}"]')[0].get_attribute("data-state")
        == "running"
    )
    assert script_errors(browser) == []


def test_the_page_is_dark_before_it_draws_when_the_browser_prefers_dark(
    browser: Any, base_url: str, scenario: Scenario
) -> None:
    """theme.js runs in <head>: the first paint already has the palette (no white flash)."""
    prefer_color_scheme(browser, "dark")
    browser.get(f"{base_url}/gang/jobs/default/{scenario.name('capped')}?refresh=30")
    assert theme(browser) == "dark"
    assert luminance(palette(browser)["background"]) < 0.02
    assert script_errors(browser) == []


# -- words: gang jobs, each by its own kind ------------------------------------------------------


def test_labels_say_jobs_and_each_job_its_own_kind(browser: Any, base_url: str, scenario: Scenario) -> None:
    open_jobs_page(browser, base_url)
    header = css(browser, ".top")[0].text
    filters = css(browser, "#filters")[0].text
    assert "PyTorchJob" not in header + filters
    assert "training jobs gang-scheduled by Volcano" in header
    assert "every gang job, not only Airflow's" in filters
    assert {cell.text for cell in css(browser, "#jobs-table td.kind")} == {"PyTorchJob"}

    # A job outside Airflow says what it is: its own kind.
    browser.get(f"{base_url}/paris/jobs/{OTHER_NAMESPACE}/{scenario.outsider}?refresh=30")
    wait_for(browser, lambda d: "not submitted by Airflow" in css(d, "#job-airflow")[0].text, "the outsider")
    assert css(browser, "#job-airflow")[0].text == "This PyTorchJob was not submitted by Airflow."
    assert script_errors(browser) == []


# -- timezone ------------------------------------------------------------------------------------


def api_jobs(base_url: str, prefix: str = "/gang") -> dict[str, dict[str, Any]]:
    answer = httpx.get(f"{base_url}{prefix}/api/jobs", timeout=30)
    assert answer.status_code == 200, answer.text
    return {job["name"]: job for job in answer.json()["jobs"]}


def in_zone(iso: str, zone: str) -> str:
    """A time as the page shows it: 24-hour, in ``zone``."""
    return dt.datetime.fromisoformat(iso).astimezone(ZoneInfo(zone)).strftime("%Y-%m-%d %H:%M:%S")


def submitted(browser: Any, name: str) -> str:
    cells = css(browser, f'#jobs-table tr[data-job="default/{name}"] td.submitted')
    return str(cells[0].text) if cells else ""


def zone_shown(browser: Any) -> str:
    return str(css(browser, "#timezone")[0].text)


def stored(browser: Any, key: str) -> Any:
    return browser.execute_script("return window.localStorage.getItem(arguments[0])", key)


def test_times_follow_airflows_default_timezone_the_users_choice_and_tz(
    browser: Any, base_url: str, scenario: Scenario, tmp_path: Path
) -> None:
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select

    train = scenario.name("train")
    queued_at = api_jobs(base_url)[train]["queued_at"]
    page = f"{base_url}/paris/?refresh=30"

    def shows(zone: str) -> None:
        wait_for(browser, lambda d: zone_shown(d) == f"times in {zone}", f"times in {zone}")
        wait_for(browser, lambda d: submitted(d, train) == in_zone(queued_at, zone), f"{train} in {zone}")

    # Airflow's [core] default_timezone; the key Airflow's own UI keeps in localStorage is not read.
    browser.get(page)
    browser.execute_script("window.localStorage.setItem('timezone', arguments[0])", json.dumps("Asia/Tokyo"))
    browser.get(page)
    shows(PARIS)
    assert css(browser, "#tz-select option")[0].text == f"Airflow default ({PARIS})"

    # The user's choice applies at once and is kept under the page's own key.
    Select(css(browser, "#tz-select")[0]).select_by_value("UTC")
    shows("UTC")
    assert stored(browser, "airflow-gang.timezone") == "UTC"
    browser.get(page)
    shows("UTC")
    # Any zone the browser knows, typed (with the list of them to pick from).
    Select(css(browser, "#tz-select")[0]).select_by_value("other")
    field = css(browser, "#tz-input")[0]
    assert field.is_displayed()
    assert len(css(browser, "#tz-zones option")) > 100
    field.send_keys("Nowhere/Atlantis", Keys.ENTER)
    wait_for(browser, lambda d: css(d, "#tz-input")[0].get_attribute("aria-invalid") == "true", "refused")
    assert zone_shown(browser) == "times in UTC"
    field.clear()
    field.send_keys("America/Sao_Paulo", Keys.ENTER)
    shows("America/Sao_Paulo")
    assert stored(browser, "airflow-gang.timezone") == "America/Sao_Paulo"

    # ?tz= wins over both, and follows the links to a job's page.
    browser.get(f"{page}&tz=Asia/Kolkata")
    shows("Asia/Kolkata")
    kolkata = quote("Asia/Kolkata", safe="")
    link = css(browser, f'#jobs-table tr[data-job="default/{train}"] a.job-link')[0]
    assert link.get_attribute("href").endswith(f"/paris/jobs/default/{train}?tz={kolkata}")
    link.click()
    wait_for(browser, lambda d: css(d, "#job-cards dd"), "the job page")
    shows_on_job = in_zone(queued_at, "Asia/Kolkata")
    wait_for(
        browser, lambda d: shows_on_job in css(d, "#job-cards")[0].text, "its submission in Asia/Kolkata"
    )
    assert zone_shown(browser) == "times in Asia/Kolkata"
    assert css(browser, "a.back")[0].get_attribute("href").endswith(f"/paris/?tz={kolkata}")

    # An unknown zone is ignored: the user's choice, else Airflow's default; the page works.
    browser.get(f"{page}&tz=Mars/Olympus_Mons")
    shows("America/Sao_Paulo")
    assert "Mars/Olympus_Mons" in css(browser, "#timezone")[0].get_attribute("title")
    browser.execute_script("window.localStorage.setItem('airflow-gang.timezone', 'Not/A_Zone')")
    browser.get(f"{page}&tz=Mars/Olympus_Mons")
    shows(PARIS)
    assert len(css(browser, "#jobs-table tbody tr")) == 7
    assert not css(browser, "#banner")[0].is_displayed()
    browser.save_screenshot(str(tmp_path / "timezone.png"))
    assert script_errors(browser) == []


def test_a_system_default_timezone_is_the_browsers_own(
    browser: Any, base_url: str, scenario: Scenario
) -> None:
    browser.execute_cdp_cmd("Emulation.setTimezoneOverride", {"timezoneId": "Pacific/Auckland"})
    train = scenario.name("train")
    queued_at = api_jobs(base_url, "/system")[train]["queued_at"]
    browser.get(f"{base_url}/system/?refresh=30")
    wait_for(browser, lambda d: zone_shown(d) == "times in Pacific/Auckland", "the browser's zone")
    wait_for(
        browser, lambda d: submitted(d, train) == in_zone(queued_at, "Pacific/Auckland"), "Auckland times"
    )
    assert css(browser, "#tz-select option")[0].text == "Airflow default (this browser's, Pacific/Auckland)"
    assert script_errors(browser) == []

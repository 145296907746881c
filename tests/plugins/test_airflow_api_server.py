"""The plugin inside Airflow's own API server (``airflow api-server``, SQLite, simple auth manager).

The installed ``airflow.plugins`` entry point brings the app to ``/gang`` and the "Gang jobs"
entry to the navigation; the JSON API there authenticates with Airflow's JWT and reads the
embedded cluster and the metadata DB of the scenario (conftest.py).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.plugins.conftest import ADMITTED_PHASES, Scenario, css, free_port, wait_for

STARTUP_TIMEOUT = 180.0
VIEWER_PASSWORD = "gang-viewer-password"
EDITOR_PASSWORD = "gang-editor-password"
ACTION_HEADERS = {"X-Requested-By": "test"}


def log_tail(path: Path) -> str:
    return path.read_text(errors="replace")[-3000:] if path.exists() else "(no log)"


@pytest.fixture(scope="module")
def api_server(scenario: Scenario, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """``airflow api-server`` on a free port, with this session's AIRFLOW_HOME and DB; always killed."""
    installed = {ep.value for ep in entry_points(group="airflow.plugins")}
    assert "airflow_gang.plugins.plugin:GangPlugin" in installed, (
        "the airflow.plugins entry point is not installed: run `pip install -e .` (or `make install`)"
    )
    workdir = tmp_path_factory.mktemp("api-server")
    log = workdir / "api-server.log"
    passwords = workdir / "passwords.json"
    passwords.write_text(json.dumps({"viewer": VIEWER_PASSWORD, "editor": EDITOR_PASSWORD}))
    port = free_port()
    env = {
        **os.environ,
        "AIRFLOW__CORE__AUTH_MANAGER": "airflow.api_fastapi.auth.managers.simple.simple_auth_manager."
        "SimpleAuthManager",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_ALL_ADMINS": "False",
        # Airflow's simple auth manager roles: a viewer reads, a user may also change DAG runs.
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": "viewer:viewer,editor:user",
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
        "AIRFLOW__API__BASE_URL": f"http://127.0.0.1:{port}",
    }
    airflow = Path(sys.executable).parent / "airflow"
    with log.open("wb") as output:
        process = subprocess.Popen(
            [str(airflow), "api-server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1"],
            cwd=workdir,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + STARTUP_TIMEOUT
        while True:
            if process.poll() is not None:
                pytest.fail(f"airflow api-server exited with {process.returncode}:\n{log_tail(log)}")
            try:
                if httpx.get(f"{base}/api/v2/monitor/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                pytest.fail(f"airflow api-server not healthy after {STARTUP_TIMEOUT:.0f}s:\n{log_tail(log)}")
            time.sleep(0.5)
        yield base
    finally:
        if process.poll() is None:
            os.killpg(process.pid, signal.SIGTERM)
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(process.pid, signal.SIGKILL)
                process.wait(timeout=10)


def sign_in(api_server: str, username: str, password: str) -> str:
    answer = httpx.post(
        f"{api_server}/auth/token", json={"username": username, "password": password}, timeout=30
    )
    assert answer.status_code == 201, answer.text
    return str(answer.json()["access_token"])


@pytest.fixture(scope="module")
def token(api_server: str) -> str:
    """A JWT of the read-only ``viewer`` user."""
    return sign_in(api_server, "viewer", VIEWER_PASSWORD)


@pytest.fixture(scope="module")
def editor_token(api_server: str) -> str:
    """A JWT of ``editor``, whose role may change DAG runs and task instances."""
    return sign_in(api_server, "editor", EDITOR_PASSWORD)


def test_nav_entry_and_app_are_registered(api_server: str, token: str) -> None:
    answer = httpx.get(
        f"{api_server}/api/v2/plugins", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    plugins = {plugin["name"]: plugin for plugin in answer.json()["plugins"]}
    ours = plugins["airflow_gang"]
    assert [(app["url_prefix"], app["name"]) for app in ours["fastapi_apps"]] == [("/gang", "Gang jobs")]
    (view,) = ours["external_views"]
    assert view["name"] == "Gang jobs"
    assert view["href"] == "/gang/"
    assert view["destination"] == "nav"
    assert view["url_route"] == "gang-jobs"
    errors = httpx.get(
        f"{api_server}/api/v2/plugins/importErrors", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert errors.status_code == 200, errors.text
    assert errors.json()["import_errors"] == []


def test_gang_app_is_served_and_authenticated(api_server: str, token: str, scenario: Scenario) -> None:
    page = httpx.get(f"{api_server}/gang/", timeout=30)
    assert page.status_code == 200
    assert 'data-root="/gang"' in page.text
    assert httpx.get(f"{api_server}/gang/static/gang.js", timeout=30).status_code == 200

    # Airflow does not authenticate plugin apps; the plugin does, with Airflow's own JWT.
    anonymous = httpx.get(f"{api_server}/gang/api/jobs", timeout=30)
    assert anonymous.status_code == 401
    forged = httpx.get(f"{api_server}/gang/api/jobs", headers={"Authorization": "Bearer x.y.z"}, timeout=30)
    assert forged.status_code in (401, 403)

    headers = {"Authorization": f"Bearer {token}"}
    jobs = httpx.get(f"{api_server}/gang/api/jobs", headers=headers, timeout=60)
    assert jobs.status_code == 200, jobs.text
    states = {job["name"]: job["state"] for job in jobs.json()["jobs"]}
    assert states[scenario.name("train")] == "running"
    assert states[scenario.name("broken")] == "failed"
    assert states[scenario.name("capped")] == "queued"
    assert len(states) == 7

    detail = httpx.get(
        f"{api_server}/gang/api/jobs/default/{scenario.name('train')}", headers=headers, timeout=60
    )
    assert detail.status_code == 200, detail.text
    assert detail.json()["progress"]["value"]["phase"] in ADMITTED_PHASES
    assert detail.json()["airflow"]["task_instance_url"].startswith(f"/dags/{scenario.dag_id}/runs/")

    queues = httpx.get(f"{api_server}/gang/api/queues", headers=headers, timeout=60)
    assert queues.status_code == 200, queues.text
    assert {q["name"] for q in queues.json()["queues"]} == {"root", "default", "research"}


def test_page_in_airflows_own_ui(
    browser: Any, api_server: str, token: str, scenario: Scenario, tmp_path: Path
) -> None:
    """Signed in (the UI's ``_token`` cookie), Airflow's UI frames the page at /plugin/gang-jobs."""
    browser.get(f"{api_server}/api/v2/monitor/health")  # the origin, to set its cookie
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    browser.get(f"{api_server}/plugin/gang-jobs")

    frames = wait_for(browser, lambda d: css(d, "iframe"), "Airflow's UI framing the plugin page")
    assert frames[0].get_attribute("src") == f"{api_server}/gang/"
    browser.switch_to.frame(frames[0])
    wait_for(
        browser, lambda d: len(css(d, "#jobs-table tbody tr")) == 7, "seven job rows, cookie-authenticated"
    )
    wait_for(browser, lambda d: len(css(d, "svg.timeline-svg")) == 2, "two timeline charts")
    assert not css(browser, "#banner")[0].is_displayed()
    browser.switch_to.default_content()
    browser.save_screenshot(str(tmp_path / "airflow-ui-gang-jobs.png"))
    print(f"screenshot: {tmp_path / 'airflow-ui-gang-jobs.png'}")


def test_a_viewer_may_not_delete_a_job_and_an_editor_passes_the_check(
    api_server: str, token: str, editor_token: str, scenario: Scenario
) -> None:
    train = scenario.name("train")
    url = f"{api_server}/gang/api/jobs/default/{train}"
    refused = httpx.post(
        f"{url}/delete", headers={"Authorization": f"Bearer {token}", **ACTION_HEADERS}, timeout=60
    )
    assert refused.status_code == 403, refused.text
    error = refused.json()["error"]
    assert error["kind"] == "not_permitted"
    assert f"viewer may not delete jobs of DAG '{scenario.dag_id}'" in error["message"]
    still = httpx.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=60)
    assert still.json()["job"]["state"] == "running"
    # The editor is let through to the job's own rules: a running job has nothing to resume.
    allowed = httpx.post(
        f"{url}/resume", headers={"Authorization": f"Bearer {editor_token}", **ACTION_HEADERS}, timeout=60
    )
    assert allowed.status_code == 409, allowed.text
    assert "is not suspended" in allowed.json()["error"]["message"]
    anonymous = httpx.post(f"{url}/delete", headers=ACTION_HEADERS, timeout=60)
    assert anonymous.status_code == 401


def test_in_a_browser_a_viewers_delete_is_refused_with_the_reason(
    browser: Any, api_server: str, token: str, scenario: Scenario, tmp_path: Path
) -> None:
    train = scenario.name("train")
    browser.get(f"{api_server}/api/v2/monitor/health")  # the origin, to set its cookie
    browser.add_cookie({"name": "_token", "value": token, "path": "/"})
    browser.get(f"{api_server}/gang/jobs/default/{train}?refresh=60")
    buttons = wait_for(
        browser, lambda d: css(d, '#job-actions button[data-action="delete"]'), "a delete button"
    )
    buttons[0].click()
    browser.switch_to.alert.accept()  # "Delete PyTorchJob ...?"
    wait_for(browser, lambda d: css(d, "#banner")[0].is_displayed(), "the refusal")
    assert css(browser, "#banner-title")[0].text == "Not allowed."
    assert "viewer may not delete jobs of DAG" in css(browser, "#banner-message")[0].text
    assert css(browser, "#job-state")[0].text == "running"
    browser.save_screenshot(str(tmp_path / "viewer-refused.png"))

"""One embedded cluster with gang jobs in every phase, shared by the UI plugin's tests.

The scenario is the seed shape (Master + 3 Workers, 1 GPU each, on 2 nodes x 2 GPUs: one job
fits at a time), submitted by the real operator from a real DAG run (``dag.test()``), so the
jobs carry real identity labels and the metadata DB holds the DAG run, the task instances and
their task state store entries:

- ``sweep[0]``, ``sweep[1]``: a mapped task; both jobs succeeded;
- ``broken``: every replica exits 1; the job failed;
- ``train``: runs for ten minutes (``wait_for_completion=False``), holding all four GPUs;
- ``waiting[0]``, ``waiting[1]``: submitted without waiting, queued behind ``train``;
- ``capped``: needs 4 GPUs in queue ``research`` whose capability is 2: queued for ever;
- ``outsider``: a PyTorchJob submitted without Airflow (no identity labels), in ``team-b``.
"""

from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import shutil
import socket
import subprocess
import textwrap
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.hooks.gang import GangJobHook
from airflow_gang.model.naming import job_name
from airflow_gang.spec import GangJobSpec
from gang_sim.cluster import SimCluster
from tests.e2e.conftest import load_dag_file
from tests.metadata import migrate_db
from tests.waiting import eventually

DAGS = Path(os.environ["AIRFLOW__CORE__DAGS_FOLDER"])
DAG_ID = "gang_ui_scenario"
OTHER_NAMESPACE = "team-b"

DAG_SOURCE = """
import datetime as dt

from airflow.sdk import DAG

from airflow_gang.operators.pytorch_job import PyTorchJobOperator


def sim(**annotations):
    return {"metadata": {"annotations": {f"sim.airflow-gang.io/{k}": v for k, v in annotations.items()}}}


common = dict(
    image="ghcr.io/acme/train:1", command=["python", "train.py"], workers=3,
    resources={"nvidia.com/gpu": 1}, poll_interval=0.2, admission_timeout=120,
    delete_on_finish="never", deferrable=False, get_logs=False,
)

with DAG("__DAG_ID__", schedule=None, start_date=dt.datetime(2026, 1, 1), catchup=False) as dag:
    sweep = PyTorchJobOperator.partial(task_id="sweep", **common).expand(
        pod_template=[sim(duration="0.3"), sim(duration="0.4")]
    )
    broken = PyTorchJobOperator(
        task_id="broken", restart_policy="Never", retries=0,
        pod_template=sim(duration="0.3", **{"exit-code": "1", "log": "CUDA error: out of memory"}),
        **common,
    )
    train = PyTorchJobOperator(
        task_id="train", wait_for_completion=False, trigger_rule="all_done",
        pod_template=sim(duration="600", log="epoch 1 loss 0.9"), **common,
    )
    waiting = PyTorchJobOperator.partial(
        task_id="waiting", wait_for_completion=False, wait_for_admission=False, **common
    ).expand(pod_template=[sim(duration="5"), sim(duration="5")])
    capped = PyTorchJobOperator(
        task_id="capped", queue="research", wait_for_completion=False, wait_for_admission=False,
        pod_template=sim(duration="5"), **common,
    )
    sweep >> broken >> train >> [waiting, capped]
"""


# The progress entry of ``train`` is written when its task sees the gang admitted: "admitted"
# (every replica bound, the PodGroup still Inqueue) or, a Volcano session later, "running".
# Which one the task saw first is a race.
ADMITTED_PHASES = ("admitted", "running")


@dataclass(frozen=True)
class Scenario:
    cluster: SimCluster
    dag_id: str
    run_id: str
    jobs: dict[str, str]  # task key ("sweep[0]", "train", ...) -> job name
    outsider: str

    def name(self, key: str) -> str:
        return self.jobs[key]


def _load_dag() -> Any:
    path = DAGS / f"{DAG_ID}.py"
    path.write_text(textwrap.dedent(DAG_SOURCE).replace("__DAG_ID__", DAG_ID))
    spec = importlib.util.spec_from_file_location(DAG_ID, path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.dag


def _submit_outsider(cluster: SimCluster) -> str:
    """A PyTorchJob from outside Airflow: gang-scheduled, but without identity labels."""
    with cluster.api_client() as api:
        k8s.CoreV1Api(api).create_namespace({"metadata": {"name": OTHER_NAMESPACE}})
    hook = GangJobHook(conn_id=None, kubernetes_conn_id=None, config_file=cluster.kubeconfig_path)
    spec = GangJobSpec(
        image="ghcr.io/acme/train:1",
        workers=1,
        resources={"nvidia.com/gpu": 1},
        pod_template={"metadata": {"annotations": {"sim.airflow-gang.io/duration": "600"}}},
    )
    name = "outsider"
    podgroup = spec.build_podgroup(name, OTHER_NAMESPACE)
    assert podgroup is not None
    hook.create_podgroup(podgroup, OTHER_NAMESPACE)
    job = hook.create_pytorchjob(spec.build_pytorchjob(name, OTHER_NAMESPACE), OTHER_NAMESPACE)
    hook.set_podgroup_owner(name, OTHER_NAMESPACE, job)
    return name


def task_key(ti: Any) -> str:
    return ti.task_id if ti.map_index < 0 else f"{ti.task_id}[{ti.map_index}]"


@pytest.fixture(scope="session")
def scenario() -> Iterator[Scenario]:
    """The cluster with jobs in every phase; ``kubernetes_default`` points at it meanwhile."""
    migrate_db()
    _forget_other_histories()
    previous = os.environ.get("AIRFLOW_CONN_KUBERNETES_DEFAULT")
    with SimCluster(
        nodes=2, gpus_per_node=2, schedule_period=0.2, queues={"research": {"nvidia.com/gpu": 2}}
    ) as cluster:
        os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": cluster.kubeconfig_path}}
        )
        try:
            dag_run = _load_dag().test()
            jobs: dict[str, str] = {}
            for ti in dag_run.get_task_instances():
                jobs[task_key(ti)] = job_name(DAG_ID, ti.task_id, dag_run.run_id, ti.map_index, ti.try_number)
            outsider = _submit_outsider(cluster)
            result = Scenario(cluster, DAG_ID, dag_run.run_id, jobs, outsider)
            _wait_for_phases(cluster, result)
            yield result
        finally:
            if previous is None:
                os.environ.pop("AIRFLOW_CONN_KUBERNETES_DEFAULT", None)
            else:
                os.environ["AIRFLOW_CONN_KUBERNETES_DEFAULT"] = previous


def _forget_other_histories() -> None:
    """Drop the job records earlier tests' DAGs left in this session's metadata DB: the page
    lists recorded jobs of namespace ``default`` beside the scenario's live ones."""
    from airflow.models.task_state_store import TaskStateStoreModel
    from airflow.utils.session import create_session
    from sqlalchemy import delete

    from airflow_gang.state.history import HISTORY_KEY, LOG_TAIL_KEY

    with create_session() as session:
        session.execute(
            delete(TaskStateStoreModel).where(
                TaskStateStoreModel.key.in_((HISTORY_KEY, LOG_TAIL_KEY)), TaskStateStoreModel.dag_id != DAG_ID
            )
        )


def _wait_for_phases(cluster: SimCluster, scenario: Scenario) -> None:
    """Until every job shows the condition its task implies (the operator returns before some)."""
    expected = {
        "sweep[0]": "Succeeded",
        "sweep[1]": "Succeeded",
        "broken": "Failed",
        "train": "Running",
    }
    with cluster.api_client() as api:
        custom = k8s.CustomObjectsApi(api)

        def conditions() -> dict[str, str | None]:
            found = {}
            for key, name in scenario.jobs.items():
                job = custom.get_namespaced_custom_object(
                    "kubeflow.org", "v1", "default", "pytorchjobs", name
                )
                true = [
                    c["type"]
                    for c in (job.get("status") or {}).get("conditions") or []
                    if c["status"] == "True"
                ]
                found[key] = true[-1] if true else None
            return found

        eventually(
            lambda: all(conditions().get(key) == value for key, value in expected.items()),
            timeout=30,
            message=f"(job conditions: {conditions()})",
        )
        core = k8s.CoreV1Api(api)

        def explained(key: str) -> bool:
            field = f"involvedObject.name={scenario.jobs[key]}"
            events = core.list_namespaced_event("default", field_selector=field).items
            return any(event.reason == "Unschedulable" for event in events)

        # Volcano explains a gang it cannot enqueue with Unschedulable events on the PodGroup.
        eventually(lambda: all(map(explained, ("waiting[0]", "waiting[1]", "capped"))), timeout=30)


# -- a headless browser (test_browser.py, test_airflow_api_server.py) -------------------------

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1400,1800",
)
WAIT = 30.0


def _install_chromium() -> str | None:
    """Install Debian's chromium + chromium-driver; the reason it cannot, or None."""
    if os.geteuid() != 0:
        return "not running as root, so apt-get cannot install them"
    if shutil.which("apt-get") is None:
        return "apt-get is not available on this machine"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for command in (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "chromium", "chromium-driver"],
    ):
        try:
            result = subprocess.run(
                command, capture_output=True, text=True, timeout=900, env=env, check=False
            )
        except subprocess.TimeoutExpired:
            return f"`{' '.join(command)}` timed out"
        if result.returncode != 0:
            return f"`{' '.join(command)}` failed: {result.stderr.strip()[-500:]}"
    return None


@pytest.fixture(scope="session")
def chromium() -> None:
    if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
        problem = _install_chromium()
        if problem is not None or not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
            pytest.skip(
                "the browser test needs Debian's chromium and chromium-driver "
                f"(/usr/bin/chromium, /usr/bin/chromedriver): {problem or 'not found after installing'}"
            )
    try:
        import selenium  # noqa: F401
    except ImportError:
        pytest.skip("the browser test needs selenium: pip install -e '.[dev]'")


@pytest.fixture
def browser(chromium: None, tmp_path: Path) -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.options import Options
    from selenium.webdriver.chrome.service import Service

    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={tmp_path / 'chromium-profile'}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    driver = webdriver.Chrome(service=Service(str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(WAIT)
    try:
        yield driver
    finally:
        driver.quit()


# The docs' screenshots (docs/screenshots, ``make screenshots``): a browser test saves one with
# docs_screenshot(browser, tmp_path, "<name>.png"), the name written out in the call, so
# tests/docs/test_screenshots.py can read which files the browser tests write.
SCREENSHOTS_DIR = "GANG_SCREENSHOTS_DIR"


def docs_screenshot(browser: Any, tmp_path: Path, name: str) -> Path:
    """Save a screenshot of the docs: to $GANG_SCREENSHOTS_DIR when set, else the test's tmp dir."""
    folder = Path(os.environ[SCREENSHOTS_DIR]) if os.environ.get(SCREENSHOTS_DIR) else tmp_path
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    assert browser.save_screenshot(str(path)), path
    return path


def wait_for(driver: Any, condition: Any, message: str = "") -> Any:
    """Wait for ``condition``; elements replaced by a refresh meanwhile just mean "not yet"."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(
        driver, WAIT, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,)
    )
    return wait.until(condition, message)


def css(driver: Any, selector: str) -> list[Any]:
    from selenium.webdriver.common.by import By

    return list(driver.find_elements(By.CSS_SELECTOR, selector))


def script_errors(driver: Any) -> list[str]:
    return [entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@contextlib.contextmanager
def served(app: Any, name: str) -> Iterator[str]:
    """``app`` served by uvicorn on a free loopback port, as a browser reaches it: its base URL."""
    import uvicorn

    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, name=name, daemon=True)
    thread.start()
    try:
        eventually(lambda: server.started, timeout=20, message="(uvicorn did not start)")
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)


# -- a module's own cluster behind a connection, and its DAG file --------------------------------


def write_scenario_dag(dag_id: str, source: str, *, namespace: str, conn_id: str) -> Any:
    """Write ``source`` (``__DAG_ID__``, ``__NAMESPACE__``, ``__CONN_ID__`` filled in) into the
    DAGs folder and load it (``dag.test()`` needs the file there)."""
    path = DAGS / f"{dag_id}.py"
    text = textwrap.dedent(source)
    for key, value in {"__DAG_ID__": dag_id, "__NAMESPACE__": namespace, "__CONN_ID__": conn_id}.items():
        text = text.replace(key, value)
    path.write_text(text)
    return load_dag_file(path, dag_id)


@contextlib.contextmanager
def cluster_behind(conn_id: str, namespace: str) -> Iterator[SimCluster]:
    """A 2 x 2-GPU cluster with ``namespace``, reached through Airflow connection ``conn_id``
    (set for the block's length) and the metadata DB migrated: a plugin module's own scenario."""
    migrate_db()
    variable = f"AIRFLOW_CONN_{conn_id.upper()}"
    with SimCluster(nodes=2, gpus_per_node=2, schedule_period=0.2) as cluster:
        with cluster.api_client() as api:
            k8s.CoreV1Api(api).create_namespace({"metadata": {"name": namespace}})
        os.environ[variable] = json.dumps(
            {"conn_type": "kubernetes", "extra": {"kube_config_path": cluster.kubeconfig_path}}
        )
        try:
            yield cluster
        finally:
            os.environ.pop(variable, None)

"""The release's wheels, installed as a user installs them: into a fresh venv, from the files.

``scripts/build_dist.py`` (what ``make dist`` runs) builds the three distributions and checks them
with ``twine check --strict``; a new venv (``python -m venv``, no system site-packages, no pip)
gets the provider's wheel and the simulator's, not editable, run from a scratch folder so the
repository is on no ``sys.path``. There:

- ``airflow providers get airflow-gang`` shows what Airflow learns from the installed metadata:
  the documentation link (the wheel's ``Project-URL: Documentation``), the integrations and the
  ``[gang]`` config section;
- ``make demo``'s script, copied with its DAG file into the scratch folder, runs the seed scenario
  on the embedded cluster the simulator's wheel installed: six gang jobs succeed one after
  another and nothing is left running (the twin of the repository-venv run in
  tests/e2e/test_demo.py, which is ``slow`` since this one runs in every ``make test``).

The wheels' dependencies (about 150 packages) are installed with uv, pinned to the versions of
the venv running the tests (so this tests the provider against what the rest of the suite tests
it against, and a new release of a dependency cannot make it fail on its own): pip took ~37 s
for them on a 2-core machine where uv takes ~4 s with an empty cache.
"""

from __future__ import annotations

import importlib.metadata
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from airflow_gang import __version__
from tests.support.demo_output import assert_the_demo_ran_six_gangs_one_at_a_time

REPO = Path(__file__).resolve().parents[2]
OURS = {"airflow-gang", "airflow-gang-sim", "airflow-gang-stack"}
# Run by the venv's Python from the scratch folder: where our packages were imported from.
PROBE = """
import importlib.metadata as metadata, json, sys
import airflow_gang, gang_sim
print(json.dumps({
    "files": [airflow_gang.__file__, gang_sim.__file__],
    "path": sys.path,
    "versions": [metadata.version(name) for name in ("airflow-gang", "airflow-gang-sim")],
    "ours": sorted(
        d.metadata["Name"] for d in metadata.distributions() if d.metadata["Name"].startswith("airflow-gang")
    ),
    "direct_url": metadata.distribution("airflow-gang").read_text("direct_url.json"),
}))
"""


@dataclass
class Installed:
    """The fresh venv with the provider's and the simulator's wheels, and a scratch folder."""

    venv: Path
    scratch: Path
    env: dict[str, str]
    seconds: dict[str, float] = field(default_factory=dict)  # each phase, shown when a test fails

    @property
    def bin(self) -> Path:
        return self.venv / "bin"

    def run(self, *command: str, timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            command,
            cwd=self.scratch,
            env={**self.env, **env},
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )


def _clean_env(venv: Path, airflow_home: Path) -> dict[str, str]:
    """This process's environment without anything that points Python at the repository or its
    venv, and with a private Airflow home; the resume hold stays off as for every dag.test() run
    (tests/conftest.py)."""
    env = {
        name: value
        for name, value in os.environ.items()
        if name not in {"PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV", "KUBECONFIG"}
        and not name.startswith(("AIRFLOW__", "AIRFLOW_CONN_", "AIRFLOW_VAR_"))
    }
    env["PATH"] = f"{venv / 'bin'}{os.pathsep}{env.get('PATH', '')}"
    env["AIRFLOW_HOME"] = str(airflow_home)
    env["AIRFLOW__CORE__LOAD_EXAMPLES"] = "false"
    env["AIRFLOW__GANG__RESUME_HOLD_SECONDS"] = "0"
    return env


def _pins(path: Path) -> Path:
    """Constraints: every distribution of this venv at its installed version, but our own."""
    lines = sorted(
        {
            f"{dist.metadata['Name']}=={dist.version}"
            for dist in importlib.metadata.distributions()
            if dist.metadata["Name"] and dist.metadata["Name"].lower().replace("_", "-") not in OURS
        }
    )
    path.write_text("\n".join(lines) + "\n")
    return path


def _check(done: subprocess.CompletedProcess[str], what: str) -> None:
    assert done.returncode == 0, f"{what} failed ({done.returncode}):\n{(done.stdout + done.stderr)[-4000:]}"


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installed]:
    root = tmp_path_factory.mktemp("wheels")
    dist, venv, scratch = root / "dist", root / "venv", root / "scratch"
    scratch.mkdir()
    seconds: dict[str, float] = {}

    started = time.monotonic()
    built = subprocess.run(
        [sys.executable, str(REPO / "scripts" / "build_dist.py"), "--no-isolation", "--outdir", str(dist)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    _check(built, "scripts/build_dist.py")
    assert "twine check --strict passed" in built.stdout
    seconds["build and twine check"] = time.monotonic() - started

    started = time.monotonic()
    # The interpreter this venv was made from (sys._base_executable), not this venv.
    created = subprocess.run(
        [sys.executable, "-m", "venv", "--without-pip", str(venv)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    _check(created, "python -m venv")
    assert "include-system-site-packages = false" in (venv / "pyvenv.cfg").read_text()
    wheels = [
        next(dist.glob(f"{stem}-{__version__}-py3-none-any.whl"))
        for stem in ("airflow_gang", "airflow_gang_sim")
    ]
    env = _clean_env(venv, root / "airflow-home")
    install = subprocess.run(
        [
            sys.executable,
            "-m",
            "uv",
            "pip",
            "install",
            "--no-config",
            "--quiet",
            "--python",
            str(venv / "bin" / "python"),
            "--constraints",
            str(_pins(root / "constraints.txt")),
            *map(str, wheels),
        ],
        cwd=scratch,
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    _check(install, "uv pip install")
    seconds["venv and install"] = time.monotonic() - started
    yield Installed(venv, scratch, env, seconds)
    print(f"seconds per phase: {seconds}")  # shown with -s or -rP


def test_the_packages_come_from_the_wheels_in_the_venv(installed: Installed) -> None:
    done = installed.run(str(installed.bin / "python"), "-c", PROBE, timeout=60)
    _check(done, "the probe")
    found = json.loads(done.stdout)
    site_packages = (
        installed.venv / "lib" / f"python{sys.version_info.major}.{sys.version_info.minor}" / "site-packages"
    )
    assert [Path(file).parent.parent for file in found["files"]] == [site_packages, site_packages]
    assert not [entry for entry in found["path"] if entry and Path(entry).is_relative_to(REPO)]
    assert found["versions"] == [__version__, __version__]
    assert found["ours"] == ["airflow-gang", "airflow-gang-sim"]  # the demo needs no harness
    # Installed from a wheel file, not editable (an editable install records {"dir_info": ...}).
    assert json.loads(found["direct_url"])["url"].endswith(f"airflow_gang-{__version__}-py3-none-any.whl")


def test_airflow_providers_get_shows_the_documentation_link_integrations_and_config(
    installed: Installed,
) -> None:
    started = time.monotonic()
    done = installed.run(
        str(installed.bin / "airflow"),
        "providers",
        "get",
        "airflow-gang",
        "--full",
        "-o",
        "json",
        timeout=120,
    )
    installed.seconds["airflow providers get"] = time.monotonic() - started
    _check(done, f"airflow providers get {installed.seconds}")
    (info,) = json.loads(done.stdout)
    assert info["package-name"] == "airflow-gang"
    assert info["versions"][0] == __version__
    assert info["documentation-url"] == "https://airflow-gang.readthedocs.io/en/stable/"
    assert [integration["integration-name"] for integration in info["integrations"]] == [
        "Volcano gang scheduling",
        "Kubeflow PyTorchJob",
        "Kubeflow Trainer TrainJob",
        "Volcano Job",
    ]
    assert all(integration["external-doc-url"].startswith("https://") for integration in info["integrations"])
    options = info["config"]["gang"]["options"]
    assert options["default_admission_timeout"]["default"] == "1800"
    assert {option["version_added"] for option in options.values()} <= set(info["versions"])
    assert info["connection-types"] == []  # cncf.kubernetes keeps the `kubernetes` type (see the module)


def test_the_demo_runs_six_gang_jobs_one_after_another_from_the_installed_wheels(
    installed: Installed,
) -> None:
    # demo.py finds its DAG folder beside its own folder (scripts/../dags) and runs every command
    # from there: a copy of the two files is the whole "repository" it sees.
    app, out = installed.scratch / "app", installed.scratch / "demo"
    (app / "scripts").mkdir(parents=True)
    (app / "dags").mkdir()
    shutil.copy(REPO / "scripts" / "demo.py", app / "scripts" / "demo.py")
    shutil.copy(REPO / "dags" / "gang_vs_deadlock.py", app / "dags" / "gang_vs_deadlock.py")

    started = time.monotonic()
    done = installed.run(
        str(installed.bin / "python"), str(app / "scripts" / "demo.py"), timeout=240, GANG_DEMO_DIR=str(out)
    )
    installed.seconds["demo"] = time.monotonic() - started
    output = done.stdout + done.stderr
    assert done.returncode == 0, f"{installed.seconds}\n{output[-4000:]}"
    assert assert_the_demo_ran_six_gangs_one_at_a_time(output).is_relative_to(out)

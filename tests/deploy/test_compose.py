"""The local stack: docker-compose.yaml, the Dockerfile every service runs, and .dockerignore.

No Docker engine is needed: ``docker-compose config`` (Debian's docker-compose 1.29, installed
on demand when we are root on a Debian-like machine) validates the file, and the rest reads it
with PyYAML and checks that the pieces fit together — the image has the provider, every Airflow
service finds kube-sim's kubeconfig where its connection says, kube-sim is reachable under the
name its kubeconfig advertises.
"""

from __future__ import annotations

import fnmatch
import importlib.metadata
import os
import shlex
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path, PurePosixPath
from urllib.parse import urlsplit

import pytest
import yaml

from gang_stack.stack import component_names
from tests.deploy.compose_file import (
    AIRFLOW_SERVICES,
    COMPOSE_FILE,
    DEFAULT_DAGS_FOLDER,
    DOCKERFILE,
    DOCKERIGNORE,
    HA_PROFILE,
    KUBE_SIM,
    REPO,
    command,
    connection_kubeconfig_path,
    dockerfile_instructions,
    environment,
    kube_sim_arguments,
    load_compose,
    mount_holding,
    services,
)

APT_TIMEOUT = 600

# The airflow subcommand each Airflow service runs (the image's entrypoint strips "airflow").
AIRFLOW_COMMANDS = {
    "airflow-init": ["db", "migrate"],
    "api-server": ["api-server"],
    "scheduler": ["scheduler"],
    "scheduler-2": ["scheduler"],
    "dag-processor": ["dag-processor"],
    "triggerer": ["triggerer"],
    "triggerer-2": ["triggerer"],
    "celery-worker": ["celery", "worker"],
    "celery-worker-2": ["celery", "worker"],
}


def _install_docker_compose() -> str:
    """Try ``apt-get install docker-compose``; returns why it is unavailable if that fails."""
    if shutil.which("apt-get") is None:
        return "docker-compose is not installed and this machine has no apt-get to install it"
    if os.geteuid() != 0:
        return "docker-compose is not installed and installing it with apt-get needs root"
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    steps = (
        ["apt-get", "update"],
        ["apt-get", "install", "-y", "--no-install-recommends", "docker-compose"],
    )
    for step in steps:
        try:
            done = subprocess.run(
                step, check=False, capture_output=True, text=True, timeout=APT_TIMEOUT, env=env
            )
        except subprocess.TimeoutExpired:
            return f"`{shlex.join(step)}` did not finish within {APT_TIMEOUT}s"
        if done.returncode != 0:
            tail = (done.stdout + done.stderr).strip().splitlines()[-5:]
            return f"`{shlex.join(step)}` failed ({done.returncode}): " + " | ".join(tail)
    return "apt-get installed docker-compose but it is not on PATH"


@pytest.fixture(scope="session")
def docker_compose() -> str:
    """The ``docker-compose`` (v1) executable, installed with apt-get if needed, or a skip."""
    found = shutil.which("docker-compose")
    if found is None:
        reason = _install_docker_compose()
        found = shutil.which("docker-compose")
        if found is None:
            pytest.skip(f"cannot validate with docker-compose: {reason}")
    return found


# --- docker-compose itself -------------------------------------------------------------------


def test_docker_compose_config_accepts_the_file(docker_compose: str, tmp_path: Path) -> None:
    # A copy in a scratch project directory: `config` resolves relative paths against it and
    # nothing can be written into the repository.
    shutil.copy(COMPOSE_FILE, tmp_path / "docker-compose.yaml")
    env = {key: value for key, value in os.environ.items() if not key.startswith("COMPOSE_")}
    version = subprocess.run(
        [docker_compose, "version", "--short"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    ).stdout.strip()
    done = subprocess.run(
        [docker_compose, "-f", "docker-compose.yaml", "config"],
        check=False,
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
    )
    assert done.returncode == 0, f"docker-compose {version} rejected the file:\n{done.stderr}"
    assert "WARN" not in done.stderr.upper(), done.stderr
    resolved = yaml.safe_load(done.stdout)
    assert set(resolved["services"]) == set(services())
    # docker-compose kept the start-up order conditions (it drops nothing it understands).
    for name in AIRFLOW_SERVICES:
        depends = resolved["services"][name]["depends_on"]
        assert depends[KUBE_SIM] == {"condition": "service_healthy"}, (name, depends)
    assert resolved["services"]["scheduler"]["depends_on"]["airflow-init"] == {
        "condition": "service_completed_successfully"
    }
    assert sorted(path.name for path in tmp_path.iterdir()) == ["docker-compose.yaml"]


# --- the services ------------------------------------------------------------------------------


def test_every_service_of_the_stack_exists() -> None:
    assert {"postgres", "redis", *AIRFLOW_SERVICES, KUBE_SIM} <= set(services())


def test_the_compose_shape_is_the_harness_shape() -> None:
    """What tests/production proves on the harness is what compose deploys: the same components,
    by default and with the `ha` profile (``airflow-init`` is compose's ``db migrate`` step)."""
    all_services = services()
    airflow = {name for name in all_services if name in AIRFLOW_SERVICES and name != "airflow-init"}
    default = {name for name in airflow if HA_PROFILE not in all_services[name].get("profiles", [])}
    assert default == set(component_names(1, 1, celery_workers=1))
    assert airflow == set(component_names(2, 2, celery_workers=2))
    for name in airflow - default:
        assert all_services[name]["profiles"] == [HA_PROFILE], name
        # The second of each runs exactly what the first does.
        first = name.removesuffix("-2")
        assert command(all_services[name]) == command(all_services[first]), name
        assert environment(all_services[name]) == environment(all_services[first]), name


def test_celery_reaches_its_broker_and_keeps_results_in_the_metadata_database() -> None:
    all_services = services()
    assert "healthcheck" in all_services["redis"]
    for name in AIRFLOW_SERVICES:
        env = environment(all_services[name])
        broker = urlsplit(env["AIRFLOW__CELERY__BROKER_URL"])
        assert (broker.scheme, broker.hostname) == ("redis", "redis"), name
        assert all_services[name]["depends_on"]["redis"] == {"condition": "service_healthy"}, name
        backend = env["AIRFLOW__CELERY__RESULT_BACKEND"]
        database = env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"]
        assert backend.startswith("db+postgresql"), name
        assert urlsplit(backend.removeprefix("db+")).netloc == urlsplit(database).netloc, name
    for name in ("celery-worker", "celery-worker-2"):
        probe = " ".join(all_services[name]["healthcheck"]["test"])
        assert "inspect ping" in probe, name


@pytest.mark.parametrize("name", [*AIRFLOW_SERVICES, KUBE_SIM])
def test_service_runs_the_image_built_from_the_repository_dockerfile(name: str) -> None:
    service = services()[name]
    build = service["build"]
    context = build if isinstance(build, str) else build["context"]
    dockerfile = "Dockerfile" if isinstance(build, str) else build.get("dockerfile", "Dockerfile")
    assert (REPO / context).resolve() == REPO
    assert (REPO / context / dockerfile).resolve() == DOCKERFILE
    # One image for all of them, built here and never pulled from a registry.
    assert service["image"] == services()["scheduler"]["image"]
    assert service.get("pull_policy") == "build"


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_airflow_service_runs_its_airflow_command(name: str) -> None:
    argv = command(services()[name])
    if argv[:1] == ["airflow"]:
        argv = argv[1:]
    assert argv == AIRFLOW_COMMANDS[name]


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_airflow_service_configuration(name: str) -> None:
    all_services = services()
    env = environment(all_services[name])
    assert env["AIRFLOW__CORE__EXECUTOR"] == "CeleryExecutor"
    assert env["AIRFLOW__CORE__LOAD_EXAMPLES"] == "false"
    database = urlsplit(env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"])
    assert database.scheme.startswith("postgresql")
    assert database.hostname == "postgres"
    assert database.hostname in all_services
    postgres_env = environment(all_services["postgres"])
    assert database.username == postgres_env["POSTGRES_USER"]
    assert database.password == postgres_env["POSTGRES_PASSWORD"]
    assert database.path.lstrip("/") == postgres_env["POSTGRES_DB"]
    # Tasks started by the scheduler reach the API server's Execution API by its service name,
    # and every component signs and checks tokens with the same secret.
    execution_api = urlsplit(env["AIRFLOW__CORE__EXECUTION_API_SERVER_URL"])
    assert execution_api.hostname == "api-server"
    assert f"{execution_api.port}:{execution_api.port}" in all_services["api-server"]["ports"]
    assert env["AIRFLOW__API_AUTH__JWT_SECRET"]
    assert (
        env["AIRFLOW__API_AUTH__JWT_SECRET"]
        == environment(all_services["api-server"])["AIRFLOW__API_AUTH__JWT_SECRET"]
    )


@pytest.mark.parametrize("name", AIRFLOW_SERVICES)
def test_airflow_service_starts_after_kube_sim_is_healthy_and_the_database_is_migrated(name: str) -> None:
    all_services = services()
    depends = all_services[name]["depends_on"]
    assert depends[KUBE_SIM] == {"condition": "service_healthy"}
    assert depends["postgres"] == {"condition": "service_healthy"}
    assert "healthcheck" in all_services[KUBE_SIM]
    assert "healthcheck" in all_services["postgres"]
    if name == "airflow-init":
        assert str(all_services[name].get("restart", "no")) == "no"
    else:
        assert depends["airflow-init"] == {"condition": "service_completed_successfully"}


def test_every_airflow_service_reads_the_kubeconfig_kube_sim_writes() -> None:
    all_services = services()
    declared_volumes = set(load_compose().get("volumes") or {})
    written = kube_sim_arguments(all_services[KUBE_SIM]).kubeconfig
    sim_mount = mount_holding(all_services[KUBE_SIM], written)
    assert sim_mount is not None, f"kube-sim writes {written} outside its volumes"
    sim_volume, sim_relative = sim_mount
    assert sim_volume.is_named_volume
    assert sim_volume.source in declared_volumes
    assert not sim_volume.read_only
    for name in AIRFLOW_SERVICES:
        path = connection_kubeconfig_path(all_services[name])
        found = mount_holding(all_services[name], path)
        assert found is not None, f"{name}: kubernetes_default names {path}, which no volume holds"
        mount, relative = found
        assert (mount.source, relative) == (sim_volume.source, sim_relative), name
        assert mount.read_only, f"{name} mounts kube-sim's kubeconfig writable"
    # kube-sim is healthy only once that kubeconfig exists (the check loads it).
    healthcheck = all_services[KUBE_SIM]["healthcheck"]["test"]
    assert written in " ".join(healthcheck)


def test_kube_sim_is_reachable_under_its_service_name_and_port() -> None:
    service = services()[KUBE_SIM]
    args = kube_sim_arguments(service)
    advertised = urlsplit(args.advertise_url)
    assert advertised.scheme == "https"
    assert advertised.hostname == KUBE_SIM
    assert advertised.port == args.port != 0
    assert KUBE_SIM in args.tls_san
    # Other containers connect to the container's address, not its loopback.
    assert args.host == "0.0.0.0"
    # The image's /entrypoint would run the command as `airflow airflow-gang ...`.
    entrypoint = service["entrypoint"]
    entrypoint = shlex.split(entrypoint) if isinstance(entrypoint, str) else entrypoint
    assert "/entrypoint" not in entrypoint
    published = [str(port).rsplit(":", 1)[-1] for port in service.get("ports", [])]
    assert published == [] or str(args.port) in published


def test_dags_and_examples_are_mounted_where_airflow_reads_them() -> None:
    for name in AIRFLOW_SERVICES:
        service = services()[name]
        dags_folder = environment(service).get("AIRFLOW__CORE__DAGS_FOLDER", DEFAULT_DAGS_FOLDER)
        for path, source in ((dags_folder, "dags"), ("/opt/airflow/examples", "examples")):
            found = mount_holding(service, path)
            assert found is not None, f"{name}: nothing mounted at {path}"
            mount, relative = found
            assert relative == PurePosixPath(".")
            assert (REPO / mount.source).resolve() == REPO / source, (name, mount)


# --- the image ---------------------------------------------------------------------------------


def test_dockerfile_builds_on_airflow_3_3_2_and_installs_the_provider_as_the_airflow_user() -> None:
    instructions = dockerfile_instructions()
    assert [i.arguments for i in instructions if i.keyword == "FROM"] == ["apache/airflow:3.3.2"]
    user, workdir = "airflow", PurePosixPath("/opt/airflow")  # the base image's
    copied: dict[PurePosixPath, str] = {}
    installs: list[tuple[PurePosixPath, str]] = []
    for instruction in instructions:
        if instruction.keyword == "USER":
            user = instruction.arguments
        elif instruction.keyword == "WORKDIR":
            workdir = workdir / instruction.arguments
        elif instruction.keyword == "COPY":
            *sources, destination = [t for t in shlex.split(instruction.arguments) if not t.startswith("--")]
            target = workdir / destination
            for source in sources:
                name = source.rstrip("/")
                is_dir = (REPO / name).is_dir()
                landing = target if is_dir or not destination.endswith("/") else target / name
                copied[landing] = name
        elif instruction.keyword == "RUN":
            for step in instruction.arguments.split("&&"):
                words = shlex.split(step)
                if words[:2] == ["pip", "install"]:
                    paths = [w for w in words[2:] if w == "." or w.startswith(("/", "./"))]
                    installs += [(workdir / p, user) for p in paths]
    # The provider, and the simulator the kube-sim service runs (this demo's image only).
    assert len(installs) == 2, installs
    (provider_dir, provider_user), (sim_dir, sim_user) = installs
    assert provider_user == sim_user == "airflow"
    assert copied.get(provider_dir / "pyproject.toml") == "pyproject.toml"
    assert copied.get(provider_dir / "README.md") == "README.md"
    assert copied.get(provider_dir / "airflow_gang") == "airflow_gang"
    assert copied.get(sim_dir) == "sim"


def _ignore_patterns() -> list[str]:
    lines = DOCKERIGNORE.read_text(encoding="utf-8").splitlines()
    return [line.strip().rstrip("/") for line in lines if line.strip() and not line.startswith("#")]


def _matches(parts: list[str], pattern: str) -> bool:
    """Docker's matching: ``*`` stays within one path component."""
    wanted = pattern.split("/")
    return len(parts) == len(wanted) and all(map(fnmatch.fnmatchcase, parts, wanted))


def _ignored(path: str, patterns: list[str]) -> bool:
    """Whether .dockerignore leaves ``path`` out (itself, or a directory above it)."""
    parts = path.split("/")
    for pattern in patterns:
        if pattern.startswith("**/"):
            # Any depth: every run of consecutive components.
            spans = [parts[i:j] for i in range(len(parts)) for j in range(i + 1, len(parts) + 1)]
            if any(_matches(span, pattern[3:]) for span in spans):
                return True
        elif any(_matches(parts[:end], pattern) for end in range(1, len(parts) + 1)):
            return True
    return False


def test_dockerignore_keeps_local_state_out_and_what_the_dockerfile_copies_in() -> None:
    patterns = _ignore_patterns()
    local_state = (
        ".venv/bin/python",
        ".git/HEAD",
        ".airflow/airflow.db",
        "sim.kubeconfig",
        "deploy/cluster.kubeconfig",
        ".mypy_cache/3.11/cache.db",
        ".pytest_cache/v/cache/lastfailed",
        ".ruff_cache/CACHEDIR.TAG",
        "airflow_gang/__pycache__/spec.cpython-311.pyc",
    )
    for path in local_state:
        assert _ignored(path, patterns), f"{path} would be sent to the Docker daemon"
    for path in ("pyproject.toml", "README.md", "sim/gang_sim/cli_cluster.py", "airflow_gang/spec.py"):
        assert not _ignored(path, patterns), f"{path} is excluded from the build context"


def _wheel(source: Path, wheel_dir: Path, pattern: str) -> tuple[set[str], str]:
    """Build ``source`` as pip would; the wheel's file names and its entry_points.txt.

    Without build isolation (no download), so with this venv's setuptools: `make install` gives
    it one that reads PEP 639 license strings (>= 77).
    """
    setuptools_major = int(importlib.metadata.version("setuptools").split(".")[0])
    assert setuptools_major >= 77, (
        f"this venv's setuptools {importlib.metadata.version('setuptools')} cannot read the "
        "pyproject's license string; `make install` (or pip install 'setuptools>=77') upgrades it"
    )
    pip_wheel = [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--quiet"]
    done = subprocess.run(
        [*pip_wheel, "--wheel-dir", str(wheel_dir), str(source)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    (wheel,) = wheel_dir.glob(pattern)
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
        return names, archive.read(entry_points).decode()


def test_the_files_the_dockerfile_copies_build_the_provider_and_the_simulator(tmp_path: Path) -> None:
    # The same files the image gets, and nothing else: pip must build each package from them.
    source = tmp_path / "src"
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(REPO / name, source / name)
    skip = shutil.ignore_patterns("__pycache__", "*.egg-info")
    shutil.copytree(REPO / "airflow_gang", source / "airflow_gang", ignore=skip)
    shutil.copytree(REPO / "sim", source / "sim", ignore=skip)

    provider, declared = _wheel(source, tmp_path / "dist", "airflow_gang-*.whl")
    assert "airflow_gang/spec.py" in provider
    # What `pip install airflow-gang` puts into an Airflow image: no simulator, no harness.
    assert {name.split("/")[0] for name in provider} == {"airflow_gang", *_dist_info(provider)}
    assert "airflow-gang = airflow_gang.cli:main" in declared
    assert "apache_airflow_provider" in declared
    assert "pytest11" not in declared

    simulator, declared = _wheel(source / "sim", tmp_path / "dist", "airflow_gang_sim-*.whl")
    assert "gang_sim/cli_cluster.py" in simulator
    assert not any(name.startswith("airflow_gang/") for name in simulator)
    assert "sim = gang_sim.cli:register" in declared  # `airflow-gang sim`
    assert "gang_sim = gang_sim.pytest_plugin" in declared


def _dist_info(names: set[str]) -> set[str]:
    return {name.split("/")[0] for name in names if name.split("/")[0].endswith(".dist-info")}

"""Reading the repository's docker-compose.yaml, Dockerfile and .dockerignore for the deploy tests."""

from __future__ import annotations

import argparse
import json
import shlex
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import yaml

from airflow_gang.cli import build_parser

REPO = Path(__file__).resolve().parents[2]
COMPOSE_FILE = REPO / "docker-compose.yaml"
DOCKERFILE = REPO / "Dockerfile"
DOCKERIGNORE = REPO / ".dockerignore"

AIRFLOW_SERVICES = (
    "airflow-init", "api-server", "scheduler", "scheduler-2", "dag-processor", "triggerer", "triggerer-2",
    "celery-worker", "celery-worker-2",
)  # fmt: skip
# The second scheduler, triggerer and Celery worker start only with `--profile ha`.
HA_PROFILE = "ha"
KUBE_SIM = "kube-sim"
# Airflow's default dags folder inside the official image.
DEFAULT_DAGS_FOLDER = "/opt/airflow/dags"


def load_compose() -> dict[str, Any]:
    """The compose file as PyYAML reads it (anchors and ``<<`` merge keys resolved)."""
    document = yaml.safe_load(COMPOSE_FILE.read_text(encoding="utf-8"))
    assert isinstance(document, dict)
    return document


def services() -> dict[str, dict[str, Any]]:
    found = load_compose()["services"]
    assert isinstance(found, dict)
    return found


@dataclass(frozen=True)
class Mount:
    source: str
    target: str
    read_only: bool

    @property
    def is_named_volume(self) -> bool:
        return not self.source.startswith((".", "/", "~"))


def mounts(service: dict[str, Any]) -> list[Mount]:
    """The service's volumes, short (``src:target[:mode]``) or long syntax."""
    result = []
    for entry in service.get("volumes", []):
        if isinstance(entry, str):
            source, target, *mode = entry.split(":")
            result.append(Mount(source, target, "ro" in (mode[0].split(",") if mode else [])))
        else:
            result.append(Mount(entry["source"], entry["target"], bool(entry.get("read_only"))))
    return result


def mount_holding(service: dict[str, Any], path: str) -> tuple[Mount, PurePosixPath] | None:
    """The mount whose target contains ``path``, and ``path`` relative to it (None: no mount)."""
    wanted = PurePosixPath(path)
    best: tuple[Mount, PurePosixPath] | None = None
    for mount in mounts(service):
        target = PurePosixPath(mount.target)
        inside = wanted == target or target in wanted.parents
        if inside and (best is None or len(target.parts) > len(PurePosixPath(best[0].target).parts)):
            best = (mount, wanted.relative_to(target))
    return best


def environment(service: dict[str, Any]) -> dict[str, str]:
    """A service's environment, from the mapping or the ``KEY=value`` list form."""
    env = service.get("environment") or {}
    if isinstance(env, list):
        return dict(item.split("=", 1) for item in env)
    return {key: "" if value is None else str(value) for key, value in env.items()}


def command(service: dict[str, Any]) -> list[str]:
    value = service.get("command") or []
    return shlex.split(value) if isinstance(value, str) else [str(item) for item in value]


def connection_kubeconfig_path(service: dict[str, Any]) -> str:
    """``kube_config_path`` of the service's AIRFLOW_CONN_KUBERNETES_DEFAULT."""
    connection = json.loads(environment(service)["AIRFLOW_CONN_KUBERNETES_DEFAULT"])
    assert connection["conn_type"] == "kubernetes", connection
    path = connection["extra"]["kube_config_path"]
    assert isinstance(path, str)
    return path


def kube_sim_arguments(service: dict[str, Any]) -> argparse.Namespace:
    """kube-sim's command parsed by the real ``airflow-gang`` parser (so it must be valid)."""
    argv = command(service)
    assert argv[:2] == ["airflow-gang", "sim"], argv
    return build_parser().parse_args(argv[1:])


@dataclass(frozen=True)
class Instruction:
    keyword: str
    arguments: str


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """The Dockerfile's instructions, continuation lines joined, comments dropped."""
    instructions: list[Instruction] = []
    pending = ""
    for line in path.read_text(encoding="utf-8").splitlines():
        stripped = line.strip()
        if not pending and (not stripped or stripped.startswith("#")):
            continue
        if stripped.endswith("\\"):
            pending += stripped[:-1] + " "
            continue
        text = pending + stripped
        pending = ""
        keyword, _, arguments = text.partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
    return instructions

"""The `airflow-gang` command and the provider registration, run as a user would run them."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import yaml

from airflow_gang import __version__
from airflow_gang.get_provider_info import get_provider_info

BIN = Path(sys.executable).parent


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command, capture_output=True, text=True, timeout=120, env=os.environ.copy(), check=False
    )


def test_version_command_prints_the_package_version() -> None:
    result = _run(str(BIN / "airflow-gang"), "version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"airflow-gang {__version__}"


def test_render_prints_a_podgroup_and_a_pytorchjob_per_job() -> None:
    result = _run(str(BIN / "airflow-gang"), "render", "--name", "seed", "--count", "6", "--gpus", "1")
    assert result.returncode == 0, result.stderr
    documents = list(yaml.safe_load_all(result.stdout))
    assert [d["kind"] for d in documents] == ["PodGroup", "PyTorchJob"] * 6
    assert [d["metadata"]["name"] for d in documents[::2]] == [f"seed-{i}" for i in range(1, 7)]
    assert all(d["spec"]["minMember"] == 2 for d in documents[::2])


def test_render_reports_bad_input_on_stderr_with_exit_code_2(tmp_path: Path) -> None:
    spec = tmp_path / "job.yaml"
    spec.write_text("image: ghcr.io/acme/train:1\nresources: {memory: 16GB}\n")
    result = _run(str(BIN / "airflow-gang"), "render", "--spec", str(spec))
    assert result.returncode == 2
    assert result.stdout == ""
    assert "resources['memory']='16GB' is invalid" in result.stderr


def test_provider_info_matches_airflows_schema() -> None:
    import jsonschema
    from airflow.providers_manager import ProvidersManager  # noqa: F401 - ensures airflow is importable

    schema_path = Path(__import__("airflow").__file__).parent / "provider_info.schema.json"
    schema = json.loads(schema_path.read_text())
    jsonschema.validate(get_provider_info(), schema)
    info = get_provider_info()
    assert info["package-name"] == "airflow-gang"
    assert set(info["config"]["gang"]["options"]) == {
        "default_admission_timeout",
        "checkpoint_root",
        "resume_hold_seconds",
        "kubeconfig_to_triggerer",
        "freeze_triggerer_heap",
        "orphan_reaper_interval",
        "ui_url_template",
        "dashboard_url_template",
        "ui_kubernetes_conn_id",
        "ui_namespaces",
    }


def test_provider_info_matches_the_stricter_provider_yaml_schema() -> None:
    """Airflow's own providers are checked against provider.yaml.schema.json (integration tags from
    a fixed list, no unknown keys); ours passes too, but for the two fields only Apache's release
    tooling writes (its state and a reproducible-build date)."""
    import jsonschema

    schema_path = Path(__import__("airflow").__file__).parent / "provider.yaml.schema.json"
    schema = json.loads(schema_path.read_text())
    assert {"state", "source-date-epoch"} <= set(schema["required"])
    schema["required"] = [key for key in schema["required"] if key not in {"state", "source-date-epoch"}]
    jsonschema.validate(get_provider_info(), schema)


def test_provider_info_versions_are_the_releases_and_every_option_says_one() -> None:
    info = get_provider_info()
    versions = info["versions"]
    assert versions[0] == __version__  # newest first: this release
    assert versions == sorted(versions, key=lambda v: tuple(int(part) for part in v.split(".")), reverse=True)
    added = {name: option["version_added"] for name, option in info["config"]["gang"]["options"].items()}
    assert {name: version for name, version in added.items() if version not in versions} == {}


def test_airflow_providers_list_shows_the_provider() -> None:
    result = _run(str(BIN / "airflow"), "providers", "list", "--output", "json")
    assert result.returncode == 0, result.stderr
    providers = {p["package_name"]: p for p in json.loads(result.stdout)}
    assert providers["airflow-gang"]["version"] == __version__
    assert "kubernetes_default" not in result.stderr
    assert "already registered" not in result.stderr + result.stdout


def test_airflow_providers_triggers_lists_the_gang_trigger() -> None:
    result = _run(str(BIN / "airflow"), "providers", "triggers", "--output", "json")
    assert result.returncode == 0, result.stderr
    ours = [t for t in json.loads(result.stdout) if t["package_name"] == "airflow-gang"]
    assert ours == [
        {
            "package_name": "airflow-gang",
            "class": "airflow_gang.triggers.gang",
            "integration_name": "Volcano gang scheduling",
        }
    ]

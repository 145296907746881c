"""The documentation site builds with ``mkdocs build --strict`` (as ``make docs`` and CI run it), and
its reference section is built from the code.

The build runs once per module into a temporary ``site_dir``; a warning anywhere (a broken link
or anchor, a docstring parameter griffe cannot match, a generated table whose code and words
disagree) fails it. The other tests read the built pages and compare them with what the code
says now: every ``[gang]`` option, every ``airflow-gang`` command, every metric sent, every
route of the page API and every field of the ``kubernetes`` connection is on its page, and
each operator and sensor lists every parameter its docstring documents (its own and those it
takes from its base class through ``**kwargs``, which only the runtime docstring holds) once,
with its description.
"""

from __future__ import annotations

import argparse
import html
import importlib.util
import json
import logging
import os
import re
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from airflow_gang.cli import build_parser
from airflow_gang.get_provider_info import get_provider_info
from airflow_gang.kinds.pytorchjob.operator import PyTorchJobOperator
from airflow_gang.kinds.trainjob.operator import TrainJobOperator
from airflow_gang.kinds.vcjob.operator import VolcanoJobOperator
from airflow_gang.reports import telemetry
from airflow_gang.sensors.gang import GangAdmissionSensor, PyTorchJobSensor, TrainJobSensor, VolcanoJobSensor

REPO = Path(__file__).resolve().parents[2]
HOOK = REPO / "docs" / "_hooks" / "generated.py"
DOCUMENTED = re.compile(r"^\s*:param\s+(\w+)\s*:", re.MULTILINE)
# A row of a parameters table as mkdocstrings-python renders it: the name, then its description.
PARAMETER_ROW = re.compile(
    r'<tr class="doc-section-item">\s*<td>\s*<code>(\w+)</code>.*?'
    r'<div class="doc-md-description">(.*?)</div>',
    re.DOTALL,
)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    warnings = [line for line in result.stderr.splitlines() if line.startswith(("WARNING", "ERROR"))]
    assert result.returncode == 0, "mkdocs build --strict failed:\n" + "\n".join(
        warnings or [result.stderr[-3000:]]
    )
    return site_dir


def page(site: Path, name: str) -> str:
    return (site / "reference" / name / "index.html").read_text(encoding="utf-8")


def text(markup: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", "", markup))


def section(markup: str, anchor: str) -> str:
    """The HTML from the heading with id ``anchor`` to the next heading of the same level."""
    start = markup.index(f'id="{anchor}"')
    level = markup.rfind("<h", 0, start)
    tag = markup[level : level + 3]
    end = markup.find(tag + " ", start)
    return markup[start : end if end != -1 else len(markup)]


def test_the_site_builds_with_no_warning(site: Path) -> None:
    assert (site / "index.html").is_file()
    assert (site / "reference" / "index.html").is_file()


@pytest.mark.parametrize(
    ("page_name", "anchor", "cls", "own"),
    [
        ("operators", "airflow_gang.operators.pytorch_job.PyTorchJobOperator", PyTorchJobOperator, "image"),
        ("operators", "airflow_gang.operators.train_job.TrainJobOperator", TrainJobOperator, "num_nodes"),
        ("operators", "airflow_gang.operators.volcano_job.VolcanoJobOperator", VolcanoJobOperator, "tasks"),
        ("sensors", "airflow_gang.sensors.gang.GangAdmissionSensor", GangAdmissionSensor, "job_kind"),
        ("sensors", "airflow_gang.sensors.gang.PyTorchJobSensor", PyTorchJobSensor, "gang_scheduling"),
        ("sensors", "airflow_gang.sensors.gang.TrainJobSensor", TrainJobSensor, "gang_scheduling"),
        ("sensors", "airflow_gang.sensors.gang.VolcanoJobSensor", VolcanoJobSensor, "gang_scheduling"),
    ],
    ids=lambda value: value.__name__ if isinstance(value, type) else None,
)
def test_each_operator_and_sensor_lists_every_documented_parameter_once(
    site: Path, page_name: str, anchor: str, cls: type, own: str
) -> None:
    rows = PARAMETER_ROW.findall(section(page(site, page_name), anchor))
    names = [name for name, _ in rows]
    # The runtime docstring: the class's own text and the shared one its module appends.
    assert names == DOCUMENTED.findall(cls.__doc__ or "")
    assert {own, "job_name", "kubernetes_conn_id", "deferrable", "kwargs"} <= set(names)
    assert all(text(description).strip() for _, description in rows)


def test_the_operators_take_the_shared_parameters_in_their_signature(site: Path) -> None:
    pytorchjob = text(
        section(page(site, "operators"), "airflow_gang.operators.pytorch_job.PyTorchJobOperator")
    )
    signature = pytorchjob[: pytorchjob.index("Parameters:")]
    for parameter in (
        "image:",
        "workers:",
        "admission_timeout:",
        "deferrable:",
        "on_disruption:",
        "**kwargs",
    ):
        assert parameter in signature
    assert (
        signature.index("restart_policy:")
        < signature.index("admission_timeout:")
        < signature.index("**kwargs")
    )


def test_the_configuration_page_has_every_gang_option(site: Path) -> None:
    markup = page(site, "configuration")
    options = get_provider_info()["config"]["gang"]["options"]
    for name, option in options.items():
        entry = text(section(markup, name))
        assert f"AIRFLOW__GANG__{name.upper()}" in entry
        assert " ".join(option["description"].replace("`", "").split()) in " ".join(entry.split())


def test_the_cli_page_has_every_command_and_argument(site: Path) -> None:
    shown = text(page(site, "cli"))
    parsers = [build_parser()]
    seen = []
    while parsers:
        parser = parsers.pop(0)
        seen.append(parser.prog)
        assert parser.prog in shown
        for action in parser._actions:
            for option in action.option_strings:
                assert option in shown, f"{parser.prog} {option}"
            if isinstance(action, argparse._SubParsersAction):
                parsers.extend(action.choices.values())
    assert {"airflow-gang version", "airflow-gang render", "airflow-gang sim", "airflow-gang airflow"} <= set(
        seen
    )


def test_the_metrics_page_has_every_metric_sent(site: Path) -> None:
    shown = text(page(site, "metrics"))
    sent = re.findall(r'_(?:incr|timing)\(\s*"(\w+)"', Path(telemetry.__file__).read_text(encoding="utf-8"))
    assert len(sent) >= 9
    for name in sent:
        assert telemetry.PREFIX + name in shown


def test_the_page_api_page_has_every_route_and_schema(site: Path) -> None:
    shown = text(page(site, "page-api"))
    document = json.loads((REPO / "docs" / "page-api" / "openapi.json").read_text(encoding="utf-8"))
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            assert f"{method.upper()} /gang{path}" in shown
            for parameter in operation.get("parameters", []):
                assert parameter["name"] in shown
    for name in document["components"]["schemas"]:
        assert name in shown


def test_the_connection_page_explains_every_kubernetes_connection_field(site: Path) -> None:
    from airflow.providers.cncf.kubernetes.get_provider_info import get_provider_info as cncf_info

    markup = page(site, "connection")
    (kubernetes,) = (
        kind for kind in cncf_info()["connection-types"] if kind["connection-type"] == "kubernetes"
    )
    for name in kubernetes["conn-fields"]:
        assert re.search(rf"<td><code>{name}</code></td>\s*<td>[^<]", markup), name


def load_hook() -> ModuleType:
    spec = importlib.util.spec_from_file_location("docs_generated_hook", HOOK)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_a_connection_field_the_hook_does_not_explain_is_a_warning(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    hook = load_hook()
    explained = dict(hook.CONNECTION_FIELDS)
    del explained["namespace"]
    monkeypatch.setattr(hook, "CONNECTION_FIELDS", explained)
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.generated"):
        hook.connection()
    assert any("'namespace'" in record.getMessage() for record in caplog.records)


def test_an_unknown_marker_is_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    class File:
        src_uri = "reference/sample.md"

    class Page:
        file = File()

    hook = load_hook()
    with caplog.at_level(logging.WARNING, logger="mkdocs.hooks.generated"):
        kept = hook.on_page_markdown("# Sample\n\n<!-- generated: nothing -->\n", page=Page())
    assert "<!-- generated: nothing -->" in kept
    assert any("no generated section 'nothing'" in record.getMessage() for record in caplog.records)

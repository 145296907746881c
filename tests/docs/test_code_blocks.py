"""Every Python code block of the docs runs: README.md and each page under docs/.

What counts: a fenced block (backticks or tildes, indented too) whose language is ``python``,
``py``, ``python3`` or ``py3`` runs as a module; a ``pycon`` block (or a Python one that starts
with ``>>>``) is an interactive session, run as a doctest (``ELLIPSIS`` and
``NORMALIZE_WHITESPACE`` on): each ``>>>`` line must print what the block shows. Other languages
(``text``, ``bash``, ``yaml``...) are not run. Each block is a test named ``file:line`` (its
opening fence), and a failure says ``file:line: what`` with the traceback, whose lines are the
page's lines.

How a block runs (`tests.docs.code_blocks.check`), in this process:

1. It is executed as a fresh module, in a temporary working directory, with the environment,
   ``sys.path`` and working directory put back afterwards. It must not raise: a block the site
   shows as Python is a complete example, never a fragment with ``...`` standing in for code.
2. If it defines DAGs (``DAG`` objects at module level, ``with DAG(...)`` blocks, ``@dag``
   functions that are called), it is a DAG block: it is written into the DAGs folder and parsed
   by Airflow's ``DagBag`` (with Airflow's own file heuristic: the text names ``airflow`` and
   ``dag``), which must report no import error, the same DAGs, each with a task.
3. Then each DAG runs with ``dag.test()`` on an embedded cluster (gang_sim), and the run must
   succeed and leave no job or pod behind. The cluster is the e2e tests' one (2 nodes x 2 GPUs,
   queue ``research``; pods follow their ``sim.airflow-gang.io/*`` annotations, 1 s by default);
   a DAG with a ``@task.pytorchjob``, ``@task.trainjob`` or ``@task.vcjob`` task runs on a
   second one, of the same shape, whose pods are real processes, so the function really runs
   (its ``python`` is this virtualenv's). A run whose replicas import ``torch`` or ``sklearn``
   is skipped where the ``train`` extra is not installed.

A fence whose body is only pymdownx.snippets includes (``--8<-- "dags/retrain_daily.py"``)
shows repository files: each must resolve (a section or line range too), run as a module, and
parse as a DAG file if it is one; its DAGs are not run here, the tests of those files do that
(``tests/e2e/test_example_dags.py``). A page that includes another Markdown file shows that
file's blocks, tested under their own file and line.

Opting out, always with a reason, by an HTML comment on a line before the fence (only blank
lines or other comments between); the site and GitHub do not show it:

- ``<!-- docs-test: parse-only: why -->``: the DAG block is executed and parsed, not run
  (for instance, it needs a queue or an image the test cluster does not have, or runs long).
- ``<!-- docs-test: compile-only: why -->``: the block is only compiled, never executed
  (for instance, it needs credentials or a real cluster).
- ``<!-- docs-test: keeps-job: why -->``: the DAG's successful run may leave its job on the
  cluster (a sensor does not delete the job it watched; ``delete_on_finish="never"``); the test
  deletes it afterwards instead of failing.
- ``<!-- docs-test: run-conf: {"epochs": 1} -->``: ``dag.test()`` gets this ``run_conf``, so a
  DAG the page shows with realistic params runs small here.

A ``docs-test`` comment that is not right before a Python block, or that does not parse, fails
`test_every_docs_test_comment_is_right_before_a_python_block`. tests/docs/fixtures/sample.md
proves the checks: blocks that must pass and blocks that must fail, each saying so.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from gang_sim.cluster import SimCluster
from tests.docs.code_blocks import (
    REPO,
    Block,
    BlockFailed,
    Clusters,
    Directive,
    Outcome,
    aligned,
    check,
    collect,
    collect_all,
    execute,
    parse_directive,
    runtime_of,
)
from tests.e2e.conftest import DAGS, airflow_db, cluster  # noqa: F401 (the e2e tests' fixtures)
from tests.support.cluster import NOTHING, leftovers
from tests.waiting import eventually

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SAMPLE = FIXTURES / "sample.md"
DOCS = collect_all()
SAMPLE_BLOCKS = collect(SAMPLE).blocks
_EXPECT = re.compile(r"<!--\s*expect:\s*(?P<verdict>pass|fail)\s*(?P<detail>.*?)\s*-->")
# What a docs DAG may leave behind, deleted before the next block runs (their pods go with them).
CLEARED = (
    ("kubeflow.org", "v1", "pytorchjobs"),
    ("trainer.kubeflow.org", "v1alpha1", "trainjobs"),
    ("batch.volcano.sh", "v1alpha1", "jobs"),
    ("scheduling.volcano.sh", "v1beta1", "podgroups"),
)


@pytest.fixture(scope="module")
def process_cluster() -> Iterator[SimCluster]:
    """The e2e cluster's shape with the process runtime: ``@task.pytorchjob`` functions really run."""
    with SimCluster(
        nodes=2, gpus_per_node=2, schedule_period=0.2, runtime="process", queues={"research": None}
    ) as running:
        yield running


@pytest.fixture
def clusters(request: pytest.FixtureRequest) -> tuple[Clusters, list[SimCluster]]:
    """The embedded clusters, started (and the metadata DB migrated) only when a DAG runs."""
    used: list[SimCluster] = []

    def get(runtime: str) -> Any:
        request.getfixturevalue("airflow_db")
        started: SimCluster = request.getfixturevalue(
            "process_cluster" if runtime == "process" else "cluster"
        )
        if started not in used:
            used.append(started)
        return started

    return Clusters(get=get), used


def _clear(api: k8s.ApiClient) -> None:
    objects = k8s.CustomObjectsApi(api)
    for group, version, plural in CLEARED:
        for item in objects.list_namespaced_custom_object(group, version, "default", plural)["items"]:
            objects.delete_namespaced_custom_object(
                group, version, "default", plural, item["metadata"]["name"], propagation_policy="Foreground"
            )


def nothing_left_behind(block: Block, used: list[SimCluster], settle: float = 20) -> None:
    """A docs DAG leaves no job or pod (unless its page says why it keeps one): what is left goes,
    so the next block starts on an empty cluster, and the block fails."""
    for running in used:
        with running.api_client() as api:
            if block.directive.keeps_job:
                _clear(api)
            try:
                eventually(lambda: leftovers(api) == NOTHING, timeout=settle)
            except AssertionError:
                left = leftovers(api)
                _clear(api)
                with contextlib.suppress(AssertionError):
                    eventually(lambda: leftovers(api) == NOTHING, timeout=20)
                raise BlockFailed(f"{block.id}: the run left objects behind: {left}") from None


def run(
    block: Block, tmp_path: Path, clusters: tuple[Clusters, list[SimCluster]], settle: float = 20
) -> Outcome:
    getter, used = clusters
    try:
        return check(block, workdir=tmp_path, dags_folder=DAGS, clusters=getter)
    finally:
        nothing_left_behind(block, used, settle)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", DOCS.blocks, ids=[block.id for block in DOCS.blocks])
def test_code_block(block: Block, tmp_path: Path, clusters: tuple[Clusters, list[SimCluster]]) -> None:
    outcome = run(block, tmp_path, clusters)
    if outcome.skipped_run and outcome.dag_ids and not block.only_includes and not block.directive.parse_only:
        pytest.skip(f"{block.id}: parsed {outcome.dag_ids}, not run: {outcome.skipped_run}")


def test_the_docs_have_python_blocks() -> None:
    assert DOCS.blocks, "no Python block found in README.md or docs/: is the collector broken?"


def test_every_docs_test_comment_is_right_before_a_python_block() -> None:
    assert DOCS.stray == [], "docs-test comments with no Python block right after them, or unreadable"


# --- the machinery, on tests/docs/fixtures/sample.md --------------------------------------------


def expectation(block: Block) -> tuple[str, str]:
    """The ``<!-- expect: pass|fail detail -->`` comment among the lines right before the fence."""
    lines = block.path.read_text(encoding="utf-8").split("\n")[: block.line - 1]
    for line in reversed(lines):
        if match := _EXPECT.search(line):
            return match.group("verdict"), match.group("detail")
        if line.strip() and "<!--" not in line:
            break
    raise AssertionError(f"{block.id} says nothing of what it expects")


def test_the_collector_reads_the_sample_page() -> None:
    found = collect(SAMPLE)
    by_line = {block.line: block for block in found.blocks}
    text = SAMPLE.read_text(encoding="utf-8").split("\n")
    fences = [
        number
        for number, line in enumerate(text, start=1)
        if re.match(r"\s*(```|~~~)(python|py|pycon)\b", line)
    ]
    # Every Python and pycon fence, the indented one in the admonition too; no bash or text one.
    assert sorted(by_line) == fences
    assert {block.language for block in found.blocks} == {"python", "py", "pycon"}
    assert all(block.path == SAMPLE for block in found.blocks)
    assert all(block.id.startswith("tests/docs/fixtures/sample.md:") for block in found.blocks)

    indented = next(block for block in found.blocks if block.language == "py")
    assert indented.source.startswith("import datetime as dt\n")
    assert indented.directive == Directive(parse_only="the queue does not exist on the test cluster")
    configured = next(block for block in found.blocks if "sample_job" in block.source)
    assert configured.directive == Directive(run_conf={"epochs": 2})

    # Includes are expanded as the site does: the block holds the file's text.
    included = [block for block in found.blocks if block.includes]
    assert [block.includes[0].file for block in included] == [
        "dags/retrain_daily.py",
        "tests/docs/fixtures/included_snippet.py",
        "tests/docs/fixtures/included_broken.py",
        "dags/no_such_file.py",
    ]
    assert all(block.only_includes and block.body_line is None for block in included)
    assert included[0].source == (REPO / "dags/retrain_daily.py").read_text(encoding="utf-8").rstrip() + "\n"
    assert included[0].problems == []
    assert included[-1].includes[0].path is None
    (problem,) = included[-1].problems
    assert "does not resolve" in problem

    # The directive before a bash block is reported with its line.
    (stray,) = found.stray
    stray_line = next(n for n, line in enumerate(text, start=1) if "nothing to parse" in line)
    assert stray == f"tests/docs/fixtures/sample.md:{stray_line}"


def test_a_page_that_includes_a_markdown_file_shows_its_blocks_under_their_own_lines(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text('# A page\n\n--8<-- "tests/docs/fixtures/sample.md"\n\n```python\nx = 1\n```\n')
    found = collect(page)
    assert [(block.path, block.line) for block in found.blocks] == [
        *[(SAMPLE, block.line) for block in SAMPLE_BLOCKS],
        (page.resolve(), 5),
    ]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("parse-only", "needs a reason"),
        ("compile-only:  ", "needs a reason"),
        ("run-conf: [1, 2]", "must be a JSON object"),
        ("run-conf: {epochs: 1}", "Expecting property name"),
        ("keeps-job:", "needs a reason"),
        ("skip: flaky", "unknown docs-test directive"),
    ],
)
def test_directives_that_do_not_parse_are_refused(text: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_directive(text)


@pytest.mark.timeout(180)
@pytest.mark.parametrize("block", SAMPLE_BLOCKS, ids=[f"sample.md:{block.line}" for block in SAMPLE_BLOCKS])
def test_each_sample_block_passes_or_fails_as_it_says(
    block: Block, tmp_path: Path, clusters: tuple[Clusters, list[SimCluster]]
) -> None:
    verdict, detail = expectation(block)
    if verdict == "fail":
        with pytest.raises(BlockFailed) as failure:  # (a job that stays, stays: no need to wait long)
            run(block, tmp_path, clusters, settle=1 if "left objects behind" in detail else 20)
        message = str(failure.value)
        assert message.startswith(f"{block.id}: "), message
        assert detail in message, message
        return
    outcome = run(block, tmp_path, clusters)
    assert outcome.executed or block.directive.compile_only
    fields = dict(part.split("=", 1) for part in detail.split())
    assert outcome.ran == ([fields["ran"]] if "ran" in fields else [])
    if "parsed" in fields:
        assert fields["parsed"] in outcome.dag_ids
        assert outcome.skipped_run


def test_a_traceback_points_at_the_page_line(tmp_path: Path) -> None:
    raising = next(block for block in SAMPLE_BLOCKS if "1 / 0" in block.source)
    with pytest.raises(BlockFailed) as failure:
        check(raising, workdir=tmp_path, dags_folder=DAGS, clusters=None)
    line = raising.line + 1
    assert f'File "{SAMPLE}", line {line}' in str(failure.value)
    assert "ratio = 1 / 0" in str(failure.value)


def test_a_block_cannot_change_the_environment_of_the_next(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```python\nimport os, sys\nos.environ['DOCS_BLOCK_LEAK'] = '1'\nsys.path.insert(0, '/nowhere')\n"
        "os.chdir('/')\n```\n"
    )
    (block,) = collect(page).blocks
    before = (Path.cwd(), list(sys.path))
    check(block, workdir=tmp_path, dags_folder=DAGS, clusters=None)
    assert "DOCS_BLOCK_LEAK" not in os.environ
    assert (Path.cwd(), list(sys.path)) == before


def test_a_dag_with_a_replica_function_runs_on_the_process_runtime() -> None:
    """(The decorator reads its function's source at parse time: from the page, at its lines.)"""
    runtimes = {}
    for block in SAMPLE_BLOCKS:
        if "sample_taskflow" in block.source or "sample_job" in block.source:
            _, (dag,) = execute(*aligned(block), f"runtime_{block.line}")
            runtimes[dag.dag_id] = runtime_of(dag)
    assert runtimes == {"sample_taskflow": "process", "sample_job": "script"}

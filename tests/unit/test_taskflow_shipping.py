"""``@task.pytorchjob`` without a cluster: what is shipped, how a replica runs it, what comes back.

The bootstrap runs here as it runs on a replica: ``python -c <entry program>`` with the payload
in the environment, under ``-S`` (no site-packages: no torch, no Airflow), so it is proven to
need only the standard library.
"""

from __future__ import annotations

import datetime as dt
import glob
import os
import re
import subprocess
import sys
from typing import Any

import pytest
from airflow.sdk import Param
from airflow.sdk.definitions.param import ParamsDict

from airflow_gang.decorators import replica_bootstrap
from airflow_gang.decorators.function_source import FunctionSource, syntax_min_python
from airflow_gang.decorators.payload import (
    BOOTSTRAP_SOURCE,
    MAX_PAYLOAD_BYTES,
    PAYLOAD_ENV,
    call_arguments,
    encode_payload,
    replica_command,
)
from airflow_gang.decorators.pytorch_job import PyTorchJobDecoratedOperator, pytorchjob_task
from airflow_gang.decorators.replica_bootstrap import (
    BOOTSTRAP_MIN_PYTHON,
    EXIT_BOOTSTRAP_ERROR,
    NotJsonError,
    to_json_value,
)
from airflow_gang.decorators.replica_output import NoReturnValue, replica_error, return_value
from airflow_gang.exceptions import GangSpecError
from airflow_gang.get_provider_info import get_provider_info

LIMIT = 3


def scaled(values: list[float], factor: float = 2.0, *, label: str = "x") -> dict[str, Any]:
    # A comment inside the function travels with it.
    import os

    total = sum(value * factor for value in values)
    return {"label": label, "total": total, "rank": os.environ.get("RANK", "0")}


def over_limit(value: int) -> int:
    if value > LIMIT:
        raise ValueError(f"{value} is over the limit")
    return value


def local_ranks() -> str:
    import os

    print(f"local rank {os.environ['LOCAL_RANK']} is global rank {os.environ['RANK']}", flush=True)
    return os.environ["RANK"]


def run_on_replica(
    function: Any, *args: Any, env: dict[str, str] | None = None, min_python: tuple[int, int] | None = None
) -> subprocess.CompletedProcess[str]:
    source = FunctionSource.of(function)
    call_args, call_kwargs = call_arguments(function, args, {}, {}, frozenset())
    version = min_python or source.min_python
    payload = encode_payload(source, call_args, call_kwargs, min_python=version, backend=None)
    command = replica_command(sys.executable, version)
    return subprocess.run(
        [command[0], "-S", *command[1:]],
        env={"PATH": os.environ["PATH"], PAYLOAD_ENV: payload, **(env or {})},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- registration ----------------------------------------------------------------------------


def test_the_provider_registers_task_pytorchjob() -> None:
    from airflow.sdk import task

    assert {"name": "pytorchjob", "class-name": "airflow_gang.decorators.pytorch_job.pytorchjob_task"} in (
        get_provider_info()["task-decorators"]
    )
    assert task.pytorchjob is pytorchjob_task


# --- the function's source -------------------------------------------------------------------


def test_the_source_is_the_def_statement_dedented_without_decorators() -> None:
    from airflow.sdk import task

    class Holder:
        @staticmethod
        @task.pytorchjob(image="python:3.12")
        def nested(value: int) -> int:
            return value + 1

    source = FunctionSource.of(Holder.nested.function)
    assert source.text == "def nested(value: int) -> int:\n    return value + 1\n"
    assert source.name == "nested"
    assert source.filename == __file__
    with open(__file__) as this_file:
        assert this_file.readlines()[source.first_line - 1].strip() == "def nested(value: int) -> int:"
    assert source.min_python == (3, 9)


def test_a_function_reading_its_modules_globals_is_refused_at_parse_time() -> None:
    with pytest.raises(GangSpecError, match=r"over_limit\(\) uses LIMIT from outside the function"):
        FunctionSource.of(over_limit)


def test_closures_defaults_from_outside_lambdas_and_async_functions_are_refused() -> None:
    threshold = 1

    def closure() -> int:
        return threshold

    def default_from_outside(when: dt.date = dt.date.today()) -> str:  # noqa: B008
        return str(when)

    async def coroutine() -> None:
        return None

    with pytest.raises(GangSpecError, match="uses threshold from outside"):
        FunctionSource.of(closure)
    with pytest.raises(GangSpecError, match="uses dt from outside"):
        FunctionSource.of(default_from_outside)
    with pytest.raises(GangSpecError, match="is async"):
        FunctionSource.of(coroutine)
    with pytest.raises(GangSpecError, match="defined with def"):
        FunctionSource.of(lambda: 1)


def test_the_python_the_syntax_needs_is_detected() -> None:
    assert syntax_min_python("def f(x):\n    return (y := x)\n") == (3, 8)
    assert syntax_min_python("def f(x):\n    match x:\n        case 1:\n            return 1\n") == (3, 10)


# --- the arguments ---------------------------------------------------------------------------


def test_arguments_become_plain_json_and_context_keys_come_from_the_context() -> None:
    def train(config: dict[str, Any], sizes: tuple[int, ...], ds: str | None = None) -> None:
        return None

    def tuned(params: dict[str, Any] | None = None) -> None:
        return None

    args, kwargs = call_arguments(
        train,
        [{"lr": 0.1}],
        {"sizes": (64, 128)},
        {"ds": "2026-01-01", "ti": object()},
        frozenset({"ds", "ti"}),
    )
    assert args == [{"lr": 0.1}]
    assert kwargs == {"sizes": [64, 128], "ds": "2026-01-01"}
    params = ParamsDict({"lr": Param(0.1, type="number"), "layers": [64, 32]})
    assert call_arguments(tuned, [], {}, {"params": params}, frozenset({"params"})) == (
        [],
        {"params": {"lr": 0.1, "layers": [64, 32]}},
    )


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ({"layers": [64, {128, 256}]}, r"argument 'config'\['layers'\]\[1\] is a set, which is not JSON"),
        ({1: "a"}, r"argument 'config' has the key 1 \(int\): JSON object keys are strings"),
        (dt.datetime(2026, 1, 1), r"argument 'config' is a datetime.datetime, which is not JSON"),
    ],
)
def test_an_argument_that_is_not_json_is_named_with_where_it_fails(value: Any, message: str) -> None:
    def train(config: Any) -> None:
        return None

    with pytest.raises(GangSpecError, match=message) as raised:
        call_arguments(train, [value], {}, {}, frozenset())
    assert raised.value.field == "config"


def test_objects_with_item_get_a_conversion_hint() -> None:
    class Scalar:
        def item(self) -> float:
            return 1.0

    with pytest.raises(NotJsonError, match=r"convert it with \.item\(\) or \.tolist\(\)"):
        to_json_value({"accuracy": Scalar()}, "the return value")


def test_a_payload_over_the_limit_names_the_biggest_argument_and_the_fix() -> None:
    source = FunctionSource.of(scaled)
    noise = os.urandom(MAX_PAYLOAD_BYTES).hex()  # incompressible
    with pytest.raises(GangSpecError) as raised:
        encode_payload(source, [[1.0]], {"label": noise}, min_python=(3, 9), backend=None)
    message = str(raised.value)
    assert f"over the {MAX_PAYLOAD_BYTES}-byte limit of @task.pytorchjob" in message
    assert "the biggest is argument 'label'" in message
    assert "pass big inputs by reference (a path or URL the replicas read)" in message


# --- on a replica ----------------------------------------------------------------------------


def test_a_replica_runs_the_function_and_rank_0_prints_its_value() -> None:
    done = run_on_replica(scaled, [1.0, 2.5], env={"RANK": "0", "WORLD_SIZE": "1"})
    assert done.returncode == 0, done.stderr
    assert return_value(done.stdout) == {"label": "x", "total": 7.0, "rank": "0"}


def test_other_ranks_return_nothing() -> None:
    done = run_on_replica(scaled, [1.0], env={"RANK": "1", "WORLD_SIZE": "2"})
    assert done.returncode == 0, done.stderr
    with pytest.raises(NoReturnValue):
        return_value(done.stdout)


def test_nproc_per_node_starts_one_local_process_per_rank() -> None:
    done = run_on_replica(
        local_ranks, env={"RANK": "1", "WORLD_SIZE": "4", "PET_NODE_RANK": "1", "PET_NPROC_PER_NODE": "2"}
    )
    assert done.returncode == 0, done.stderr
    assert sorted(line for line in done.stdout.splitlines() if line.startswith("local rank")) == [
        "local rank 0 is global rank 2",
        "local rank 1 is global rank 3",
    ]
    with pytest.raises(NoReturnValue):  # node 1 holds no global rank 0
        return_value(done.stdout)


def test_a_python_older_than_required_is_refused_with_a_clear_error() -> None:
    done = run_on_replica(scaled, [1.0], min_python=(3, 99))
    assert done.returncode == EXIT_BOOTSTRAP_ERROR
    found = replica_error(done.stderr)
    assert found is not None
    assert found.where == "this replica"
    assert "@task.pytorchjob needs Python 3.99 or newer" in found.summary
    assert f"{sys.executable} is Python {sys.version_info.major}.{sys.version_info.minor}" in found.summary


def test_the_bootstrap_is_written_for_its_oldest_python() -> None:
    assert syntax_min_python(BOOTSTRAP_SOURCE) <= BOOTSTRAP_MIN_PYTHON


def other_pythons() -> list[str]:
    """Interpreters of other versions on this machine (pyenv's), to run the bootstrap for real."""
    found = sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/*/bin/python")))
    return [path for path in found if f"/{sys.version_info.major}.{sys.version_info.minor}." not in path]


@pytest.mark.skipif(not other_pythons(), reason="no other Python versions installed (pyenv) on this machine")
def test_older_and_newer_pythons_run_it_or_refuse_it_clearly() -> None:
    for python in other_pythons():
        payload = encode_payload(
            FunctionSource.of(scaled), [[1.0]], {}, min_python=BOOTSTRAP_MIN_PYTHON, backend=None
        )
        done = subprocess.run(
            [python, "-c", replica_bootstrap.entry_program(BOOTSTRAP_MIN_PYTHON)],
            env={"PATH": os.environ["PATH"], PAYLOAD_ENV: payload},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        version = subprocess.run(
            [python, "-c", "import sys; sys.stdout.write('%d %d' % sys.version_info[:2])"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.split()
        if (int(version[0]), int(version[1])) < BOOTSTRAP_MIN_PYTHON:
            assert done.returncode == EXIT_BOOTSTRAP_ERROR, (python, done.stderr)
            needed = ".".join(str(part) for part in BOOTSTRAP_MIN_PYTHON)
            assert (
                f"needs Python {needed} or newer, but {python} is Python {'.'.join(version)}" in done.stderr
            )
        else:
            assert done.returncode == 0, (python, done.stderr)
            assert return_value(done.stdout)["total"] == 2.0


def test_the_entry_program_survives_kubernetes_variable_expansion() -> None:
    assert "$" not in replica_command("python", (3, 9))[2]


# --- reading the master's log ----------------------------------------------------------------


def test_the_last_complete_value_wins_and_chunks_are_joined() -> None:
    log = "\n".join(
        [
            '[airflow-gang] return value 1/1: {"try":1}',
            "restarted",
            '[airflow-gang] return value 1/2: {"tr',
            '[airflow-gang] return value 2/2: y":2}',
            '[airflow-gang] return value 1/2: {"cut',  # a last attempt cut short does not count
        ]
    )
    assert return_value(log) == {"try": 2}


def test_an_error_block_cut_by_the_log_tail_still_gives_its_summary() -> None:
    found = replica_error("noise\n[airflow-gang] error on rank 1: f() raised KeyError: 'x'\nTraceback ...")
    assert found is not None
    assert (found.where, found.summary, found.details) == (
        "rank 1",
        "f() raised KeyError: 'x'",
        "Traceback ...",
    )
    assert replica_error("no marker here") is None


# --- the operator's arguments ----------------------------------------------------------------


def test_the_errors_name_the_decorator_the_user_wrote() -> None:
    from airflow_gang.decorators.train_job import TrainJobDecoratedOperator
    from airflow_gang.decorators.volcano_job import VolcanoJobDecoratedOperator

    async def coroutine() -> None:
        return None

    for operator_class, decorator in (
        (TrainJobDecoratedOperator, "@task.trainjob"),
        (VolcanoJobDecoratedOperator, "@task.vcjob"),
        (PyTorchJobDecoratedOperator, "@task.pytorchjob"),
    ):
        with pytest.raises(GangSpecError, match=rf"coroutine\(\) is async: {re.escape(decorator)} calls"):
            operator_class(task_id="t", python_callable=coroutine, image="i")
        with pytest.raises(GangSpecError, match=rf"^{re.escape(decorator)} needs a function defined with"):
            operator_class(task_id="t", python_callable=lambda: 1, image="i")


def test_arguments_the_decorator_sets_itself_are_refused() -> None:
    with pytest.raises(GangSpecError, match="takes no command="):
        PyTorchJobDecoratedOperator(task_id="t", python_callable=scaled, image="i", command=["x"])
    with pytest.raises(GangSpecError, match="clean_pod_policy='All' is refused"):
        PyTorchJobDecoratedOperator(
            task_id="t", python_callable=scaled, image="i", run_policy={"clean_pod_policy": "All"}
        )


def test_a_mapped_function_keeps_replica_resources_and_the_volcano_queue_apart_from_airflows() -> None:
    from airflow.sdk import DAG, task

    with DAG("mapped_taskflow", schedule=None, start_date=dt.datetime(2026, 1, 1)):

        @task.pytorchjob(image="python:3.12", resources={"cpu": "1", "memory": "1Gi"}, queue="research")
        def train(lr: float) -> float:
            return lr

        mapped = train.expand(lr=[0.1, 0.2]).operator

    assert mapped.partial_kwargs["replica_resources"] == {"cpu": "1", "memory": "1Gi"}
    assert mapped.partial_kwargs["volcano_queue"] == "research"
    assert mapped.partial_kwargs.get("resources") is None
    assert mapped.partial_kwargs.get("queue") != "research"  # Airflow's executor queue is untouched

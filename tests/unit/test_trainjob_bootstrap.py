"""``@task.trainjob`` on a node: the bootstrap finds its rank, world size and master from ``PET_*``.

Trainer's torch runtime gives a TrainJob node only torchrun's variables (``PET_NNODES``,
``PET_NPROC_PER_NODE``, ``PET_NODE_RANK``, ``PET_MASTER_ADDR``, ``PET_MASTER_PORT``), not the
training-operator's ``RANK``/``WORLD_SIZE``/``MASTER_ADDR``. The bootstrap runs for real here, as
a subprocess without ``site`` (so without torch: nothing rendezvouses).
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from airflow_gang.decorators.function_source import FunctionSource
from airflow_gang.decorators.payload import PAYLOAD_ENV, call_arguments, encode_payload, replica_command
from airflow_gang.decorators.replica_bootstrap import EXIT_FUNCTION_RAISED, torch_env
from airflow_gang.decorators.replica_output import NoReturnValue, replica_error, return_value
from airflow_gang.decorators.train_job import TrainJobDecoratedOperator, trainjob_task
from airflow_gang.exceptions import GangSpecError
from airflow_gang.get_provider_info import get_provider_info


def node_env(rank: int, nodes: int = 2, nproc: str = "1") -> dict[str, str]:
    """What the torch runtime sets on node ``rank`` (nothing else of the training-operator's)."""
    return {
        "PET_NNODES": str(nodes),
        "PET_NPROC_PER_NODE": nproc,
        "PET_NODE_RANK": str(rank),
        "PET_MASTER_ADDR": "train-1a2b-node-0-0.train-1a2b",
        "PET_MASTER_PORT": "29500",
    }


def where_am_i() -> dict[str, Any]:
    import os

    names = ("RANK", "WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "LOCAL_RANK")
    seen = {name: os.environ.get(name) for name in names}
    print(f"seen {seen}", flush=True)
    return seen


def fails_on_node_1() -> int:
    import os

    if os.environ["RANK"] == "1":
        raise RuntimeError("node 1 has no data shard")
    return 0


def run_on_node(function: Any, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    source = FunctionSource.of(function)
    args, kwargs = call_arguments(function, [], {}, {}, frozenset(), decorator="@task.trainjob")
    payload = encode_payload(
        source, args, kwargs, min_python=source.min_python, backend=None, decorator="@task.trainjob"
    )
    command = replica_command(sys.executable, source.min_python, "@task.trainjob")
    return subprocess.run(
        [command[0], "-S", *command[1:]],
        env={"PATH": os.environ["PATH"], PAYLOAD_ENV: payload, **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


# --- the mapping ---------------------------------------------------------------------------


def test_a_trainjob_node_gets_master_rank_and_world_size_from_pet_variables() -> None:
    assert torch_env(node_env(1, nodes=3)) == {
        "MASTER_ADDR": "train-1a2b-node-0-0.train-1a2b",
        "MASTER_PORT": "29500",
        "WORLD_SIZE": "3",
        "RANK": "1",
    }


def test_the_world_is_nodes_times_processes_per_node_and_rank_stays_the_node_rank() -> None:
    added = torch_env(node_env(1, nodes=2, nproc="4"))
    # The node's local processes take global ranks 4..7 from local_rank_env.
    assert (added["WORLD_SIZE"], added["RANK"]) == ("8", "1")
    # "auto" (a GPU node: torchrun counts the GPUs) is one process for the bootstrap.
    assert torch_env(node_env(0, nodes=2, nproc="auto"))["WORLD_SIZE"] == "2"


def test_an_elastic_node_count_takes_its_upper_bound() -> None:
    assert torch_env({**node_env(0), "PET_NNODES": "2:4"})["WORLD_SIZE"] == "4"


def test_the_training_operators_variables_win_and_nothing_is_added_to_a_pytorchjob_replica() -> None:
    replica = {
        **node_env(1),
        "RANK": "1",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "train-master-0",
        "MASTER_PORT": "23456",
    }
    assert torch_env(replica) == {}
    assert torch_env({}) == {}


# --- the bootstrap on a node ---------------------------------------------------------------


def test_node_0_of_two_is_rank_0_of_a_world_of_two_and_prints_the_return_value() -> None:
    done = run_on_node(where_am_i, node_env(0))
    assert done.returncode == 0, done.stderr
    assert return_value(done.stdout) == {
        "RANK": "0",
        "WORLD_SIZE": "2",
        "MASTER_ADDR": "train-1a2b-node-0-0.train-1a2b",
        "MASTER_PORT": "29500",
        "LOCAL_RANK": None,
    }


def test_node_1_is_rank_1_and_hands_back_nothing() -> None:
    done = run_on_node(where_am_i, node_env(1))
    assert done.returncode == 0, done.stderr
    assert "'RANK': '1', 'WORLD_SIZE': '2'" in done.stdout
    with pytest.raises(NoReturnValue):
        return_value(done.stdout)


def test_processes_per_node_get_global_ranks_in_a_world_of_nodes_times_processes() -> None:
    # No master: the local processes run the venv's Python, with torch, which would rendezvous.
    env = {key: value for key, value in node_env(1, nodes=2, nproc="2").items() if "MASTER" not in key}
    done = run_on_node(where_am_i, env)
    assert done.returncode == 0, done.stderr
    seen = sorted(line for line in done.stdout.splitlines() if line.startswith("seen "))
    assert len(seen) == 2
    for local_rank, line in enumerate(seen):
        assert f"'RANK': '{2 + local_rank}', 'WORLD_SIZE': '4'" in line
        assert f"'LOCAL_RANK': '{local_rank}'" in line


def test_an_error_on_a_node_names_its_rank() -> None:
    done = run_on_node(fails_on_node_1, node_env(1))
    assert done.returncode == EXIT_FUNCTION_RAISED
    found = replica_error(done.stderr)
    assert found is not None
    assert found.where == "rank 1"
    assert found.summary == "fails_on_node_1() raised RuntimeError: node 1 has no data shard"


# --- the decorator -------------------------------------------------------------------------


def test_the_provider_registers_task_trainjob() -> None:
    from airflow.sdk import task

    assert {"name": "trainjob", "class-name": "airflow_gang.decorators.train_job.trainjob_task"} in (
        get_provider_info()["task-decorators"]
    )
    assert task.trainjob is trainjob_task


def test_the_decorator_sets_the_command_itself() -> None:
    with pytest.raises(GangSpecError, match=r"@task.trainjob takes no command="):
        TrainJobDecoratedOperator(task_id="t", python_callable=where_am_i, command=["python"])

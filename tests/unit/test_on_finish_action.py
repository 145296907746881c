"""``on_finish_action``: KubernetesPodOperator's words for ``delete_on_finish``, checked before
any API call."""

from __future__ import annotations

import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.operators.pytorch_job import PyTorchJobOperator


@pytest.mark.parametrize(
    ("action", "delete_on_finish"),
    [("delete_job", "always"), ("delete_succeeded_job", "on_success"), ("keep_job", "never")],
)
def test_on_finish_action_sets_delete_on_finish(action: str, delete_on_finish: str) -> None:
    operator = PyTorchJobOperator(
        task_id="t", image="train:1", on_finish_action=action, delete_on_finish="on_success"
    )

    assert operator.delete_on_finish == delete_on_finish
    operator.build_spec()  # valid


def test_without_on_finish_action_delete_on_finish_stands() -> None:
    operator = PyTorchJobOperator(task_id="t", image="train:1", delete_on_finish="never")

    assert operator.delete_on_finish == "never"


def test_an_unknown_on_finish_action_names_the_field_and_the_choices() -> None:
    operator = PyTorchJobOperator(task_id="t", image="train:1", on_finish_action="delete_pod")

    with pytest.raises(GangSpecError) as invalid:
        operator.build_spec()
    assert invalid.value.field == "on_finish_action"
    assert "'delete_job', 'delete_succeeded_job', 'keep_job'" in str(invalid.value)

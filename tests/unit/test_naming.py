from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from airflow_gang.model import naming
from airflow_gang.model.naming import (
    identity_labels,
    identity_selector,
    is_dns_1035_label,
    is_label_value,
    job_name,
)

airflow_ids = st.text(min_size=1, max_size=250)
map_indexes = st.integers(min_value=-1, max_value=100_000)
try_numbers = st.integers(min_value=0, max_value=1_000)


def test_job_name_is_the_task_slug_plus_eight_hex() -> None:
    name = job_name("retrain", "train_model", "scheduled__2026-11-29T00:00:00+00:00", -1, 1)
    slug, _, digest = name.rpartition("-")
    assert slug == "train-model"
    assert re.fullmatch(r"[0-9a-f]{8}", digest), digest


def test_job_name_is_deterministic() -> None:
    args = ("dag", "task", "run", 3, 2)
    assert job_name(*args) == job_name(*args)


@pytest.mark.parametrize(
    ("task_id", "expected_slug"),
    [
        ("Train.Model_V2", "train-model-v2"),
        ("123_train", "train"),
        ("Modèle-entraînement", "modele-entrainement"),
        ("訓練", "job"),
        ("___", "job"),
    ],
)
def test_job_name_slugs_any_task_id_into_dns_1035(task_id: str, expected_slug: str) -> None:
    name = job_name("dag", task_id, "run", -1, 1)
    assert name.rsplit("-", 1)[0] == expected_slug
    assert is_dns_1035_label(name, max_length=45)


def test_task_ids_that_slug_alike_get_different_names() -> None:
    assert job_name("d", "train_a", "r", -1, 1) != job_name("d", "train-a", "r", -1, 1)


@settings(max_examples=300)
@given(airflow_ids, airflow_ids, airflow_ids, map_indexes, try_numbers)
def test_any_airflow_ids_give_a_valid_short_dns_1035_name(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> None:
    name = job_name(dag_id, task_id, run_id, map_index, try_number)
    assert len(name) <= naming.MAX_JOB_NAME_LENGTH
    assert is_dns_1035_label(name)


@given(airflow_ids, airflow_ids, airflow_ids, map_indexes, try_numbers)
def test_different_map_indexes_and_tries_give_different_names(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> None:
    name = job_name(dag_id, task_id, run_id, map_index, try_number)
    assert name != job_name(dag_id, task_id, run_id, map_index + 1, try_number)
    assert name != job_name(dag_id, task_id, run_id, map_index, try_number + 1)


@settings(max_examples=300)
@given(airflow_ids, airflow_ids, airflow_ids, map_indexes, try_numbers)
def test_identity_labels_are_always_valid_label_values(
    dag_id: str, task_id: str, run_id: str, map_index: int, try_number: int
) -> None:
    labels = identity_labels(dag_id, task_id, run_id, map_index, try_number)
    expected = {
        "airflow-gang.io/dag-id",
        "airflow-gang.io/task-id",
        "airflow-gang.io/run-id",
        "airflow-gang.io/try-number",
        "airflow-gang.io/managed-by",
    }
    assert set(labels) == (expected | {"airflow-gang.io/map-index"} if map_index >= 0 else expected)
    assert all(is_label_value(value) for value in labels.values())
    assert all(naming.is_qualified_key(key) for key in labels)
    assert labels == identity_labels(dag_id, task_id, run_id, map_index, try_number)


def test_valid_label_values_are_kept_and_invalid_ones_hashed_readably() -> None:
    labels = identity_labels("my_dag.v2", "train", "manual__2026-11-29T21:46:48+00:00", 4, 2)
    assert labels["airflow-gang.io/dag-id"] == "my_dag.v2"
    run = labels["airflow-gang.io/run-id"]
    assert run.startswith("manual__2026-11-29T21-46-48-00-00-")
    assert is_label_value(run)
    assert labels["airflow-gang.io/map-index"] == "4"
    assert labels["airflow-gang.io/managed-by"] == "airflow-gang"


def test_distinct_invalid_values_do_not_collide_after_hashing() -> None:
    first = naming.safe_label_value("run:1+00:00")
    second = naming.safe_label_value("run:1-00:00")
    assert first != second


def test_identity_selector_spans_tries_unless_asked() -> None:
    labels = identity_labels("d", "t", "r", 2, 3)
    selector = identity_selector(labels)
    assert "try-number" not in selector
    assert "airflow-gang.io/map-index=2" in selector.split(",")
    assert "airflow-gang.io/try-number=3" in identity_selector(labels, include_try_number=True).split(",")


def test_identity_selector_of_an_unmapped_task_requires_the_map_index_label_absent() -> None:
    selector = identity_selector(identity_labels("d", "t", "r", -1, 1))
    assert "!airflow-gang.io/map-index" in selector.split(",")

"""Katib-style ``name=value`` metrics parsed from a replica's log."""

from __future__ import annotations

import pytest

from airflow_gang.reports.metrics import parse_metrics


def test_the_last_value_of_each_metric_wins() -> None:
    log = "epoch 1/3 loss=0.91\nepoch 2/3 loss=0.40\nepoch 3/3 loss=0.12\naccuracy=0.975\n"
    assert parse_metrics(log) == {"loss": 0.12, "accuracy": 0.975}


@pytest.mark.parametrize(
    ("line", "expected"),
    [
        ("lr = 1e-3", {"lr": 0.001}),
        ("val/acc=0.5 train-loss=-.25", {"val/acc": 0.5, "train-loss": -0.25}),
        ("step=5, best_acc=0.9;", {"step": 5.0, "best_acc": 0.9}),
        ("version=1.2.3 path=/data/x url=http://a.b/c?x=1a", {}),
        ("accuracy=nan loss=inf", {}),
        ("no metrics here", {}),
    ],
)
def test_only_name_equals_number_pairs_are_metrics(line: str, expected: dict[str, float]) -> None:
    assert parse_metrics(line) == expected

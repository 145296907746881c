"""Every concrete operator and sensor documents every parameter it takes in its own class
docstring (issue 35), as KubernetesJobOperator does: a reader of one class's help, or of the docs
generated from it, sees every argument with what it does."""

from __future__ import annotations

import inspect

import pytest
from airflow.sdk import BaseOperator

from airflow_gang.decorators.pytorch_job import PyTorchJobDecoratedOperator
from airflow_gang.decorators.train_job import TrainJobDecoratedOperator
from airflow_gang.operators.pytorch_job import PyTorchJobOperator
from airflow_gang.operators.train_job import TrainJobOperator
from airflow_gang.sensors.gang import GangAdmissionSensor, PyTorchJobSensor, TrainJobSensor

CONCRETE = [PyTorchJobOperator, TrainJobOperator, GangAdmissionSensor, PyTorchJobSensor, TrainJobSensor]


def parameters(cls: type) -> set[str]:
    """The keyword parameters the class takes: its own ``__init__``'s and, through ``**kwargs``,
    its bases' up to Airflow's own operator classes (whose parameters Airflow documents)."""
    names: set[str] = set()
    for klass in cls.__mro__:
        if klass.__module__.startswith("airflow.") or "__init__" not in vars(klass):
            continue
        for name, parameter in inspect.signature(vars(klass)["__init__"]).parameters.items():
            if name != "self" and parameter.kind is not inspect.Parameter.VAR_POSITIONAL:
                names.add(name)
    return names


def undocumented(cls: type) -> set[str]:
    doc = cls.__doc__ or ""
    return {name for name in parameters(cls) if f":param {name}:" not in doc}


@pytest.mark.parametrize("cls", CONCRETE, ids=lambda cls: cls.__name__)
def test_every_parameter_is_documented_in_the_class_docstring(cls: type) -> None:
    assert issubclass(cls, BaseOperator)
    assert parameters(cls) >= {"job_name", "namespace", "kubernetes_conn_id", "kwargs"}
    assert undocumented(cls) == set(), f"{cls.__name__} does not document these parameters"


DECORATED = [PyTorchJobDecoratedOperator, TrainJobDecoratedOperator]


@pytest.mark.parametrize("cls", DECORATED, ids=lambda c: c.__name__)
def test_the_decorators_operators_document_what_they_add(cls: type) -> None:
    init = vars(cls).get("__init__")
    own = set(inspect.signature(init).parameters) if init else set()
    own -= {"self", "kwargs", "python_callable"}
    doc = cls.__doc__ or ""
    assert {name for name in own if f":param {name}:" not in doc} == set()


def test_the_check_finds_an_undocumented_parameter() -> None:
    class Sloppy(PyTorchJobOperator):
        """Documents nothing."""

        def __init__(self, *, sloppiness: int = 1, **kwargs: object) -> None:
            super().__init__(**kwargs)

    assert "sloppiness" in undocumented(Sloppy)
    assert "image" in undocumented(Sloppy)

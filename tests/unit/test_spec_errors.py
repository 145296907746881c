"""Every invalid job description raises GangSpecError naming the field, the value and the fix."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from airflow_gang.exceptions import GangError, GangSpecError
from airflow_gang.spec import GangJobSpec

VALID: dict[str, Any] = {"image": "img:1", "workers": 1}


def _error(**overrides: Any) -> GangSpecError:
    with pytest.raises(GangSpecError) as caught:
        GangJobSpec(**{**VALID, **overrides})
    return caught.value


@pytest.mark.parametrize(
    ("overrides", "expected_fragments"),
    [
        pytest.param({"image": ""}, ["image=''", "non-empty image reference", "ghcr.io"], id="empty-image"),
        pytest.param({"image": "   "}, ["image='   '", "non-empty"], id="blank-image"),
        pytest.param({"image": None}, ["image is required", "image='registry/repo:tag'"], id="missing-image"),
        pytest.param(
            {"workers": -1}, ["workers=-1", "workers=0 runs the master only"], id="negative-workers"
        ),
        pytest.param({"workers": "many"}, ["workers='many'", "whole number"], id="non-integer-workers"),
        pytest.param(
            {"min_available": 3}, ["min_available=3", "between 1 and the job's 2 replicas"], id="gang-too-big"
        ),
        pytest.param({"min_available": 0}, ["min_available=0", "between 1"], id="gang-zero"),
        pytest.param(
            {"resources": {"nvidia.com/gpu": 1.5}},
            ["nvidia.com/gpu", "1.5", "whole number >= 1"],
            id="fractional-gpu",
        ),
        pytest.param({"resources": {"nvidia.com/gpu": 0}}, ["nvidia.com/gpu", "omit the key"], id="zero-gpu"),
        pytest.param(
            {"resources": {"nvidia.com/gpu": "two"}},
            ["nvidia.com/gpu", "'two'", "not a Kubernetes quantity"],
            id="word-gpu",
        ),
        pytest.param(
            {"resources": {"memory": "16GB"}},
            ["resources['memory']='16GB'", "not a Kubernetes quantity", "16Gi"],
            id="bad-memory",
        ),
        pytest.param({"resources": {"cpu": "-1"}}, ["resources['cpu']='-1'", "negative"], id="negative-cpu"),
        pytest.param({"env": {"1BAD": "x"}}, ["env name '1BAD'", "valid identifier"], id="env-digit-first"),
        pytest.param(
            {"env": {"LEARNING-RATE": "x"}},
            ["LEARNING-RATE", "valid identifier", "LEARNING_RATE"],
            id="env-dash",
        ),
        pytest.param(
            {"env": {"MASTER_ADDR": "x"}}, ["MASTER_ADDR", "reserved", "training-operator"], id="env-reserved"
        ),
        pytest.param({"env": {"A": [1]}}, ["env['A']", "valueFrom"], id="env-list-value"),
        pytest.param(
            {"gang_scheduling": "volcano"},
            ["gang_scheduling='volcano'", "'provider', 'training-operator' or 'disabled'"],
            id="unknown-mode",
        ),
        pytest.param(
            {"restart_policy": "Sometimes"}, ["restart_policy='Sometimes'", "OnFailure"], id="restart-policy"
        ),
        pytest.param({"queue": "Research Team"}, ["queue='Research Team'", "DNS-1123"], id="queue-name"),
        pytest.param(
            {"command": "python train.py"},
            ["command='python train.py'", "['python', 'train.py']"],
            id="command-string",
        ),
        pytest.param(
            {"labels": {"team": "vision team"}},
            ["labels['team']='vision team'", "annotations"],
            id="label-value",
        ),
        pytest.param({"labels": {"airflow-gang.io/dag-id": "x"}}, ["reserved"], id="label-reserved"),
        pytest.param({"labels": {"bad key!": "x"}}, ["labels key 'bad key!'"], id="label-key"),
        pytest.param({"master_port": 70000}, ["master_port=70000", "65535"], id="port-range"),
        pytest.param({"nproc_per_node": 0}, ["nproc_per_node=0", ">= 1"], id="nproc-zero"),
        pytest.param(
            {"tolerations": [{"operator": "Maybe"}]},
            ["tolerations[0].operator='Maybe'"],
            id="toleration-operator",
        ),
        pytest.param({"volumes": [{"claim": "x"}]}, ["volumes[0].name=None"], id="volume-without-name"),
        pytest.param(
            {"volume_mounts": [{"name": "data", "mountPath": "/data"}]},
            ["name='data' has no matching volume"],
            id="mount-without-volume",
        ),
        pytest.param(
            {"run_policy": {"backoff_limit": -2}},
            ["run_policy.backoff_limit=-2", "whole number >= 0"],
            id="backoff-negative",
        ),
        pytest.param(
            {"run_policy": {"clean_pods": "All"}},
            ["run_policy.clean_pods is not a known argument", "clean_pod_policy"],
            id="run-policy-typo",
        ),
        pytest.param(
            {"wrokers": 3}, ["wrokers is not a known argument", "did you mean 'workers'"], id="argument-typo"
        ),
        pytest.param(
            {"pod_template": {"spec": {"schedulerName": "default-scheduler"}}},
            ["schedulerName='default-scheduler'", "gang_scheduling='disabled'"],
            id="template-scheduler",
        ),
        pytest.param(
            {"job_template": {"kind": "TFJob"}}, ["kind='TFJob'", "only PyTorchJob"], id="template-kind"
        ),
        pytest.param(
            {"job_template": {"kind": "PyTorchJob", "apiVersion": "kubeflow.org/v2"}},
            ["apiVersion='kubeflow.org/v2'"],
            id="template-version",
        ),
        pytest.param(
            {"job_template": {"spec": {"pytorchReplicaSpecs": {"Chief": {}}}}},
            ["'Chief'", "only 'Master' and 'Worker'"],
            id="template-replica-type",
        ),
        pytest.param(
            {"job_template": {"spec": {"pytorchReplicaSpecs": {"Master": {"replicas": 2}}}}},
            ["Master.replicas=2", "exactly 1 Master"],
            id="template-two-masters",
        ),
        pytest.param(
            {"job_template": "missing-file.yaml"},
            ["job_template='missing-file.yaml' could not be read"],
            id="template-missing-file",
        ),
        pytest.param(
            {"job_template": "kind: [unclosed\n"}, ["job_template is not valid YAML"], id="template-bad-yaml"
        ),
        pytest.param(
            {"job_template": 42}, ["job_template=42", "kind: PyTorchJob"], id="template-not-mapping"
        ),
    ],
)
def test_invalid_argument_is_named_with_its_value_and_a_fix(
    overrides: dict[str, Any], expected_fragments: list[str]
) -> None:
    message = str(_error(**overrides))
    for fragment in expected_fragments:
        assert fragment in message, f"{fragment!r} not in {message!r}"


def test_spec_error_is_a_value_error_and_a_gang_error_that_names_its_field() -> None:
    error = _error(workers=-1)
    assert isinstance(error, ValueError)
    assert isinstance(error, GangError)
    assert error.field == "workers"


def test_model_validate_raises_the_same_error_as_the_constructor() -> None:
    with pytest.raises(GangSpecError, match="workers=-1"):
        GangJobSpec.model_validate({**VALID, "workers": -1})


def test_several_problems_are_reported_together() -> None:
    message = str(_error(workers=-1, queue="Bad Queue"))
    assert "workers=-1" in message
    assert "queue='Bad Queue'" in message


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("Train", "DNS-1035"),
        ("1train", "DNS-1035"),
        ("train_1", "DNS-1035"),
        ("train-", "DNS-1035"),
        ("", "DNS-1035"),
        ("a" * 60, "too long (60 characters)"),
    ],
)
def test_invalid_job_names_are_rejected_by_the_builders(name: str, fragment: str) -> None:
    spec = GangJobSpec(**VALID)
    for build in (spec.build_pytorchjob, spec.build_podgroup):
        with pytest.raises(GangSpecError, match="job_name") as caught:
            build(name, "ml")
        assert fragment in str(caught.value)


def test_job_name_limit_leaves_room_for_the_largest_worker_index() -> None:
    spec = GangJobSpec(image="img:1", workers=100)
    job = spec.build_pytorchjob("a" * 53, "ml")  # "<53 chars>-worker-99" is exactly 63
    assert len(job["metadata"]["name"] + "-worker-99") == 63
    with pytest.raises(GangSpecError, match="use at most 53 characters"):
        spec.build_pytorchjob("a" * 54, "ml")


def test_invalid_namespace_is_rejected() -> None:
    with pytest.raises(GangSpecError, match="namespace='ML_Team'"):
        GangJobSpec(**VALID).build_pytorchjob("train", "ML_Team")


def test_job_template_path_that_is_a_directory_is_reported(tmp_path: Path) -> None:
    folder = tmp_path / "job.yaml"
    folder.mkdir()
    assert "could not be read" in str(_error(job_template=str(folder)))

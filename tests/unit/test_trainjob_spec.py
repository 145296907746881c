"""`TrainJobSpec`: a Kubeflow Trainer v2 TrainJob from typed arguments, refused before any API call
when Trainer or the API server would refuse it, with the field and the fix named."""

from __future__ import annotations

import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.job_kinds import QUEUE_ANNOTATION, TRAINJOB
from airflow_gang.trainjob_spec import PATCH_MANAGER, TrainJobSpec

IMAGE = "ghcr.io/acme/train:1"


def queue_patch(manager: str, queue: str) -> dict[str, object]:
    annotations = {QUEUE_ANNOTATION: queue}
    return {
        "manager": manager,
        "trainingRuntimeSpec": {"template": {"metadata": {"annotations": annotations}}},
    }


def test_the_trainer_fields_runtime_and_queue_land_where_trainer_reads_them() -> None:
    spec = TrainJobSpec(
        image=IMAGE,
        command=["torchrun", "train.py"],
        args=["--epochs", 3],
        env={"LR": "0.1"},
        num_nodes=4,
        resources_per_node={"nvidia.com/gpu": 1, "cpu": "2"},
        num_proc_per_node=1,
        queue="research",
    )
    job = spec.build_trainjob("sweep-1", "ml", extra_labels={"airflow-gang.io/dag-id": "d"})
    assert job["apiVersion"] == "trainer.kubeflow.org/v1alpha1"
    assert job["kind"] == "TrainJob"
    # Trainer ignores a queue annotation on the TrainJob itself: none there, a kubectl reader
    # would believe it.
    assert "annotations" not in job["metadata"]
    assert job["metadata"]["labels"] == {"airflow-gang.io/dag-id": "d"}
    assert job["spec"]["runtimeRef"] == {
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
        "name": "torch-distributed",
    }
    trainer = job["spec"]["trainer"]
    assert trainer["numNodes"] == 4
    assert trainer["args"] == ["--epochs", "3"]
    assert trainer["env"] == [{"name": "LR", "value": "0.1"}]
    assert trainer["numProcPerNode"] == 1
    # A GPU is an extended resource: Kubernetes wants its limit equal to its request.
    assert (
        trainer["resourcesPerNode"]["requests"]["nvidia.com/gpu"]
        == trainer["resourcesPerNode"]["limits"]["nvidia.com/gpu"]
    )
    # The identity labels reach the pods too, through the operator's own runtime patch, which
    # carries the queue where Trainer's Volcano plugin reads it: the JobSet template's annotations.
    (patch,) = job["spec"]["runtimePatches"]
    assert patch["manager"] == PATCH_MANAGER
    assert patch["trainingRuntimeSpec"]["template"]["metadata"] == {
        "annotations": {QUEUE_ANNOTATION: "research"}
    }
    (replicated,) = patch["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"]
    assert replicated["name"] == "node"
    assert replicated["template"]["spec"]["template"]["metadata"]["labels"] == {"airflow-gang.io/dag-id": "d"}


def test_pod_fields_and_power_user_patches_become_runtime_patches_in_order() -> None:
    mine = {"manager": "team.example.com/tuning", "trainingRuntimeSpec": {"template": {"metadata": {}}}}
    spec = TrainJobSpec(
        image=IMAGE,
        node_selector={"gpu": "a100"},
        tolerations=[{"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}],
        pod_template={"metadata": {"annotations": {"a": "b"}}, "spec": {"serviceAccountName": "trainer"}},
        runtime_patches=[mine],
        runtime="my-runtime",
        runtime_kind="TrainingRuntime",
    )
    job = spec.build_trainjob("tune", "ml")
    own, theirs = job["spec"]["runtimePatches"]
    assert theirs == mine
    pod = own["trainingRuntimeSpec"]["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    assert pod["metadata"] == {"annotations": {"a": "b"}}
    assert pod["spec"]["nodeSelector"] == {"gpu": "a100"}
    assert pod["spec"]["tolerations"][0]["key"] == "gpu"
    assert pod["spec"]["serviceAccountName"] == "trainer"
    assert job["spec"]["runtimeRef"]["kind"] == "TrainingRuntime"


def test_a_queue_alone_is_a_runtime_patch_and_the_job_kind_reads_it_back() -> None:
    job = TrainJobSpec(image=IMAGE, queue="research").build_trainjob("queued", "ml")
    assert job["spec"]["runtimePatches"] == [
        {
            "manager": PATCH_MANAGER,
            "trainingRuntimeSpec": {
                "template": {"metadata": {"annotations": {QUEUE_ANNOTATION: "research"}}}
            },
        }
    ]
    assert "annotations" not in job["metadata"]
    assert TRAINJOB.queue(job) == "research"


def test_a_user_patch_naming_the_same_queue_or_none_is_kept_and_may_name_it_alone() -> None:
    same = queue_patch("team.example.com/queues", "research")
    spec = TrainJobSpec(image=IMAGE, queue="research", runtime_patches=[same])
    own, theirs = spec.build_trainjob("same", "ml")["spec"]["runtimePatches"]
    assert theirs == same
    assert own["manager"] == PATCH_MANAGER
    # Without queue=, the queue a patch of the user's names is the one asked for.
    assert TrainJobSpec(image=IMAGE, runtime_patches=[same]).asked_queue == "research"
    assert TrainJobSpec(image=IMAGE).asked_queue is None


def test_nothing_to_patch_sends_no_runtime_patches() -> None:
    job = TrainJobSpec(image=IMAGE).build_trainjob("plain", "default")
    assert "runtimePatches" not in job["spec"]
    assert "annotations" not in job["metadata"]


@pytest.mark.parametrize(
    ("arguments", "field", "fix"),
    [
        ({"env": {"PET_NNODES": "4"}}, "env", "num_nodes and num_proc_per_node"),
        ({"num_nodes": 0}, "num_nodes", "greater than or equal to 1"),
        ({"num_proc_per_node": "auto"}, "num_proc_per_node", "valid integer"),
        ({"queue": "Research"}, "queue", "DNS-1123"),
        ({"runtime": "torch_distributed"}, "runtime", "DNS-1123"),
        ({"runtime_kind": "PyTorchJob"}, "runtime_kind", "ClusterTrainingRuntime"),
        (
            {"pod_template": {"spec": {"priorityClassName": "high"}}},
            "pod_template",
            "TrainingRuntime of yours",
        ),
        (
            {"pod_template": {"spec": {"containers": [{"name": "node", "image": "x"}]}}},
            "pod_template",
            "image",
        ),
        ({"runtime_patches": [{"trainingRuntimeSpec": {}}]}, "runtime_patches", "'manager'"),
        ({"runtime_patches": [{"manager": PATCH_MANAGER}]}, "runtime_patches", "operator's own patch"),
        # Trainer reads the queue only from the runtime's template and runtimePatches.
        ({"annotations": {QUEUE_ANNOTATION: "research"}}, "annotations", "pass queue='research'"),
        (
            {"pod_template": {"metadata": {"annotations": {QUEUE_ANNOTATION: "research"}}}},
            "pod_template",
            "ignores on a pod",
        ),
        (
            {"queue": "research", "runtime_patches": [queue_patch("team.example.com/queues", "batch")]},
            "runtime_patches",
            "the patch's queue would win; drop the annotation from the patch, or pass queue='batch'",
        ),
        ({"resources_per_node": {"nvidia.com/gpu": "lots"}}, "resources_per_node", "nvidia.com/gpu"),
        ({"num_node": 2}, "num_node", "did you mean 'num_nodes'"),
    ],
)
def test_bad_input_names_the_field_and_the_fix(arguments: dict[str, object], field: str, fix: str) -> None:
    with pytest.raises(GangSpecError) as raised:
        TrainJobSpec(image=IMAGE, **arguments)
    assert raised.value.field == field, str(raised.value)
    assert fix in str(raised.value)


def test_the_default_runtime_needs_an_image() -> None:
    with pytest.raises(GangSpecError, match="image is required"):
        TrainJobSpec()
    # A command alone runs in the runtime's own image.
    trainer = TrainJobSpec(command=["python", "-c", "print(1)"]).build_trainjob("cmd", "default")["spec"][
        "trainer"
    ]
    assert trainer == {"numNodes": 1, "command": ["python", "-c", "print(1)"]}


@pytest.mark.parametrize(
    ("name", "nodes", "ok"), [("a" * 48, 10, True), ("a" * 49, 10, False), ("a" * 48, 11, False)]
)
def test_the_name_leaves_room_for_the_longest_pod_name(name: str, nodes: int, ok: bool) -> None:
    spec = TrainJobSpec(image=IMAGE, num_nodes=nodes)
    pod = f"{name}-node-0-{nodes - 1}-xxxxx"
    assert (len(pod) <= 63) == ok
    if ok:
        spec.build_trainjob(name, "default")
    else:
        with pytest.raises(GangSpecError, match="too long"):
            spec.build_trainjob(name, "default")
    with pytest.raises(GangSpecError, match="DNS-1035"):
        spec.build_trainjob("Train", "default")

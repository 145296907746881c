"""`VolcanoJobSpec`: a Volcano Job (``batch.volcano.sh/v1alpha1`` ``Job``) from typed arguments,
refused before any API call when Volcano's admission webhook would refuse it (or would accept
what cannot work), with the field and the fix named; and the manifest checked against the
upstream Volcano Job CRD."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import jsonschema
import pytest

from airflow_gang.exceptions import GangSpecError
from airflow_gang.kinds.vcjob.spec import (
    LifecyclePolicy,
    VolcanoJobSpec,
    VolcanoTask,
    check_policies,
    check_vcjob_name,
)
from tests.support.crd_schemas import crd_schema, pruned_fields

JsonDict = dict[str, Any]
IMAGE = "ghcr.io/acme/train:1"
IDENTITY = {"airflow-gang.io/dag-id": "train", "airflow-gang.io/task-id": "fit"}
VCJOB_CRD = "batch.volcano.sh_jobs.yaml"


def shorthand(**overrides: Any) -> VolcanoJobSpec:
    arguments: dict[str, Any] = {
        "image": IMAGE,
        "command": ["python", "train.py"],
        "env": {"LR": "0.1"},
        "workers": 3,
        "resources": {"nvidia.com/gpu": 1, "cpu": "4"},
        "queue": "research",
        "max_retry": 2,
    }
    return VolcanoJobSpec(**{**arguments, **overrides})


def tasks_by_name(job: JsonDict) -> dict[str, JsonDict]:
    return {task["name"]: task for task in job["spec"]["tasks"]}


def container(task: JsonDict) -> JsonDict:
    containers = task["template"]["spec"]["containers"]
    assert [c["name"] for c in containers] == ["pytorch"]
    return dict(containers[0])


def spec_error(**arguments: Any) -> GangSpecError:
    with pytest.raises(GangSpecError) as raised:
        VolcanoJobSpec(**arguments)
    return raised.value


# --- the PyTorch shorthand -----------------------------------------------------------------------


def test_the_shorthand_is_a_master_and_workers_wired_by_the_pytorch_plugin() -> None:
    job = shorthand().build_vcjob("train", "ml", IDENTITY)
    assert job["apiVersion"] == "batch.volcano.sh/v1alpha1"
    assert job["kind"] == "Job"
    assert job["metadata"] == {"name": "train", "namespace": "ml", "labels": IDENTITY}
    spec = job["spec"]
    assert spec["schedulerName"] == "volcano"
    assert spec["minAvailable"] == 4  # the whole gang: 1 master + 3 workers
    assert spec["queue"] == "research"
    assert spec["maxRetry"] == 2
    assert spec["plugins"] == {
        "pytorch": ["--master=master", "--worker=worker", "--port=23456"],
        "svc": [],
        "env": [],
    }
    tasks = tasks_by_name(job)
    assert [(task["name"], task["replicas"]) for task in spec["tasks"]] == [("master", 1), ("worker", 3)]
    for task in tasks.values():
        assert "minAvailable" not in task
        assert "policies" not in task
        assert task["template"]["metadata"] == {"labels": IDENTITY}
        pod = task["template"]["spec"]
        assert pod["restartPolicy"] == "Never"
        assert "priorityClassName" not in pod
        assert container(task) == {
            "name": "pytorch",
            "image": IMAGE,
            "command": ["python", "train.py"],
            "env": [{"name": "LR", "value": "0.1"}],
            # GPUs are an extended resource: Kubernetes wants the limit equal to the request.
            "resources": {"requests": {"nvidia.com/gpu": 1, "cpu": "4"}, "limits": {"nvidia.com/gpu": 1}},
        }
    for absent in ("policies", "priorityClassName", "ttlSecondsAfterFinished"):
        assert absent not in spec


def test_the_shorthand_defaults_to_one_worker_and_workers_zero_is_the_master_alone() -> None:
    default = VolcanoJobSpec(image=IMAGE)
    assert [(t.name, t.replicas) for t in default.effective_tasks] == [("master", 1), ("worker", 1)]
    assert default.queue == "default"
    assert default.max_retry == 3
    alone = VolcanoJobSpec(image=IMAGE, workers=0).build_vcjob("solo", "ml")
    assert [task["name"] for task in alone["spec"]["tasks"]] == ["master"]
    assert alone["spec"]["minAvailable"] == 1
    assert "labels" not in alone["metadata"]


def test_priority_ttl_port_labels_and_pod_fields_land_on_the_job_and_every_pod() -> None:
    spec = shorthand(
        priority_class="high",
        ttl_seconds_after_finished=120,
        master_port=29500,
        labels={"team": "vision"},
        annotations={"acme.io/owner": "ada"},
        node_selector={"gpu": "a100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        env={"TOKEN": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    )
    job = spec.build_vcjob("train", "ml", IDENTITY)
    assert job["metadata"]["labels"] == {"team": "vision", **IDENTITY}
    assert job["metadata"]["annotations"] == {"acme.io/owner": "ada"}
    assert job["spec"]["priorityClassName"] == "high"
    assert job["spec"]["ttlSecondsAfterFinished"] == 120
    assert job["spec"]["plugins"]["pytorch"] == ["--master=master", "--worker=worker", "--port=29500"]
    for task in job["spec"]["tasks"]:
        assert task["template"]["metadata"]["labels"] == {"team": "vision", **IDENTITY}
        pod = task["template"]["spec"]
        assert pod["priorityClassName"] == "high"
        assert pod["nodeSelector"] == {"gpu": "a100"}
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert container(task)["env"] == [
            {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}}
        ]


def test_policies_go_on_the_wire_as_volcano_spells_them() -> None:
    spec = shorthand(
        policies=[
            {"event": "PodEvicted", "action": "RestartJob"},
            {"exitCode": 3, "action": "AbortJob"},  # the wire's name is accepted
            LifecyclePolicy(exit_code=4, action="TerminateJob"),  # and the Python one
            {"events": ["TaskCompleted"], "action": "CompleteJob", "timeout": "10s"},
        ]
    )
    assert spec.build_vcjob("train", "ml")["spec"]["policies"] == [
        {"action": "RestartJob", "event": "PodEvicted"},
        {"action": "AbortJob", "exitCode": 3},
        {"action": "TerminateJob", "exitCode": 4},
        {"action": "CompleteJob", "events": ["TaskCompleted"], "timeout": "10s"},
    ]


def test_a_user_pod_template_is_kept_under_the_providers_fields() -> None:
    template: JsonDict = {
        "metadata": {"labels": {"extra": "yes"}},
        "spec": {
            "hostIPC": True,
            "restartPolicy": "OnFailure",
            "containers": [
                {"name": "sidecar", "image": "busybox"},
                {"name": "pytorch", "env": [{"name": "LR", "value": "old"}, {"name": "KEEP", "value": "1"}]},
            ],
        },
    }
    job = shorthand(pod_template=template).build_vcjob("train", "ml")
    pod = tasks_by_name(job)["worker"]["template"]["spec"]
    assert pod["hostIPC"] is True
    assert pod["restartPolicy"] == "OnFailure"  # the template's own word wins over the default
    assert [c["name"] for c in pod["containers"]] == ["sidecar", "pytorch"]
    main = pod["containers"][1]
    assert main["image"] == IMAGE
    assert main["env"] == [{"name": "KEEP", "value": "1"}, {"name": "LR", "value": "0.1"}]
    assert tasks_by_name(job)["worker"]["template"]["metadata"]["labels"] == {"extra": "yes"}
    assert template["spec"]["containers"][1].get("image") is None  # the caller's dict is not changed


# --- the general form ------------------------------------------------------------------------------


def general(**overrides: Any) -> VolcanoJobSpec:
    arguments: dict[str, Any] = {
        "image": IMAGE,
        "command": ["python", "train.py"],
        "resources": {"cpu": "2"},
        "tasks": [
            {
                "name": "ps",
                "image": "ghcr.io/acme/ps:2",
                "command": ["python", "ps.py"],
                "resources": {"cpu": "1", "memory": "2Gi"},
                "min_available": 1,
                "max_retry": 5,
                "policies": [{"event": "PodFailed", "action": "RestartTask"}],
            },
            VolcanoTask(name="trainer", replicas=4, resources={"nvidia.com/gpu": 2}, env={"ROLE": "t"}),
        ],
    }
    return VolcanoJobSpec(**{**arguments, **overrides})


def test_tasks_take_the_jobs_fields_unless_they_give_their_own() -> None:
    spec = general()
    job = spec.build_vcjob("mixed", "ml", IDENTITY)
    tasks = tasks_by_name(job)
    assert list(tasks) == ["ps", "trainer"]
    ps, trainer = tasks["ps"], tasks["trainer"]
    assert (ps["replicas"], ps["minAvailable"], ps["maxRetry"]) == (1, 1, 5)
    assert ps["policies"] == [{"action": "RestartTask", "event": "PodFailed"}]
    assert container(ps) == {
        "name": "pytorch",
        "image": "ghcr.io/acme/ps:2",
        "command": ["python", "ps.py"],
        "resources": {"requests": {"cpu": "1", "memory": "2Gi"}},  # no extended resource: no limits
    }
    assert trainer["replicas"] == 4
    for absent in ("minAvailable", "maxRetry", "policies"):
        assert absent not in trainer
    assert container(trainer) == {
        "name": "pytorch",
        "image": IMAGE,
        "command": ["python", "train.py"],
        "env": [{"name": "ROLE", "value": "t"}],
        # the task's resources over the job's, key by key
        "resources": {"requests": {"cpu": "2", "nvidia.com/gpu": 2}, "limits": {"nvidia.com/gpu": 2}},
    }
    for task in tasks.values():
        assert task["template"]["metadata"]["labels"] == IDENTITY
        assert task["template"]["spec"]["restartPolicy"] == "Never"
    # No pytorch plugin for tasks of any names: only the service and the hosts' environment.
    assert job["spec"]["plugins"] == {"svc": [], "env": []}
    assert job["spec"]["minAvailable"] == 5
    assert spec.replica_count == 5


def test_a_tasks_own_pod_template_merges_over_the_jobs() -> None:
    spec = VolcanoJobSpec(
        pod_template={"spec": {"hostIPC": True, "containers": [{"name": "pytorch", "image": "base:1"}]}},
        tasks=[
            {"name": "a", "pod_template": {"spec": {"containers": [{"name": "pytorch", "image": "own:1"}]}}},
            {"name": "b"},
        ],
    )
    tasks = tasks_by_name(spec.build_vcjob("tpl", "ml"))
    assert container(tasks["a"])["image"] == "own:1"
    assert container(tasks["b"])["image"] == "base:1"
    assert tasks["a"]["template"]["spec"]["hostIPC"] is True


def test_explicit_plugins_replace_the_defaults() -> None:
    job = general(plugins={"ssh": [], "svc": ["--disable-network-policy=true"]}).build_vcjob("p", "ml")
    assert job["spec"]["plugins"] == {"ssh": [], "svc": ["--disable-network-policy=true"]}


@pytest.mark.parametrize(
    ("arguments", "mode", "min_member"),
    [
        ({"workers": 3}, "volcano", 4),
        ({"workers": 3, "min_available": 4}, "volcano", 4),
        ({"workers": 3, "min_available": 1}, "disabled", 1),
        ({"tasks": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}]}, "volcano", 4),
        (
            {"tasks": [{"name": "a", "replicas": 2}, {"name": "b", "replicas": 2}], "min_available": 3},
            "disabled",
            3,
        ),
    ],
)
def test_the_gang_is_the_whole_job_unless_min_available_is_smaller(
    arguments: JsonDict, mode: str, min_member: int
) -> None:
    spec = VolcanoJobSpec(image=IMAGE, **arguments)
    assert spec.gang_scheduling == mode
    assert spec.min_member == min_member
    assert spec.build_vcjob("g", "ml")["spec"]["minAvailable"] == min_member
    recipe = spec.recipe()
    assert recipe.gang_scheduling == mode


# --- what Volcano's webhook (or the cluster) would refuse ------------------------------------------


@pytest.mark.parametrize(
    ("policies", "words"),
    [
        pytest.param(
            [{"event": "PodFailed", "action": "Retry"}], ["action 'Retry'", "RestartJob"], id="action"
        ),
        pytest.param([{"event": "PodCrashed", "action": "RestartJob"}], ["event 'PodCrashed'"], id="event"),
        pytest.param(
            [{"event": "PodFailed", "exitCode": 3, "action": "RestartJob"}],
            ["not both", "exitCode simultaneously"],
            id="event-and-exit-code",
        ),
        pytest.param([{"action": "RestartJob"}], ["give an event", "or an exit_code"], id="neither"),
        pytest.param(
            [{"event": "PodFailed", "action": "RestartJob"}, {"events": ["PodFailed"], "action": "AbortJob"}],
            ["policies[1]", "event 'PodFailed' is already handled"],
            id="duplicate-event",
        ),
        pytest.param([{"exitCode": 0, "action": "AbortJob"}], ["exit_code 0 is success"], id="exit-code-0"),
        pytest.param(
            [{"exitCode": 3, "action": "AbortJob"}, {"exitCode": 3, "action": "RestartJob"}],
            ["policies[1]", "exit_code 3 is already handled"],
            id="duplicate-exit-code",
        ),
        pytest.param(
            [{"event": "*", "action": "RestartJob"}, {"event": "PodEvicted", "action": "AbortJob"}],
            ["event '*' must be the only event policy"],
            id="star-with-others",
        ),
        pytest.param(
            [{"events": ["*", "PodEvicted"], "action": "RestartJob"}],
            ["event '*' must be the only event policy"],
            id="star-with-others-in-one",
        ),
    ],
)
def test_policies_volcano_refuses_are_refused_naming_the_field(
    policies: list[JsonDict], words: list[str]
) -> None:
    error = spec_error(image=IMAGE, policies=policies)
    assert error.field == "policies", str(error)
    for word in words:
        assert word in str(error)
    # A task's policies are checked by the same rules, named as the task's.
    task_error = spec_error(image=IMAGE, tasks=[{"name": "a", "policies": policies}])
    assert task_error.field == "tasks[].policies", str(task_error)
    for word in words:
        assert word in str(task_error)


def test_check_policies_accepts_what_volcano_accepts() -> None:
    policies = [
        LifecyclePolicy(event="*", action="RestartJob"),
        LifecyclePolicy(exit_code=137, action="AbortJob"),
        LifecyclePolicy.model_validate({"exitCode": 1, "action": "TerminateJob"}),
    ]
    assert check_policies(policies, "policies") == policies
    assert policies[2].exit_code == 1


@pytest.mark.parametrize(
    ("arguments", "field", "words"),
    [
        pytest.param(
            {"plugins": {"horovod": []}}, "plugins", ["horovod is not a Volcano job plugin"], id="plugin"
        ),
        pytest.param(
            {"workers": 2, "tasks": [{"name": "a"}]}, "workers", ["with tasks=", "its replicas"], id="workers"
        ),
        pytest.param({"tasks": []}, "tasks", ["tasks is empty"], id="empty-tasks"),
        pytest.param(
            {"tasks": [{"name": "a"}, {"name": "b"}, {"name": "a"}]},
            "tasks",
            ["duplicate task name 'a'"],
            id="duplicate-tasks",
        ),
        pytest.param(
            {"tasks": [{"name": "Worker"}]}, "tasks", ["'Worker' is invalid", "DNS-1123"], id="task-name"
        ),
        pytest.param(
            {"tasks": [{"name": "a", "replicas": 2, "min_available": 3}]},
            "tasks",
            ["task 'a' has min_available=3 but only 2 replicas"],
            id="task-min-available",
        ),
        pytest.param(
            {"workers": 3, "min_available": 0}, "min_available", ["min_available=0", "between 1"], id="min-0"
        ),
        pytest.param(
            {"workers": 3, "min_available": 5},
            "min_available",
            ["min_available=5", "job's 4 replicas"],
            id="min-big",
        ),
        pytest.param(
            {"tasks": [{"name": "worker", "replicas": 2}], "plugins": {"pytorch": [], "svc": []}},
            "plugins",
            ["pytorch plugin's master task 'master'", "not among the tasks (worker)"],
            id="pytorch-no-master",
        ),
        pytest.param(
            {"tasks": [{"name": "master"}, {"name": "worker"}], "plugins": {"pytorch": ["--master=head"]}},
            "plugins",
            ["master task 'head'"],
            id="pytorch-named-master-missing",
        ),
        pytest.param(
            {"queu": "research"}, "queu", ["queu is not a known argument", "did you mean 'queue'?"], id="typo"
        ),
        pytest.param(
            {"workers": -1}, "workers", ["workers=-1", "workers=0 runs the master only"], id="workers-neg"
        ),
        pytest.param({"queue": "Research"}, "queue", ["queue='Research'", "DNS-1123"], id="queue"),
    ],
)
def test_bad_input_names_the_field_and_the_fix(arguments: JsonDict, field: str, words: list[str]) -> None:
    error = spec_error(**{"image": IMAGE, **arguments})
    assert isinstance(error, GangSpecError)
    assert error.field == field, str(error)
    for word in words:
        assert word in str(error)


def test_every_task_needs_an_image_from_somewhere() -> None:
    error = spec_error(workers=1)
    assert error.field == "image"
    assert "image is required: task 'master' has none" in str(error)
    error = spec_error(tasks=[{"name": "a", "image": "a:1"}, {"name": "b"}])
    assert error.field == "image"
    assert "task 'b' has none" in str(error)
    # Given by each task, or by the pod template's main container, it is enough.
    VolcanoJobSpec(tasks=[{"name": "a", "image": "a:1"}, {"name": "b", "image": "b:1"}])
    VolcanoJobSpec(pod_template={"spec": {"containers": [{"name": "pytorch", "image": "t:1"}]}})


def test_the_pytorch_plugin_may_name_another_master_task() -> None:
    spec = VolcanoJobSpec(
        image=IMAGE,
        tasks=[{"name": "head"}, {"name": "worker", "replicas": 2}],
        plugins={"pytorch": ["--master=head", "--worker=worker"], "svc": [], "env": []},
    )
    job = spec.build_vcjob("named", "ml")
    assert job["spec"]["plugins"]["pytorch"] == ["--master=head", "--worker=worker"]
    assert [task["name"] for task in job["spec"]["tasks"]] == ["head", "worker"]


@pytest.mark.parametrize(
    ("name", "workers", "ok"),
    [
        ("a" * 54, 3, True),
        ("a" * 55, 3, False),
        ("a" * 54, 10, True),
        ("a" * 54, 11, False),
        ("a" * 53, 11, True),
    ],
)
def test_the_name_leaves_room_for_the_longest_pod_name(name: str, workers: int, ok: bool) -> None:
    spec = VolcanoJobSpec(image=IMAGE, workers=workers)
    longest = max(f"{name}-master-0", f"{name}-worker-{workers - 1}", key=len)
    assert (len(longest) <= 63) == ok
    if ok:
        assert spec.build_vcjob(name, "ml")["metadata"]["name"] == name
        return
    with pytest.raises(GangSpecError) as raised:
        spec.build_vcjob(name, "ml")
    assert raised.value.field == "job_name"
    assert "too long" in str(raised.value)
    assert repr(longest) in str(raised.value)
    assert f"use at most {63 - (len(longest) - len(name))}" in str(raised.value)


def test_a_long_task_name_counts_in_the_pod_name() -> None:
    tasks = [VolcanoTask(name="t" * 40, replicas=1)]
    check_vcjob_name("a" * 20, tasks)  # 20 + "-" + 40 + "-0": 63
    with pytest.raises(GangSpecError, match="use at most 20") as raised:
        check_vcjob_name("a" * 21, tasks)
    assert raised.value.field == "job_name"


@pytest.mark.parametrize("name", ["Train", "train_1", "-train", ""])
def test_an_invalid_job_name_is_refused(name: str) -> None:
    with pytest.raises(GangSpecError) as raised:
        shorthand().build_vcjob(name, "ml")
    assert raised.value.field == "job_name"
    assert "DNS-1123 label" in str(raised.value)


# --- the upstream CRD -------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def vcjob_schema(shared_crds: Path) -> JsonDict:
    if not (shared_crds / VCJOB_CRD).is_file():
        pytest.skip(f"the upstream Volcano Job CRD {VCJOB_CRD} is not in {shared_crds}")
    return crd_schema(shared_crds, VCJOB_CRD, "v1alpha1")


RICH = shorthand(
    args=["--epochs", "3"],
    env={"LR": "0.1", "TOKEN": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    resources={"nvidia.com/gpu": 1, "cpu": "4", "memory": "16Gi"},
    priority_class="high",
    ttl_seconds_after_finished=60,
    policies=[
        {"event": "PodEvicted", "action": "RestartJob"},
        {"exitCode": 3, "action": "AbortJob"},
        {"events": ["TaskCompleted"], "action": "CompleteJob", "timeout": "10s"},
    ],
    labels={"team": "vision"},
    annotations={"acme.io/owner": "ada"},
    node_selector={"gpu": "a100"},
    tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    pod_template={"spec": {"hostIPC": True}},
)
CRD_SPECS = {
    "seed": VolcanoJobSpec(image=IMAGE),
    "rich-shorthand": RICH,
    "general": general(min_available=3),
}


@pytest.mark.parametrize("spec", list(CRD_SPECS.values()), ids=list(CRD_SPECS))
def test_the_manifest_validates_against_the_upstream_crd_and_loses_no_field(
    spec: VolcanoJobSpec, vcjob_schema: JsonDict
) -> None:
    job = spec.build_vcjob("train-1a2b3c4d", "ml", IDENTITY)
    jsonschema.validate(job, vcjob_schema)
    assert pruned_fields(job, vcjob_schema) == []


def test_the_crd_check_catches_a_wrong_type_and_a_misspelled_field(vcjob_schema: JsonDict) -> None:
    job = RICH.build_vcjob("train-1", "ml")
    job["spec"]["tasks"][1]["replicas"] = "three"
    with pytest.raises(jsonschema.ValidationError, match="'three' is not of type 'integer'"):
        jsonschema.validate(job, vcjob_schema)
    job["spec"]["tasks"][1]["replicas"] = 3
    job["spec"]["policies"][0]["exitcode"] = 3
    assert pruned_fields(job, vcjob_schema) == [".spec.policies[0].exitcode"]

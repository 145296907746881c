"""What the builders produce for valid job descriptions."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from airflow_gang.spec import GangJobSpec
from tests.unit.spec_invariants import assert_manifest_invariants

SEED = {"image": "ghcr.io/acme/train:1", "workers": 1, "resources": {"nvidia.com/gpu": 1}}


def _pod(job: dict[str, Any], replica_type: str = "Master") -> dict[str, Any]:
    spec: dict[str, Any] = job["spec"]["pytorchReplicaSpecs"][replica_type]["template"]["spec"]
    return spec


def _container(job: dict[str, Any], replica_type: str = "Master") -> dict[str, Any]:
    return next(c for c in _pod(job, replica_type)["containers"] if c["name"] == "pytorch")


@pytest.mark.parametrize("mode", ["provider", "training-operator", "disabled"])
def test_seed_job_satisfies_the_invariants_in_every_gang_mode(mode: str) -> None:
    spec = GangJobSpec(**SEED, gang_scheduling=mode)
    assert_manifest_invariants(spec, "seed-1", "ml")


def test_provider_mode_podgroup_gangs_the_whole_job_with_summed_requests() -> None:
    spec = GangJobSpec(
        image="img:1",
        workers=3,
        resources={"nvidia.com/gpu": 1, "cpu": "4", "memory": "16Gi"},
        queue="research",
    )
    podgroup = spec.build_podgroup("train-1", "ml", labels={"airflow-gang.io/managed-by": "airflow-gang"})
    assert podgroup == {
        "apiVersion": "scheduling.volcano.sh/v1beta1",
        "kind": "PodGroup",
        "metadata": {
            "name": "train-1",
            "namespace": "ml",
            "labels": {"airflow-gang.io/managed-by": "airflow-gang"},
        },
        "spec": {
            "minMember": 4,
            "queue": "research",
            "minResources": {"cpu": "16", "memory": "64Gi", "nvidia.com/gpu": "4"},
        },
    }


def test_min_available_gangs_only_the_first_pods_master_first() -> None:
    spec = GangJobSpec(image="img:1", workers=3, resources={"nvidia.com/gpu": 2}, min_available=2)
    podgroup = spec.build_podgroup("train-1", "ml")
    assert podgroup is not None
    assert podgroup["spec"]["minMember"] == 2
    assert podgroup["spec"]["minResources"] == {"nvidia.com/gpu": "4"}


def test_explicit_min_resources_win_over_the_computed_sum() -> None:
    spec = GangJobSpec(image="img:1", resources={"nvidia.com/gpu": 1}, min_resources={"nvidia.com/gpu": 1})
    job = spec.build_pytorchjob("train-1", "ml")
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["minResources"] == {"nvidia.com/gpu": "1"}


def test_gpus_are_requested_and_limited_while_cpu_and_memory_are_only_requested() -> None:
    job = GangJobSpec(
        image="img:1", resources={"nvidia.com/gpu": 2, "cpu": "500m", "memory": "2Gi"}
    ).build_pytorchjob("t", "ml")
    resources = _container(job)["resources"]
    assert resources == {
        "requests": {"nvidia.com/gpu": 2, "cpu": "500m", "memory": "2Gi"},
        "limits": {"nvidia.com/gpu": 2},
    }


def test_priority_class_reaches_podgroup_scheduling_policy_and_pods() -> None:
    spec = GangJobSpec(image="img:1", priority_class="high-priority")
    job = spec.build_pytorchjob("t", "ml")
    podgroup = spec.build_podgroup("t", "ml")
    assert podgroup is not None
    assert podgroup["spec"]["priorityClassName"] == "high-priority"
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["priorityClass"] == "high-priority"
    assert _pod(job)["priorityClassName"] == "high-priority"


def test_workers_zero_runs_the_master_alone() -> None:
    job = GangJobSpec(image="img:1", workers=0).build_pytorchjob("t", "ml")
    assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 1


def test_container_fields_env_and_port() -> None:
    spec = GangJobSpec(
        image="img:1",
        command=["python", "train.py"],
        args=["--epochs", 3],
        env={"LR": 0.1, "DEBUG": True, "TOKEN": {"secretKeyRef": {"name": "creds", "key": "token"}}},
        master_port=29500,
        nproc_per_node=2,
    )
    job = spec.build_pytorchjob("t", "ml")
    container = _container(job, "Worker")
    assert container["command"] == ["python", "train.py"]
    assert container["args"] == ["--epochs", "3"]
    assert container["env"] == [
        {"name": "LR", "value": "0.1"},
        {"name": "DEBUG", "value": "true"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "token"}}},
    ]
    assert container["ports"] == [{"name": "pytorchjob-port", "containerPort": 29500, "protocol": "TCP"}]
    assert job["spec"]["nprocPerNode"] == "2"


def test_pod_level_fields_land_in_every_replica() -> None:
    spec = GangJobSpec(
        image="img:1",
        labels={"team": "vision"},
        annotations={"acme.io/owner": "Ada Lovelace"},
        node_selector={"gpu": "a100"},
        tolerations=[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
        volumes=[{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}],
        volume_mounts=[{"name": "data", "mountPath": "/data"}],
        service_account_name="trainer",
        image_pull_secrets=["regcred"],
    )
    job = spec.build_pytorchjob("t", "ml", labels={"airflow-gang.io/managed-by": "airflow-gang"})
    assert job["metadata"]["labels"] == {"team": "vision", "airflow-gang.io/managed-by": "airflow-gang"}
    assert job["metadata"]["annotations"] == {"acme.io/owner": "Ada Lovelace"}
    for replica_type in ("Master", "Worker"):
        template = job["spec"]["pytorchReplicaSpecs"][replica_type]["template"]
        pod = template["spec"]
        assert template["metadata"]["labels"] == {
            "team": "vision",
            "airflow-gang.io/managed-by": "airflow-gang",
        }
        assert pod["nodeSelector"] == {"gpu": "a100"}
        assert pod["tolerations"] == [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]
        assert pod["volumes"] == [{"name": "data", "persistentVolumeClaim": {"claimName": "datasets"}}]
        assert pod["serviceAccountName"] == "trainer"
        assert pod["imagePullSecrets"] == [{"name": "regcred"}]
        assert _container(job, replica_type)["volumeMounts"] == [{"name": "data", "mountPath": "/data"}]


def test_official_client_models_are_accepted_for_volumes_and_tolerations() -> None:
    spec = GangJobSpec(
        image="img:1",
        volumes=[k8s.V1Volume(name="scratch", empty_dir=k8s.V1EmptyDirVolumeSource(medium="Memory"))],
        volume_mounts=[k8s.V1VolumeMount(name="scratch", mount_path="/scratch")],
        tolerations=[k8s.V1Toleration(key="dedicated", operator="Equal", value="ml", effect="NoSchedule")],
    )
    pod = _pod(spec.build_pytorchjob("t", "ml"))
    assert pod["volumes"] == [{"name": "scratch", "emptyDir": {"medium": "Memory"}}]
    assert pod["tolerations"] == [
        {"effect": "NoSchedule", "key": "dedicated", "operator": "Equal", "value": "ml"}
    ]


def test_run_policy_and_restart_policy() -> None:
    spec = GangJobSpec(
        image="img:1",
        restart_policy="Never",
        run_policy={
            "clean_pod_policy": "All",
            "backoff_limit": 2,
            "active_deadline_seconds": 600,
            "ttl_seconds_after_finished": 60,
        },
    )
    job = spec.build_pytorchjob("t", "ml")
    policy = dict(job["spec"]["runPolicy"])
    policy.pop("schedulingPolicy")
    assert policy == {
        "cleanPodPolicy": "All",
        "backoffLimit": 2,
        "activeDeadlineSeconds": 600,
        "ttlSecondsAfterFinished": 60,
    }
    assert {r["restartPolicy"] for r in job["spec"]["pytorchReplicaSpecs"].values()} == {"Never"}


def test_pod_template_is_merged_into_every_replica_by_container_name() -> None:
    spec = GangJobSpec(
        image="img:1",
        env={"A": "1"},
        pod_template={
            "metadata": {"annotations": {"sidecar.istio.io/inject": "false"}},
            "spec": {
                "containers": [
                    {"name": "pytorch", "env": [{"name": "B", "value": "2"}]},
                    {"name": "proxy", "image": "p:1"},
                ],
                "hostIPC": True,
            },
        },
    )
    job = spec.build_pytorchjob("t", "ml")
    for replica_type in ("Master", "Worker"):
        template = job["spec"]["pytorchReplicaSpecs"][replica_type]["template"]
        assert template["metadata"]["annotations"] == {
            "sidecar.istio.io/inject": "false",
            "scheduling.k8s.io/group-name": "t",
        }
        assert template["spec"]["hostIPC"] is True
        assert [c["name"] for c in template["spec"]["containers"]] == ["pytorch", "proxy"]
        assert [e["name"] for e in _container(job, replica_type)["env"]] == ["A", "B"]


TEMPLATE = {
    "apiVersion": "kubeflow.org/v1",
    "kind": "PyTorchJob",
    "metadata": {"name": "ignored", "labels": {"source": "template"}},
    "spec": {
        "pytorchReplicaSpecs": {
            "Master": {
                "replicas": 1,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [{"name": "pytorch", "image": "base:1", "command": ["python", "a.py"]}]
                    }
                },
            },
            "worker": {
                "replicas": 3,
                "restartPolicy": "Never",
                "template": {
                    "spec": {
                        "containers": [{"name": "pytorch", "image": "base:1", "command": ["python", "a.py"]}]
                    }
                },
            },
        },
        "runPolicy": {"cleanPodPolicy": "Running", "schedulingPolicy": {"queue": "team-a"}},
    },
}


def test_job_template_keeps_its_values_unless_an_argument_overrides_them() -> None:
    spec = GangJobSpec(job_template=TEMPLATE, image="override:2")
    job = spec.build_pytorchjob("t", "ml")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert set(replicas) == {"Master", "Worker"}
    assert replicas["Worker"]["replicas"] == 3
    assert {r["restartPolicy"] for r in replicas.values()} == {"Never"}
    assert _container(job)["image"] == "override:2"
    assert _container(job)["command"] == ["python", "a.py"]
    assert job["metadata"]["name"] == "t"
    assert job["metadata"]["labels"] == {"source": "template"}
    assert job["spec"]["runPolicy"]["cleanPodPolicy"] == "Running"
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "team-a"
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["minAvailable"] == 4
    assert_manifest_invariants(spec, "t", "ml")


def test_explicit_arguments_override_the_job_template() -> None:
    spec = GangJobSpec(
        job_template=TEMPLATE, workers=1, restart_policy="OnFailure", queue="team-b", command=["x"]
    )
    job = spec.build_pytorchjob("t", "ml")
    replicas = job["spec"]["pytorchReplicaSpecs"]
    assert replicas["Worker"]["replicas"] == 1
    assert {r["restartPolicy"] for r in replicas.values()} == {"OnFailure"}
    assert job["spec"]["runPolicy"]["schedulingPolicy"]["queue"] == "team-b"
    assert _container(job, "Worker")["command"] == ["x"]


def test_job_template_from_yaml_file_and_yaml_text(tmp_path: Path) -> None:
    text = textwrap.dedent(
        """\
        apiVersion: kubeflow.org/v1
        kind: PyTorchJob
        spec:
          pytorchReplicaSpecs:
            Master:
              replicas: 1
              template:
                spec:
                  containers:
                  - name: pytorch
                    image: from-yaml:1
        """
    )
    path = tmp_path / "job.yaml"
    path.write_text(text)
    for template in (str(path), path, text):
        job = GangJobSpec(job_template=template).build_pytorchjob("t", "ml")
        assert list(job["spec"]["pytorchReplicaSpecs"]) == ["Master"]
        assert _container(job)["image"] == "from-yaml:1"


def test_disabled_mode_strips_gang_decoration_a_template_carries() -> None:
    template = {
        "kind": "PyTorchJob",
        "spec": {
            "pytorchReplicaSpecs": {
                "Master": {
                    "template": {
                        "metadata": {"annotations": {"scheduling.k8s.io/group-name": "old"}},
                        "spec": {
                            "schedulerName": "volcano",
                            "containers": [{"name": "pytorch", "image": "i:1"}],
                        },
                    }
                }
            },
            "runPolicy": {"schedulingPolicy": {"queue": "q"}},
        },
    }
    spec = GangJobSpec(job_template=template, gang_scheduling="disabled")
    assert_manifest_invariants(spec, "t", "ml")


def test_builders_do_not_share_state_between_calls() -> None:
    spec = GangJobSpec(**SEED)
    first = spec.build_pytorchjob("a", "ml")
    _container(first)["image"] = "mutated"
    second = spec.build_pytorchjob("b", "ml")
    assert _container(second)["image"] == "ghcr.io/acme/train:1"

"""The Trainer v2 kinds as the API server serves them: discovery, defaults, validation, and the
default runtimes every cluster starts with; plus a plain batch Job run by the Job controller."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.sim.trainer_v2.manifests import JOBSET, TRAINER, create_trainjob, trainjob
from tests.waiting import eventually


def test_discovery_lists_the_trainer_jobset_and_batch_groups(api_client: k8s.ApiClient) -> None:
    groups = {group.name: group for group in k8s.ApisApi(api_client).get_api_versions().groups}
    assert groups["trainer.kubeflow.org"].preferred_version.version == "v1alpha1"
    assert groups["jobset.x-k8s.io"].preferred_version.version == "v1alpha2"
    assert groups["batch"].preferred_version.version == "v1"
    trainer = k8s.CustomObjectsApi(api_client).get_api_resources(*TRAINER)
    scopes = {resource.name: resource.namespaced for resource in trainer.resources}
    assert scopes == {
        "clustertrainingruntimes": False,
        "trainingruntimes": True,
        "trainjobs": True,
        "trainjobs/status": True,
    }


def test_the_cluster_starts_with_a_gang_and_a_no_gang_torch_runtime(custom: k8s.CustomObjectsApi) -> None:
    runtimes = {
        r["metadata"]["name"]: r["spec"]
        for r in custom.list_cluster_custom_object(*TRAINER, "clustertrainingruntimes")["items"]
    }
    gang, plain = runtimes["torch-distributed"], runtimes["torch-distributed-no-gang"]
    assert gang["mlPolicy"] == {"numNodes": 1, "torch": {}}
    assert gang["podGroupPolicy"] == {"volcano": {}}
    [node] = gang["template"]["spec"]["replicatedJobs"]
    assert node["name"] == "node"
    pod_spec = node["template"]["spec"]["template"]["spec"]
    assert pod_spec["schedulerName"] == "volcano"
    assert [c["name"] for c in pod_spec["containers"]] == ["node"]
    assert "podGroupPolicy" not in plain
    assert (
        "schedulerName"
        not in plain["template"]["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]
    )


def test_a_trainjob_gets_its_schema_defaults(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    created = create_trainjob(custom, namespace, trainjob("defaults"))
    assert created["spec"]["runtimeRef"] == {
        "name": "torch-distributed",
        "apiGroup": "trainer.kubeflow.org",
        "kind": "ClusterTrainingRuntime",
    }
    assert created["spec"]["suspend"] is False
    assert created["spec"]["managedBy"] == "trainer.kubeflow.org/trainjob-controller"
    assert "status" not in created  # the status subresource owns it


def test_a_trainjob_name_must_be_a_dns_1035_label(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        create_trainjob(custom, namespace, trainjob("1-starts-with-a-digit"))
    assert caught.value.status == 422
    assert json.loads(caught.value.body)["details"]["causes"][0]["field"] == "metadata.name"


def test_a_jobset_gets_the_jobset_webhook_defaults(custom: k8s.CustomObjectsApi, namespace: str) -> None:
    body: dict[str, Any] = {
        "apiVersion": "/".join(JOBSET),
        "kind": "JobSet",
        "metadata": {"name": "plain"},
        "spec": {
            "suspend": True,  # left alone by the controllers: only the defaults are looked at
            "replicatedJobs": [
                {
                    "name": "workers",
                    "template": {
                        "spec": {"template": {"spec": {"containers": [{"name": "w", "image": "busybox"}]}}}
                    },
                }
            ],
        },
    }
    created = custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", body)
    spec = created["spec"]
    assert spec["successPolicy"] == {"operator": "All"}
    assert spec["startupPolicy"] == {"startupPolicyOrder": "AnyOrder"}
    assert spec["network"] == {"enableDNSHostnames": True}
    [workers] = spec["replicatedJobs"]
    assert (workers["replicas"], workers["groupName"]) == (1, "default")  # CRD schema defaults
    assert workers["template"]["spec"]["completionMode"] == "Indexed"
    assert workers["template"]["spec"]["template"]["spec"]["restartPolicy"] == "OnFailure"


def test_a_jobset_whose_pod_names_would_exceed_63_characters_is_refused(
    custom: k8s.CustomObjectsApi, namespace: str
) -> None:
    body = {
        "apiVersion": "/".join(JOBSET),
        "kind": "JobSet",
        "metadata": {"name": "x" * 50},
        "spec": {
            "replicatedJobs": [
                {
                    "name": "node",
                    "template": {
                        "spec": {
                            "completions": 2,
                            "template": {"spec": {"containers": [{"name": "w", "image": "busybox"}]}},
                        }
                    },
                }
            ]
        },
    }
    with pytest.raises(k8s.ApiException) as caught:
        custom.create_namespaced_custom_object(*JOBSET, namespace, "jobsets", body)
    assert caught.value.status == 403
    assert (
        "pod names generated for this JobSet will exceed 63 characters"
        in json.loads(caught.value.body)["message"]
    )


def batch_job(name: str, **spec: Any) -> k8s.V1Job:
    pod_spec = k8s.V1PodSpec(
        restart_policy=spec.pop("restart_policy", "Never"),
        containers=[k8s.V1Container(name="work", image="busybox")],
    )
    annotations = {"sim.airflow-gang.io/duration": "0.1"}
    template = k8s.V1PodTemplateSpec(metadata=k8s.V1ObjectMeta(annotations=annotations), spec=pod_spec)
    return k8s.V1Job(metadata=k8s.V1ObjectMeta(name=name), spec=k8s.V1JobSpec(template=template, **spec))


def test_a_batch_job_gets_its_defaults_and_generated_selector(
    api_client: k8s.ApiClient, namespace: str
) -> None:
    batch = k8s.BatchV1Api(api_client)
    job = batch.create_namespaced_job(namespace, batch_job("defaults"))
    assert (job.spec.parallelism, job.spec.completions, job.spec.backoff_limit) == (1, 1, 6)
    assert (job.spec.completion_mode, job.spec.suspend) == ("NonIndexed", False)
    assert job.spec.selector.match_labels == {"batch.kubernetes.io/controller-uid": job.metadata.uid}
    labels = job.spec.template.metadata.labels
    assert labels["batch.kubernetes.io/controller-uid"] == job.metadata.uid
    assert labels["batch.kubernetes.io/job-name"] == "defaults"


@pytest.mark.parametrize(
    ("spec", "field", "message"),
    [
        ({"restart_policy": "Always"}, "spec.template.spec.restartPolicy", 'Unsupported value: "Always"'),
        (
            {"completion_mode": "Indexed", "parallelism": 2},
            "spec.completions",
            "when completion mode is Indexed",
        ),
    ],
    ids=["restart-always", "indexed-without-completions"],
)
def test_an_invalid_batch_job_is_refused(
    api_client: k8s.ApiClient, namespace: str, spec: dict[str, Any], field: str, message: str
) -> None:
    with pytest.raises(k8s.ApiException) as caught:
        k8s.BatchV1Api(api_client).create_namespaced_job(namespace, batch_job("bad", **spec))
    assert caught.value.status == 422
    causes = json.loads(caught.value.body)["details"]["causes"]
    assert any(cause["field"] == field and message in cause["message"] for cause in causes), causes


def test_a_plain_batch_job_runs_its_completions_one_pod_at_a_time(
    api_client: k8s.ApiClient, core: k8s.CoreV1Api, namespace: str
) -> None:
    """The Job controller is not Trainer-only: a NonIndexed Job of 2 completions, parallelism 1."""
    batch = k8s.BatchV1Api(api_client)
    batch.create_namespaced_job(namespace, batch_job("twice", completions=2, parallelism=1))

    def complete() -> k8s.V1Job | None:
        job = batch.read_namespaced_job("twice", namespace)
        true = {c.type for c in job.status.conditions or [] if c.status == "True"}
        return job if "Complete" in true else None

    job = eventually(complete, timeout=20)
    assert job is not None
    assert job.status.succeeded == 2
    pods = core.list_namespaced_pod(namespace, label_selector="batch.kubernetes.io/job-name=twice").items
    assert sorted(pod.status.phase for pod in pods) == ["Succeeded", "Succeeded"]
    assert all(pod.metadata.name.startswith("twice-") for pod in pods)

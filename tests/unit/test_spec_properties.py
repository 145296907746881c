"""Property-based tests: the builders either raise GangSpecError or return manifests that hold."""

from __future__ import annotations

import os
from typing import Any

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from airflow_gang.exceptions import GangSpecError
from airflow_gang.spec import GangJobSpec
from tests.unit.spec_invariants import assert_manifest_invariants

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-5, 5) | st.floats(allow_nan=True) | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=8), children, max_size=3)
    ),
    max_leaves=12,
)
quantities = (
    st.sampled_from(["500m", "2", "16Gi", "1.5", "1e3", "0", "-1", "16GB", "", "two"])
    | st.integers(-2, 8)
    | st.floats(-1, 4)
)
resource_names = st.sampled_from(
    ["cpu", "memory", "nvidia.com/gpu", "amd.com/gpu", "ephemeral-storage", "bad name"]
)
names = st.from_regex(r"[a-z][a-z0-9-]{0,20}[a-z0-9]", fullmatch=True) | st.text(max_size=70)
pod_templates = st.fixed_dictionaries(
    {},
    optional={
        "metadata": st.fixed_dictionaries({}, optional={"labels": json_values, "annotations": json_values})
        | json_values,
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "containers": st.lists(
                    st.fixed_dictionaries(
                        {"name": st.sampled_from(["pytorch", "sidecar"]) | json_values},
                        optional={
                            "image": st.text(max_size=5) | json_values,
                            "env": json_values,
                            "resources": st.fixed_dictionaries(
                                {}, optional={"requests": st.dictionaries(resource_names, quantities)}
                            ),
                            "ports": json_values,
                        },
                    ),
                    max_size=2,
                )
                | json_values,
                "schedulerName": st.sampled_from(["volcano", "default-scheduler"]) | json_values,
                "volumes": json_values,
                "tolerations": json_values,
                "nodeSelector": json_values,
            },
        )
        | json_values,
    },
)
job_templates = st.fixed_dictionaries(
    {},
    optional={
        "kind": st.sampled_from(["PyTorchJob", "TFJob"]),
        "apiVersion": st.sampled_from(["kubeflow.org/v1", "v1"]),
        "metadata": json_values,
        "spec": st.fixed_dictionaries(
            {},
            optional={
                "pytorchReplicaSpecs": st.dictionaries(
                    st.sampled_from(["Master", "Worker", "worker", "Chief"]),
                    st.fixed_dictionaries(
                        {},
                        optional={
                            "replicas": st.integers(-1, 4) | json_values,
                            "template": pod_templates,
                            "restartPolicy": st.text(max_size=5),
                        },
                    )
                    | json_values,
                    max_size=2,
                ),
                "runPolicy": json_values,
            },
        ),
    },
)

arbitrary_arguments = st.fixed_dictionaries(
    {},
    optional={
        "image": st.none() | st.text(max_size=10) | st.just("ghcr.io/acme/train:1") | json_values,
        "command": st.none() | st.lists(st.text(max_size=5) | st.integers(), max_size=3) | json_values,
        "args": st.none() | st.lists(st.text(max_size=5), max_size=3) | json_values,
        "env": st.dictionaries(st.text(max_size=8), json_values, max_size=3) | json_values,
        "workers": st.integers(-2, 12) | json_values,
        "resources": st.dictionaries(resource_names | st.text(max_size=8), quantities, max_size=4)
        | json_values,
        "nproc_per_node": st.none() | st.integers(-1, 8) | st.sampled_from(["auto", "gpu", "many"]),
        "queue": st.sampled_from(["default", "research"]) | st.text(max_size=10),
        "priority_class": st.none() | names,
        "min_available": st.none() | st.integers(-1, 14) | json_values,
        "min_resources": st.none() | st.dictionaries(resource_names, quantities, max_size=3),
        "gang_scheduling": st.sampled_from(["provider", "training-operator", "disabled", "volcano"]),
        "labels": st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3) | json_values,
        "annotations": st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=3),
        "node_selector": st.dictionaries(st.text(max_size=10), st.text(max_size=10), max_size=2),
        "tolerations": st.lists(
            st.dictionaries(st.sampled_from(["key", "operator", "effect"]), st.text(max_size=8)), max_size=2
        ),
        "volumes": st.lists(st.dictionaries(st.sampled_from(["name", "emptyDir"]), json_values), max_size=2)
        | json_values,
        "volume_mounts": st.lists(
            st.dictionaries(st.sampled_from(["name", "mountPath"]), st.text(max_size=6)), max_size=2
        ),
        "service_account_name": st.none() | names,
        "image_pull_secrets": st.lists(names, max_size=2) | json_values,
        "pod_template": st.none() | pod_templates,
        "job_template": st.none() | job_templates | st.text(max_size=20),
        "run_policy": st.dictionaries(
            st.sampled_from(
                [
                    "clean_pod_policy",
                    "backoff_limit",
                    "active_deadline_seconds",
                    "ttl_seconds_after_finished",
                    "bogus",
                ]
            ),
            json_values | st.integers(-1, 100) | st.sampled_from(["All", "None", "Running"]),
            max_size=3,
        ),
        "restart_policy": st.sampled_from(["OnFailure", "Never", "ExitCode", "Always", "Sometimes"]),
        "master_port": st.integers(-1, 70000) | json_values,
    },
)


# GANG_HYPOTHESIS_SCALE=25 for a thorough local run; CI keeps the default.
SCALE = int(os.environ.get("GANG_HYPOTHESIS_SCALE", "1"))


@settings(max_examples=800 * SCALE, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    base=st.just({"image": "ghcr.io/acme/train:1"}),
    overrides=arbitrary_arguments,
    name=names,
    namespace=names,
    data=st.data(),
)
def test_builders_raise_only_gang_spec_errors_and_otherwise_hold_the_invariants(
    base: dict[str, Any], overrides: dict[str, Any], name: str, namespace: str, data: st.DataObject
) -> None:
    # A few wild arguments on top of a valid job reach deeper than all-wild ones, which fail fast.
    kept = (
        data.draw(st.lists(st.sampled_from(sorted(overrides)), max_size=3, unique=True)) if overrides else []
    )
    arguments = {**base, **{key: overrides[key] for key in kept}}
    try:
        spec = GangJobSpec(**arguments)
        assert_manifest_invariants(spec, name, namespace)
        event("built")
    except GangSpecError as error:
        # which inputs are invalid is not known in advance, so pytest.raises cannot be used here
        assert str(error), "a GangSpecError always says what is wrong"  # noqa: PT017
        event(f"rejected: {error.field}")


valid_arguments = st.fixed_dictionaries(
    {"image": st.sampled_from(["ghcr.io/acme/train:1", "pytorch/pytorch:2.5.0"])},
    optional={
        "workers": st.integers(0, 16),
        "resources": st.fixed_dictionaries(
            {},
            optional={
                "cpu": st.sampled_from(["500m", "1", "4", 2]),
                "memory": st.sampled_from(["512Mi", "16Gi", "1G"]),
                "nvidia.com/gpu": st.integers(1, 8),
            },
        ),
        "queue": st.sampled_from(["default", "research", "team-a.gpu"]),
        "priority_class": st.sampled_from(["high", "low-priority"]),
        "gang_scheduling": st.sampled_from(["provider", "training-operator", "disabled"]),
        "restart_policy": st.sampled_from(["OnFailure", "Never", "ExitCode"]),
        "master_port": st.integers(1024, 65535),
        "labels": st.dictionaries(
            st.sampled_from(["team", "acme.io/project"]), st.sampled_from(["a", "b-1"]), max_size=2
        ),
        "min_resources": st.none() | st.fixed_dictionaries({"nvidia.com/gpu": st.integers(0, 4)}),
    },
)


@settings(max_examples=300 * SCALE, deadline=None)
@given(arguments=valid_arguments, data=st.data())
def test_valid_descriptions_always_build_and_hold_the_invariants(
    arguments: dict[str, Any], data: st.DataObject
) -> None:
    replicas = 1 + arguments.get("workers", 1)
    if data.draw(st.booleans()):
        arguments["min_available"] = data.draw(st.integers(1, replicas))
    spec = GangJobSpec(**arguments)
    assert spec.replica_count == replicas
    assert_manifest_invariants(spec, "train-job", "ml")

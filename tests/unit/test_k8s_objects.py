from __future__ import annotations

import datetime

from kubernetes import client as k8s

from airflow_gang.model.k8s_objects import deep_merge, to_wire


def test_to_wire_uses_the_camel_case_wire_names_of_client_models() -> None:
    volume = k8s.V1Volume(
        name="cfg", config_map=k8s.V1ConfigMapVolumeSource(name="settings", default_mode=0o644)
    )
    assert to_wire(volume) == {"name": "cfg", "configMap": {"name": "settings", "defaultMode": 0o644}}


def test_to_wire_copies_plain_values_and_renders_datetimes() -> None:
    source = {"a": [{"b": 1}], "when": datetime.datetime(2026, 1, 2, tzinfo=datetime.UTC)}
    wire = to_wire(source)
    wire["a"][0]["b"] = 2
    assert source["a"][0]["b"] == 1
    assert wire["when"] == "2026-01-02T00:00:00+00:00"


def test_deep_merge_merges_named_lists_by_name_and_replaces_other_lists() -> None:
    base = {"containers": [{"name": "pytorch", "image": "a", "args": ["x"]}], "tolerations": [{"key": "a"}]}
    overlay = {
        "containers": [{"name": "pytorch", "args": ["y"]}, {"name": "sidecar", "image": "s"}],
        "tolerations": [{"key": "b"}],
    }
    assert deep_merge(base, overlay) == {
        "containers": [{"name": "pytorch", "image": "a", "args": ["y"]}, {"name": "sidecar", "image": "s"}],
        "tolerations": [{"key": "b"}],
    }


def test_deep_merge_deletes_keys_set_to_none_and_leaves_inputs_untouched() -> None:
    base = {"spec": {"hostIPC": True, "nodeSelector": {"a": "1"}}}
    merged = deep_merge(base, {"spec": {"hostIPC": None, "nodeSelector": {"b": "2"}}})
    assert merged == {"spec": {"nodeSelector": {"a": "1", "b": "2"}}}
    assert base == {"spec": {"hostIPC": True, "nodeSelector": {"a": "1"}}}

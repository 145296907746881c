"""The scheduler configuration: the real ``volcano-scheduler.conf`` format, parsed and checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from gang_sim.cluster import SimCluster
from gang_sim.controllers.volcano.conf import DEFAULT, SchedulerConfError, load_scheduler_conf

HELM_WITH_PREEMPTION = """\
actions: "enqueue, allocate, preempt, reclaim, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
    enablePreemptable: false
  - name: conformance
- plugins:
  - name: overcommit
  - name: drf
    enablePreemptable: false
  - name: predicates
  - name: proportion
  - name: nodeorder
  - name: binpack
configurations:
- name: preempt
  arguments:
    enableTopologyAwarePreemption: false
"""


def test_the_helm_chart_configuration_parses_with_its_flags(tmp_path: Path) -> None:
    """installer/helm/chart/volcano/config/volcano-scheduler.conf:1-15@v1.16.0-alpha.1 with
    preempt and reclaim added; conf/scheduler_conf.go:34-70@v1.16.0-alpha.1 (field names);
    plugins/defaults.go:29-59@v1.16.0-alpha.1 (an unset flag is true)."""
    path = tmp_path / "volcano-scheduler.conf"
    path.write_text(HELM_WITH_PREEMPTION)
    for source in (HELM_WITH_PREEMPTION, path, str(path)):
        conf = load_scheduler_conf(source)
        assert conf.actions == ("enqueue", "allocate", "preempt", "reclaim", "backfill")
        assert conf.disrupts
        assert not conf.enabled("gang", "enable_preemptable")
        assert conf.enabled("gang", "enable_reclaimable")
        assert conf.enabled("proportion", "enable_reclaimable")
        assert not conf.enabled("capacity", "enable_reclaimable")  # not configured at all
        assert [len(tier.plugins) for tier in conf.tiers] == [3, 6]
    again = load_scheduler_conf(load_scheduler_conf(HELM_WITH_PREEMPTION).to_mapping())
    assert again == load_scheduler_conf(HELM_WITH_PREEMPTION)


def test_without_a_configuration_the_compiled_in_default_applies() -> None:
    """pkg/scheduler/util.go:38-51@v1.16.0-alpha.1: enqueue, allocate, backfill; priority, gang,
    conformance, then overcommit, drf, predicates, proportion, nodeorder."""
    conf = load_scheduler_conf(None)
    assert conf is DEFAULT
    assert conf.actions == ("enqueue", "allocate", "backfill")
    assert not conf.disrupts
    assert [[p.name for p in tier.plugins] for tier in conf.tiers] == [
        ["priority", "gang", "conformance"],
        ["overcommit", "drf", "predicates", "proportion", "nodeorder"],
    ]


@pytest.mark.parametrize(
    ("text", "named"),
    [
        ('actions: "enqueue, allocate, evict"', "actions: Value error, unknown action 'evict'"),
        ('actions: "enqueue, allocate, shuffle"', "action 'shuffle' is Volcano's but not simulated"),
        ('actions: "allocate, enqueue"', "actions: Value error, the simulator runs enqueue, then allocate"),
        (
            'actions: "enqueue, allocate"\ntiers: [{plugins: [{name: gang, enablePreemptible: false}]}]',
            "tiers.0.plugins.0.enablePreemptible: Extra inputs are not permitted",
        ),
        (
            'actions: "enqueue, allocate"\ntiers: [{plugins: [{name: drf, enableHierarchy: true}, '
            "{name: proportion}]}]",
            "proportion and drf with hierarchy enabled conflicts",
        ),
    ],
)
def test_a_wrong_configuration_is_refused_naming_the_field(text: str, named: str) -> None:
    """pkg/scheduler/util.go:54-90@v1.16.0-alpha.1 refuses an action it does not know ("failed to
    find Action") and drf hierarchy with proportion; the simulator also refuses flags it does not
    know (a typo would silently change nothing) and actions it does not simulate."""
    with pytest.raises(SchedulerConfError) as refused:
        load_scheduler_conf(text)
    assert named in str(refused.value)


def test_sim_cluster_refuses_a_wrong_configuration_before_starting_anything() -> None:
    """As ``faults=``: an invalid ``scheduler_conf`` fails in the constructor (util.go:83-90@v1.16.0-alpha.1
    makes vc-scheduler refuse it at start)."""
    with pytest.raises(SchedulerConfError, match="unknown action 'evict'"):
        SimCluster(scheduler_conf={"actions": "enqueue, allocate, evict"})
    with pytest.raises(SchedulerConfError, match="no such file"):
        SimCluster(scheduler_conf=Path("/nonexistent/volcano-scheduler.conf"))

"""The sample Grafana dashboard (docs/dashboards/airflow-gang.json) queries only what the provider
emits, and every metric it emits has a panel.

The metrics are read from the code: the ``_incr("name", ...)`` (counter) and ``_timing("name",
...)`` (timer) calls of `airflow_gang.reports.telemetry`, under its ``PREFIX`` and Airflow's
default ``[metrics] statsd_prefix``. The dashboard queries them as the Prometheus statsd_exporter
names them with its default mapping: every character that is not a letter, digit or underscore
becomes ``_`` (``airflow.gang.queue_wait`` -> ``airflow_gang_queue_wait``), a counter keeps that
name, and a timer becomes a summary: the name itself (with a ``quantile`` label), ``_sum`` and
``_count``. The labels are the tags each call sends (with ``[metrics] statsd_influxdb_enabled``).
"""

from __future__ import annotations

import ast
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from airflow_gang.reports import telemetry

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "dashboards" / "airflow-gang.json"
GUIDE = REPO / "docs" / "guides" / "metrics.md"
SENDERS = {"_incr": "counter", "_timing": "timer"}
SUMMARY_SERIES = ("", "_sum", "_count")
# PromQL words that are not metric names: functions, aggregations and keywords the dashboard may use.
PROMQL_WORDS = {
    "abs", "absent", "avg", "avg_over_time", "bool", "by", "ceil", "clamp_max", "clamp_min", "count",
    "count_over_time", "delta", "deriv", "floor", "group_left", "group_right", "histogram_quantile",
    "ignoring", "increase", "irate", "label_replace", "max", "max_over_time", "min", "min_over_time",
    "offset", "on", "or", "and", "unless", "quantile", "quantile_over_time", "rate", "round", "scalar",
    "sort", "sort_desc", "sum", "sum_over_time", "time", "topk", "bottomk", "vector", "without",
}  # fmt: skip
GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
MATCHERS = re.compile(r"\{([^}]*)\}")
LABEL_IN_MATCHER = re.compile(r"([A-Za-z_]\w*)\s*(?:=~|!~|!=|=)")


@dataclass(frozen=True)
class Metric:
    name: str  # as Airflow sends it: airflow.gang.queue_wait
    kind: str  # counter or timer
    tags: frozenset[str] = field(default_factory=frozenset)

    @property
    def prometheus(self) -> str:
        return re.sub(r"[^A-Za-z0-9_]", "_", self.name)

    def series(self) -> set[str]:
        """The Prometheus series statsd_exporter's default mapping makes of it."""
        suffixes = SUMMARY_SERIES if self.kind == "timer" else ("",)
        return {self.prometheus + suffix for suffix in suffixes}

    def labels(self) -> set[str]:
        return set(self.tags) | ({"quantile"} if self.kind == "timer" else set())


def statsd_prefix() -> str:
    from airflow.configuration import conf

    return str(conf.get_default_value("metrics", "statsd_prefix"))


def _dict_keys(function: ast.AST) -> dict[str, set[str]]:
    """``where = {"queue": ..., "dag_id": ...}`` in a function: name -> its literal keys."""
    found: dict[str, set[str]] = {}
    for node in ast.walk(function):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict):
            keys = {
                k.value for k in node.value.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)
            }
            for target in node.targets:
                if isinstance(target, ast.Name):
                    found[target.id] = keys
    return found


def emitted_metrics(source: str, prefix: str) -> dict[str, Metric]:
    """Every metric a telemetry module's ``_incr``/``_timing`` calls send, by Airflow name."""
    metrics: dict[str, Metric] = {}
    for function in ast.walk(ast.parse(source)):
        if not isinstance(function, ast.FunctionDef) or function.name in SENDERS:
            continue
        dicts = _dict_keys(function)
        for call in ast.walk(function):
            if not (
                isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in SENDERS
            ):
                continue
            first = call.args[0] if call.args else None
            assert isinstance(first, ast.Constant), f"line {call.lineno}: a metric's name must be a literal"
            assert isinstance(first.value, str), f"line {call.lineno}: a metric's name must be a string"
            tags: set[str] = set()
            for keyword in call.keywords:
                if keyword.arg is not None:
                    tags.add(keyword.arg)
                elif isinstance(keyword.value, ast.Name):
                    tags |= dicts.get(keyword.value.id, set())
            name = f"{prefix}{first.value}"
            metric = Metric(name, SENDERS[call.func.id], frozenset(tags))
            if name in metrics:  # the same metric sent from two places: the tags either may carry
                assert metrics[name].kind == metric.kind, name
                metric = Metric(name, metric.kind, metrics[name].tags | metric.tags)
            metrics[name] = metric
    return metrics


def provider_metrics() -> dict[str, Metric]:
    source = Path(telemetry.__file__).read_text(encoding="utf-8")
    return emitted_metrics(source, f"{statsd_prefix()}.{telemetry.PREFIX}")


def queries(dashboard: dict[str, Any]) -> list[tuple[str, str]]:
    """``(where, PromQL)`` of every panel target (rows' nested panels too) and query variable."""
    found = []

    def panels(items: list[dict[str, Any]]) -> None:
        for panel in items:
            for target in panel.get("targets", []):
                found.append((f"panel {panel.get('title')!r}", target["expr"]))
            panels(panel.get("panels", []))

    panels(dashboard["panels"])
    for variable in dashboard.get("templating", {}).get("list", []):
        if variable.get("type") == "query":
            query = variable["query"]
            text = query["query"] if isinstance(query, dict) else query
            found.append((f"variable ${variable['name']}", str(text)))
    return found


def metric_names_in(expr: str) -> set[str]:
    """The metric names a PromQL expression reads: the identifiers left once strings, label
    matchers, groupings, durations, numbers and PromQL's own words are taken out."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    text = MATCHERS.sub("", text)
    text = GROUPING.sub("", text)
    text = re.sub(r"\[[^\]]*\]", "", text)
    text = re.sub(r"\$\w+|\$\{\w+\}", "", text)  # Grafana variables
    text = re.sub(
        r"\blabel_values\s*\(([^,)]*),[^)]*\)", r"(\1)", text
    )  # Grafana's label_values(metric, label)
    words = set(re.findall(r"[A-Za-z_:][\w:]*", text))
    return {word for word in words if word not in PROMQL_WORDS and not re.fullmatch(r"\d\w*", word)}


def labels_in(expr: str) -> set[str]:
    labels = set()
    for group in GROUPING.findall(expr):
        labels |= {label.strip() for label in group.split(",") if label.strip()}
    for matcher in MATCHERS.findall(re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)):
        labels |= set(LABEL_IN_MATCHER.findall(matcher))
    if match := re.search(r"label_values\s*\([^,]*,\s*(\w+)\s*\)", expr):
        labels.add(match.group(1))
    return labels - {"__name__"}


def check(dashboard: dict[str, Any], metrics: dict[str, Metric]) -> list[str]:
    """What is wrong with ``dashboard`` against ``metrics``: one line per problem."""
    by_series = {series: metric for metric in metrics.values() for series in metric.series()}
    problems = []
    queried: set[str] = set()
    for where, expr in queries(dashboard):
        names = metric_names_in(expr)
        if not names:
            problems.append(f"{where}: queries no metric: {expr}")
        unknown = sorted(names - set(by_series))
        if unknown:
            problems.append(f"{where}: {unknown} is no series of a metric the provider emits")
        used = [by_series[name] for name in names if name in by_series]
        queried |= {metric.name for metric in used}
        if used:
            allowed = set.intersection(*(metric.labels() for metric in used))
            stray = sorted(labels_in(expr) - allowed)
            if stray:
                problems.append(f"{where}: label(s) {stray} not sent with {sorted(m.name for m in used)}")
    for name in sorted(set(metrics) - queried):
        problems.append(f"no panel shows {name}")
    return problems


# -- the reading itself -------------------------------------------------------------------------

TELEMETRY_LIKE = """
PREFIX = "gang."

def _incr(name, **tags): ...
def _timing(name, seconds, **tags): ...

def ended(record, *, dag_id, task_id):
    where = {"queue": record.get("queue"), "dag_id": dag_id, "task_id": task_id}
    _timing("queue_wait", 1.0, **where)

def reaped(*, reason):
    _incr("reaper_deletion", reason=reason)
"""


def test_metrics_and_their_tags_are_read_from_the_calls() -> None:
    metrics = emitted_metrics(TELEMETRY_LIKE, "airflow.gang.")
    assert metrics == {
        "airflow.gang.queue_wait": Metric(
            "airflow.gang.queue_wait", "timer", frozenset({"queue", "dag_id", "task_id"})
        ),
        "airflow.gang.reaper_deletion": Metric(
            "airflow.gang.reaper_deletion", "counter", frozenset({"reason"})
        ),
    }
    assert metrics["airflow.gang.queue_wait"].series() == {
        "airflow_gang_queue_wait",
        "airflow_gang_queue_wait_sum",
        "airflow_gang_queue_wait_count",
    }


def test_metric_names_and_labels_are_read_from_promql() -> None:
    expr = (
        'sum by (queue) (rate(airflow_gang_queue_wait_sum{queue=~"$queue"}[1h])) / '
        'max without (task_id) (airflow_gang_queue_wait{quantile="0.9"}) + 2'
    )
    assert metric_names_in(expr) == {"airflow_gang_queue_wait_sum", "airflow_gang_queue_wait"}
    assert labels_in(expr) == {"queue", "task_id", "quantile"}
    variable = "label_values(airflow_gang_queue_wait_count, queue)"
    assert (metric_names_in(variable), labels_in(variable)) == ({"airflow_gang_queue_wait_count"}, {"queue"})


def test_a_drifted_dashboard_is_caught() -> None:
    metrics = emitted_metrics(TELEMETRY_LIKE, "airflow.gang.")
    drifted = {
        "panels": [
            {"title": "typo", "targets": [{"expr": "rate(airflow_gang_queue_wiat_count[1h])"}]},
            {
                "title": "no such label",
                "targets": [{"expr": "sum by (queue) (airflow_gang_reaper_deletion)"}],
            },
        ]
    }
    assert check(drifted, metrics) == [
        "panel 'typo': ['airflow_gang_queue_wiat_count'] is no series of a metric the provider emits",
        "panel 'no such label': label(s) ['queue'] not sent with ['airflow.gang.reaper_deletion']",
        "no panel shows airflow.gang.queue_wait",
    ]


# -- the provider and its dashboard ---------------------------------------------------------------


def test_the_provider_emits_counters_and_timers() -> None:
    metrics = provider_metrics()
    assert {metric.kind for metric in metrics.values()} == {"counter", "timer"}
    assert all(name.startswith("airflow.gang.") for name in metrics)


def test_the_dashboard_queries_only_what_the_provider_emits_and_shows_all_of_it() -> None:
    dashboard = json.loads(DASHBOARD.read_text(encoding="utf-8"))
    problems = check(dashboard, provider_metrics())
    assert not problems, "\n".join(problems)


def test_the_metrics_guide_names_every_metric_and_links_the_dashboard() -> None:
    guide = GUIDE.read_text(encoding="utf-8")
    missing = sorted(name for name in provider_metrics() if f"`{name}`" not in guide)
    assert not missing, f"docs/guides/metrics.md does not name {missing}"
    assert "../dashboards/airflow-gang.json" in guide

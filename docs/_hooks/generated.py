"""mkdocs hook: the parts of the reference pages built from the code at build time.

A page asks for one with a line of its own, ``<!-- generated: NAME -->``; `on_page_markdown`
replaces it with the Markdown that ``GENERATORS[NAME]`` builds from what the installed code says:

- ``configuration``: the provider's Airflow config options (``get_provider_info()["config"]``);
- ``metrics``: the metric names `airflow_gang.reports.telemetry` sends, with the descriptions of
  its module docstring's table;
- ``cli``: every command of the ``airflow-gang`` console script, from its argparse parser
  (`airflow_gang.cli.build_parser`, with the commands other distributions register);
- ``connection``: the fields of the cncf.kubernetes ``kubernetes`` connection (from the installed
  cncf.kubernetes provider) and what airflow-gang does with each (`CONNECTION_FIELDS`);
- ``page-api``: the Gang jobs page's HTTP API from its OpenAPI snapshot,
  ``docs/page-api/openapi.json``.

Where the code and the words kept here or in a docstring disagree (a metric sent but not
described, a connection field not explained, an unknown marker) the hook logs a warning, which
fails ``mkdocs build --strict``: the reference cannot drift from the code silently.
"""

from __future__ import annotations

import argparse
import ast
import html
import importlib.metadata
import inspect
import json
import logging
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

log = logging.getLogger("mkdocs.hooks.generated")

DOCS = Path(__file__).resolve().parents[1]
OPENAPI = DOCS / "page-api" / "openapi.json"
MARKER = re.compile(r"^<!-- generated: ([\w-]+)(?: ([\w.]+))? -->[ \t]*$", re.MULTILINE)
CODE_SPAN = re.compile(r"(`+).+?\1", re.DOTALL)


def on_page_markdown(markdown: str, page: Any, **kwargs: Any) -> str:
    def replace(match: re.Match[str]) -> str:
        name, argument = match.groups()
        generator = GENERATORS.get(name)
        if generator is None:
            log.warning(
                "%s: no generated section %r (there are: %s)", page.file.src_uri, name, ", ".join(GENERATORS)
            )
            return match.group(0)
        return generator(argument) if argument else generator()

    return MARKER.sub(replace, markdown)


# -- Markdown helpers ------------------------------------------------------------------------------


def inline(text: str) -> str:
    """``text`` as one line of Markdown that is safe in a table cell: outside code spans, ``<``
    and ``&`` become entities (``<root>`` is no HTML tag) and ``|`` is escaped; line breaks join."""
    parts: list[str] = []
    position = 0
    for span in CODE_SPAN.finditer(text):
        parts.append(_escape(text[position : span.start()]))
        parts.append(span.group(0))
        position = span.end()
    parts.append(_escape(text[position:]))
    return " ".join("".join(parts).split())


def _escape(text: str) -> str:
    return html.escape(text, quote=False).replace("|", "\\|")


def code(value: Any) -> str:
    """A value as inline code; the empty string as *empty*."""
    text = str(value)
    if text == "":
        return "*empty*"
    fence = "``" if "`" in text else "`"
    return f"{fence}{text}{fence}"


def table(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "|".join("---" for _ in header) + "|",
        *("| " + " | ".join(row) + " |" for row in rows),
        "",
    ]


# -- a model's fields --------------------------------------------------------------------------------


def fields(path: str) -> str:
    """The fields of the pydantic model at ``path`` (``module.Class``): name (and alias), type,
    default and bounds, as the model declares them."""
    module_name, _, class_name = path.rpartition(".")
    model = getattr(importlib.import_module(module_name), class_name)
    rows = []
    for name, field in model.model_fields.items():
        alias = f" (or `{field.alias}`)" if field.alias and field.alias != name else ""
        bounds = [
            f"{symbol} {getattr(rule, attribute)}"
            for rule in field.metadata
            for attribute, symbol in (("ge", "≥"), ("gt", ">"), ("le", "≤"), ("lt", "<"))
            if hasattr(rule, attribute)
        ]
        rows.append(
            [f"`{name}`{alias}", f"`{_annotation(field.annotation)}`", _default(field), ", ".join(bounds)]
        )
    return "\n".join(table(["Field", "Type", "Default", "Bounds"], rows))


def _annotation(annotation: Any) -> str:
    """A type as Python would write it, with an enum's or a Literal's values spelt out."""
    import enum
    import types
    import typing

    origin, arguments = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "None"
    if annotation is typing.Any:
        return "Any"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        return " | ".join(repr(member.value) for member in annotation)
    if origin is typing.Literal:
        return " | ".join(repr(argument) for argument in arguments)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(dict.fromkeys(_annotation(argument) for argument in arguments))
    if origin is not None:
        return f"{getattr(origin, '__name__', str(origin))}[{', '.join(_annotation(a) for a in arguments)}]"
    return getattr(annotation, "__name__", str(annotation).replace("typing.", ""))


def _default(field: Any) -> str:
    import enum

    from pydantic import BaseModel

    if field.default_factory is not None:
        made = field.default_factory()
        return f"`{type(made).__name__}()`" if isinstance(made, BaseModel) else code(repr(made))
    if field.is_required():
        return "required"
    value = field.default.value if isinstance(field.default, enum.Enum) else field.default
    return code(repr(value))


# -- configuration ---------------------------------------------------------------------------------


def configuration() -> str:
    """Each section of the provider's ``config``: a summary table, then one entry per option (its
    anchor is the option's name: ``configuration.md#default_admission_timeout``)."""
    from airflow_gang.get_provider_info import get_provider_info

    config = get_provider_info()["config"]
    readers = _config_readers()
    for section, name in sorted(
        readers.keys() - {(s, o) for s, spec in config.items() for o in spec["options"]}
    ):
        log.warning(
            "configuration: %s reads [%s] %s, which get_provider_info() does not declare",
            ", ".join(readers[section, name]),
            section,
            name,
        )
    lines: list[str] = []
    for section, spec in config.items():
        options: dict[str, dict[str, Any]] = spec["options"]
        lines += [f"## `[{section}]` {{#{section}}}", "", inline(spec["description"]), ""]
        lines += table(
            ["Option", "Type", "Default"],
            [
                [f"[`{name}`](#{name})", option["type"], code(option["default"])]
                for name, option in options.items()
            ],
        )
        for name, option in options.items():
            facts = [f"Type: {option['type']}", f"Default: {code(option['default'])}"]
            if option.get("example") is not None:
                facts.append(f"Example: {code(option['example'])}")
            facts.append(f"Environment variable: `AIRFLOW__{section.upper()}__{name.upper()}`")
            if option.get("version_added"):
                facts.append(f"Added in: {option['version_added']}")
            if option.get("sensitive"):
                facts.append("Sensitive: Airflow hides its value in its UI and logs")
            modules = readers.get((section, name))
            if modules:
                facts.append("Read in: " + ", ".join(f"`{module}`" for module in modules))
            else:
                log.warning("configuration: no module of airflow_gang reads [%s] %s", section, name)
            lines += [f"### `{name}` {{#{name}}}", "", inline(option["description"]), ""]
            lines += [*(f"- {fact}" for fact in facts), ""]
    return "\n".join(lines)


def _config_readers() -> dict[tuple[str, str], list[str]]:
    """(section, option) -> the modules of ``airflow_gang`` that read it with ``conf.get*(section,
    option, ...)``, for the provider's own sections."""
    import airflow_gang
    from airflow_gang.get_provider_info import get_provider_info

    sections = set(get_provider_info()["config"])
    package = Path(airflow_gang.__file__).parent
    readers: dict[tuple[str, str], list[str]] = {}
    for path in sorted(package.rglob("*.py")):
        module = ".".join(path.relative_to(package.parent).with_suffix("").parts).removesuffix(".__init__")
        for call in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (
                isinstance(call, ast.Call)
                and isinstance(call.func, ast.Attribute)
                and isinstance(call.func.value, ast.Name)
                and call.func.value.id == "conf"
                and call.func.attr.startswith("get")
                and len(call.args) >= 2
            ):
                continue
            section, option = call.args[0], call.args[1]
            if (
                isinstance(section, ast.Constant)
                and isinstance(option, ast.Constant)
                and section.value in sections
            ):
                modules = readers.setdefault((str(section.value), str(option.value)), [])
                if module not in modules:
                    modules.append(module)
    return readers


# -- metrics ---------------------------------------------------------------------------------------

METRIC_KINDS = {"_incr": "counter", "_timing": "timer"}


def metrics() -> str:
    """The metrics `airflow_gang.reports.telemetry` sends (its calls of ``_incr``/``_timing``: name,
    counter or timer, tags) with the descriptions of its module docstring's table."""
    from airflow_gang.reports import telemetry

    module = ast.parse(Path(telemetry.__file__).read_text(encoding="utf-8"))
    sent = _sent_metrics(module, telemetry.PREFIX)
    described = _described_metrics(inspect.getdoc(telemetry) or "")
    for name in sorted(set(sent) - set(described)):
        log.warning(
            "metrics: %s is sent (airflow_gang/reports/telemetry.py) but not in its docstring's table", name
        )
    for name in sorted(set(described) - set(sent)):
        log.warning("metrics: %s is in telemetry.py's docstring table but nothing sends it", name)
    rows = []
    for name in [
        *(name for name in described if name in sent),
        *(name for name in sent if name not in described),
    ]:
        kind, tags = sent[name]
        told_kind, description = described.get(name, (kind, ""))
        if told_kind != kind:
            log.warning("metrics: %s is sent as a %s but its docstring row says %s", name, kind, told_kind)
        rows.append([f"`{name}`", kind, ", ".join(f"`{tag}`" for tag in tags) or "none", inline(description)])
    return "\n".join(table(["Name", "Type", "Tags", "What it measures"], rows))


def _sent_metrics(module: ast.Module, prefix: str) -> dict[str, tuple[str, list[str]]]:
    sent: dict[str, tuple[str, list[str]]] = {}
    for function in (node for node in module.body if isinstance(node, ast.FunctionDef)):
        if function.name in METRIC_KINDS:
            continue
        dicts = {
            target.id: [key.value for key in node.value.keys if isinstance(key, ast.Constant)]
            for node in ast.walk(function)
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Dict)
            for target in node.targets
            if isinstance(target, ast.Name)
        }
        for call in (node for node in ast.walk(function) if isinstance(node, ast.Call)):
            if not (isinstance(call.func, ast.Name) and call.func.id in METRIC_KINDS and call.args):
                continue
            first = call.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            tags: list[str] = []
            for keyword in call.keywords:
                if keyword.arg is not None:
                    tags.append(keyword.arg)
                elif isinstance(keyword.value, ast.Name):
                    tags.extend(dicts.get(keyword.value.id, []))
            name = prefix + first.value
            kind, known = sent.get(name, (METRIC_KINDS[call.func.id], []))
            sent[name] = (kind, [*known, *(tag for tag in tags if tag not in known)])
    return sent


def _described_metrics(docstring: str) -> dict[str, tuple[str, str]]:
    """The rows of the docstring's reStructuredText table (name, type, what): name -> (type, what)."""
    lines = docstring.splitlines()
    rules = [index for index, line in enumerate(lines) if re.fullmatch(r"=+( +=+)+", line)]
    if len(rules) < 3:
        log.warning("metrics: airflow_gang/reports/telemetry.py's docstring has no table of metrics")
        return {}
    starts = [match.start() for match in re.finditer(r"=+", lines[rules[0]])]
    rows: list[list[str]] = []
    for line in lines[rules[1] + 1 : rules[2]]:
        cells = [line[start:end].strip() for start, end in zip(starts, [*starts[1:], None], strict=True)]
        if cells[0]:
            rows.append(cells)
        elif rows:
            rows[-1] = [f"{old} {new}".strip() for old, new in zip(rows[-1], cells, strict=True)]
    return {row[0].strip("`"): (row[1], row[2]) for row in rows}


# -- CLI -------------------------------------------------------------------------------------------


def cli() -> str:
    """Every command and subcommand of ``airflow-gang``: usage, what it does, its arguments."""
    from airflow_gang.cli import build_parser

    lines: list[str] = []
    for parser, help_text in _commands(build_parser(), None):
        lines += [f"### `{parser.prog}` {{#{_slug(parser.prog)}}}", ""]
        for text in dict.fromkeys(t for t in (help_text, parser.description) if t):
            lines += [inline(_sentence(text)), ""]
        lines += ["```text", _usage(parser), "```", ""]
        rows = [_argument_row(parser, action) for action in parser._actions if _documented(action)]
        if rows:
            lines += table(["Argument", "Default", "Description"], rows)
        subcommands = [
            name
            for action in parser._actions
            if isinstance(action, argparse._SubParsersAction)
            for name in action.choices
        ]
        if subcommands:
            links = ", ".join(f"[`{name}`](#{_slug(f'{parser.prog} {name}')})" for name in subcommands)
            lines += [f"Subcommands: {links}.", ""]
    return "\n".join(lines)


def _commands(
    parser: argparse.ArgumentParser, help_text: str | None
) -> Iterator[tuple[argparse.ArgumentParser, str | None]]:
    yield parser, help_text
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help for choice in action._choices_actions}
            for name, subparser in action.choices.items():
                yield from _commands(subparser, helps.get(name))


def _documented(action: argparse.Action) -> bool:
    return not isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) and (
        action.help != argparse.SUPPRESS
    )


def _usage(parser: argparse.ArgumentParser) -> str:
    formatter = parser.formatter_class(prog=parser.prog, width=88)
    formatter.add_usage(parser.usage, parser._actions, parser._mutually_exclusive_groups, prefix="")
    return formatter.format_help().strip()


def _argument_row(parser: argparse.ArgumentParser, action: argparse.Action) -> list[str]:
    formatter = parser.formatter_class(prog=parser.prog)
    names = f"`{formatter._format_action_invocation(action)}`"
    description = formatter._expand_help(action) if action.help else ""
    default = action.default
    # A flag's False and an unset None or [] say nothing; 0 is a real default (--port 0).
    unset = action.nargs == 0 or default is None or default is argparse.SUPPRESS or default == []
    return [names, "" if unset else code(default), inline(description)]


def _sentence(text: str) -> str:
    text = text.strip()
    return text[0].upper() + text[1:] + ("" if text.endswith((".", ")")) else ".")


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


# -- connection ------------------------------------------------------------------------------------

# What airflow-gang does with each field of the cncf.kubernetes `kubernetes` connection. The
# workers (operators, sensors), the scheduler (the orphan reaper) and the API server (the Gang
# jobs page) use `GangJobHook`, built on cncf's KubernetesHook; the triggerer uses
# `AsyncGangJobHook`, built on cncf's AsyncKubernetesHook, which reads fewer fields.
CONNECTION_FIELDS = {
    "in_cluster": (
        "Use the pod's service account (every Airflow component must then run in the cluster). "
        "Read by both hooks."
    ),
    "kube_config_path": (
        "Path of a kubeconfig file. It must exist on every component that uses the connection: "
        "the workers, the triggerer, the scheduler (its orphan reaper) and the API server (the "
        "Gang jobs page), unless `[gang] kubeconfig_to_triggerer` ships its content to the "
        "triggerer. When the file changes, triggers started afterwards use the new content, and "
        "waiting ones switch to it when their requests start failing."
    ),
    "kube_config": "A kubeconfig inline, as JSON. Read by both hooks.",
    "namespace": (
        "The namespace of a task's jobs when the operator or sensor gets no `namespace`, and the "
        "namespace the Gang jobs page shows when `[gang] ui_namespaces` is empty; else `default`."
    ),
    "cluster_context": "The kubeconfig context to use. Read by both hooks.",
    "disable_verify_ssl": (
        "Do not verify the API server's certificate. Read by the synchronous hook only: the "
        "triggerer's client does not read it."
    ),
    "disable_tcp_keepalive": (
        "Turn off the TCP keepalive the synchronous hook sets on its connections, which is what "
        "detects a half-open connection while a task follows a log. The triggerer's client does "
        "not read it."
    ),
    **dict.fromkeys(
        (
            "xcom_sidecar_container_image",
            "xcom_sidecar_container_resources",
            "xcom_sidecar_container_security_context",
        ),
        "Not used (the KubernetesPodOperator's XCom sidecar).",
    ),
}


def connection() -> str:
    """The `kubernetes` connection type's fields as the installed cncf.kubernetes provider
    declares them, with `CONNECTION_FIELDS`' explanation of each."""
    from airflow.providers.cncf.kubernetes.get_provider_info import get_provider_info

    types = {entry["connection-type"]: entry for entry in get_provider_info()["connection-types"]}
    fields: dict[str, dict[str, Any]] = types["kubernetes"]["conn-fields"]
    for name in fields.keys() - CONNECTION_FIELDS.keys():
        log.warning(
            "connection: the kubernetes connection has a field %r that docs/_hooks/generated.py "
            "does not explain (CONNECTION_FIELDS)",
            name,
        )
    for name in CONNECTION_FIELDS.keys() - fields.keys():
        log.warning(
            "connection: CONNECTION_FIELDS explains %r, which the kubernetes connection no longer has", name
        )
    version = importlib.metadata.version("apache-airflow-providers-cncf-kubernetes")
    rows = [
        [
            f"`{name}`",
            inline(field.get("label", "")),
            _field_type(field),
            inline(CONNECTION_FIELDS.get(name, "")),
        ]
        for name, field in fields.items()
    ]
    return "\n".join(
        [
            f"The fields of the `kubernetes` connection type in apache-airflow-providers-cncf-kubernetes "
            f"{version} (the version this site was built with):",
            "",
            *table(["Extra", "Label in the connection form", "Type", "What airflow-gang does with it"], rows),
        ]
    )


def _field_type(field: dict[str, Any]) -> str:
    types = field.get("schema", {}).get("type", [])
    types = [types] if isinstance(types, str) else types
    return " or ".join(kind for kind in types if kind != "null")


# -- the Gang jobs page's API ----------------------------------------------------------------------


def page_api() -> str:
    """Each route of ``docs/page-api/openapi.json`` (parameters, answers) and each schema."""
    from airflow_gang.plugins.plugin import URL_PREFIX

    document = json.loads(OPENAPI.read_text(encoding="utf-8"))
    notes = _parameter_notes()
    lines = ["## Routes", ""]
    for path, operations in document["paths"].items():
        for method, operation in operations.items():
            route = f"{method.upper()} {URL_PREFIX}{path}"
            lines += [f"### `{route}` {{#{_slug(method + ' ' + path)}}}", ""]
            what = ROUTES.get((method, path))
            if what is None:
                log.warning("page-api: docs/_hooks/generated.py does not say what %s answers (ROUTES)", route)
            lines += [inline(what or operation.get("summary", "")), ""]
            rows = []
            for parameter in operation.get("parameters", []):
                key = (parameter["name"], parameter["in"])
                if key not in notes:
                    log.warning(
                        "page-api: %s has a %s parameter %r that docs/_hooks/generated.py does not "
                        "explain (_parameter_notes)",
                        route,
                        parameter["in"],
                        parameter["name"],
                    )
                rows.append(
                    [
                        f"`{parameter['name']}`",
                        parameter["in"],
                        _schema_type(parameter.get("schema", {})),
                        "yes" if parameter.get("required") else "no",
                        inline(notes.get(key, "")),
                    ]
                )
            if rows:
                lines += table(["Parameter", "In", "Type", "Required", "Meaning"], rows)
            answers = []
            for status, response in operation.get("responses", {}).items():
                schema = response.get("content", {}).get("application/json", {}).get("schema", {})
                answers.append([status, _schema_type(schema), inline(response.get("description", ""))])
            lines += table(["Status", "Body", "When"], answers)
    lines += ["## Schemas", ""]
    for name, schema in document.get("components", {}).get("schemas", {}).items():
        lines += [f"### `{name}` {{#{_schema_anchor(name)}}}", ""]
        if schema.get("description"):
            lines += [inline(schema["description"]), ""]
        required = set(schema.get("required", []))
        properties = schema.get("properties", {})
        if properties:
            lines += table(
                ["Field", "Type", "Always there", "Meaning"],
                [
                    [
                        f"`{field}`",
                        _schema_type(spec),
                        "yes" if field in required else "no",
                        inline(spec.get("description", "")),
                    ]
                    for field, spec in properties.items()
                ],
            )
        elif "enum" in schema:
            lines += ["One of " + ", ".join(code(value) for value in schema["enum"]) + ".", ""]
    return "\n".join(lines)


def _schema_anchor(name: str) -> str:
    return "schema-" + _slug(name)


def _schema_type(schema: dict[str, Any]) -> str:
    """A JSON schema's type in a few words, with links to the page's schemas."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[-1]
        return f"[{name}](#{_schema_anchor(name)})"
    for combinator in ("anyOf", "oneOf", "allOf"):
        if combinator in schema:
            return " or ".join(_schema_type(part) for part in schema[combinator])
    kind = schema.get("type")
    if kind == "array":
        return f"array of {_schema_type(schema.get('items', {}))}"
    if kind == "object" and isinstance(schema.get("additionalProperties"), dict):
        return f"object of {_schema_type(schema['additionalProperties'])}"
    if "enum" in schema:
        return " or ".join(code(value) for value in schema["enum"])
    if "const" in schema:
        return code(schema["const"])
    return str(kind or "any")


# What each route of the page's API answers, by (method, path) as in the OpenAPI document.
ROUTES = {
    ("get", "/api/jobs"): (
        "One page of the jobs table, newest submission first: the live jobs and those already "
        "deleted, as their tasks recorded them, with the values each filter can take."
    ),
    ("get", "/api/jobs/{namespace}/{name}"): (
        "Everything about one job: its conditions, PodGroup, replicas, pods and recent events, the "
        "Airflow task instance it belongs to and that task's progress; for a deleted job, what its "
        "task recorded."
    ),
    ("post", "/api/jobs/{namespace}/{name}/{action}"): (
        "Delete, suspend or resume a live job that an Airflow task submitted; Airflow's audit log records it."
    ),
    ("get", "/api/queues"): "The Volcano queues: state, capability, what is allocated, PodGroups by phase.",
    ("get", "/api/timeline"): (
        "Per queue, when each job was queued, admitted, running and finished, for the jobs of the "
        "same page of `/api/jobs` (the same filters and paging)."
    ),
}


def _parameter_notes() -> dict[tuple[str, str], str]:
    """What each parameter of the API means, by (name, where), with the values the code accepts."""
    from airflow_gang.kinds import JOB_KINDS
    from airflow_gang.model.naming import MANAGED_BY_LABEL, MANAGED_BY_VALUE
    from airflow_gang.plugins.actions import ACTIONS, CSRF_HEADER
    from airflow_gang.plugins.job_filter import DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE
    from airflow_gang.plugins.summaries import STATES

    kinds = ", ".join(f"`{kind}`" for kind in JOB_KINDS)
    return {
        ("namespace", "path"): "The job's namespace: one of those the page shows (`[gang] ui_namespaces`).",
        ("name", "path"): "The job's name.",
        ("action", "path"): "One of " + ", ".join(f"`{action}`" for action in ACTIONS) + ".",
        ("kind", "query"): (
            f"The job kind: {kinds} (any case). On a list, only jobs of that kind; on one job, the "
            f"kind of the job named (without it, the first of these kinds that has a job of that name)."
        ),
        ("namespace", "query"): "Only jobs in this namespace (one of those the page shows).",
        ("queue", "query"): "Only jobs in this Volcano queue.",
        ("dag_id", "query"): "Only jobs submitted by this DAG's tasks.",
        ("state", "query"): "Only jobs in these states, comma-separated: "
        + ", ".join(f"`{s}`" for s in STATES)
        + ".",
        ("all", "query"): (
            f"`true`: also the live jobs that airflow-gang did not submit (without the label "
            f"`{MANAGED_BY_LABEL}={MANAGED_BY_VALUE}`)."
        ),
        ("since", "query"): "Only jobs submitted at or after this time (ISO 8601).",
        ("until", "query"): "Only jobs submitted at or before this time (ISO 8601).",
        ("limit", "query"): f"Page size: default {DEFAULT_PAGE_SIZE}, at most {MAX_PAGE_SIZE}.",
        ("offset", "query"): "How many matching jobs to skip (paging).",
        (CSRF_HEADER, "header"): (
            "Required for an action, with any value: a cross-site form cannot send it, so a page on "
            "another site cannot make a logged-in user's browser act on a job."
        ),
    }


GENERATORS: dict[str, Callable[..., str]] = {
    "fields": fields,
    "configuration": configuration,
    "metrics": metrics,
    "cli": cli,
    "connection": connection,
    "page-api": page_api,
}

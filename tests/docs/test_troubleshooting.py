"""docs/troubleshooting.md has an entry for every message the provider raises or logs.

`provider_messages.Catalog` reads ``airflow_gang/`` with `ast` and finds each message site (an
exception with a message, a logging call at WARNING or above, ``warnings.warn``, a warning line
of the disruption reports or of the Gang jobs page, text written to stderr) and its templates.

The rule for "this message has an entry": the page quotes it as code (an inline code span or a
code block, as a user would copy it from a log). Take the message's literal parts (the text
between the values computed at run time), normalised (whitespace collapsed, case folded). If its
longest part has at least `MIN_WORDS` words, that part must appear in one of the page's quotes;
else the whole message must, each value written as anything of up to 80 characters (``<job>``).
So one entry serves every site that raises the same text, and an entry may show a message's
values as placeholders; prose that happens to use the same words does not count.

Messages the catalog cannot read statically are listed in `UNRESOLVED` with where their text
comes from; each must name a documented exception class (or `EXTRA` phrases for its text), and a
new one fails the test until it is listed. `EXTRA` holds texts users read that are built away
from any raise or log call (a trigger's event, an outage warning, a status note); each phrase must
still be in its source file, so the list cannot go stale silently.

``GANG_TROUBLESHOOTING_PAGE`` points the test at another page (e.g. an older version of it).
"""

from __future__ import annotations

import functools
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.docs.provider_messages import Catalog, Site, Template, literals, shown

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "airflow_gang"
PAGE = ROOT / "docs" / "troubleshooting.md"
PAGE_ENV = "GANG_TROUBLESHOOTING_PAGE"
MIN_WORDS = 4
SEPARATOR = "\x00"  # between two quotes of the page: no message is found across them
PLACEHOLDER = "[^\x00]{1,80}?"
_FENCED = re.compile(r"^```[^\n]*\n(.*?)^```", re.MULTILINE | re.DOTALL)
_INLINE = re.compile(r"(`+)(.+?)\1", re.DOTALL)

# Sites whose message the catalog cannot resolve, by (file, function, message expression): what the
# text is, and the phrases of it (`EXTRA` keys) the page must hold besides the exception class.
UNRESOLVED: dict[tuple[str, str, str], tuple[str, tuple[str, ...]]] = {
    ("airflow_gang/model/outage.py", "_backoff_or_raise", "step.warning"): (
        "the outage warning `Outage.failed` words",
        ("outage-warning",),
    ),
    ("airflow_gang/triggers/gang.py", "GangJobTrigger._wait", "step.warning"): (
        "the outage warning `Outage.failed` words, in the triggerer",
        ("outage-warning",),
    ),
    ("airflow_gang/plugins/errors.py", "classify", "str(error)"): (
        "the page relays a provider exception's own message (GangCRDNotInstalled, GangPermissionError, "
        "GangApiError, GangError): documented under that exception",
        (),
    ),
    ("airflow_gang/plugins/service.py", "GangPageService._recorded_rows", "problem"): (
        "why the job history cannot be listed (`plugins/history.py`)",
        ("history-backend", "history-clear-on-success", "history-unreadable"),
    ),
    (
        "airflow_gang/reports/disruption_report.py",
        "give_up_error",
        "f'{where} {message}; {after_deletion(deleted)}'",
    ): (
        "`<kind> <namespace>/<name> <give-up message>; <deletion>`, the give-up message from "
        "`jobs/disruption.py`",
        ("disruption-retry", "disruption-max", "after-deletion-unconfirmed"),
    ),
    ("airflow_gang/triggers/events.py", "GangEvent.to_exception", "self.message"): (
        "the trigger's event message: a lost job (`triggers/gang.py`), an outage past "
        "api_unavailable_timeout (`Outage.unavailable`), a PodGroup in another queue "
        "(`queue_mismatch_message`), each also raised by the worker's wait",
        ("lost-in-trigger",),
    ),
}

# Texts users read that are built away from a raise or log call: key -> (source file, phrase).
EXTRA: dict[str, tuple[str, str]] = {
    "outage-warning": (
        "airflow_gang/model/outage.py",
        "nothing is deleted, the wait goes on",
    ),
    "history-backend": ("airflow_gang/plugins/history.py", "jobs deleted by cleanup are not listed"),
    "history-clear-on-success": (
        "airflow_gang/plugins/history.py",
        "clear_on_success is on: a succeeded task's job records are deleted",
    ),
    "history-unreadable": (
        "airflow_gang/plugins/history.py",
        "the job history could not be read from the Airflow metadata DB",
    ),
    "disruption-retry": ("airflow_gang/jobs/disruption.py", "with on_disruption='retry'"),
    "disruption-max": ("airflow_gang/jobs/disruption.py", "times in this try, "),
    "readmission-timeout": ("airflow_gang/jobs/disruption.py", "of its disruption"),
    "after-deletion-unconfirmed": (
        "airflow_gang/jobs/deletion.py",
        "its deletion was not confirmed in time (the orphan reaper finishes it)",
    ),
    "lost-in-trigger": ("airflow_gang/triggers/gang.py", "was deleted while waiting"),
    "admission-deadline": ("airflow_gang/triggers/gang.py", "gang not admitted by "),
    "execution-timeout": ("airflow_gang/triggers/events.py", "execution_timeout reached at "),
    "not-gang-scheduled": (
        "airflow_gang/model/gang_state.py",
        "not gang-scheduled: the training-operator created pods but no PodGroup",
    ),
    "trainer-not-gang-scheduled": (
        "airflow_gang/model/gang_state.py",
        "not gang-scheduled: the TrainJob's pods exist but no PodGroup does",
    ),
    "waiting-for-podgroup": ("airflow_gang/model/gang_state.py", "waiting for the PodGroup to be created"),
    "create-retried-409": ("airflow_gang/hooks/retrying.py", "the create was retried after a failed attempt"),
    "progress-unreadable": ("airflow_gang/plugins/metadata.py", "the task state store could not be read: "),
    "log-unavailable-no-pod": ("airflow_gang/jobs/outcome.py", "(log unavailable: no rank-0 pod of "),
    "replica-python-too-old": (
        "airflow_gang/decorators/replica_bootstrap.py",
        "use an image with a newer Python, or name another ",
    ),
}


@dataclass(frozen=True)
class Missing:
    site: Site
    template: Template
    looked_for: str

    def __str__(self) -> str:
        message = f"{self.site.where} ({self.site.source}): {shown(self.template)!r}"
        return f"{message}\n    looked for: {self.looked_for!r}"


def normalise(text: str) -> str:
    """Whitespace collapsed, backticks and Markdown's ``\\|`` escapes dropped, case folded."""
    return re.sub(r"\s+", " ", text.replace("`", "").replace("\\|", "|")).casefold()


def quotes(page_text: str) -> str:
    """The page's code (fenced blocks, inline spans), normalised, one quote after another."""
    blocks = _FENCED.findall(page_text)
    prose = _FENCED.sub(SEPARATOR, page_text)
    spans = [match.group(2) for match in _INLINE.finditer(prose)]
    return SEPARATOR.join(normalise(quote) for quote in [*blocks, *spans])


def _words(text: str) -> int:
    return len([word for word in text.split() if re.search(r"[A-Za-z0-9]", word)])


def key_part(template: Template) -> str:
    """The template's longest literal part (by words, then characters), normalised."""
    parts = [normalise(part).strip(" :;,.") for part in literals(template)]
    return max(parts, key=lambda part: (_words(part), len(part)))


def skeleton(template: Template) -> re.Pattern[str]:
    """The whole message as a pattern: its literal parts in order, anything short for each value
    between them (a value at either end may be anything: it is not looked for)."""
    parts = list(template)
    while parts and (parts[0] is None or not parts[0].strip()):
        parts.pop(0)
    while parts and (parts[-1] is None or not parts[-1].strip()):
        parts.pop()
    texts = [None if part is None else normalise(part) for part in parts]
    if texts:
        texts[0], texts[-1] = str(texts[0]).lstrip(), str(texts[-1]).rstrip()
    return re.compile("".join(PLACEHOLDER if text is None else re.escape(text) for text in texts))


def documented(template: Template, quoted: str) -> tuple[bool, str]:
    """Whether the page's ``quoted`` text (`quotes`) has an entry for ``template``, and what was
    looked for."""
    key = key_part(template)
    if _words(key) >= MIN_WORDS:
        return key in quoted, key
    pattern = skeleton(template)
    return pattern.search(quoted) is not None, pattern.pattern


def missing_messages(sites: Iterable[Site], page_text: str) -> list[Missing]:
    page = quotes(page_text)
    missing = []
    for site in sites:
        for template in site.checkable:
            found, looked_for = documented(template, page)
            if not found:
                missing.append(Missing(site, template, looked_for))
    return missing


def undocumented_classes(classes: Iterable[str], page_text: str) -> list[str]:
    """Exception classes the page never names as inline code (`` `GangSpecError` ``)."""
    return sorted(name for name in classes if f"`{name}`" not in page_text)


def unresolved_key(site: Site) -> tuple[str, str, str]:
    return site.path, site.function, site.expression


@functools.cache
def catalog() -> Catalog:
    return Catalog(PACKAGE)


def page_path() -> Path:
    return Path(os.environ.get(PAGE_ENV) or PAGE)


@pytest.fixture(scope="module")
def page_text() -> str:
    return page_path().read_text(encoding="utf-8")


def _report(title: str, lines: Iterable[object]) -> str:
    listed = [str(line) for line in lines]
    return f"{len(listed)} {title} (add them to {page_path()}):\n" + "\n".join(listed)


# --- the page --------------------------------------------------------------------------------


def test_every_message_has_an_entry(page_text: str) -> None:
    missing = missing_messages(catalog().sites, page_text)
    assert not missing, _report("messages without an entry", missing)


def test_every_exception_class_has_an_entry(page_text: str) -> None:
    missing = undocumented_classes(catalog().provider_exceptions, page_text)
    where = [f"{name} ({catalog().provider_exceptions[name]})" for name in missing]
    assert not missing, _report("exception classes the page does not name", where)


def test_every_unresolved_message_is_accounted_for(page_text: str) -> None:
    """A site the catalog cannot read is listed in UNRESOLVED, its class named, its phrases there."""
    unresolved = [site for site in catalog().sites if not site.resolved]
    new = [site for site in unresolved if unresolved_key(site) not in UNRESOLVED]
    assert not new, "messages the catalog cannot resolve: document them and list them in UNRESOLVED:\n" + (
        "\n".join(f"{site.where} {site.function}: {site.expression}" for site in new)
    )
    stale = set(UNRESOLVED) - {unresolved_key(site) for site in unresolved}
    assert not stale, f"UNRESOLVED lists sites that are gone or now resolved: {sorted(stale)}"
    classes = {site.exception for site in unresolved if site.exception}
    assert not undocumented_classes(classes, page_text)
    page = quotes(page_text)
    for _, phrases in UNRESOLVED.values():
        for key in phrases:
            assert normalise(EXTRA[key][1]).strip() in page, f"EXTRA {key!r} is not on the page"


@pytest.mark.parametrize("key", sorted(EXTRA))
def test_extra_texts_have_an_entry(key: str, page_text: str) -> None:
    source, phrase = EXTRA[key]
    assert phrase in (ROOT / source).read_text(encoding="utf-8"), f"{source} no longer says {phrase!r}"
    assert normalise(phrase).strip() in quotes(page_text), f"the page does not quote {phrase!r}"


def test_the_page_links_only_to_the_docs(page_text: str) -> None:
    """Links to other pages are relative links mkdocs checks (test_no_outside_references.py checks
    that none leaves the repository)."""
    for target in re.findall(r"\]\(([^)]+)\)", page_text):
        assert not target.startswith("/"), target


# --- the rule can fail -----------------------------------------------------------------------


def test_the_catalog_finds_each_kind_of_message() -> None:
    """The catalog sees the sites the page is held to (a reader that found nothing would pass)."""
    sites = catalog().sites
    by_source = {site.source for site in sites}
    assert {"exception", "log", "warnings.warn", "line", "page warning", "stderr"} <= by_source
    texts = {shown(template) for site in sites for template in site.templates}
    expected = [
        # an f-string raised directly
        "queue=<...> does not exist in the cluster: create the Volcano queue or pass an existing one "
        "(kubectl get queues.scheduling.volcano.sh)",
        # through validation.error(), a function passing its argument on to GangSpecError
        "tasks is empty: give at least one task, e.g. [{'name': 'worker'}]",
        # %-style logging with a constant argument put into the text
        "<...> <...>/<...> of an earlier try was deleted (that try was cleared or killed): submitting a "
        "new job",
        # a module constant logged from another module
        "runtime <...> has no podGroupPolicy: TrainJob <...>/<...> is NOT gang-scheduled.",
    ]
    for text in expected:
        assert any(found.startswith(text) for found in texts), text
    assert len(sites) > 150
    assert {"GangSpecError", "GangAdmissionTimeout", "PageError"} <= set(catalog().provider_exceptions)


def test_a_page_without_entries_fails() -> None:
    """The stub the page started as documents nothing: every message is missing."""
    sites = catalog().sites
    missing = missing_messages(sites, "# troubleshooting\n")
    assert len(missing) == sum(len(site.checkable) for site in sites)
    assert undocumented_classes(catalog().provider_exceptions, "# troubleshooting\n")


def test_the_rule_reads_placeholders_and_markdown() -> None:
    template: Template = (
        "queue=",
        None,
        " is ",
        None,
        ": Volcano admits nothing into a queue that is not Open",
    )
    assert not documented(
        template, quotes("`queue='<queue>' is Closed: Volcano admits nothing into a queue`")
    )[0]
    assert documented(template, quotes("| `Volcano admits nothing\ninto a queue that is not Open` |"))[0]
    assert not documented(template, quotes("Volcano admits nothing into a queue that is not Open."))[0]
    assert documented(
        template, quotes("```text\nVolcano admits nothing into a queue that is not Open\n```\n")
    )[0]
    short: Template = ("could not delete ", None, ": ", None)
    assert documented(short, quotes("`could not delete <kind> <ns>/<name>: <error>`"))[0]
    assert not documented(short, quotes("we `could not delete` `it: <error>`"))[0]

"""Properties of the selector parser (pure logic): printing round-trips, matching follows the spec."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from gang_sim.apiserver.selectors import (
    FieldSelector,
    LabelSelector,
    Requirement,
    field_value,
    parse_field_selector,
    parse_label_selector,
)

names = st.from_regex(r"[a-z]([a-z0-9._-]{0,8}[a-z0-9])?", fullmatch=True)
dns_labels = st.from_regex(r"[a-z]([a-z0-9-]{0,8}[a-z0-9])?", fullmatch=True)
keys = st.one_of(names, st.builds(lambda p, n: f"{p}.io/{n}", dns_labels, names))
values = st.one_of(st.just(""), names)


@st.composite
def requirements(draw: st.DrawFn) -> Requirement:
    key = draw(keys)
    op = draw(st.sampled_from(["=", "!=", "in", "notin", "exists", "!", ">", "<"]))
    if op in ("=", "!="):
        return Requirement(key, op, (draw(values),))
    if op in ("in", "notin"):
        return Requirement(key, op, tuple(sorted(set(draw(st.lists(names, min_size=1, max_size=3))))))
    if op in (">", "<"):
        return Requirement(key, op, (str(draw(st.integers(-50, 50))),))
    return Requirement(key, op)


selectors = st.builds(lambda rs: LabelSelector(tuple(rs)), st.lists(requirements(), max_size=4))
label_sets = st.dictionaries(keys, st.one_of(values, st.integers(-60, 60).map(str)), max_size=5)


def expected_match(req: Requirement, labels: dict[str, str]) -> bool:
    """The meaning of each operator, written independently of the implementation."""
    if req.op == "exists":
        return req.key in labels
    if req.op == "!":
        return req.key not in labels
    if req.key not in labels:
        return req.op in ("!=", "notin")
    value = labels[req.key]
    if req.op == "=":
        return value == req.values[0]
    if req.op == "!=":
        return value != req.values[0]
    if req.op == "in":
        return value in req.values
    if req.op == "notin":
        return value not in req.values
    if not value.lstrip("-").isdigit():
        return False
    return int(value) > int(req.values[0]) if req.op == ">" else int(value) < int(req.values[0])


@settings(max_examples=300, deadline=None)
@given(selectors)
def test_printed_selector_parses_back_to_itself(selector: LabelSelector) -> None:
    assert parse_label_selector(str(selector)) == selector


@settings(max_examples=300, deadline=None)
@given(selectors, label_sets)
def test_matching_is_the_conjunction_of_requirement_meanings(
    selector: LabelSelector, labels: dict[str, str]
) -> None:
    assert selector.matches(labels) == all(expected_match(r, labels) for r in selector.requirements)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["metadata.name", "spec.nodeName"]),
            st.sampled_from(["=", "!="]),
            st.text(alphabet="ab,=!\\ .-", max_size=6),
        ),
        max_size=3,
    )
)
def test_field_selector_escapes_round_trip(terms: list[tuple[str, str, str]]) -> None:
    def escape(text: str) -> str:
        return "".join("\\" + ch if ch in "\\,=!" else ch for ch in text)

    text = ",".join(f"{field}{op}{escape(value)}" for field, op, value in terms)
    parsed = parse_field_selector(text)
    assert [(r.field, r.op, r.value) for r in parsed.requirements] == terms or (
        not terms and parsed == FieldSelector()
    )


def test_field_value_reads_dotted_paths_and_booleans() -> None:
    obj = {"spec": {"nodeName": "n1", "unschedulable": True}, "metadata": {"name": "x"}}
    assert (field_value(obj, "spec.nodeName"), field_value(obj, "spec.unschedulable")) == ("n1", "true")
    assert field_value(obj, "status.phase") == ""

"""Checking an answer of the page's API against its schema (`schemas`), cheaply.

FastAPI's ``response_model`` check builds a model instance per object of the answer, then
serialises the instances again: for a page of 1,000 jobs that added about 8.5 ms to a 32 ms
request (2 cores, ``benchmarks/bench_history_page.py``'s data). `Checked` makes the same check
(every key declared, every required key there, every value of its declared type) against a
*twin* of the model, a ``TypedDict`` that pydantic validates into plain dicts, and serialises
those: about 4 ms. The models stay the contract and the OpenAPI document; `twin` derives the
twins from them, so the two cannot drift, and refuses a model it could not mirror exactly
(validators, constraints, aliases, a default other than None).
"""

from __future__ import annotations

import dataclasses
import types
from typing import Any, NotRequired, Union, get_args, get_origin

from fastapi.responses import Response
from pydantic import BaseModel, ConfigDict, TypeAdapter, ValidationError
from pydantic_core import to_json
from typing_extensions import TypedDict  # pydantic needs this one before Python 3.12

from airflow_gang.plugins.errors import off_schema

_twins: dict[type[BaseModel], Any] = {}


def twin(annotation: Any) -> Any:
    """``annotation`` with every model in it replaced by its ``TypedDict`` twin: the same keys and
    types, optional keys ``NotRequired`` (absent, as the answers leave them), extra keys forbidden."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return _model_twin(annotation)
    arguments = get_args(annotation)
    if not arguments:
        return annotation
    twins = tuple(twin(argument) for argument in arguments)
    origin = get_origin(annotation)
    if origin in (Union, types.UnionType):
        return Union[twins]  # noqa: UP007 (a runtime-built union)
    return origin[twins]


def _model_twin(model: type[BaseModel]) -> Any:
    if model in _twins:
        return _twins[model]
    decorators = model.__pydantic_decorators__  # a dataclass of every kind of decorator
    if any(getattr(decorators, kind.name) for kind in dataclasses.fields(decorators)):
        raise TypeError(f"{model.__name__} has validators or serialisers, which a twin cannot mirror")
    keys: dict[str, Any] = {}
    for name, field in model.model_fields.items():
        if field.metadata or field.alias not in (None, name):
            raise TypeError(
                f"{model.__name__}.{name} has constraints or an alias, which a twin cannot mirror"
            )
        if field.is_required():
            keys[name] = twin(field.annotation)
        elif field.default is None:
            keys[name] = NotRequired[twin(field.annotation)]
        else:
            raise TypeError(f"{model.__name__}.{name} defaults to {field.default!r}: only None is mirrored")
    shape = TypedDict(f"{model.__name__}Twin", keys)  # type: ignore[misc]  # a name made at run time
    shape.__pydantic_config__ = ConfigDict(extra=model.model_config.get("extra", "ignore"))  # type: ignore[attr-defined]
    _twins[model] = shape
    return shape


class Checked:
    """Answers of one route, checked against ``model`` (its ``response_model``) and serialised."""

    def __init__(self, model: type[BaseModel]) -> None:
        self.adapter: TypeAdapter[Any] = TypeAdapter(twin(model))  # built once per route

    def response(self, answer: dict[str, Any]) -> Response:
        """The answer as JSON, or a 500 (`errors.off_schema`) naming where it strays."""
        try:
            valid = self.adapter.validate_python(answer)
        except ValidationError as error:
            places = [{**e, "loc": ("response", *e["loc"])} for e in error.errors(include_url=False)]
            raise off_schema(places) from None
        return Response(to_json(valid), media_type="application/json")

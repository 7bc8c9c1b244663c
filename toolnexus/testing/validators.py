"""Request validators: the documented rules each provider enforces on a request body, and
its published request schema.

    validate_request(body, "anthropic")  -> []  (or the problems, one readable string each)

The fake provider runs them on every request and answers 400 in the provider's own shape.
Each dialect's rules are in its own kit module (testing/fake_<name>.py: `rules` of its
record in `testing.registry`), re-exported here: `validate_openai_request`,
`validate_anthropic_request`, `validate_responses_request`.

On top of those rules, `validate_request` checks the body against the provider's
published request schema (`schema_problems`: each record's `spec`, a document in
`toolnexus/testing/specs/`: OpenAI's `CreateChatCompletionRequest` and `CreateResponse`,
Anthropic's `CreateMessageParams`, Gemini's `GenerateContentRequest` read closed by its
own reader, gemini_schema), with `jsonschema` (the `testing` extra). For an OpenAPI
document whose request schema is made with allOf, that includes no top-level field the
schema does not name (OpenAI's live API: "Unrecognized request argument supplied"). A
`oneOf` with a `discriminator` is read as an `anyOf` (see specs/README.md).
"""

from __future__ import annotations

import functools
import json
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from types import MappingProxyType
from typing import Any

from .fake_anthropic import validate_anthropic_request
from .fake_openai import validate_openai_request
from .fake_responses import validate_responses_request
from .registry import FAKES, fake_of

__all__ = [
    "validate_openai_request",
    "validate_anthropic_request",
    "validate_responses_request",
    "validate_request",
    "schema_problems",
    "schema_validator",
    "schema_checks_available",
    "schema_checks_on",
    "SchemaChecksSkipped",
]

# dialect -> (shipped document, the request body's schema)
SPECS = MappingProxyType({name: f.spec for name, f in FAKES.items()})
SPEC_URI = "urn:spec"


# ---- the published request schemas ---------------------------------------------


@functools.cache
def _document(dialect: str) -> dict:
    # The shipped cut-down OpenAPI document, as published (see specs/README.md).
    name = SPECS[dialect][0]
    text = resources.files(__package__).joinpath("specs", name).read_text(encoding="utf-8")
    return json.loads(text)


def _request_schema(dialect: str) -> dict:
    return _document(dialect)["components"]["schemas"][SPECS[dialect][1]]


@functools.cache
def _request_fields(dialect: str) -> frozenset | None:
    # The top-level fields the request schema names, through its allOf / $ref chain
    # (OpenAI's); None when the schema itself refuses others (Anthropic's).
    schemas = _document(dialect)["components"]["schemas"]
    if _request_schema(dialect).get("additionalProperties") is False:
        return None

    def fields(node: Mapping) -> set:
        if "$ref" in node:
            return fields(schemas[node["$ref"].rsplit("/", 1)[-1]])
        return set(node.get("properties", ())).union(*(fields(n) for n in node.get("allOf", ())))

    return frozenset(fields(_request_schema(dialect)))


def _as_json_schema(node: Any) -> Any:
    # OpenAPI 3.0's `nullable: true` beside a type is `"type": [..., "null"]` (and null in
    # an enum) to JSON Schema; internal references point into the registered document.
    # A `oneOf` with a `discriminator` is an `anyOf`: OpenAPI picks such a branch by its
    # discriminator, and read literally the Responses `InputItem` refuses every user
    # message whose content is a list (it is both an EasyInputMessage and an InputMessage).
    if isinstance(node, list):
        return [_as_json_schema(v) for v in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _as_json_schema(v) for k, v in node.items() if k != "nullable"}
    if "discriminator" in node and "oneOf" in node:
        out["anyOf"] = out.pop("oneOf")
    if node.get("nullable") is True and "type" in node:
        kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
        out["type"] = [*kinds, "null"]
        if "enum" in node and None not in node["enum"]:
            out["enum"] = [*node["enum"], None]
    if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
        out["$ref"] = SPEC_URI + node["$ref"]
    return out


def schema_checks_available() -> bool:
    """Return whether jsonschema and referencing (the `testing` extra) can be imported."""
    try:
        import jsonschema  # noqa: F401
        import referencing  # noqa: F401
    except ImportError:
        return False
    return True


class SchemaChecksSkipped(UserWarning):
    """The fake provider runs without the published-schema checks (jsonschema is missing)."""


NO_SCHEMA = (
    "the fake provider checks requests by its own rules only: checking them against the "
    "providers' published schemas needs jsonschema (pip install 'toolnexus[testing]')"
)
_warned: list[bool] = []  # said once per process: a tour starts many fake providers


def schema_checks_on(validate: bool, schema: bool | None) -> bool:
    """Return whether the fake provider checks requests against the published schemas.

    None (the default) means: when jsonschema is here, else warn once and go on without.
    """
    if not validate or schema is False:
        return False
    if schema is None and not schema_checks_available():
        if not _warned:
            _warned.append(True)
            warnings.warn(NO_SCHEMA, SchemaChecksSkipped, stacklevel=4)
        return False
    for dialect in SPECS:
        schema_validator(dialect)  # fail here, not in a request, without jsonschema
    return True


@functools.cache
def schema_validator(dialect: str) -> Any:
    """Return the (cached) jsonschema validator of `dialect`'s published request schema."""
    own = fake_of(dialect).spec_validator
    if own is not None:  # a document its dialect reads its own way
        return own()
    try:
        import referencing
        import referencing.jsonschema
        from jsonschema import Draft202012Validator
    except ImportError as e:  # pragma: no cover - the test extra installs it
        raise ImportError(
            "checking requests against the published schemas needs jsonschema: "
            "pip install 'toolnexus[testing]' (or fake_provider(..., schema=False))"
        ) from e
    document = referencing.jsonschema.DRAFT202012.create_resource(
        _as_json_schema(_document(dialect))
    )
    registry = referencing.Registry().with_resource(SPEC_URI, document)
    root = {"$ref": f"{SPEC_URI}#/components/schemas/{SPECS[dialect][1]}"}
    return Draft202012Validator(root, registry=registry)


def schema_problems(body: Mapping, dialect: str, limit: int = 3) -> list[str]:
    """Return the published request schema's problems with `body`, "path: why" each.

    >>> schema_problems({"model": "m", "messages": [{"role": "user", "content": "hi"}]},
    ...                 "anthropic")
    ["max_tokens: a required field is missing ('max_tokens' is a required property)"]
    """
    own = fake_of(dialect).spec_problems
    if own is not None:
        return own(body, limit)
    out: list[str] = []
    fields = _request_fields(dialect)
    if fields is not None:  # the live API refuses them; a schema made with allOf cannot say it
        out += [f"{k}: unrecognized request argument (not in the published request schema)"
                for k in body if k not in fields][:limit]  # fmt: skip
    for error in schema_validator(dialect).iter_errors(body):
        out.append(_explain(error))
        if len(out) >= limit:
            break
    return out


def _path(parts: Sequence) -> str:
    text = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in parts)
    return text.lstrip(".")


KINDS = ("role", "type")  # the fields that tell a union's branches apart


def _kind_error(e: Any) -> bool:
    # The branch is for another kind of value: the wrong JSON type, the wrong `role` /
    # `type` (a wrong or missing discriminating field, or one of a nullable union), or an
    # object that names none of the branch's fields (the Responses item reference has no
    # required `type`: `{"role": "robot"}` is not a reference without its `id`).
    if e.validator == "type" and not e.relative_path:
        return True
    if e.validator in ("anyOf", "oneOf") and not e.relative_path and e.context:
        return not _meant(e)  # a union nested in this branch: of no kind offered
    if e.validator in ("enum", "const", "anyOf", "oneOf"):
        return len(e.relative_path) == 1 and e.relative_path[0] in KINDS
    if e.validator == "required" and not e.relative_path and isinstance(e.instance, Mapping):
        named = set(e.schema.get("properties", ())) if isinstance(e.schema, Mapping) else set()
        strange = bool(named) and not named.intersection(e.instance)
        return strange or any(k in KINDS and k not in e.instance for k in e.validator_value)
    return False


def _explain(error: Any) -> str:
    """Say one schema error as "path: why", through oneOf/anyOf to the branch meant."""
    if error.validator in ("oneOf", "anyOf") and error.context:
        return _explain_union(error)
    at = list(error.absolute_path)
    if error.validator == "required":
        # One error per missing field; its message is the only place that names it.
        missing = [k for k in error.validator_value if k not in error.instance]
        name = next((k for k in missing if error.message.startswith(repr(k))), missing[0])
        return f"{_path([*at, name])}: a required field is missing ({error.message})"
    if error.validator in ("additionalProperties", "unevaluatedProperties"):
        known = set(error.schema.get("properties", ()))
        extra = [k for k in error.instance if k not in known] or ["?"]
        return f"{_path([*at, extra[0]])}: unknown field ({error.message})"
    return f"{_path(at) or '(body)'}: {_message(error)}"


def _message(error: Any) -> str:
    # jsonschema's messages start with the whole value: keep its head only.
    text, value = error.message, repr(error.instance)
    if text.startswith(value) and len(value) > 80:
        text = _short(error.instance) + text[len(value) :]
    return _short(text, 300)


def _meant(error: Any) -> list[list]:
    # The union's branches for the value's own kind (none: it is of no kind offered).
    branches: dict[int, list] = {}
    for e in error.context:
        branches.setdefault(e.relative_schema_path[0], []).append(e)
    return [errs for errs in branches.values() if not any(map(_kind_error, errs))]


def _kinds(errors: Sequence) -> list[tuple[Any, Any]]:
    # (field, value allowed) of each discriminating field a union's branches wanted,
    # through the unions nested in it (the Responses `InputItem` holds `Item`'s).
    out = []
    for e in errors:
        if e.validator in ("anyOf", "oneOf") and not e.relative_path:
            out += _kinds(e.context)
        elif e.validator in ("enum", "const", "anyOf", "oneOf") and e.relative_path:
            out += [(e.relative_path[0], v) for v in _allowed(e)]
    return out


def _explain_union(error: Any) -> str:
    meant = _meant(error)
    if meant:  # the branch(es) of the value's own kind: their nearest problem
        return _explain(_best([e for errs in meant for e in errs]))
    where = _path(error.absolute_path) or "(body)"
    kinds = _kinds(error.context)
    if kinds:
        name = kinds[0][0]
        allowed = sorted({json.dumps(v) for k, v in kinds if k == name})
        field = _path([*error.absolute_path, name])
        value = error.instance.get(name) if isinstance(error.instance, Mapping) else None
        return f"{field}: {_short(value)} is not one of {', '.join(allowed)}"
    types = sorted({json.dumps(e.validator_value) for e in error.context if e.validator == "type"})
    if types:
        return f"{where}: {_short(error.instance)} is not of type {', '.join(types)}"
    return f"{where}: {_message(error)}"


def _best(errors: list) -> Any:
    # The most relevant error itself (best_match would descend into a union's branches
    # by its own heuristic; _explain_union picks the branch meant instead).
    from jsonschema.exceptions import relevance

    return max(errors, key=relevance)


def _allowed(error: Any) -> list:
    # The values a discriminating field may take, through a nullable union's branches.
    if error.validator in ("anyOf", "oneOf"):
        nested = [e for e in error.context if e.validator in ("enum", "const")]
        return [v for e in nested for v in _allowed(e)]
    return list(error.validator_value) if error.validator == "enum" else [error.validator_value]


def _short(value: Any, size: int = 80) -> str:
    text = value if isinstance(value, str) and size > 80 else repr(value)
    return text if len(text) <= size else text[: size - 3] + "..."


# Each dialect's rules, what no schema says: the fake provider checks each request by its row.
VALIDATORS = MappingProxyType({name: f.rules for name, f in FAKES.items()})
RULES = VALIDATORS


def validate_request(body: Mapping, dialect: str, *, schema: bool = True) -> list[str]:
    """Return the problems of a request body in `dialect` (a row of VALIDATORS).

    The published request schema's problems come first, for the dialects whose schema is
    shipped (`schema=False`: only ours).
    """
    if dialect not in VALIDATORS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {sorted(VALIDATORS)}")
    if not isinstance(body, Mapping):
        return [f"(body): a request body is a JSON object, not {type(body).__name__}"]
    ours = VALIDATORS[dialect](body)
    return [*(schema_problems(body, dialect) if schema else []), *ours]

"""Request validators: the documented rules each provider enforces on a request body.

    validate_anthropic_request(body)  -> []  (or the problems, one readable string each)
    validate_openai_request(body)     -> []

The fake provider runs them on every request and answers 400 in the provider's own shape.

Anthropic (/v1/messages): the first message is `user`; roles are only `user` and
`assistant`; every `tool_use` is answered by `tool_result` blocks in the next message,
a user one; tool ids match `^[a-zA-Z0-9_-]+$`; no empty text block, no empty content;
`system`, when present, is not empty.
OpenAI (/chat/completions): every `tool_calls` entry is answered by a `tool` message
before the next other message; tool call ids are at most 40 characters; `arguments`
is a string; no assistant message without content or tool calls; a function tool's
name matches `^[a-zA-Z0-9_-]{1,64}$` (documented, not in the schema).

On top of those rules, `validate_request` checks the body against the provider's
published request schema (`schema_problems`: OpenAI's `CreateChatCompletionRequest` and
`CreateResponse`, Anthropic's `CreateMessageParams`, Gemini's `GenerateContentRequest` read
closed (gemini_schema; its rules: fake_gemini), in `toolnexus/testing/specs/`), with
`jsonschema` (the `testing` extra). For OpenAI's two that includes no top-level field the
schema does not name (the live API: "Unrecognized request argument supplied"). A `oneOf`
with a `discriminator` is read as an `anyOf` (see specs/README.md).
"""

from __future__ import annotations

import functools
import json
import re
import warnings
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from . import gemini_schema as _gemini
from .fake_gemini import validate_gemini_request

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

ANTHROPIC_ID = re.compile(r"[a-zA-Z0-9_-]+")
OPENAI_ID_MAX = 40
OPENAI_TOOL_NAME = re.compile(r"[a-zA-Z0-9_-]{1,64}")
# dialect -> (shipped document, the request body's schema)
SPECS = {
    "openai": ("openai-chat.json", "CreateChatCompletionRequest"),
    "anthropic": ("anthropic-messages.json", "CreateMessageParams"),
    "responses": ("openai-responses.json", "CreateResponse"),
    "gemini": ("gemini-generatecontent.json", "GenerateContentRequest"),  # gemini_schema
}
SPEC_URI = "urn:spec"


def _list(value: Any) -> list:
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        return list(value)
    return []


def _is_list(value: Any) -> bool:
    return isinstance(value, Sequence) and not isinstance(value, (str, bytes))


def _empty_text(blocks: list) -> bool:
    return any(
        isinstance(b, Mapping) and b.get("type") == "text" and not b.get("text") for b in blocks
    )


def _anthropic_message(i: int, m: Any) -> list[str]:
    if not isinstance(m, Mapping):
        return [f"messages[{i}]: not an object"]
    problems = []
    role, content = m.get("role"), m.get("content")
    if role not in ("user", "assistant"):
        problems.append(f"messages[{i}].role: {role!r} is not 'user' or 'assistant'")
    if isinstance(content, str):
        if not content:
            problems.append(f"messages[{i}].content: empty")
    elif not _is_list(content) or not content:
        problems.append(f"messages[{i}].content: must be a non-empty string or list of blocks")
    else:
        blocks = _list(content)
        if _empty_text(blocks):
            problems.append(f"messages[{i}].content: text content blocks must be non-empty")
        for b in blocks:
            if not isinstance(b, Mapping):
                problems.append(f"messages[{i}].content: a block is not an object")
            elif b.get("type") == "tool_use" and not ANTHROPIC_ID.fullmatch(str(b.get("id"))):
                problems.append(f"messages[{i}]: tool_use id {b.get('id')!r} does not match"
                                " ^[a-zA-Z0-9_-]+$")  # fmt: skip
            elif b.get("type") == "tool_result":
                if role != "user":
                    problems.append(f"messages[{i}]: tool_result in a {role!r} message")
                if not ANTHROPIC_ID.fullmatch(str(b.get("tool_use_id"))):
                    problems.append(f"messages[{i}]: tool_use_id {b.get('tool_use_id')!r}"
                                    " does not match ^[a-zA-Z0-9_-]+$")  # fmt: skip
                if _is_list(b.get("content")) and _empty_text(_list(b.get("content"))):
                    problems.append(f"messages[{i}]: empty text block in a tool_result")
    return problems


def _blocks_of(m: Any, kind: str, key: str) -> list:
    if not isinstance(m, Mapping):
        return []
    return [
        b.get(key)
        for b in _list(m.get("content"))
        if isinstance(b, Mapping) and b.get("type") == kind
    ]


def validate_anthropic_request(body: Mapping) -> list[str]:
    """Return the problems of a messages request body (empty when valid).

    >>> validate_anthropic_request({"messages": [{"role": "user", "content": "hi"}]})
    []
    >>> validate_anthropic_request({"messages": [{"role": "system", "content": "s"}]})[-1]
    "messages[0].role: 'system' is not 'user' or 'assistant'"
    """
    problems = []
    if "system" in body and not _system_ok(body["system"]):
        problems.append("system: must be non-empty when present")
    messages = _list(body.get("messages"))
    if not messages:
        return [*problems, "messages: must be a non-empty list"]
    if not isinstance(messages[0], Mapping) or messages[0].get("role") != "user":
        problems.append("messages[0]: the first message must be 'user'")
    for i, m in enumerate(messages):
        problems += _anthropic_message(i, m)
        uses = _blocks_of(m, "tool_use", "id")
        if not uses:
            continue
        following = messages[i + 1] if i + 1 < len(messages) else None
        answered = set(_blocks_of(following, "tool_result", "tool_use_id"))
        if following is None or following.get("role") != "user":
            answered = set()
        missing = [u for u in uses if u not in answered]
        if missing:
            problems.append(f"messages[{i}]: tool_use ids {missing!r} have no tool_result"
                            " blocks in the next (user) message")  # fmt: skip
    for i, m in enumerate(messages):
        results = _blocks_of(m, "tool_result", "tool_use_id")
        before = set(_blocks_of(messages[i - 1], "tool_use", "id")) if i else set()
        orphans = [r for r in results if r not in before]
        if orphans:
            problems.append(f"messages[{i}]: tool_result for {orphans!r} without a tool_use"
                            " in the previous message")  # fmt: skip
    return problems


def _system_ok(system: Any) -> bool:
    if isinstance(system, str):
        return bool(system)
    blocks = _list(system)
    return bool(blocks) and not _empty_text(blocks)


def _openai_calls(i: int, m: Mapping) -> tuple[list[str], list]:
    problems, ids = [], []
    for c in _list(m.get("tool_calls")):
        if not isinstance(c, Mapping):
            problems.append(f"messages[{i}].tool_calls: an entry is not an object")
            continue
        cid = c.get("id")
        if not isinstance(cid, str) or not cid or len(cid) > OPENAI_ID_MAX:
            problems.append(f"messages[{i}].tool_calls: id {cid!r} must be a string of at most"
                            f" {OPENAI_ID_MAX} characters")  # fmt: skip
        if not isinstance((c.get("function") or {}).get("arguments"), str):
            problems.append(f"messages[{i}].tool_calls[{cid!r}].function.arguments: not a string")
        ids.append(cid)
    return problems, ids


def validate_openai_request(body: Mapping) -> list[str]:
    """Return the problems of a chat completions request body (empty when valid).

    >>> validate_openai_request({"messages": [{"role": "user", "content": "hi"}]})
    []
    >>> validate_openai_request({"messages": [{"role": "assistant", "content": None}]})
    ['messages[0]: an assistant message needs content or tool_calls']
    """
    problems = _openai_top(body)
    messages = _list(body.get("messages"))
    if not messages:
        return [*problems, "messages: must be a non-empty list"]
    open_ids: list = []  # calls still waiting for their tool messages
    for i, m in enumerate(messages):
        if not isinstance(m, Mapping):
            problems.append(f"messages[{i}]: not an object")
            continue
        role = m.get("role")
        if role == "tool":
            cid = m.get("tool_call_id")
            if cid in open_ids:
                open_ids.remove(cid)
            else:
                problems.append(f"messages[{i}]: tool message for {cid!r} answers no open call")
            continue
        if open_ids:
            problems.append(f"messages[{i}]: tool_calls {open_ids!r} are not answered by tool"
                            " messages before it")  # fmt: skip
            open_ids = []
        if role == "assistant":
            found, ids = _openai_calls(i, m)
            problems += found
            if not m.get("content") and not ids:
                problems.append(f"messages[{i}]: an assistant message needs content or tool_calls")
            open_ids = ids
    if open_ids:
        problems.append(f"tool_calls {open_ids!r} of the last assistant message are not answered")
    return problems


def _openai_top(body: Mapping) -> list[str]:
    problems = []
    for i, t in enumerate(_list(body.get("tools"))):
        if isinstance(t, Mapping) and t.get("type", "function") == "function":
            name = (t.get("function") or {}).get("name")
            if not isinstance(name, str) or not OPENAI_TOOL_NAME.fullmatch(name):
                problems.append(f"tools[{i}].function.name: {name!r} does not match"
                                " ^[a-zA-Z0-9_-]{1,64}$")  # fmt: skip
    return problems


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
    if dialect == "gemini":  # JSON Schema $defs, read closed
        return _gemini.schema_validator()
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
    if dialect == "gemini":
        return _gemini.schema_problems(body, limit)
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


def _responses_item(i: int, item: Any, open_ids: list, called: set, store: Any) -> list[str]:
    """Return the problems of one input item; updates the open and seen call ids."""
    if not isinstance(item, Mapping):
        return [f"input[{i}]: not an object"]
    kind = item.get("type", "message")
    if kind == "function_call":
        cid = item.get("call_id")
        if cid in called:
            return [f"input[{i}]: duplicate function_call call_id {cid!r}"]
        called.add(cid)
        open_ids.append(cid)
        return []
    if kind == "function_call_output":
        cid = item.get("call_id")
        if cid not in open_ids:
            return [f"input[{i}]: function_call_output for {cid!r} answers no function_call"
                    " before it"]  # fmt: skip
        open_ids.remove(cid)
        return []
    nulls = [k for k, v in item.items() if v is None]
    if nulls:  # what a gateway adds (LiteLLM: "async": null, "namespace": null)
        return [f"input[{i}].{nulls[0]}: null is not a valid value for an input item's field"]
    if kind == "reasoning" and store is False and not item.get("encrypted_content"):
        return [f"input[{i}]: a reasoning item without encrypted_content cannot be replayed"
                " with store false (the server kept nothing)"]  # fmt: skip
    if kind == "message" and not item.get("content"):
        return [f"input[{i}]: a message needs content"]
    return []


def _led(items: list, i: int) -> bool:
    """Return whether the reasoning at `i` leads to an output of the model's own: a
    message of the assistant or a call, after any further reasoning."""
    for following in items[i + 1 :]:
        if not isinstance(following, Mapping):
            return False
        kind = following.get("type")
        if kind == "reasoning":
            continue
        if kind in (None, "message"):
            return following.get("role") == "assistant"
        return kind != "function_call_output"
    return False


# OpenAI's models that do not reason refuse to be asked for encrypted reasoning.
_NO_ENCRYPTED = re.compile(r"(chatgpt-4o|gpt-4o|gpt-4\.1)(-|$)")


def _include_problems(body: Mapping) -> list[str]:
    include = body.get("include")
    model = body.get("model")
    if not isinstance(model, str) or not isinstance(include, list):
        return []
    if "reasoning.encrypted_content" in include and _NO_ENCRYPTED.match(model):
        return ["include: Encrypted content is not supported with this model."]
    return []


def validate_responses_request(body: Mapping) -> list[str]:
    """Return the problems of a Responses request body (empty when valid): every
    function_call_output answers a function_call before it (each once), every
    function_call is answered, a reasoning item is followed by the item it led to, and
    with `store: false` it carries its encrypted_content; no message without content;
    no item id given twice; no null field on an item; no encrypted reasoning asked of a
    model that does not reason (gpt-4o, gpt-4.1).

    >>> validate_responses_request({"input": [{"type": "function_call_output",
    ...                                        "call_id": "c", "output": "4"}]})
    ["input[0]: function_call_output for 'c' answers no function_call before it"]
    """
    given = body.get("input")
    if isinstance(given, str):
        return [] if given else ["input: empty"]
    items = _list(given)
    if not items and body.get("previous_response_id") is None:
        return ["input: must be a non-empty list (or text)"]
    problems: list = _include_problems(body)
    open_ids: list = []
    called: set = set()
    store = body.get("store", True)
    seen: set = set()  # item ids: the API refuses one given twice
    for i, item in enumerate(items):
        problems += _responses_item(i, item, open_ids, called, store)
        iid = item.get("id") if isinstance(item, Mapping) else None
        if isinstance(iid, str):
            if iid in seen:
                problems.append(f"input[{i}]: duplicate item id {iid!r}")
            seen.add(iid)
        if isinstance(item, Mapping) and item.get("type") == "reasoning" and not _led(items, i):
            problems.append(f"input[{i}]: a reasoning item was provided without its"
                            " following item")  # fmt: skip
    if open_ids:
        problems.append(f"function_calls {open_ids!r} have no function_call_output")
    return problems


# Each dialect's rules, what no schema says: the fake provider checks each request by its row.
VALIDATORS = {
    "openai": validate_openai_request,
    "anthropic": validate_anthropic_request,
    "responses": validate_responses_request,
    "gemini": validate_gemini_request,
}
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
    checked = schema and dialect in SPECS
    return [*(schema_problems(body, dialect) if checked else []), *ours]

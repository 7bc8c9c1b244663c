"""The providers' published request schemas (../shared/specs), as a check for tests.

`spec_problems(body, dialect)` returns the schema errors of a request body (none: the
published schema accepts it). OpenAPI 3.0's `nullable: true` next to a `type` is read as
`"type": [..., "null"]`, as the specs' README says, and a `oneOf` with a `discriminator`
as an `anyOf` (OpenAPI chooses such a branch by its discriminator; the Responses
`InputItem` has two branches for one shape).
"""

from __future__ import annotations

import json
import os
from functools import cache
from typing import Any

SPECS = os.environ.get(
    "TOOLNEXUS_SPECS", os.path.join(os.path.dirname(__file__), "..", "..", "shared", "specs")
)
_FILES = {"openai": ("openai-chat.json", "CreateChatCompletionRequest"),
          "anthropic": ("anthropic-messages.json", "CreateMessageParams"),
          "responses": ("openai-openapi.yaml", "CreateResponse")}  # fmt: skip


def _rewrite(node: Any) -> Any:
    if isinstance(node, dict):
        out = {k: _rewrite(v) for k, v in node.items() if k != "nullable"}
        if node.get("nullable") is True and "type" not in node and "$ref" not in node:
            return {"anyOf": [out, {"type": "null"}]}  # the README's three places
        if node.get("nullable") is True and "type" in node:
            kinds = node["type"] if isinstance(node["type"], list) else [node["type"]]
            out["type"] = [*kinds, "null"]
            if "enum" in out:
                out["enum"] = [*out["enum"], None]
        if "discriminator" in out and "oneOf" in out:
            # OpenAPI picks a `oneOf` branch by its discriminator; read literally, the
            # Responses `InputItem` refuses every user message with a content list (it
            # is both an EasyInputMessage and an InputMessage): any branch will do.
            out["anyOf"] = out.pop("oneOf")
        if isinstance(out.get("$ref"), str) and out["$ref"].startswith("#/"):
            out["$ref"] = "urn:spec" + out["$ref"]
        return out
    if isinstance(node, list):
        return [_rewrite(v) for v in node]
    return node


def available() -> bool:
    """Whether the specs and jsonschema are here."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return False
    return all(os.path.exists(os.path.join(SPECS, f)) for f, _ in _FILES.values())


def _load(f: Any, name: str) -> Any:
    if not name.endswith(".yaml"):
        return json.load(f)
    import yaml  # the full OpenAI document (CreateResponse has no cut-down file)

    return yaml.load(f, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))


@cache
def _validator(dialect: str) -> Any:
    from jsonschema import Draft202012Validator
    from referencing import Registry, Resource
    from referencing.jsonschema import DRAFT202012

    name, root = _FILES[dialect]
    with open(os.path.join(SPECS, name), encoding="utf-8") as f:
        doc = _rewrite(_load(f, name))
    resource = Resource.from_contents(doc, default_specification=DRAFT202012)
    registry = Registry().with_resource("urn:spec", resource)
    schema = {"$ref": f"urn:spec#/components/schemas/{root}"}
    return Draft202012Validator(schema, registry=registry)


def spec_problems(body: Any, dialect: str) -> list[str]:
    """Return the published schema's errors for a request body (empty: valid)."""
    errors = _validator(dialect).iter_errors(body)
    return [f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}" for e in errors]

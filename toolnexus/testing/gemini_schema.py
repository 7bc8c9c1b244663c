"""Gemini's published request schema, read with every object closed (see specs/README.md).

The discovery document's schemas are open, but the live API refuses an unknown field
("Invalid JSON payload received. Unknown name ..."): each schema naming `properties`
is read here with `additionalProperties: false`. Free objects (a call's `args`, a
`response`, a `parametersJsonSchema`) stay open, as the API keeps them. Fields are read
under their JSON (camelCase) names: the API takes the proto (snake_case) names too.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from importlib import resources
from typing import Any

__all__ = ["schema_validator", "schema_problems", "DOCUMENT"]

DOCUMENT = "gemini-generatecontent.json"
_URI = "urn:gemini"


def _closed(node: Any) -> Any:
    if isinstance(node, list):
        return [_closed(v) for v in node]
    if not isinstance(node, Mapping):
        return node
    out = {k: _closed(v) for k, v in node.items()}
    if isinstance(node.get("properties"), Mapping) and "additionalProperties" not in node:
        out["additionalProperties"] = False
    if isinstance(node.get("$ref"), str) and node["$ref"].startswith("#"):
        out["$ref"] = _URI + node["$ref"]
    return out


def _camel(value: Any) -> Any:
    """Return a body with every field under its JSON name: the API takes the proto name too
    (`parameters_json_schema` for `parametersJsonSchema`), which the schema does not name."""
    if isinstance(value, list):
        return [_camel(v) for v in value]
    if not isinstance(value, Mapping):
        return value
    return {_camel_name(k): _camel(v) for k, v in value.items()}


def _camel_name(name: str) -> str:
    head, *rest = name.split("_")
    return head + "".join(w[:1].upper() + w[1:] for w in rest) if rest and head else name


@functools.cache
def schema_validator() -> Any:
    """Return the (cached) validator of GenerateContentRequest, every object closed."""
    import referencing
    import referencing.jsonschema
    from jsonschema import Draft202012Validator

    text = resources.files(__package__).joinpath("specs", DOCUMENT).read_text(encoding="utf-8")
    document = _closed(json.loads(text))
    resource = referencing.jsonschema.DRAFT202012.create_resource(document)
    registry = referencing.Registry().with_resource(_URI, resource)
    return Draft202012Validator(
        {"$ref": f"{_URI}#/$defs/GenerateContentRequest"}, registry=registry
    )


def schema_problems(body: Mapping, limit: int = 3) -> list[str]:
    """Return the schema's problems with a generateContent body, "path: why" each.

    >>> schema_problems({"contents": [], "model": "m"})
    ["(body): Additional properties are not allowed ('model' was unexpected)"]
    """
    out = []
    for error in schema_validator().iter_errors(_camel(body)):
        path = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in error.absolute_path)
        out.append(f"{path.lstrip('.') or '(body)'}: {error.message}")
        if len(out) >= limit:
            break
    return out

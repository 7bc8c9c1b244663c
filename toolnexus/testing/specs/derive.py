"""Cut the providers' full OpenAPI documents down to one request each (reproducibly).

    python -m toolnexus.testing.specs.derive ../shared/specs [OUT_DIR]

writes `openai-chat.json`, `anthropic-messages.json` and `openai-responses.json`
(OUT_DIR: this folder). A cut keeps one operation (its `post`, without `x-` extensions
and with only its 2xx responses), every schema it reaches through `$ref` (sorted by
name), and the document's security schemes; the server becomes the loopback one. A cut
made for its request only (the Responses one: the answer's schemas would double its
size, and nothing checks answers) keeps its 2xx responses' descriptions, not their
content. Where `nullable: true` stands without a `type` (three places in OpenAI's
document) the schema becomes `{"anyOf": [rest, {"type": "null"}]}`, as
../shared/specs/README.md says; a `nullable` next to a `type` is left as published (the
validator reads it at load time, as it reads a `oneOf` that has a `discriminator`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

__all__ = ["CUTS", "cut", "derive", "load_document", "write"]

OPENAI, ANTHROPIC = "openai-openapi.yaml", "anthropic-openapi.json"
# (shipped file, full document, path of the operation, whether its answers' schemas stay)
CUTS = (
    ("openai-chat.json", OPENAI, "/chat/completions", True),
    ("anthropic-messages.json", ANTHROPIC, "/v1/messages", True),
    ("openai-responses.json", OPENAI, "/responses", False),
)
VERBATIM = ("gemini-generatecontent.json",)  # JSON Schema $defs, read closed (gemini_schema)
LOOPBACK = [{"url": "http://127.0.0.1"}]
ANNOTATIONS = ("description", "default")  # stay beside the anyOf, as annotations do
PREFIX = "#/components/schemas/"


def load_document(path: Path) -> dict:
    """Return a full OpenAPI document (YAML or JSON) as plain data."""
    if path.suffix in (".yaml", ".yml"):
        import yaml  # only for regenerating: PyYAML is in the test extra

        loader = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
        return yaml.load(path.read_text(encoding="utf-8"), Loader=loader)
    return json.loads(path.read_text(encoding="utf-8"))


def _refs(node: Any) -> set[str]:
    if isinstance(node, Mapping):
        own = (
            {node["$ref"][len(PREFIX) :]} if str(node.get("$ref", "")).startswith(PREFIX) else set()
        )
        return own.union(*(_refs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_refs(v) for v in node))
    return set()


def _closure(schemas: Mapping, roots: set[str]) -> list[str]:
    seen, todo = set(), set(roots)
    while todo:
        name = todo.pop()
        seen.add(name)
        todo |= _refs(schemas[name]) - seen
    return sorted(seen)


def _untyped_nullable(node: Any) -> Any:
    # A nullable without a type means nothing to JSON Schema: say "or null" explicitly.
    if isinstance(node, list):
        return [_untyped_nullable(v) for v in node]
    if not isinstance(node, Mapping):
        return node
    node = {k: _untyped_nullable(v) for k, v in node.items()}
    if node.get("nullable") is not True or "type" in node:
        return node
    kept = {k: v for k, v in node.items() if k in ANNOTATIONS}
    rest = {k: v for k, v in node.items() if k not in ANNOTATIONS and k != "nullable"}
    return {**kept, "anyOf": [rest, {"type": "null"}]}


def _operation(op: Mapping, answers: bool) -> dict:
    out = {k: v for k, v in op.items() if not k.startswith("x-")}
    ok = {k: v for k, v in op["responses"].items() if str(k).startswith("2")}
    # OpenAPI wants each response's description; without its content no schema is reached.
    out["responses"] = (
        ok if answers else {k: {"description": v["description"]} for k, v in ok.items()}
    )
    return out


def cut(document: Mapping, path: str, answers: bool = True) -> dict:
    """Return `document` cut down to the `post` of `path` and the schemas it reaches
    (`answers=False`: the request's only)."""
    post = _operation(document["paths"][path]["post"], answers)
    paths = {path: {"post": _untyped_nullable(post)}}
    schemas = document["components"]["schemas"]
    names = _closure(schemas, _refs(paths))
    components: dict = {"schemas": {n: _untyped_nullable(schemas[n]) for n in names}}
    if "securitySchemes" in document["components"]:
        components["securitySchemes"] = document["components"]["securitySchemes"]
    out = {
        "openapi": document["openapi"],
        "info": {**document["info"], "version": document["info"].get("version", "unversioned")},
        "servers": LOOPBACK,
        "paths": paths,
        "components": components,
    }
    if "security" in document:
        out["security"] = document["security"]
    return out


def derive(source: Path) -> dict[str, str]:
    """Return {file name: JSON text} of every cut, from the full documents in `source`."""
    documents: dict[str, dict] = {}
    out = {}
    for name, full, path, answers in CUTS:
        if full not in documents:
            documents[full] = load_document(source / full)
        out[name] = json.dumps(cut(documents[full], path, answers), indent=1)
    for name in VERBATIM:  # already cut to its request and answer: shipped as published
        out[name] = (source / name).read_text(encoding="utf-8")
    return out


def write(source: Path, target: Path) -> list[Path]:
    """Write every cut from `source` into `target`; return the files written."""
    written = []
    for name, text in derive(source).items():
        (target / name).write_text(text, encoding="utf-8")
        written.append(target / name)
    return written


if __name__ == "__main__":
    here = Path(__file__).resolve().parent
    args = sys.argv[1:]
    if not args:
        sys.exit("usage: python -m toolnexus.testing.specs.derive SHARED_SPECS_DIR [OUT_DIR]")
    for p in write(Path(args[0]), Path(args[1]) if len(args) > 1 else here):
        print(p)

"""One scripted conversation per dialect, its request bodies printed as JSON: run by
tests/test_same_bytes.py in processes of different PYTHONHASHSEED.

    python tests/bytes_probe.py STORE_URL...    # file:DIR, sqlite:PATH, redis://, postgresql://

Per dialect: exchange 1 (a prompt of parts, a tool `f(zeta, alpha, mid, beta)` the model
calls with its arguments in that order, a text answer) and exchange 2 (structured output
of {"reasoning", "answer"}) on one client with an in-memory store: "warm", every request.
Then per store URL: exchange 1 by one client, exchange 2 by a NEW client (another
runtime, as another worker or a restart): the cold request of exchange 2.
"""

from __future__ import annotations

import json
import sys

from toolnexus import create_client, define_tool, run, toolkit
from toolnexus.backends.urls import open_backend
from toolnexus.core.wire import DIALECTS
from toolnexus.parts import image, text
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

ARGS = {"zeta": 1, "alpha": 2, "mid": 3, "beta": 4}
SCHEMA = {
    "type": "object",
    "properties": {"reasoning": {"type": "string"}, "answer": {"type": "string"}},
    "required": ["reasoning", "answer"],
    "additionalProperties": False,
}
# A 1x1 transparent PNG.
PNG = bytes.fromhex(
    "89504e470d0a1a0a0000000d4948445200000001000000010806000000"
    "1f15c4890000000d49444154789c6360000002000154a24f5d0000000049454e44ae426082"
)


@define_tool
def f(zeta: int, alpha: int, mid: int, beta: int) -> str:
    """Add four numbers."""
    return str(zeta + alpha + mid + beta)


SCRIPT = [
    tool_calls_reply({"id": "call_1", "name": "f", "arguments": ARGS}),
    text_reply("10"),
    text_reply('{"reasoning": "added them", "answer": "10"}'),
]


def _client(url: str, style: str, store: dict):
    return create_client(base_url=url, style=style, model="m", api_key="k", store=store)


def _exchange(client, number: int, cid: str) -> None:
    if number == 1:
        prompt = [text("add the numbers in this picture"), image(PNG, "image/png")]
        run(client, prompt, toolkit=toolkit(f), id=cid)
    else:
        run(client, "again, as JSON", toolkit=toolkit(f), output_schema=SCHEMA, id=cid)


def bodies(style: str, stores: list[str]) -> dict:
    """Return {"warm": [every request body], url: the cold body of exchange 2, ...}."""
    out: dict = {}
    with fake_provider(SCRIPT) as fp:
        c = _client(fp.url, style, in_memory_store())
        _exchange(c, 1, "probe")
        _exchange(c, 2, "probe")
        out["warm"] = [r["raw"].decode() for r in fp.requests]
    for url in stores:
        backend = open_backend(url)
        store, cid = backend["store"], f"bytes-probe-{style}"
        try:
            if store.get("delete") is not None:
                store["delete"](cid)
            with fake_provider(SCRIPT) as fp:
                _exchange(_client(fp.url, style, store), 1, cid)
                _exchange(_client(fp.url, style, store), 2, cid)
                out[url.split(":")[0]] = fp.requests[-1]["raw"].decode()
            store["delete"](cid)
        finally:
            backend["close"]()
    return out


if __name__ == "__main__":
    json.dump({style: bodies(style, sys.argv[1:]) for style in DIALECTS}, sys.stdout)

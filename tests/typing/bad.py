"""Wrong user code: tests/test_typing.py asserts mypy reports each marked line and no other.

Lines marked "E: code" must be errors now; "E-typed-options: code" ones once create_client
takes every option as a typed keyword parameter (checked from its signature).
"""

from __future__ import annotations

from toolnexus import (
    RunResult,
    Store,
    StreamEvent,
    ask,
    create_client,
    create_in_process_client,
    run,
)


def model(request: dict) -> dict:
    return {"content": "hi"}


client = create_in_process_client(model="m", generate=model)
run(client, 123)  # E: arg-type
ask(client, "hi", id=42)  # E: arg-type
run(client, "hi", conversation="c1")  # E: call-arg
store: Store = {"get": lambda id: None}  # E: typeddict-item
wrong: Store = {"get": lambda id: None, "save": print, "sav": print}  # E: typeddict-unknown-key


def tokens(r: RunResult) -> str:
    return r["usage"]["total"]  # E: typeddict-item


def delta(e: StreamEvent) -> str:
    return e["delta"]  # E: typeddict-item


create_client(base_url="http://x", model="m", max_turns="ten")  # E-typed-options: arg-type
create_client(base_url="http://x", model="m", retrys=3)  # E-typed-options: call-arg
result = run(client, "hi")
result["txet"]  # E: typeddict-item
tokens_text: str = result["usage"]["total_tokens"]  # E: assignment

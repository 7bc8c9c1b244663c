"""Stored parts and in-process answers are validated into clear errors (a ValueError that
says what is wrong), never a raw KeyError or TypeError from deep inside."""

from __future__ import annotations

import pytest

from toolnexus import ask, create_in_process_client
from toolnexus.store import in_memory_store, sqlite_store


@pytest.mark.parametrize(
    "junk",
    [
        ["not", "a", "map"],
        {"content": 42},
        {"tool_calls": "add"},
        {"tool_calls": [{"arguments": {}}]},
        {"tool_calls": [{"name": "add", "id": 7}]},
        {"tool_calls": [{"name": "add", "arguments": 3}]},
    ],
)
def test_junk_from_an_in_process_generate_is_a_clear_value_error(junk):
    client = create_in_process_client(model="m", generate=lambda request: junk)
    with pytest.raises(ValueError, match="generate"):
        ask(client, "hi")


MALFORMED = [
    {"type": "image", "mimeType": "image/png"},  # neither data nor url
    {"type": "file", "name": "a.pdf"},
    {"type": "text"},
    {"type": "image", "data": "aGk="},  # data without a mime type
]


@pytest.mark.parametrize("part", MALFORMED)
def test_a_malformed_part_is_a_clear_value_error_in_both_dialects(part):
    from toolnexus.core.wire.parts import to_anthropic, to_openai

    for encode in (to_openai, to_anthropic):
        with pytest.raises(ValueError, match="part"):
            encode(part)


@pytest.mark.parametrize("part", MALFORMED[:1] + MALFORMED[3:])
def test_a_malformed_stored_image_part_is_a_clear_value_error(tmp_path, part):
    """Failed on main with KeyError: 'data' on the next ask."""
    store = sqlite_store(tmp_path / "c.db")
    store["save"]("x", [{"role": "user", "content": [part]},
                        {"role": "assistant", "content": "ok"}])  # fmt: skip
    client = create_in_process_client(
        model="m", generate=lambda request: {"content": "fine"}, store=store
    )
    with pytest.raises(ValueError, match="part"):
        ask(client, "again", id="x")


def test_a_good_part_still_goes_through():
    store = in_memory_store()
    part = {"type": "image", "mimeType": "image/png", "data": "aGk="}
    seen = []
    client = create_in_process_client(
        model="m",
        generate=lambda request: seen.append(request) or {"content": "an image"},
        store=store,
    )
    assert ask(client, [{"type": "text", "text": "look"}, part], id="x")["text"] == "an image"

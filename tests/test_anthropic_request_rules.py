"""Messages requests in their published shape (core/wire/anthropic_request.py), rule by
rule: citations cut to a request's fields, prompt-cache breakpoints within the API's
four, a prompt of content parts. Pure, no I/O."""

from __future__ import annotations

from types import MappingProxyType

import pytest
from pyrsistent import pvector

from toolnexus.core.frozen import thaw
from toolnexus.core.wire import anthropic_request as Q
from toolnexus.core.wire import parts as P

MARK = {"type": "ephemeral"}

# Each citation type with the fields a request takes, plus one it does not.
CITATIONS = {
    "char_location": {
        "cited_text": "x",
        "document_index": 0,
        "document_title": "d",
        "start_char_index": 0,
        "end_char_index": 1,
    },
    "page_location": {
        "cited_text": "x",
        "document_index": 0,
        "document_title": "d",
        "start_page_number": 1,
        "end_page_number": 2,
    },
    "content_block_location": {
        "cited_text": "x",
        "document_index": 0,
        "document_title": "d",
        "start_block_index": 0,
        "end_block_index": 1,
    },
    "web_search_result_location": {
        "cited_text": "x",
        "encrypted_index": "e",
        "title": "t",
        "url": "https://x",
    },
    "search_result_location": {
        "cited_text": "x",
        "search_result_index": 0,
        "source": "s",
        "start_block_index": 0,
        "end_block_index": 1,
        "title": "t",
    },
}


def text(t, **more):
    return {"type": "text", "text": t, **more}


@pytest.mark.parametrize("kind", sorted(CITATIONS))
def test_a_citation_keeps_the_fields_its_request_schema_defines(kind):
    wanted = {"type": kind, **CITATIONS[kind]}
    assert Q.request_citation({**wanted, "file_id": "f", "extra": 1}) == wanted
    assert list(Q.request_citation({**wanted, "file_id": "f"})) == list(wanted)


@pytest.mark.parametrize(
    ("kind", "title"),
    [("char_location", "document_title"), ("web_search_result_location", "title")],
)
def test_a_missing_or_empty_title_is_null(kind, title):
    given = {"type": kind, **CITATIONS[kind]}
    del given[title]
    assert Q.request_citation(given)[title] is None
    assert Q.request_citation({**given, title: ""})[title] is None
    assert Q.request_citation({"type": kind}) == {"type": kind, title: None}


def test_a_citation_of_an_unknown_kind_goes_as_sent():
    odd = {"type": "new_location", "file_id": "f"}
    assert Q.request_citation(odd) is odd
    assert Q.request_citation("x") == "x"
    assert Q.request_citation({"file_id": "f"}) == {"file_id": "f"}


def test_a_text_block_is_the_same_when_its_citations_are_request_shaped():
    cite = {"type": "char_location", **CITATIONS["char_location"]}
    plain = text("a")
    assert Q.request_text(plain) is plain
    odd = text("a", citations="x")
    assert Q.request_text(odd) is odd
    good = text("a", citations=[cite])
    assert Q.request_text(good) is good
    assert Q.request_text(text("a", citations=(cite,))) == text("a", citations=(cite,))
    cut = Q.request_text(text("a", citations=pvector([{**cite, "file_id": "f"}])))
    assert cut == text("a", citations=[cite])


def test_the_mark_and_the_apis_limit():
    assert Q.EPHEMERAL == MARK and Q.MAX_BREAKPOINTS == 4


def test_cache_tools_marks_the_last_tool_once():
    assert Q.cache_tools(()) == () and Q.cache_tools(None) is None
    marked = ({"name": "a", "cache_control": MARK},)
    assert Q.cache_tools(marked) is marked
    tools = ({"name": "a"}, {"name": "b", "input_schema": {}})
    got = Q.cache_tools(tools)
    assert thaw(got) == [{"name": "a"}, {"name": "b", "input_schema": {}, "cache_control": MARK}]
    assert got[0] is tools[0] and type(got[1]) is MappingProxyType
    assert list(got[1]) == ["name", "input_schema", "cache_control"]


def test_marks_counts_cache_control_in_blocks_tools_and_system():
    marked = {"type": "text", "text": "a", "cache_control": MARK}
    assert Q._marks(None) == 0 and Q._marks("x") == 0
    assert Q._marks(marked) == 1
    assert Q._marks({"type": "text", "cache_control": None}) == 0
    assert Q._marks([marked, {"role": "user", "content": [marked, marked]}]) == 3
    assert Q._marks({"content": "x", "cache_control": MARK}) == 1
    assert Q._marks((marked, pvector([marked]))) == 2


def test_a_message_is_marked_on_its_last_block_that_can_hold_a_mark():
    m = {"role": "user", "content": "hi"}
    assert thaw(Q._marked_message(m)) == {
        "role": "user",
        "content": [{"type": "text", "text": "hi", "cache_control": MARK}],
    }
    assert Q._marked_message({"role": "user", "content": " "}) is None
    blocks = [
        text("a"),
        {"type": "thinking", "thinking": "t"},
        "x",
        {"type": "redacted_thinking", "data": "d"},
    ]
    got = thaw(Q._marked_message({"role": "assistant", "content": blocks}))
    assert got["content"] == [text("a", cache_control=MARK), *blocks[1:]]
    assert Q._marked_message({"role": "assistant", "content": blocks[1:]}) is None
    done = [text("a", cache_control=MARK), text("b")]
    assert thaw(Q._marked_message({"content": done}))["content"] == [
        done[0],
        text("b", cache_control=MARK),
    ]
    assert Q._marked_message({"content": [text("a"), text("b", cache_control=MARK)]}) is None
    assert Q._marked_message({"content": None}) is None


def test_cache_body_marks_the_last_message_and_the_system_prompt():
    msgs = [{"role": "user", "content": "q"}, {"role": "assistant", "content": "r"}]
    body = {"model": "m", "messages": msgs, "system": "s"}
    got = Q.cache_body(body, None)
    assert thaw(got) == {
        "model": "m",
        "messages": [msgs[0], {"role": "assistant", "content": [text("r", cache_control=MARK)]}],
        "system": [text("s", cache_control=MARK)],
    }
    assert body == {"model": "m", "messages": msgs, "system": "s"}
    assert got is not body
    assert thaw(Q.cache_body({"messages": [], "system": "s"}, "c")) == {
        "messages": [],
        "system": [text("s", cache_control=MARK)],
    }
    assert Q.cache_body({"messages": [], "system": ""}, None) == {"messages": [], "system": ""}
    bare = {"messages": [{"role": "user", "content": " "}]}
    assert Q.cache_body(bare, None) == bare


def test_cache_body_never_goes_past_four_marks():
    marked = {"name": "t", "cache_control": MARK}
    q = {"role": "user", "content": "q"}
    three = {
        "tools": [marked],
        "messages": [
            {
                "role": "user",
                "content": [text("a", cache_control=MARK), text("b", cache_control=MARK)],
            },
            q,
        ],
        "system": "s",
    }
    got = Q.cache_body(three, None)
    assert thaw(got["messages"][1]) == {"role": "user", "content": [text("q", cache_control=MARK)]}
    assert got["system"] == "s"
    system_marked = {**three, "system": [text("s", cache_control=MARK)]}
    assert Q.cache_body(system_marked, None)["messages"][1] is q
    tuple_system = {**three, "system": (text("s", cache_control=MARK),)}
    assert Q.cache_body(tuple_system, None)["messages"][1] is not q
    two = {**three, "tools": []}
    both = Q.cache_body(two, None)
    assert both["messages"][1] is not q and thaw(both["system"]) == [text("s", cache_control=MARK)]


def test_a_prompt_of_parts_is_checked_sized_and_drops_empty_text():
    got = Q.user_message_parts([text("hi"), text(" "), text("")])
    assert thaw(got) == {"role": "user", "content": [text("hi")]}
    audio = {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}
    with pytest.raises(P.UnsupportedPartError, match="^anthropic cannot carry the audio"):
        Q.user_message_parts([audio])
    assert thaw(Q.user_message_parts([audio], "text"))["content"] == [
        thaw(P.to_anthropic(audio, "text"))
    ]
    image = {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}
    with pytest.raises(ValueError, match="^image part of 5 bytes exceeds max_part_bytes=4$"):
        Q.user_message_parts([image], max_part_bytes=4)
    assert len(Q.user_message_parts([image], max_part_bytes=5)["content"]) == 1

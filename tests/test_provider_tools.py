"""Issue 34, item 6: provider tools beside ours, request_params the loop owns, and
body_transform as the last step before a body is encoded.

Every exchange goes over the loopback fake provider, which checks each request against
its dialect's published schema (and answers 400 to one the real API would refuse); the
provider's answers are the shapes Anthropic and OpenAI document for their server tools
(`server_tool_use` / `web_search_tool_result` blocks, `web_search_call` items).
"""

from __future__ import annotations

import json

import pytest
from dialect_kit import others
from hypothesis import given
from hypothesis import strategies as st
from published import available, spec_problems

from toolnexus import (
    ask,
    conversation_store,
    create_client,
    define_tool,
    provider_tool,
    provider_tools,
    register,
    run,
    stream,
    to_json,
    tool,
    tool_names,
    toolkit,
)
from toolnexus.core.wire import DIALECTS
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.fake_gemini import is_stream_path

needs_schemas = pytest.mark.skipif(not available(), reason="jsonschema is not installed")


@define_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


# Written in an order a hash map would not keep: the provider must get it as written.
WEB_SEARCH = {
    "type": "web_search_20250305",
    "name": "web_search",
    "max_uses": 3,
    "allowed_domains": ["example.com"],
    "user_location": {"type": "approximate", "city": "Paris", "country": "FR"},
}
CODE_EXECUTION = {"type": "code_execution_20250522", "name": "code_execution"}
RESPONSES_SEARCH = {"type": "web_search", "search_context_size": "low"}
FILE_SEARCH = {"type": "file_search", "vector_store_ids": ["vs_1"], "max_num_results": 2}


def _client(fp, style, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", retries=0, **options)


def _final(r):
    return r[-1]["result"] if isinstance(r, list) else r


def _run(c, prompt, streamed, **kw):
    """Run (or stream, returning the done event's result) a prompt."""
    if not streamed:
        return run(c, prompt, **kw)
    events = list(stream(c, prompt, **kw))
    assert events[-1]["type"] == "done", events[-1]
    return events[-1]["result"]


def _sse(name, data) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


# ---- Anthropic server tools -----------------------------------------------------------

SERVER_USE = {
    "type": "server_tool_use",
    "id": "srvtoolu_01",
    "name": "web_search",
    "input": {"query": "weather in Paris"},
}
SEARCH_RESULT = {
    "type": "web_search_tool_result",
    "tool_use_id": "srvtoolu_01",
    "content": [
        {
            "type": "web_search_result",
            "url": "https://example.com/paris",
            "title": "Paris weather",
            "encrypted_content": "EqgfCioIARgBIiQ3YTAw",
            "page_age": "April 30, 2025",
        }
    ],
}
ANSWER_TEXT = {
    "type": "text",
    "text": "It is sunny in Paris; adding now.",
    "citations": [
        {
            "type": "web_search_result_location",
            "cited_text": "Sunny all day in Paris.",
            "url": "https://example.com/paris",
            "title": "Paris weather",
            "encrypted_index": "Eo8BCioIAhgBIiQyYjQ0",
        }
    ],
}
CALL_ADD = {"type": "tool_use", "id": "toolu_add1", "name": "add", "input": {"a": 2, "b": 3}}


def _anthropic_whole(blocks, stop):
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "model": "m",
        "content": blocks,
        "stop_reason": stop,
        "stop_sequence": None,
        "usage": {
            "input_tokens": 10,
            "output_tokens": 5,
            "server_tool_use": {"web_search_requests": 1},
        },
    }


def _anthropic_sse(blocks, stop) -> str:
    """The stream Anthropic sends for these blocks: a server_tool_use's input and a
    tool_use's input in input_json_delta fragments, a search result whole at its start."""
    start = {**_anthropic_whole([], None), "usage": {"input_tokens": 10, "output_tokens": 1}}
    out = [_sse("message_start", {"type": "message_start", "message": start})]
    for i, b in enumerate(blocks):
        head, deltas = dict(b), []
        if b["type"] in ("server_tool_use", "tool_use"):
            head["input"] = {}
            raw = json.dumps(b["input"])
            deltas = [
                {"type": "input_json_delta", "partial_json": raw[k : k + 7]}
                for k in range(0, len(raw), 7)
            ]
        elif b["type"] == "text":
            head = {"type": "text", "text": ""}
            deltas = [{"type": "citations_delta", "citation": c} for c in b.get("citations", ())]
            deltas += [
                {"type": "text_delta", "text": b["text"][k : k + 9]}
                for k in range(0, len(b["text"]), 9)
            ]
        out.append(
            _sse(
                "content_block_start",
                {"type": "content_block_start", "index": i, "content_block": head},
            )
        )
        out += [
            _sse("content_block_delta", {"type": "content_block_delta", "index": i, "delta": d})
            for d in deltas
        ]
        out.append(_sse("content_block_stop", {"type": "content_block_stop", "index": i}))
    out.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": {"output_tokens": 5},
            },
        )
    )
    out.append(_sse("message_stop", {"type": "message_stop"}))
    return "".join(out)


def _anthropic_reply(blocks, stop):
    """A script entry: the whole answer, or its stream when the request asks for one."""

    def reply(body, dialect):
        if body.get("stream"):
            return {"sse": _anthropic_sse(blocks, stop)}
        return {"response": _anthropic_whole(blocks, stop)}

    return reply


def _scripted(*replies):
    """A dynamic script playing `replies` in order (each a dict or a function of the body)."""
    queue = list(replies)

    def script(body, dialect):
        r = queue.pop(0)
        return r(body, dialect) if callable(r) else r

    return script


@needs_schemas
@pytest.mark.parametrize("streamed", [False, True])
def test_anthropic_server_tools_are_declared_kept_replayed_and_never_run(streamed):
    tk = toolkit(add, provider_tool(WEB_SEARCH), provider_tool(CODE_EXECUTION))
    first = _anthropic_reply([SERVER_USE, SEARCH_RESULT, ANSWER_TEXT, CALL_ADD], "tool_use")
    with fake_provider(
        _scripted(first, text_reply("5, and sunny."), text_reply("Still sunny."))
    ) as fp:
        c = _client(fp, "anthropic")
        r = _run(c, "weather in Paris, and 2+3?", streamed, toolkit=tk, conversation_id="w")
        again = _run(c, "and tomorrow?", streamed, toolkit=tk, conversation_id="w")
    assert r["status"] == "done" and r["text"] == "5, and sunny."
    # Only our own tool ran; the provider ran its search itself.
    assert [t["name"] for t in r["tool_calls"]] == ["add"] and r["tool_calls"][0]["output"] == "5"
    sent = [q["body"] for q in fp.requests]
    assert [len(b["tools"]) for b in sent] == [3, 3, 3]
    assert sent[0]["tools"][0]["name"] == "add"
    assert sent[0]["tools"][1:] == [WEB_SEARCH, CODE_EXECUTION]
    assert list(sent[0]["tools"][1]) == list(WEB_SEARCH)  # verbatim, in its own order
    # The turn's blocks are replayed as the provider sent them, in the next request and
    # in the next run's (from the store).
    for body in sent[1:]:
        (turn,) = [
            m
            for m in body["messages"]
            if m["role"] == "assistant"
            and any(b["type"] == "server_tool_use" for b in m["content"])
        ]
        assert turn["content"][:2] == [SERVER_USE, SEARCH_RESULT]
        assert turn["content"][2:] == [ANSWER_TEXT, CALL_ADD]
        assert spec_problems(body, "anthropic") == []
    stored = conversation_store(c)["get"]("w")
    kinds = [b["type"] for m in stored if not isinstance(m["content"], str) for b in m["content"]]
    assert kinds.count("server_tool_use") == 1 and kinds.count("web_search_tool_result") == 1
    assert again["text"] == "Still sunny."


@needs_schemas
def test_a_cache_breakpoint_on_a_provider_tool_keeps_its_order():
    with fake_provider([text_reply("x")]) as fp:
        c = _client(fp, "anthropic", prompt_cache=True)
        run(c, "hi", toolkit=toolkit(add, provider_tool(WEB_SEARCH)))
    last = fp.requests[0]["body"]["tools"][-1]
    assert list(last) == [*WEB_SEARCH, "cache_control"]
    assert spec_problems(fp.requests[0]["body"], "anthropic") == []


@needs_schemas
def test_a_paused_server_tool_turn_is_continued_with_its_blocks():
    # pause_turn: a long server tool turn the client sends back as it is to go on.
    paused = _anthropic_reply([SERVER_USE, SEARCH_RESULT], "pause_turn")
    with fake_provider(_scripted(paused, text_reply("Sunny."))) as fp:
        r = run(_client(fp, "anthropic"), "weather?", toolkit=toolkit(provider_tool(WEB_SEARCH)))
    assert r["status"] == "done" and r["text"] == "Sunny." and len(r["tool_calls"]) == 0
    last = fp.requests[1]["body"]["messages"][-1]
    assert last["role"] == "assistant" and last["content"] == [SERVER_USE, SEARCH_RESULT]


# ---- Responses built-in tools --------------------------------------------------------

SEARCH_CALL = {
    "type": "web_search_call",
    "id": "ws_1",
    "status": "completed",
    "action": {"type": "search", "query": "weather in Paris"},
}
CITED = {
    "type": "message",
    "id": "msg_1",
    "role": "assistant",
    "status": "completed",
    "content": [
        {
            "type": "output_text",
            "text": "Sunny; adding.",
            "logprobs": [],
            "annotations": [
                {
                    "type": "url_citation",
                    "start_index": 0,
                    "end_index": 5,
                    "url": "https://example.com/p",
                    "title": "Paris",
                }
            ],
        }
    ],
}
FUNCTION_CALL = {
    "type": "function_call",
    "id": "fc_1",
    "call_id": "call_add",
    "name": "add",
    "arguments": '{"a": 2, "b": 3}',
    "status": "completed",
}


def _responses_whole(output):
    return {
        "id": "resp_1",
        "object": "response",
        "created_at": 0,
        "status": "completed",
        "model": "m",
        "output": output,
        "usage": {"input_tokens": 10, "output_tokens": 5, "total_tokens": 15},
    }


def _responses_sse(output) -> str:
    whole = _responses_whole(output)
    out = [
        _sse(
            "response.created",
            {
                "type": "response.created",
                "sequence_number": 0,
                "response": {**whole, "status": "in_progress", "output": []},
            },
        )
    ]
    for i, item in enumerate(output):
        out.append(
            _sse(
                "response.output_item.added",
                {
                    "type": "response.output_item.added",
                    "output_index": i,
                    "sequence_number": 2 * i + 1,
                    "item": {**item, "status": "in_progress"},
                },
            )
        )
        for phase in ("in_progress", "searching", "completed"):  # a search's own events
            if item["type"] != "web_search_call":
                break
            kind = f"response.web_search_call.{phase}"
            out.append(_sse(kind, {"type": kind, "output_index": i, "item_id": item["id"]}))
        out.append(
            _sse(
                "response.output_item.done",
                {
                    "type": "response.output_item.done",
                    "output_index": i,
                    "sequence_number": 2 * i + 2,
                    "item": item,
                },
            )
        )
    out.append(
        _sse(
            "response.completed",
            {"type": "response.completed", "sequence_number": 99, "response": whole},
        )
    )
    return "".join(out)


def _responses_reply(output):
    def reply(body, dialect):
        if body.get("stream"):
            return {"sse": _responses_sse(output)}
        return {"response": _responses_whole(output)}

    return reply


@needs_schemas
@pytest.mark.parametrize("streamed", [False, True])
def test_responses_built_in_tools_are_declared_kept_replayed_and_never_run(streamed):
    tk = toolkit(add, provider_tool(RESPONSES_SEARCH), provider_tool(FILE_SEARCH))
    first = _responses_reply([SEARCH_CALL, CITED, FUNCTION_CALL])
    with fake_provider(_scripted(first, text_reply("5, and sunny."))) as fp:
        r = _run(_client(fp, "responses"), "weather, and 2+3?", streamed, toolkit=tk)
    assert r["status"] == "done" and r["text"] == "5, and sunny."
    assert [t["name"] for t in r["tool_calls"]] == ["add"]
    sent = [q["body"] for q in fp.requests]
    assert sent[0]["tools"][1:] == [RESPONSES_SEARCH, FILE_SEARCH]
    items = sent[1]["input"]
    assert SEARCH_CALL in items  # replayed as it came, before the answer and the call
    kinds = [i.get("type") for i in items]
    assert kinds.index("web_search_call") < kinds.index("function_call")
    assert spec_problems(sent[1], "responses") == []


# ---- one toolkit, several providers ----------------------------------------------------


@needs_schemas
@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_a_provider_tool_goes_only_to_the_style_it_names(style):
    tk = toolkit(
        add,
        provider_tool(WEB_SEARCH, style="anthropic"),
        provider_tool(RESPONSES_SEARCH, style="responses"),
    )
    with fake_provider([text_reply("hi")]) as fp:
        run(_client(fp, style), "hi", toolkit=tk)
    tools = fp.requests[0]["body"]["tools"]
    theirs = [t for t in tools if t.get("type") not in (None, "function")]
    assert (
        theirs
        == {"anthropic": [WEB_SEARCH], "responses": [RESPONSES_SEARCH], "openai": [], "gemini": []}[
            style
        ]
    )
    assert spec_problems(fp.requests[0]["body"], style) == []


def test_provider_tools_are_values_of_the_toolkit():
    tk = toolkit(add, provider_tool(WEB_SEARCH, style="anthropic"))
    assert tool_names(tk) == ("add",)  # ours: what the loop may run
    assert [json.loads(to_json(t["provider_tool"])) for t in provider_tools(tk)] == [WEB_SEARCH]
    assert provider_tools(tk, "responses") == ()
    from toolnexus import to_anthropic, to_openai

    assert to_anthropic(tk)[1] == WEB_SEARCH and list(to_anthropic(tk)[1]) == list(WEB_SEARCH)
    assert len(to_anthropic(tk)) == 2 and len(to_openai(tk)) == 1
    more = register(tk, provider_tool(RESPONSES_SEARCH, style="responses"))
    assert len(provider_tools(more)) == 2 and len(provider_tools(tk)) == 1  # tk unchanged
    assert [t["name"] for t in more["wire"]["anthropic"]] == ["add", "web_search"]
    # A tool of ours registered later (the message log's lookup tool is) goes before theirs.
    mul = tool("mul", "Multiply.", None, lambda args: "0")
    later = register(more, mul)
    assert [t["name"] for t in later["wire"]["anthropic"]] == ["add", "mul", "web_search"]
    assert [t.get("name") for t in later["wire"]["responses"]] == ["add", "mul", None]
    assert later["wire"]["openai"] == register(toolkit(add), mul)["wire"]["openai"]


@pytest.mark.parametrize(
    ("declaration", "style", "why"),
    [
        ({"name": "web_search"}, None, "string 'type'"),
        ("web_search", None, "string 'type'"),
        ({"type": "function", "name": "f"}, None, "define_tool"),
        ({"type": "web_search", "max": float("nan")}, None, "JSON"),
        ({"type": "web_search", "when": object()}, None, "JSON"),
        ({"type": "web_search"}, "cohere", "unknown style"),
        ({"type": "web_search", "name": 3}, None, "name"),
    ],
)
def test_a_bad_provider_tool_is_refused_clearly(declaration, style, why):
    with pytest.raises(ValueError, match=why):
        provider_tool(declaration, style=style)


def test_a_provider_tool_name_may_not_repeat_ours():
    clash = provider_tool({"type": "web_search_20250305", "name": "add"})
    with pytest.raises(ValueError, match="duplicate tool name 'add'"):
        toolkit(add, clash)
    with pytest.raises(ValueError, match="duplicate tool name 'web_search'"):
        toolkit(provider_tool(WEB_SEARCH), provider_tool(WEB_SEARCH))


@needs_schemas
@pytest.mark.parametrize("target", others("anthropic"))
def test_server_tool_blocks_are_dropped_when_another_dialect_continues(target):
    history = [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [SERVER_USE, SEARCH_RESULT, {"type": "text", "text": "Sunny."}],
        },
    ]
    with fake_provider([text_reply("ok")]) as fp:
        r = run(_client(fp, target), "and tomorrow?", history=history)  # policy "error"
    assert r["text"] == "ok"
    body = fp.requests[0]["body"]
    assert "srvtoolu_01" not in json.dumps(body) and "Sunny." in json.dumps(body)
    assert spec_problems(body, target) == []


# ---- request_params the loop owns ----------------------------------------------------


@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_request_params_the_loop_sets_are_refused_at_create_client(style):
    owned = {
        "openai": ["model", "messages", "tools", "stream"],
        "anthropic": ["model", "messages", "tools", "stream", "system"],
        "responses": ["model", "input", "tools", "stream", "instructions"],
        "gemini": ["model", "contents", "tools", "systemInstruction"],
    }[style]
    for key in owned:
        with pytest.raises(ValueError, match=f"request_params may not set \\['{key}'\\]"):
            create_client(
                base_url="http://127.0.0.1:9/v1",
                style=style,
                model="m",
                request_params={key: [], "temperature": 0.2},
            )
    with pytest.raises(ValueError, match="provider_tool"):
        create_client(
            base_url="http://127.0.0.1:9/v1",
            style=style,
            model="m",
            request_params={"tools": [{"type": "web_search"}]},
        )
    c = create_client(
        base_url="http://127.0.0.1:9/v1",
        style=style,
        model="m",
        request_params={"temperature": 0.2},
    )
    with pytest.raises(ValueError, match="model="):
        c.set(request_params={"model": "other"})


def test_request_params_that_is_not_a_mapping_is_refused():
    with pytest.raises(ValueError, match="request_params must be a mapping"):
        create_client(base_url="http://127.0.0.1:9/v1", model="m", request_params=[("a", 1)])


# ---- body_transform is the last step -------------------------------------------------


# A field each request schema takes ("metadata"; Gemini's request has "labels" instead).
FIELD = {"gemini": "labels"}


def _recording(seen, style="openai"):
    def transform(body):
        seen.append(body)
        out = {k: v for k, v in body.items() if k != "stream_options"}
        return {**out, FIELD.get(style, "metadata"): {"user_id": "u7"}}

    return transform


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_body_transform_sees_and_decides_the_body_as_sent(style, streamed):
    seen: list = []
    script = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3")]
    with fake_provider(script) as fp:
        c = _client(fp, style, body_transform=_recording(seen, style), prompt_cache=True)
        r = _run(c, "1+2?", streamed, toolkit=toolkit(add), conversation_id="t")
    assert r["text"] == "3" and len(seen) == 2 == len(fp.requests)
    for made, request in zip(seen, fp.requests, strict=True):
        body = request["body"]
        # The transform saw what the loop made, `stream` included (Gemini: in the URL) ...
        by_url = is_stream_path(request["path"])
        assert (made.get("stream", False) or by_url) is streamed
        # ... and what it returned is exactly what went out: nothing added after it.
        field = FIELD.get(style, "metadata")
        assert body[field] == {"user_id": "u7"} and "stream_options" not in body
        assert (body.get("stream", False) or by_url) is streamed
        assert set(body) == set(made) - {"stream_options"} | {field}


def test_body_transform_sees_the_server_state_request():
    seen: list = []
    with fake_provider([text_reply("a"), text_reply("b")]) as fp:
        c = _client(fp, "responses", server_state=True, body_transform=_recording(seen))
        ask(c, "one", id="s")
        ask(c, "two", id="s")
    assert seen[1]["previous_response_id"] and seen[1]["store"] is True
    assert fp.requests[1]["body"]["previous_response_id"] == seen[1]["previous_response_id"]
    assert [m.get("content") for m in fp.requests[1]["body"]["input"]] == ["two"]


def test_body_transform_runs_again_on_the_server_state_fallback():
    seen: list = []
    with fake_provider([text_reply("a"), text_reply("b")]) as fp:
        c = _client(fp, "responses", server_state=True, body_transform=_recording(seen))
        ask(c, "one", id="s")
        fp.kept.clear()  # the server forgot the conversation: the whole one goes again
        ask(c, "two", id="s")
    assert len(seen) == 3 == len(fp.requests)
    assert "previous_response_id" not in seen[2] and fp.requests[2]["body"]["metadata"]
    assert [m.get("content") for m in fp.requests[2]["body"]["input"]][-1] == "two"


# ---- properties of the pure parts ------------------------------------------------------

_keys = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=8)
_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_keys, inner, max_size=3),
    max_leaves=12,
)
_declarations = st.builds(
    lambda kind, rest: {"type": kind, **{k: v for k, v in rest.items() if k != "type"}},
    st.text(min_size=1, max_size=12).filter(lambda k: k not in ("function", "custom")),
    st.dictionaries(_keys, _json, max_size=4),
)


@given(_declarations)
def test_a_declaration_is_sent_byte_for_byte_as_written(declaration):
    sent = to_json(provider_tool(declaration)["provider_tool"])
    assert sent == json.dumps(declaration, ensure_ascii=False, separators=(",", ":")).encode()


_entries_plan = st.lists(
    st.one_of(
        st.integers(0, 5).map(lambda n: ("ours", n)),
        st.tuples(st.just("theirs"), st.sampled_from([None, *sorted(DIALECTS)])),
    ),
    max_size=8,
)


def _entry_name(entry) -> str:
    """Return the name of a tools entry in any dialect's shape (Gemini's: its declaration)."""
    if "functionDeclarations" in entry:
        return entry["functionDeclarations"][0]["name"]
    return entry.get("name") or entry["function"]["name"]


@given(_entries_plan, st.integers(1, 4))
def test_a_toolkit_sends_ours_then_theirs_however_it_was_registered(plan, chunk):
    items = []
    for n, (kind, what) in enumerate(plan):
        if kind == "ours":
            items.append(tool(f"t{n}", "A tool.", None, lambda args: "x"))
        else:
            items.append(provider_tool({"type": f"builtin_{n}", "name": f"p{n}"}, style=what))
    whole = toolkit(*items)
    stepwise = toolkit()
    for k in range(0, len(items), chunk):  # registered a few at a time: entries reused
        stepwise = register(stepwise, *items[k : k + chunk])
    for d in DIALECTS:
        names = [t["name"] for t in items if "execute" in t]
        names += [t["name"] for t in items if "execute" not in t and t["style"] in (None, d)]
        assert [_entry_name(e) for e in whole["wire"][d]] == names
        assert stepwise["wire"][d] == whole["wire"][d]
        assert stepwise["wire_json"][d] == whole["wire_json"][d]


@pytest.mark.parametrize("streamed", [False, True])
def test_body_transform_is_the_last_step_under_asyncio_too(streamed):
    import asyncio

    from toolnexus import arun, astream

    seen: list = []

    async def go(c):
        if not streamed:
            return await arun(c, "hi")
        return [e async for e in astream(c, "hi")][-1]["result"]

    with fake_provider([text_reply("x")]) as fp:
        c = _client(fp, "openai", body_transform=_recording(seen))
        assert asyncio.run(go(c))["text"] == "x"
    assert seen[0].get("stream", False) is streamed
    body = fp.requests[0]["body"]
    assert "stream_options" not in body and body["metadata"] == {"user_id": "u7"}

"""The Responses dialect (issue 27, item 2) over the loopback fake provider: the tool loop,
parallel calls, streaming (text and argument deltas), reasoning items replayed, refusals,
incomplete and failed answers, usage details, content parts; every request the runs send
valid under the published `CreateResponse` schema and the fake provider's own rules."""

from __future__ import annotations

import json

import pytest
from dialect_kit import STYLES
from published import available, spec_problems

from toolnexus import (
    ProviderError,
    create_client,
    define_tool,
    file,
    image,
    image_url,
    run,
    stream,
    text,
    toolkit,
)
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import responses as R
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.validators import validate_responses_request

PNG = b"\x89PNG\r\n\x1a\n" + b"\x00" * 16
PDF = b"%PDF-1.4 tiny"


@define_tool
def add(a: int, b: int) -> str:
    """Add two integers."""
    return str(a + b)


@define_tool
def chart() -> list:
    """Draw a chart."""
    return [text("the chart:"), image(PNG, "image/png", "c.png")]


TK = toolkit(add, chart)


def _client(fp, **options):
    return create_client(base_url=fp.url, style="responses", model="m", api_key="k", **options)


def _run(script, streamed: bool, prompt="go", **options):
    """Return (the result, the stream's events or None, the provider's requests)."""
    with fake_provider(script) as fp:
        c = _client(fp, **options)
        if streamed:
            events = list(stream(c, prompt, toolkit=TK, conversation_id="c"))
            result, events = events[-1]["result"], events
        else:
            result, events = run(c, prompt, toolkit=TK, conversation_id="c"), None
        requests = fp.requests
    for r in requests:
        assert r["path"] == "/v1/responses"
        assert validate_responses_request(r["body"]) == []
        if available():
            assert spec_problems(r["body"], "responses") == []
    return result, events, requests


PARALLEL = [
    tool_calls_reply(("add", {"a": 2, "b": 2}), ("add", {"a": 40, "b": 2}),
                     reasoning=[{"summary": "two sums", "encrypted_content": "ENC-1"}]),
    text_reply("4 and 42", reasoning=[{"summary": "done", "encrypted_content": "ENC-2"}]),
]  # fmt: skip


@pytest.mark.parametrize("streamed", [False, True])
def test_a_tool_loop_with_parallel_calls_answers_each_call_id(streamed):
    result, _, requests = _run(PARALLEL, streamed)
    assert result["text"] == "4 and 42" and result["status"] == "done"
    assert [c["output"] for c in result["tool_calls"]] == ["4", "42"]
    first, second = (r["body"] for r in requests)
    assert first["store"] is False and first["include"] == ["reasoning.encrypted_content"]
    assert first["tools"][0] == {"type": "function", "name": "add",
                                 "description": "Add two integers.",
                                 "parameters": add["input_schema"], "strict": False}  # fmt: skip
    kinds = [i.get("type", "message") for i in second["input"]]
    assert kinds == ["message", "reasoning", "function_call", "function_call",
                     "function_call_output", "function_call_output"]  # fmt: skip
    calls = [i for i in second["input"] if i.get("type") == "function_call"]
    outputs = [i for i in second["input"] if i.get("type") == "function_call_output"]
    assert (
        [o["call_id"] for o in outputs] == [c["call_id"] for c in calls] == ["call_1_0", "call_1_1"]
    )
    assert [o["output"] for o in outputs] == ["4", "42"]


@pytest.mark.parametrize("streamed", [False, True])
def test_reasoning_items_are_kept_and_replayed_with_their_encrypted_content(streamed):
    script = [*PARALLEL, text_reply("again")]
    with fake_provider(script) as fp:
        c = _client(fp, store=in_memory_store())
        for prompt in ("go", "more"):
            if streamed:
                list(stream(c, prompt, toolkit=TK, conversation_id="c"))
            else:
                run(c, prompt, toolkit=TK, conversation_id="c")
        last = fp.requests[-1]["body"]
    reasoning = [i for i in last["input"] if i.get("type") == "reasoning"]
    assert [r["encrypted_content"] for r in reasoning] == ["ENC-1", "ENC-2"]
    assert [r["summary"][0]["text"] for r in reasoning] == ["two sums", "done"]
    assert validate_responses_request(last) == []
    if available():
        assert spec_problems(last, "responses") == []


def test_a_stream_gives_text_and_thinking_deltas_and_assembles_argument_deltas():
    script = [
        tool_calls_reply(("add", {"a": 123456, "b": 654321}),
                         reasoning=[{"summary": "let me add these", "encrypted_content": "E"}]),
        text_reply("The sum is 777777, as computed."),
    ]  # fmt: skip
    with fake_provider(script) as fp:
        c = _client(fp)
        events = list(stream(c, "go", toolkit=TK))
        raw = fp.requests  # the provider sent argument fragments: check it really did
    deltas = [e["delta"] for e in events if e["type"] == "text"]
    assert len(deltas) > 3 and "".join(deltas) == "The sum is 777777, as computed."
    assert "".join(e["delta"] for e in events if e["type"] == "thinking") == "let me add these"
    calls = [e for e in events if e["type"] == "tool_call"]
    assert calls[0]["args"] == {"a": 123456, "b": 654321}
    assert events[-1]["result"]["tool_calls"][0]["output"] == "777777"
    assert len(raw) == 2


def test_the_fake_stream_sends_arguments_in_fragments():
    from toolnexus.testing.fake_responses import responses_stream

    events = [json.loads(e.decode().split("data: ", 1)[1]) for e in
              responses_stream(tool_calls_reply(("add", {"a": 1, "b": 2})))]  # fmt: skip
    fragments = [e["delta"] for e in events
                 if e["type"] == "response.function_call_arguments.delta"]  # fmt: skip
    assert len(fragments) > 1 and json.loads("".join(fragments)) == {"a": 1, "b": 2}
    acc = R.stream_start()
    for e in events:  # an item whose done event never came is assembled from its fragments
        if e["type"] != "response.output_item.done" and e["type"] != "response.completed":
            acc, _ = R.stream_event(acc, {"event": e["type"], "data": json.dumps(e)})
    final = {"status": "completed", "output": [], "usage": None}
    acc, _ = R.stream_event(acc, {"event": "response.completed",
                                  "data": json.dumps({"type": "response.completed",
                                                      "response": final})})  # fmt: skip
    turn = R.stream_turn(acc)
    assert [(c["name"], json.loads(c["arguments"])) for c in turn["tool_calls"]] == [
        ("add", {"a": 1, "b": 2})
    ]


@pytest.mark.parametrize("streamed", [False, True])
def test_a_refusal_is_given_kept_and_replayed(streamed):
    script = [{"refusal": "I can't help with that."}, text_reply("ok")]
    with fake_provider(script) as fp:
        c = _client(fp, store=in_memory_store(), keep_refused=True)  # (default: not saved)
        if streamed:
            events = list(stream(c, "bad", conversation_id="c"))
            first = events[-1]["result"]
            assert "".join(e["delta"] for e in events if e["type"] == "refusal") == (
                "I can't help with that.")  # fmt: skip
        else:
            first = run(c, "bad", conversation_id="c")
        run(c, "fine?", conversation_id="c")
        replayed = fp.requests[-1]["body"]["input"]
    assert first["refusal"] == "I can't help with that." and first["status"] == "done"
    said = [i for i in replayed if i.get("role") == "assistant"]
    assert said[0]["content"][0] == {"type": "refusal", "refusal": "I can't help with that."}
    if available():
        assert spec_problems(fp.requests[-1]["body"], "responses") == []


@pytest.mark.parametrize("streamed", [False, True])
def test_an_answer_cut_at_max_output_tokens_is_incomplete(streamed):
    script = [text_reply("The beginning of a long", incomplete="max_output_tokens")]
    result, _, _ = _run(script, streamed)
    assert result["status"] == "incomplete" and result["limit"] == "max_tokens"
    assert result["text"] == "The beginning of a long"
    assert result["stop_reason"] == "max_output_tokens"


def test_a_content_filter_ending_is_incomplete_with_its_reason():
    result, _, _ = _run([text_reply("partial", incomplete="content_filter")], False)
    assert (result["status"], result["limit"]) == ("incomplete", "content_filter")
    assert result["stop_reason"] == "content_filter"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_failed_response_is_a_provider_error_with_its_message(streamed):
    script = [{"content": "x", "failed": {"message": "The model is overloaded"}}]
    with pytest.raises(ProviderError, match="overloaded"):
        _run(script, streamed, retries=0)


def test_an_error_event_is_a_provider_error():
    script = [
        text_reply(
            "a long answer that breaks", stream_error={"type": "server_error", "message": "boom"}
        )
    ]
    with pytest.raises(ProviderError, match="boom"):
        _run(script, True, retries=0)


def test_a_stream_without_its_closing_event_is_a_network_error():
    acc = R.stream_start()
    delta = {"type": "response.output_text.delta", "output_index": 0, "delta": "Hel"}
    acc, out = R.stream_event(acc, {"event": delta["type"], "data": json.dumps(delta)})
    assert out[0]["delta"] == "Hel"
    with pytest.raises(ProviderError) as info:
        R.stream_turn(acc)
    assert info.value.network and "final event" in str(info.value)


@pytest.mark.parametrize("streamed", [False, True])
def test_usage_reads_cached_and_reasoning_tokens(streamed):
    raw = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 60},
           "output_tokens": 30, "output_tokens_details": {"reasoning_tokens": 20},
           "total_tokens": 130}  # fmt: skip
    result, _, _ = _run([text_reply("hi", raw_usage=raw)], streamed)
    assert dict(result["usage"]) == {"prompt_tokens": 100, "completion_tokens": 30,
                                     "total_tokens": 130, "cache_read_tokens": 60,
                                     "reasoning_tokens": 20}  # fmt: skip


def test_prompt_parts_go_as_input_text_image_and_file():
    prompt = [
        text("what are these?"),
        image(PNG, "image/png", "a.png"),
        image_url("https://example.com/b.png"),
        file(PDF, "application/pdf", "d.pdf"),
    ]
    _, _, requests = _run([text_reply("pictures")], False, prompt=prompt)
    content = requests[0]["body"]["input"][0]["content"]
    assert [p["type"] for p in content] == ["input_text", "input_image", "input_image",
                                            "input_file"]  # fmt: skip
    assert content[1]["image_url"].startswith("data:image/png;base64,")
    assert content[2]["image_url"] == "https://example.com/b.png"
    assert content[3]["filename"] == "d.pdf"
    assert content[3]["file_data"].startswith("data:application/pdf;base64,")


def test_a_tool_s_media_go_inside_its_function_call_output():
    script = [tool_calls_reply(("chart", {})), text_reply("a chart")]
    _, _, requests = _run(script, False)
    output = [i for i in requests[1]["body"]["input"] if i.get("type") == "function_call_output"]
    assert [p["type"] for p in output[0]["output"]] == ["input_text", "input_image"]


def test_structured_output_goes_as_text_format():
    schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"],
              "additionalProperties": False}  # fmt: skip
    with fake_provider([text_reply('{"n": 4}')]) as fp:
        r = run(_client(fp), "count", output_schema=schema)
        body = fp.requests[0]["body"]
    assert r["output"] == {"n": 4}
    assert body["text"]["format"]["type"] == "json_schema"
    assert body["text"]["format"]["schema"] == schema
    if available():
        assert spec_problems(body, "responses") == []


def test_a_system_prompt_goes_as_instructions_and_a_forced_choice_holds_once():
    script = [tool_calls_reply(("add", {"a": 1, "b": 1})), text_reply("2")]
    _, _, requests = _run(script, False, system_prompt="be brief",
                          request_params={"tool_choice": "required"})  # fmt: skip
    assert requests[0]["body"]["instructions"] == "be brief"
    assert [r["body"]["tool_choice"] for r in requests] == ["required", "auto"]


def test_the_api_key_comes_from_openai_api_key(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-from-env")
    with fake_provider([text_reply("hi")]) as fp:
        run(create_client(base_url=fp.url, style="responses", model="m"), "q")
        assert fp.requests[0]["headers"]["Authorization"] == "Bearer sk-from-env"


# ---- the fake provider's rules (what no schema says) -----------------------------------


def test_the_validator_refuses_what_the_api_refuses():
    call = {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{}"}
    answer = {"type": "function_call_output", "call_id": "c", "output": "4"}
    think = {"type": "reasoning", "id": "rs", "summary": []}
    assert validate_responses_request({"input": [call, answer]}) == []
    assert "answers no function_call" in validate_responses_request({"input": [answer]})[0]
    assert "no function_call_output" in validate_responses_request({"input": [call]})[0]
    assert "duplicate" in validate_responses_request({"input": [call, answer, call, answer]})[0]
    got = validate_responses_request({"store": False, "input": [think, call, answer]})
    assert "encrypted_content" in got[0]
    assert "following item" in validate_responses_request({"input": [{**think,
        "encrypted_content": "E"}]})[0]  # fmt: skip
    assert validate_responses_request({"input": []}) != []


def test_the_fake_provider_answers_400_to_an_invalid_request():
    import httpx

    with fake_provider([text_reply("never")]) as fp:
        bad = {"model": "m", "input": [{"type": "function_call_output", "call_id": "x",
                                        "output": "?"}]}  # fmt: skip
        r = httpx.post(fp.url + "/responses", json=bad)
    assert r.status_code == 400 and r.json()["error"]["type"] == "invalid_request_error"


# ---- one conversation across every dialect -----------------------------------------------


def test_one_conversation_moves_across_every_dialect_with_tool_calls(tmp_path):
    from toolnexus.core.wire.translate import dialect_of
    from toolnexus.store import sqlite_store

    store = sqlite_store(tmp_path / "chat.db")
    turn = [tool_calls_reply(("add", {"a": 1, "b": 2})), text_reply("3.")]
    order = [*STYLES, *STYLES[-2::-1]]  # every row in turn, then back to the first
    with fake_provider([r for _ in order for r in turn]) as fp:
        for n, style in enumerate(order):
            c = create_client(base_url=fp.url, style=style, model="m", api_key="k", store=store,
                              system_prompt="Be brief.")  # fmt: skip
            r = run(c, f"question {n}", toolkit=TK, conversation_id="c")
            assert r["text"] == "3." and r["tool_calls"][0]["output"] == "3"
            assert dialect_of(store["get"]("c")) == style
        requests = fp.requests
    assert len(requests) == 2 * len(order)  # none refused by the fake's rules
    for style, r in zip([s for s in order for _ in turn], requests, strict=True):
        if available():
            assert spec_problems(r["body"], style) == []
    saved = store["get"]("c")
    users = [m["content"] for m in saved if m["role"] == "user" and isinstance(m["content"], str)]
    assert users == [f"question {n}" for n in range(len(order))]


# ---- server state (issue 27 item 3) -----------------------------------------------------


def test_with_server_state_a_request_does_not_grow_with_the_history():
    store = in_memory_store()
    with fake_provider([text_reply(f"answer {n}") for n in range(50)]) as fp:
        c = _client(fp, store=store, server_state=True)
        for n in range(50):
            assert run(c, f"question {n}", conversation_id="c")["text"] == f"answer {n}"
        bodies = [r["body"] for r in fp.requests]
    assert "previous_response_id" not in bodies[0] and all(b["store"] is True for b in bodies)
    assert [b["previous_response_id"] for b in bodies[1:]] == [f"resp_{n}" for n in range(1, 50)]
    assert all(b["input"] == [{"role": "user", "content": f"question {n}"}]
               for n, b in enumerate(bodies))  # fmt: skip
    sizes = [len(json.dumps(b)) for b in bodies]
    assert max(sizes) - min(sizes) < 40  # flat: the numbers in the text and the id grow
    assert len(store["get"]("c")) == 100  # the store still holds the whole conversation
    if available():
        assert all(spec_problems(b, "responses") == [] for b in bodies)


def test_with_server_state_tool_results_go_alone_after_their_response():
    script = [tool_calls_reply(("add", {"a": 1, "b": 2}), ("add", {"a": 3, "b": 4})),
              text_reply("3 and 7")]  # fmt: skip
    with fake_provider(script) as fp:
        r = run(_client(fp, server_state=True), "sums", toolkit=TK)
        second = fp.requests[1]["body"]
    assert r["text"] == "3 and 7"
    assert second["previous_response_id"] == "resp_1"
    assert [(i["type"], i["output"]) for i in second["input"]] == [
        ("function_call_output", "3"), ("function_call_output", "7")]  # fmt: skip


def test_a_forgotten_response_falls_back_once_to_the_whole_transcript():
    metrics: list = []
    script = [text_reply("one"), text_reply("two"), text_reply("three")]
    with fake_provider(script) as fp:
        c = _client(fp, store=in_memory_store(), server_state=True, on_metric=metrics.append)
        run(c, "q1", conversation_id="c")
        fp.kept.clear()  # the server forgot (expired, another region, deleted)
        r = run(c, "q2", conversation_id="c")
        again = run(c, "q3", conversation_id="c")
        bodies = [q["body"] for q in fp.requests]
    assert r["text"] == "two" and again["text"] == "three"
    assert len(bodies) == 4  # q1, q2 refused (previous_response_not_found), q2 whole, q3
    assert bodies[1]["previous_response_id"] == "resp_1"
    assert "previous_response_id" not in bodies[2] and bodies[2]["store"] is True
    assert [i.get("content") for i in bodies[2]["input"] if i.get("role") == "user"] == [
        "q1", "q2"]  # fmt: skip
    assert bodies[3]["previous_response_id"] == "resp_3"  # the whole one's id, kept again
    assert [m["event"] for m in metrics].count("server_state_fallback") == 1


def test_server_state_is_refused_where_the_server_keeps_nothing():
    with pytest.raises(ValueError, match="server_state=True needs .*responses"):
        create_client(base_url="http://h/v1", model="m", style="openai", server_state=True)


def test_request_params_are_sent_and_input_stays_the_loop_s():
    with fake_provider([text_reply("hi")]) as fp:
        with pytest.raises(ValueError, match="'input': use history="):
            _client(fp, request_params={"input": "no", "max_output_tokens": 99})
        c = _client(fp, request_params={"max_output_tokens": 99, "reasoning": {"effort": "low"}})
        run(c, "q")
        body = fp.requests[0]["body"]
    assert body["input"] == [{"role": "user", "content": "q"}]
    assert body["max_output_tokens"] == 99 and body["reasoning"] == {"effort": "low"}
    if available():
        assert spec_problems(body, "responses") == []


def test_show_renders_a_responses_turn_its_calls_results_and_refusal():
    from toolnexus import show

    script = [tool_calls_reply(("add", {"a": 1, "b": 2}), content="Let me add.",
                               reasoning=[{"summary": "secret plan", "encrypted_content": "E"}]),
              {"refusal": "No more."}]  # fmt: skip
    with fake_provider(script) as fp:
        r = run(_client(fp), "go", toolkit=TK)
    shown = str(show(r))
    assert "Let me add." in shown and 'add({"a": 1, "b": 2})' in shown
    assert "tool add: 3" in shown and "[refusal] No more." in shown
    assert "secret plan" not in shown  # reasoning is not the answer


def _events(*events) -> list:
    """Return SSE events as the transport hands them to a codec (name from the data)."""
    return [{"event": e.get("type", name), "data": json.dumps(e)} for name, e in events]


def _decoded(events) -> tuple:
    acc, deltas = R.stream_start(), []
    for e in events:
        acc, more = R.stream_event(acc, e)
        deltas += more
    return R.stream_turn(acc), deltas


def test_a_stream_without_output_indexes_or_a_closing_output_is_assembled_by_item_ids():
    # Shapes some compatible servers send: no output_index, deltas naming their item by
    # item_id, a done item that says little, a response.completed with no output.
    turn, deltas = _decoded(_events(
        ("", {"type": "response.created", "response": {"id": "resp_1", "model": "srv"}}),
        ("", {"type": "response.output_item.added",
              "item": {"id": "msg_1", "type": "message", "role": "assistant"}}),
        ("", {"type": "response.output_text.delta", "delta": "Checking "}),
        ("", {"type": "response.output_text.delta", "delta": "first."}),
        ("", {"type": "response.output_item.added", "item": {
            "id": "fc_1", "type": "function_call", "call_id": "call_1", "name": "add"}}),
        ("", {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
              "delta": '{"a": 1, '}),
        ("", {"type": "response.function_call_arguments.delta", "item_id": "fc_1",
              "delta": '"b": 2}'}),
        ("", {"type": "response.output_item.done", "item": {"type": "function_call"}}),
        ("", {"type": "response.completed", "response": {"id": "resp_1"}}),
    ))  # fmt: skip
    assert turn["text"] == "Checking first." and turn["model"] == "srv"
    assert [(c["id"], c["name"], json.loads(c["arguments"])) for c in turn["tool_calls"]] == [
        ("call_1", "add", {"a": 1, "b": 2})]  # fmt: skip
    assert [d["type"] for d in deltas] == ["text", "text", "tool_call_start"]
    body = R.body("m", [R.user_message("q"), turn["message"],
                        *R.tool_result_messages(turn["tool_calls"], [{"output": "3"}])],
                  [], "", {})  # fmt: skip
    assert validate_responses_request(thaw(body)) == []
    if available():
        assert spec_problems(thaw(body), "responses") == []


def test_text_deltas_with_no_item_at_all_still_make_the_answer():
    turn, _ = _decoded(_events(
        ("response.output_text.delta", {"delta": "Hello"}),
        ("response.output_text.delta", {"delta": " there"}),
        ("response.completed", {"response": {"status": "completed"}}),
    ))  # fmt: skip
    assert turn["text"] == "Hello there" and not turn["tool_calls"]


def test_the_compactor_summarizes_items_and_keeps_a_parts_prompt_valid():
    from toolnexus.hooks import compactor

    history = []
    for i in range(6):
        call = {"type": "function_call", "call_id": f"call_{i}", "name": "add",
                "arguments": '{"a": 1, "b": 2}'}  # fmt: skip
        history += [
            {"role": "user", "content": [{"type": "input_text", "text": f"q{i} " + "x" * 200}]},
            {"role": "assistant", "items": [call]},
            {"role": "tool", "items": [{"type": "function_call_output", "call_id": f"call_{i}",
                                        "output": "3"}]},
            {"role": "assistant", "content": f"a{i} " + "y" * 200},
        ]  # fmt: skip
    with fake_provider([text_reply("ok")]) as fp:
        c = _client(fp, hooks={"before_llm": compactor(300)})
        run(c, [text("and now?")], history=history)
        body = fp.requests[0]["body"]
    first = body["input"][0]
    assert first["role"] == "user" and first["content"][0]["type"] == "input_text"
    assert "[called add]" in first["content"][0]["text"]
    assert len(body["input"]) < 4 * len(history)
    assert validate_responses_request(body) == []
    if available():
        assert spec_problems(body, "responses") == []

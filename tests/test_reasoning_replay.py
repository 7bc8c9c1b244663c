"""Reasoning state replayed exactly as the server that made it requires (issue 34, item 4),
over loopback servers that refuse what the real ones refuse: DeepSeek's chat completions
and Anthropic-compatible endpoints, OpenAI's Responses (encrypted reasoning, store false,
lone reasoning items), a LiteLLM gateway's null fields."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence

import pytest
from dialect_kit import others

from toolnexus import ProviderError, arun, create_client, define_tool, run, stream
from toolnexus.core.frozen import thaw
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply
from toolnexus.testing.fake_provider import anthropic_response, anthropic_stream


@define_tool
def add(a: int, b: int) -> str:
    """Add two numbers."""
    return str(a + b)


CALL = {"name": "add", "arguments": {"a": 2, "b": 3}}


def outcome(c, prompt, streamed, **kw):
    """Return the RunResult of run() or stream()."""
    if not streamed:
        return run(c, prompt, **kw)
    return list(stream(c, prompt, **kw))[-1]["result"]


def refusing(rule: Callable[[Mapping], str | None], script: Sequence) -> Callable:
    """Return a fake provider script that answers 400 (OpenAI's error shape) with the
    message `rule(body)` gives, as the server does, else the next reply of `script`."""
    replies = list(script)

    def reply(body: Mapping, dialect: str) -> Mapping:
        said = rule(body)
        if said is not None:
            error = {"message": said, "type": "invalid_request_error", "param": None,
                     "code": "invalid_request_error"}  # fmt: skip
            return {"status": 400, "body": {"error": error}}
        return replies.pop(0) if replies else {"status": 500, "body": "script exhausted"}

    return reply


# ---- DeepSeek, chat completions: reasoning_content, even empty ---------------------------


def deepseek_rule(body: Mapping) -> str | None:
    """DeepSeek's thinking mode: every assistant message of a tool loop carries its
    reasoning_content back (an empty one included), else 400."""
    for i, m in enumerate(body["messages"]):
        if m["role"] == "assistant" and m.get("tool_calls") and "reasoning_content" not in m:
            return (
                f"Missing `reasoning_content` field in the assistant message at message index {i}"
            )
    return None


@pytest.mark.parametrize("streamed", [False, True])
def test_deepseeks_empty_reasoning_content_is_kept_and_replayed(streamed):
    """Failed before: `"reasoning_content": ""` was dropped as saying nothing, and DeepSeek
    refused the second request of the tool loop."""
    first = tool_calls_reply(CALL, message_extra={"reasoning_content": ""})
    store = in_memory_store()
    with fake_provider(refusing(deepseek_rule, [first, text_reply("5")]), schema=False) as fp:
        c = create_client(base_url=fp.url, model="deepseek-v4", api_key="k", store=store)
        r = outcome(c, "2+3?", streamed, toolkit=[add], conversation_id="c")
    assert r["text"] == "5" and r["status"] == "done"
    replayed = [m for m in fp.requests[1]["body"]["messages"] if m["role"] == "assistant"]
    assert replayed[0]["reasoning_content"] == ""
    assert store["get"]("c")[1]["reasoning_content"] == ""


# ---- DeepSeek's Anthropic-compatible endpoint: thinking without a signature -------------


def deepseek_anthropic_rule(body: Mapping) -> str | None:
    """DeepSeek's /anthropic in thinking mode: an assistant turn that called a tool gives its
    thinking back, else 400."""
    for m in body["messages"]:
        blocks = m["content"] if isinstance(m["content"], list) else []
        kinds = [b["type"] for b in blocks]
        if m["role"] == "assistant" and "tool_use" in kinds and "thinking" not in kinds:
            return "The `content[].thinking` in the thinking mode must be passed back to the API."
    return None


THOUGHT = "I should call add."


def unsigned(reply: Mapping, body: Mapping) -> Mapping:
    """Return the fake provider's answer to `reply` as DeepSeek's /anthropic sends it: its
    thinking blocks carry no signature (whole: no field; streamed: no signature_delta)."""
    if not body.get("stream"):
        made = anthropic_response(reply)
        for b in made["content"]:
            b.pop("signature", None)
        return {"response": made}
    events = []
    for raw in anthropic_stream(reply):
        data = json.loads(raw.decode().split("data: ", 1)[1])
        if data.get("delta", {}).get("type") == "signature_delta":
            continue
        data.get("content_block", {}).pop("signature", None)
        events.append(f"event: {data['type']}\ndata: {json.dumps(data)}\n\n")
    return {"sse": "".join(events)}


def deepseek_anthropic(script: Sequence) -> Callable:
    """Return a script playing DeepSeek's /anthropic: unsigned thinking, and its refusal."""
    replies = list(script)

    def reply(body: Mapping, dialect: str) -> Mapping:
        said = deepseek_anthropic_rule(body)
        if said is not None:
            error = {"type": "invalid_request_error", "message": said}
            return {"status": 400, "body": {"type": "error", "error": error}}
        return unsigned(replies.pop(0), body)

    return reply


def thinking_loop() -> list:
    return [tool_calls_reply(CALL, thinking=[{"thinking": THOUGHT}]), text_reply("5")]


@pytest.mark.parametrize("streamed", [False, True])
def test_deepseeks_unsigned_thinking_is_replayed_to_its_anthropic_endpoint(streamed):
    """Failed before: the unsigned thinking block was dropped, and DeepSeek refused the
    second request of every thinking tool loop."""
    store = in_memory_store()
    with fake_provider(deepseek_anthropic(thinking_loop()), schema=False) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="deepseek-v4-pro",
                          api_key="k", store=store)  # fmt: skip
        r = outcome(c, "2+3?", streamed, toolkit=[add], conversation_id="c")
    assert r["text"] == "5" and len(fp.requests) == 2
    replayed = fp.requests[1]["body"]["messages"][1]["content"]
    assert replayed[0] == {"type": "thinking", "thinking": THOUGHT}
    assert store["get"]("c")[1]["content"][0] == {"type": "thinking", "thinking": THOUGHT}


def deepseek_transcript() -> list:
    """Return a conversation DeepSeek's /anthropic made (its thinking unsigned)."""
    store = in_memory_store()
    with fake_provider(deepseek_anthropic(thinking_loop()), schema=False) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="deepseek-v4-pro",
                          api_key="k", store=store)  # fmt: skip
        run(c, "2+3?", toolkit=[add], conversation_id="c")
    return store["get"]("c")


def test_unsigned_thinking_never_goes_to_anthropics_own_models():
    """Anthropic takes thinking back signed only (the fake provider refuses it unsigned, as
    its published schema does): a Claude model is never sent the unsigned block."""
    history = deepseek_transcript()
    with fake_provider([text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="claude-sonnet-4-5",
                          api_key="k")  # fmt: skip
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
    assert len(fp.requests) == 1 and THOUGHT not in json.dumps(fp.requests[0]["body"])


def test_a_server_refusing_unsigned_thinking_is_asked_again_without_it_once_per_client():
    """A server we did not name that takes thinking signed only: its refusal (naming the
    signature) is answered by one more request without the unsigned blocks, and the
    client remembers it for that model."""
    history = deepseek_transcript()
    with fake_provider([text_reply("yes"), text_reply("again")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="gateway-model",
                          api_key="k")  # fmt: skip
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
        assert run(c, "and?", toolkit=[add], history=history)["text"] == "again"
    assert len(fp.requests) == 3  # refused once, then never again
    assert THOUGHT in json.dumps(fp.requests[0]["body"])
    assert all(THOUGHT not in json.dumps(r["body"]) for r in fp.requests[1:])
    other = create_client(base_url=fp.url, style="anthropic", model="gateway-model")
    assert other.runtime.omitted(other.plan[False]["omission_key"]) == frozenset()


@pytest.mark.parametrize("style", others("anthropic"))
def test_unsigned_thinking_is_dropped_when_the_dialect_changes(style):
    history = deepseek_transcript()
    with fake_provider([text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style=style, model="o4-mini", api_key="k")
        assert run(c, "sure?", toolkit=[add], history=history)["text"] == "yes"
    assert THOUGHT not in json.dumps(fp.requests[0]["body"])


# ---- Responses: encrypted reasoning, store false, lone reasoning, null fields -----------


def responses_client(fp, model="o4-mini", **options):
    return create_client(base_url=fp.url, style="responses", model=model, api_key="k", **options)


@pytest.mark.parametrize("model", ["gpt-4.1", "gpt-4o-mini", "openai/gpt-4o"])
def test_encrypted_reasoning_is_not_asked_of_a_model_that_refuses_it(model):
    """Failed before: `include: ["reasoning.encrypted_content"]` went on every request, and
    gpt-4o / gpt-4.1 answer each one 400 "Encrypted content is not supported"."""
    with fake_provider([text_reply("hi")]) as fp:
        assert run(responses_client(fp, model), "hello")["text"] == "hi"
    assert len(fp.requests) == 1 and "include" not in fp.requests[0]["body"]


def test_a_reasoning_model_is_asked_for_its_encrypted_reasoning():
    with fake_provider([text_reply("hi")]) as fp:
        run(responses_client(fp, "o4-mini"), "hello")
    assert fp.requests[0]["body"]["include"] == ["reasoning.encrypted_content"]


def encrypted_refused(body: Mapping) -> str | None:
    if "reasoning.encrypted_content" in (body.get("include") or ()):
        return "Encrypted content is not supported with this model."
    return None


@pytest.mark.parametrize("streamed", [False, True])
def test_a_refusal_of_encrypted_reasoning_is_asked_again_without_it_and_remembered(streamed):
    """A deployment of no known family (an Azure name) refuses `include`: the request goes
    once more without it, and the client's later runs leave it out from the start."""
    seen: list = []
    with fake_provider(refusing(encrypted_refused, [text_reply("a"), text_reply("b")])) as fp:
        c = responses_client(fp, "my-deployment", on_metric=seen.append)
        assert outcome(c, "one?", streamed)["text"] == "a"
        assert outcome(c, "two?", streamed)["text"] == "b"
        fresh = responses_client(fp, "my-deployment")  # another client learns on its own
    assert [("include" in r["body"]) for r in fp.requests] == [True, False, False]
    assert [e["part"] for e in seen if e["event"] == "omitted"] == ["encrypted_content"]
    assert fresh.runtime.omitted(fresh.plan[False]["omission_key"]) == frozenset()


def test_the_async_verbs_ask_again_without_the_refused_part_and_remember_it():
    import asyncio

    async def both(c):
        return [(await arun(c, "one?"))["text"], (await arun(c, "two?"))["text"]]

    with fake_provider(refusing(encrypted_refused, [text_reply("a"), text_reply("b")])) as fp:
        assert asyncio.run(both(responses_client(fp, "my-deployment"))) == ["a", "b"]
    assert [("include" in r["body"]) for r in fp.requests] == [True, False, False]


def test_another_refusal_is_not_retried():
    def rule(body):
        return "Unsupported parameter: 'temperature'"

    with fake_provider(refusing(rule, [])) as fp:
        with pytest.raises(ProviderError, match="temperature"):
            run(responses_client(fp, "my-deployment", retries=0), "q")
    assert len(fp.requests) == 1


@pytest.mark.parametrize("streamed", [False, True])
def test_reasoning_without_encrypted_content_is_never_replayed_by_id_under_store_false(streamed):
    """Failed before: the reasoning item went back by id under `store: false` (the server
    kept nothing: 404 "Items are not persisted when `store` is set to false")."""
    first = tool_calls_reply(CALL, reasoning=[{"summary": "Adding."}])
    store = in_memory_store()
    with fake_provider([first, text_reply("5")]) as fp:
        c = responses_client(fp, store=store)
        assert outcome(c, "2+3?", streamed, toolkit=[add], conversation_id="c")["text"] == "5"
    second = fp.requests[1]["body"]
    assert second["store"] is False
    assert [i.get("type") for i in second["input"]][1:] == ["function_call",
                                                             "function_call_output"]  # fmt: skip
    assert store["get"]("c")[1]["items"][0]["type"] == "reasoning"  # kept in the transcript


def test_reasoning_by_id_is_replayed_where_the_server_keeps_it():
    """With `store: true` the server kept the item: naming it by id is right."""
    first = tool_calls_reply(CALL, reasoning=[{"summary": "Adding."}])
    with fake_provider([first, text_reply("5")]) as fp:
        c = responses_client(fp, request_params={"store": True})
        assert run(c, "2+3?", toolkit=[add])["text"] == "5"
    assert fp.requests[1]["body"]["input"][1]["type"] == "reasoning"


@pytest.mark.parametrize("streamed", [False, True])
def test_a_turn_cut_while_reasoning_leaves_no_lone_reasoning_item(streamed):
    """Failed before: the turn was saved as a lone reasoning item and every later request
    on the conversation got 400 "... provided without its required following item"."""
    cut = {"reasoning": [{"encrypted_content": "gAAA"}], "incomplete": "max_output_tokens"}
    store = in_memory_store()
    with fake_provider([cut, text_reply("shorter")]) as fp:
        c = responses_client(fp, store=store)
        first = outcome(c, "think long", streamed, conversation_id="c")
        assert first["status"] == "incomplete" and first["limit"] == "max_tokens"
        assert outcome(c, "briefly then", streamed, conversation_id="c")["text"] == "shorter"
    saved = json.dumps(thaw(store["get"]("c")))
    assert "gAAA" not in saved
    assert all(i.get("type") != "reasoning" for i in fp.requests[1]["body"]["input"])


def test_a_lone_reasoning_item_saved_before_is_left_out_of_the_request():
    lone = {"role": "assistant", "items": [{"type": "reasoning", "id": "rs_1", "summary": [],
                                            "encrypted_content": "gAAA"}]}  # fmt: skip
    history = [{"role": "user", "content": "think long"}, lone]
    with fake_provider([text_reply("ok")]) as fp:
        assert run(responses_client(fp), "go on", history=history)["text"] == "ok"
    assert "gAAA" not in json.dumps(fp.requests[0]["body"])


LITELLM_CALL = {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "add",
                "arguments": '{"a": 2, "b": 3}', "status": "completed", "async": None,
                "namespace": None}  # fmt: skip


def litellm_answer(output: list) -> dict:
    return {"response": {"id": "resp_1", "object": "response", "model": "o4-mini",
                         "status": "completed", "output": output, "error": None,
                         "incomplete_details": None,
                         "usage": {"input_tokens": 5, "output_tokens": 2}}}  # fmt: skip


def test_null_fields_a_gateway_adds_are_never_replayed():
    """Failed before: LiteLLM's `"async": null, "namespace": null` on a function_call were
    stored and sent back, which the API refuses."""
    store = in_memory_store()
    with fake_provider([litellm_answer([LITELLM_CALL]), text_reply("5")]) as fp:
        c = responses_client(fp, store=store)
        assert run(c, "2+3?", toolkit=[add], conversation_id="c")["text"] == "5"
    replayed = fp.requests[1]["body"]["input"][1]
    assert replayed["call_id"] == "call_1" and "async" not in replayed
    assert "namespace" not in json.dumps(thaw(store["get"]("c")))


# ---- chat completions: one provider's fields to a strict server of the same dialect -----


def strict_rule(body: Mapping) -> str | None:
    """A strict OpenAI-compatible server (Groq's wording): an assistant message holds only
    the fields chat completions defines."""
    known = {"role", "content", "refusal", "name", "audio", "tool_calls", "function_call"}
    for i, m in enumerate(body["messages"]):
        extra = sorted(set(m) - known) if m["role"] == "assistant" else []
        if extra:
            return (f"'messages.{i}' : for 'role:assistant' the following must be satisfied"
                    f"[('messages.{i}' : property '{extra[0]}' is unsupported)]")  # fmt: skip
    return None


def test_another_providers_fields_are_left_out_where_a_strict_server_refuses_them():
    """A DeepSeek conversation continued on a strict server of the same dialect: its
    refusal naming `reasoning_content` is answered by one more request without the
    provider's own fields, remembered for that endpoint and model."""
    first = tool_calls_reply(CALL, reasoning_content="Adding.")
    store = in_memory_store()
    with fake_provider([first, text_reply("5")], schema=False) as deepseek:
        c = create_client(base_url=deepseek.url, model="deepseek-v4", api_key="k", store=store)
        run(c, "2+3?", toolkit=[add], conversation_id="c")
    script = refusing(strict_rule, [text_reply("yes"), text_reply("again")])
    with fake_provider(script, schema=False) as strict:
        c = create_client(base_url=strict.url, model="llama-3.3-70b", api_key="k", store=store)
        assert run(c, "sure?", toolkit=[add], conversation_id="c")["text"] == "yes"
        assert run(c, "and?", toolkit=[add], conversation_id="c")["text"] == "again"
    assert len(strict.requests) == 3  # refused once, then never again
    assert all("Adding." not in json.dumps(r["body"]) for r in strict.requests[1:])
    assert store["get"]("c")[1]["reasoning_content"] == "Adding."  # the transcript keeps it


def test_a_refusal_asking_for_a_field_back_never_leaves_it_out():
    """DeepSeek's "Missing `reasoning_content`" names the field it wants: not a reason to
    leave the provider's fields out (one request, the refusal raised as it came)."""
    first = tool_calls_reply(CALL, reasoning_content="Adding.")
    with fake_provider([first, text_reply("5")], schema=False) as fp:
        history = run(create_client(base_url=fp.url, model="m", api_key="k"), "2+3?",
                      toolkit=[add])["messages"]  # fmt: skip
    with fake_provider(refusing(lambda b: "Missing `reasoning_content` field", [])) as fp:
        c = create_client(base_url=fp.url, model="deepseek-v4", api_key="k", retries=0)
        with pytest.raises(ProviderError, match="Missing"):
            run(c, "sure?", toolkit=[add], history=history)
    assert len(fp.requests) == 1

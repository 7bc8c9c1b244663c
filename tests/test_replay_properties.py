"""Properties of the pure replay rules (issue 34, item 4): over random transcripts in each
dialect, roughened the way real servers leave them (unsigned thinking, reasoning without
encrypted content, lone reasoning, gateway null fields, other providers' fields), the
request each codec builds is one the provider's published schema and documented rules
accept, and nothing the server needs back is lost."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from toolnexus.core import steps
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire import anthropic_replay as AR
from toolnexus.testing.strategies import transcripts
from toolnexus.testing.validators import validate_request

ANTHROPIC, CHAT, RESPONSES = DIALECTS["anthropic"], DIALECTS["openai"], DIALECTS["responses"]


def request(codec, model, history, omitted=frozenset()):
    """Return the JSON-ready body the flow sends: history made replayable, a new prompt,
    what the model refuses left out."""
    body = codec.body(model, [*codec.replayable(history), codec.user_message("go on")], [], "", {})
    return thaw(codec.omit(body, codec.omissions(model) | omitted))


@st.composite
def unsigned_anthropic(draw):
    """An Anthropic transcript some of whose thinking blocks came unsigned (DeepSeek), and
    maybe a last turn cut while thinking (an unsigned block alone)."""
    t = [dict(m) for m in draw(transcripts("anthropic", max_turns=3))]
    for m in t:
        if m["role"] == "assistant" and isinstance(m["content"], list):
            m["content"] = [
                {k: v for k, v in b.items() if k != "signature"}
                if b["type"] == "thinking" and draw(st.booleans())
                else b
                for b in m["content"]
            ]
    if t and t[-1]["role"] == "user" and draw(st.booleans()):
        t.append({"role": "assistant", "content": [{"type": "thinking", "thinking": "cut"}]})
    return t


def thinking_led(transcript):
    """Return the unsigned thinking texts that led to something, in order."""
    return [
        b["thinking"]
        for m in transcript
        if m["role"] == "assistant" and isinstance(m["content"], list)
        for i, b in enumerate(m["content"])
        if AR.unsigned(b) and AR.leads(m["content"], i)
    ]


@settings(max_examples=60, deadline=None)
@given(unsigned_anthropic())
def test_unsigned_thinking_that_led_goes_back_to_a_compatible_server_and_never_to_claude(t):
    compatible = request(ANTHROPIC, "deepseek-v4-pro", t)
    sent = [
        b["thinking"]
        for m in compatible["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if AR.unsigned(b)
    ]
    assert sent == thinking_led(t)  # every one that led, none that did not
    claude = request(ANTHROPIC, "claude-sonnet-4-5", t)
    assert validate_request(claude, "anthropic") == []
    assert not any(AR.unsigned(b) for m in claude["messages"] for b in m["content"]
                   if isinstance(m["content"], list))  # fmt: skip


@given(st.lists(st.sampled_from([{"type": "thinking", "thinking": "t"},
                                 {"type": "thinking", "thinking": "t", "signature": "s"},
                                 {"type": "redacted_thinking", "data": "d"},
                                 {"type": "text", "text": "x"}]), max_size=6))  # fmt: skip
def test_led_keeps_every_block_but_unsigned_thinking_that_leads_nothing(blocks):
    kept = AR.led(blocks)
    assert AR.led(kept) == kept  # idempotent
    assert [b for b in blocks if not AR.unsigned(b)] == [b for b in kept if not AR.unsigned(b)]
    assert all(AR.leads(kept, i) for i, b in enumerate(kept) if AR.unsigned(b))


@st.composite
def rough_responses(draw):
    """A Responses transcript with reasoning items left without encrypted content, null
    fields on items, and maybe a lone reasoning turn (cut at max_output_tokens)."""
    t = [dict(m) for m in draw(transcripts("responses", max_turns=3))]
    for m in t:
        if m.get("role") == "assistant" and "items" in m:
            items = []
            for item in m["items"]:
                item = dict(item)
                if item["type"] == "reasoning" and draw(st.booleans()):
                    del item["encrypted_content"]
                if item["type"] == "function_call" and draw(st.booleans()):
                    item.update({"async": None, "namespace": None})
                items.append(item)
            m["items"] = items
    if t and t[-1]["role"] == "user" and draw(st.booleans()):
        lone = {"type": "reasoning", "id": "rs_cut", "summary": [], "encrypted_content": "x"}
        t.append({"role": "assistant", "items": [lone]})
    return t


@settings(max_examples=60, deadline=None)
@given(rough_responses(), st.sampled_from(["o4-mini", "gpt-4.1", "my-deployment"]))
def test_a_responses_request_is_valid_whatever_its_reasoning_items(t, model):
    body = request(RESPONSES, model, t)
    assert validate_request(body, "responses") == []
    assert ("include" in body) == (model != "gpt-4.1")
    encrypted = [i for i in body["input"] if i.get("type") == "reasoning"]
    assert all(i.get("encrypted_content") for i in encrypted)
    assert all(v is not None for i in body["input"] for v in i.values())
    without = request(RESPONSES, model, t, frozenset({"encrypted_content"}))
    assert "include" not in without and without["input"] == body["input"]


FOREIGN = {"reasoning_content": "r", "reasoning_details": [{"type": "reasoning.text"}],
           "annotations": [{"type": "url_citation"}]}  # fmt: skip


@st.composite
def foreign_openai(draw):
    """A chat completions transcript whose assistant messages carry other providers' fields."""
    t = [dict(m) for m in draw(transcripts("openai", max_turns=3))]
    for m in t:
        if m["role"] == "assistant":
            m.update(draw(st.dictionaries(st.sampled_from(sorted(FOREIGN)), st.just(None))))
            m.update({k: FOREIGN[k] for k, v in list(m.items()) if k in FOREIGN})
            for c in m.get("tool_calls") or ():
                if draw(st.booleans()):
                    c["extra_content"] = {"google": {"thought_signature": "s"}}
    return t


@settings(max_examples=60, deadline=None)
@given(foreign_openai())
def test_leaving_foreign_fields_out_keeps_only_what_chat_completions_defines(t):
    kept = request(CHAT, "m", t)
    strict = request(CHAT, "m", t, frozenset({"foreign_fields"}))
    defined = {"role", "content", "refusal", "name", "audio", "tool_calls", "function_call"}
    for given_m, strict_m in zip(kept["messages"], strict["messages"], strict=True):
        if given_m["role"] != "assistant":
            assert strict_m == given_m
            continue
        assert set(strict_m) <= defined
        assert {k: v for k, v in given_m.items() if k in defined} == {
            **strict_m,
            **({"tool_calls": given_m["tool_calls"]} if "tool_calls" in given_m else {}),
        }
        for c in strict_m.get("tool_calls") or ():
            assert set(c) <= {"id", "type", "function"}
    assert validate_request(strict, "openai") == []
    assert CHAT.omit(strict, frozenset({"foreign_fields"})) is strict  # nothing more to leave out


@given(st.integers(0, 5), st.integers(1, 4), st.booleans())
def test_a_refused_run_saves_the_transcript_it_started_from(before, fresh, keep):
    messages = [{"role": "user", "content": str(i)} for i in range(before + fresh)]
    state = {**steps.start("openai", messages[:before], "q"), "refusal": "no"}
    state = {**state, "messages": state["messages"].extend(messages[before + 1 :])}
    state = {**state, "fresh": fresh}
    saved, added = steps.kept_messages(state, keep)
    assert list(saved) == (list(state["messages"]) if keep else list(state["messages"])[:before])
    assert len(added) == (fresh if keep else 0)
    done = {**state, "refusal": None}
    assert steps.kept_messages(done)[0] is done["messages"]

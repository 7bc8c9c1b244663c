"""Issue 34, item 7: placeholders, system messages with list content, a bad system_prompt.

Each request goes to the loopback fake provider, which checks it against the published
schema of its dialect and answers 400 (as the real API would) to one it refuses.
"""

from __future__ import annotations

import pytest
from dialect_kit import STYLES, covers
from hypothesis import given
from hypothesis import strategies as st
from published import available, spec_problems

from toolnexus import audio, create_client, define_tool, run, text, toolkit
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.translate import native_call_ids, translate
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

WAV = b"RIFF\x24\x00\x00\x00WAVEfmt "

needs_schemas = pytest.mark.skipif(not available(), reason="jsonschema is not installed")


def _client(fp, style, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", retries=0,
                         **options)  # fmt: skip


def _parts_of(value):
    return [p for p in value if isinstance(p, dict)] if isinstance(value, list) else []


# ---- the placeholder of a part Responses cannot carry ---------------------------------


@needs_schemas
@pytest.mark.parametrize("streamed", [False, True])
def test_responses_prompt_placeholder_goes_as_input_text(streamed):
    with fake_provider([text_reply("heard")]) as fp:
        c = _client(fp, "responses", on_unsupported_part="text")
        prompt = [text("what is this?"), audio(WAV, mime_type="audio/wav", name="a.wav")]
        if streamed:
            from toolnexus import stream

            events = list(stream(c, prompt))
            assert events[-1]["type"] == "done"
        else:
            assert run(c, prompt)["text"] == "heard"
    body = fp.requests[0]["body"]
    content = body["input"][-1]["content"]
    assert [p["type"] for p in content] == ["input_text", "input_text"]
    assert "omitted" in content[1]["text"] and "a.wav" in content[1]["text"]
    assert spec_problems(body, "responses") == []


@define_tool
def recording() -> list:
    """Return a recording."""
    return [text("here it is"), audio(WAV, mime_type="audio/wav", name="r.wav")]


@needs_schemas
def test_responses_tool_output_placeholder_goes_as_input_text():
    script = [tool_calls_reply(("recording", {})), text_reply("got it")]
    with fake_provider(script) as fp:
        r = run(_client(fp, "responses"), "record", toolkit=toolkit(recording))
    assert r["status"] == "done" and r["text"] == "got it"
    body = fp.requests[1]["body"]
    (out,) = [i for i in body["input"] if i.get("type") == "function_call_output"]
    assert [p["type"] for p in out["output"]] == ["input_text", "input_text"]
    assert "r.wav" in out["output"][1]["text"]
    assert spec_problems(body, "responses") == []


@needs_schemas
def test_a_translated_unknown_block_on_responses_goes_as_input_text():
    history = [{"role": "user", "content": [{"type": "text", "text": "look"},
                                            {"type": "video", "source": {"type": "url"}}]},
               {"role": "assistant", "content": [{"type": "text", "text": "I see"}]}]  # fmt: skip
    with fake_provider([text_reply("ok")]) as fp:
        run(_client(fp, "responses", on_unsupported_part="text"), "and now?", history=history)
    body = fp.requests[0]["body"]
    assert {p["type"] for p in body["input"][0]["content"]} == {"input_text"}
    assert spec_problems(body, "responses") == []


# ---- a system message whose content is a list of parts, in every dialect ---------------

# The system message's content in each dialect's own part shape.
SYSTEM_SHAPES = {
    "chat text parts": [{"type": "text", "text": "Be terse."}],
    "responses input_text parts": [{"type": "input_text", "text": "Be terse."}],
    "anthropic text blocks with cache_control": [
        {"type": "text", "text": "Be ", "cache_control": {"type": "ephemeral"}},
        {"type": "text", "text": "terse."},
    ],
}


def _system_text_sent(body: dict) -> str:
    """Return the system text a request carries, wherever its dialect puts it."""
    said = [body.get("system"), body.get("instructions")]
    if body.get("systemInstruction"):  # Gemini's
        said.append(body["systemInstruction"]["parts"])
    for m in body.get("messages") or body.get("input") or ():
        if m.get("role") in ("system", "developer"):
            said.append(m["content"])
    out = []
    for s in said:
        if isinstance(s, str):
            out.append(s)
        for p in _parts_of(s):
            out.append(p.get("text") or "")
    return "".join(out)


@needs_schemas
@pytest.mark.parametrize("shape", sorted(SYSTEM_SHAPES))
@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_a_system_message_with_list_content_is_sent_in_every_dialect(style, shape):
    role = "developer" if shape.startswith("responses") else "system"
    history = [
        {"role": role, "content": SYSTEM_SHAPES[shape]},
        {"role": "user", "content": "hi"},
        {"role": "assistant", "content": "hello"},
    ]
    with fake_provider([text_reply("ok")]) as fp:
        r = run(_client(fp, style), "q", history=history)
    body = fp.requests[0]["body"]
    assert r["text"] == "ok"  # the fake provider took it: its schema and rules hold
    assert spec_problems(body, style) == []
    assert "Be terse." in _system_text_sent(body)  # never dropped
    kept = [m for m in r["messages"] if m["role"] in ("system", "developer")]
    assert len(kept) == 1 and kept[0]["role"] == role  # the transcript keeps it, in place


@needs_schemas
@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_a_system_message_with_media_follows_on_unsupported_part(style):
    part = {"type": "image_url", "image_url": {"url": "https://x.test/a.png"}}
    history = [{"role": "system", "content": [{"type": "text", "text": "Be terse."}, part]},
               {"role": "user", "content": "hi"}]  # fmt: skip
    for keep in (True, False):
        with pytest.raises(ValueError, match="system message"):
            translate(history, style, keep_system=keep)
        said = translate(history, style, keep_system=keep, on_unsupported_part="text")
        shown = said.system + "".join(m["content"] for m in said.messages if m["role"] == "system")
        assert "Be terse." in shown and "omitted" in shown
    with fake_provider([text_reply("ok")]) as fp:
        run(_client(fp, style, on_unsupported_part="text"), "q", history=history)
    sent = _system_text_sent(fp.requests[0]["body"])
    assert "Be terse." in sent and "omitted" in sent
    assert spec_problems(fp.requests[0]["body"], style) == []


# The type of the content parts a system message takes in each dialect's transcript (None:
# text only, as Gemini's): facts of the APIs, a table checked to cover the registry.
OWN_SYSTEM_PART = covers({"openai": "text", "anthropic": "text", "responses": "input_text",
                          "gemini": None}, "OWN_SYSTEM_PART")  # fmt: skip


@pytest.mark.parametrize("style", STYLES)
def test_a_system_message_in_its_own_shape_is_kept_as_it_is(style):
    own = OWN_SYSTEM_PART[style]
    parts = [{"type": own or "text", "text": "Be "}, {"type": own or "text", "text": "terse."}]
    history = [{"role": "system", "content": parts}, {"role": "user", "content": "hi"}]
    out = translate(history, style, keep_system=True).messages
    assert thaw(out[0]) == (history[0] if own else {"role": "system", "content": "Be terse."})


# ---- system_prompt is checked when the client is made ------------------------------


@pytest.mark.parametrize("bad", [["be terse"], {"text": "x"}, 42, b"bytes"])
def test_a_system_prompt_that_is_not_text_is_refused_at_create_client(bad):
    with pytest.raises(TypeError, match="system_prompt must be a string"):
        create_client(base_url="http://127.0.0.1:9/v1", model="m", system_prompt=bad)


def test_a_client_set_to_a_bad_system_prompt_is_refused_too():
    c = create_client(base_url="http://127.0.0.1:9/v1", model="m", system_prompt="ok")
    with pytest.raises(TypeError, match="system_prompt must be a string"):
        c.set(system_prompt=["no"])
    assert c.set(system_prompt=None).system_prompt == ""


# ---- a property of the translation ----------------------------------------------------

_texts = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=12)
_system_content = st.one_of(
    _texts,
    st.lists(
        st.builds(lambda kind, said: {"type": kind, "text": said},
                  st.sampled_from(["text", "input_text", "output_text"]), _texts),
        min_size=1, max_size=4,
    ),
)  # fmt: skip


@given(_system_content, st.sampled_from(["system", "developer"]), st.sampled_from(sorted(DIALECTS)))
def test_a_system_message_becomes_right_for_the_dialect_and_keeps_its_text(content, role, style):
    history = [{"role": role, "content": content}, {"role": "user", "content": "hi"}]
    out = translate(history, style, keep_system=True)
    (system,) = [m for m in out.messages if m["role"] in ("system", "developer")]
    said = content if isinstance(content, str) else "".join(p["text"] for p in content)
    got = system["content"]
    assert system["role"] == role and out.system == ""
    assert (got if isinstance(got, str) else "".join(p["text"] for p in got)) == said
    own = OWN_SYSTEM_PART[style]
    assert isinstance(got, str) or {p["type"] for p in got} == {own}  # what the API takes
    assert native_call_ids(out.messages, style, keep_system=True) is not None
    assert translate(out.messages, style, keep_system=True).messages is out.messages

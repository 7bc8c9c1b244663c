"""Cross-dialect translation: shapes, ids, parts, the identity on a transcript already right,
and the property that a translated conversation is a request the other API accepts, with
nothing a user or a model said lost."""

from __future__ import annotations

import base64
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st
from published import available, spec_problems

from toolnexus import create_client, run
from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.tool import define_tool
from toolnexus.core.transcript import dangling
from toolnexus.core.wire import DIALECTS, anthropic
from toolnexus.core.wire.parts import UnsupportedPartError
from toolnexus.core.wire.translate import dialect_of, to_dialect, translate, valid_tool_id
from toolnexus.parts import file, image, image_url, text
from toolnexus.store import sqlite_store
from toolnexus.testing import (
    fake_provider,
    text_reply,
    tool_calls_reply,
    transcripts,
    validate_request,
)


def call(id, name="f", arguments='{"a": 1}'):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


OPENAI = [
    {"role": "system", "content": "be brief"},
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None,
     "tool_calls": [call("functions.get_weather:0"), call("x" * 45, "g", "{}")]},
    {"role": "tool", "tool_call_id": "functions.get_weather:0", "content": "sunny"},
    {"role": "tool", "tool_call_id": "x" * 45, "content": "4"},
    {"role": "assistant", "content": "sunny, 4"},
]  # fmt: skip


# ---- examples ------------------------------------------------------------------------


def test_openai_to_anthropic_shapes_ids_and_system():
    t = translate(OPENAI, "anthropic")
    msgs = thaw(t.messages)
    assert t.system == "be brief" and [m["role"] for m in msgs] == ["user", "assistant", "user",
                                                                    "assistant"]  # fmt: skip
    uses = msgs[1]["content"]
    assert [u["type"] for u in uses] == ["tool_use", "tool_use"]
    assert uses[0]["input"] == {"a": 1} and uses[1]["input"] == {}
    assert all(valid_tool_id(u["id"], "anthropic") for u in uses)
    assert uses[1]["id"] == "x" * 45  # valid for anthropic: kept
    results = msgs[2]["content"]
    assert [r["tool_use_id"] for r in results] == [u["id"] for u in uses]
    assert [r["content"] for r in results] == ["sunny", "4"]
    assert t.ids == {uses[0]["id"]: "functions.get_weather:0"}  # new -> original
    assert validate_request(anthropic.body("m", [*msgs, {"role": "user", "content": "more"}], [],
                                           t.system, {}), "anthropic") == []  # fmt: skip


def test_anthropic_to_openai_and_back():
    there = to_dialect(OPENAI, "anthropic")
    back = translate(there, "openai")
    msgs = thaw(back.messages)
    assert [m["role"] for m in msgs] == ["user", "assistant", "tool", "tool", "assistant"]
    ids = [c["id"] for c in msgs[1]["tool_calls"]]
    assert all(len(i) <= 40 for i in ids) and [m["tool_call_id"] for m in msgs[2:4]] == ids
    assert json.loads(msgs[1]["tool_calls"][0]["function"]["arguments"]) == {"a": 1}
    assert msgs[1]["content"] is None and msgs[4]["content"] == "sunny, 4"
    assert validate_request({"model": "m", "messages": msgs}, "openai") == []


def test_the_identity_on_a_transcript_already_right_and_the_input_is_never_changed():
    given = freeze(OPENAI)
    assert to_dialect(given, "openai") is not given  # a 45-character id is not right there
    frozen = to_dialect(given, "openai")
    assert to_dialect(frozen, "openai") is frozen
    there = to_dialect(frozen, "anthropic")
    assert to_dialect(there, "anthropic") is there
    assert given == freeze(OPENAI)  # values: nothing was modified


def test_dialect_of():
    assert dialect_of([]) is None
    assert (
        dialect_of([{"role": "user", "content": "hi"}, {"role": "assistant", "content": "yo"}])
        is None
    )
    assert dialect_of(OPENAI) == "openai"
    assert dialect_of(to_dialect(OPENAI, "anthropic")) == "anthropic"
    plain = [{"role": "user", "content": [{"type": "text", "text": "hi"}]}]
    assert dialect_of(plain) is None


def test_results_mixed_with_text_split_into_tool_messages_then_a_user_message():
    thinking = {"type": "thinking", "thinking": "hm", "signature": "s"}
    use = {"type": "tool_use", "id": "t1", "name": "f", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "t1",
              "content": [{"type": "text", "text": "r"}], "is_error": True}  # fmt: skip
    t = [{"role": "user", "content": "q"},
         {"role": "assistant", "content": [thinking, use]},
         {"role": "user", "content": [result, {"type": "text", "text": "and also"}]}]  # fmt: skip
    msgs = thaw(to_dialect(t, "openai"))
    assert msgs[1] == {"role": "assistant", "content": None, "tool_calls": [call("t1", "f", "{}")]}
    assert msgs[2] == {"role": "tool", "tool_call_id": "t1",
                       "content": [{"type": "text", "text": "r"}]}  # fmt: skip
    assert msgs[3] == {"role": "user", "content": [{"type": "text", "text": "and also"}]}


def test_a_reused_id_gets_a_fresh_one_per_call_consistently():
    turn = [{"role": "user", "content": "q"},
            {"role": "assistant", "content": None, "tool_calls": [call("call_0")]},
            {"role": "tool", "tool_call_id": "call_0", "content": "r"}]  # fmt: skip
    msgs = thaw(to_dialect(turn + turn, "anthropic"))
    first, second = msgs[1]["content"][0]["id"], msgs[4]["content"][0]["id"]
    assert first == "call_0" and second != first
    assert msgs[5]["content"][0]["tool_use_id"] == second


def test_a_broken_arguments_text_is_kept_not_lost():
    t = [{"role": "user", "content": "q"},
         {"role": "assistant", "content": None, "tool_calls": [call("c", arguments='{"a": ')]},
         {"role": "tool", "tool_call_id": "c", "content": "Invalid arguments"}]  # fmt: skip
    assert to_dialect(t, "anthropic")[1]["content"][0]["input"] == {"INVALID_JSON": '{"a": '}


def test_parts_are_mapped_and_unsupported_ones_follow_the_policy():
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    t = [{"role": "user", "content": [{"type": "text", "text": "hear"}, audio]}]
    with pytest.raises(UnsupportedPartError, match="anthropic cannot carry the audio"):
        to_dialect(t, "anthropic")
    msgs = thaw(to_dialect(t, "anthropic", on_unsupported_part="text"))
    assert msgs[0]["content"][1] == {
        "type": "text", "text": "[audio (audio/wav) omitted: not supported by anthropic]"
    }  # fmt: skip
    use = {"type": "tool_use", "id": "t", "name": "f", "input": {}}
    shot = {"type": "image", "source": {"type": "url", "url": "u"}}
    image_result = [{"role": "user", "content": "q"}, {"role": "assistant", "content": [use]},
                    {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "t",
                                                  "content": [shot]}]}]  # fmt: skip
    # A tool message carries text only: the image follows in a user message (issue 24.4).
    moved = to_dialect(image_result, "openai")
    assert [m["role"] for m in moved] == ["user", "assistant", "tool", "user"]
    assert moved[2]["content"].startswith("[image u")
    assert moved[3]["content"][1] == {"type": "image_url", "image_url": {"url": "u"}}


# ---- the property ---------------------------------------------------------------------

PNG = base64.b64encode(b"\x89PNG fake").decode()
_PARTS = st.lists(
    st.one_of(
        st.text(min_size=1, max_size=8).map(text),
        st.sampled_from(["image/png", "image/jpeg", "image/gif", "image/webp"]).map(
            lambda m: image(b"\x89PNG fake", mime_type=m)
        ),
        st.just(image_url("https://x.test/cat.png")),
        st.just(file(b"%PDF-1.4", mime_type="application/pdf", name="a.pdf")),
    ),
    min_size=1,
    max_size=3,
)
_ODD = {
    "openai": ["functions.get_weather:", "call ", "tool/use#", "ünï:", "call_"],
    "anthropic": ["toolu_" + "A" * 40 + "_", "toolu_", "x-"],
    "responses": ["functions.get_weather:", "call_" + "B" * 60, "call_"],
    "gemini": ["functions/get weather#", "call_" + "C" * 70, "call_"],
}


def _with_odd_ids(t: list, dialect: str, draw) -> list:
    """Rename tool ids to ones providers really send: per message, so turns may reuse ids."""
    out, current = [], {}
    for m in t:
        m = json.loads(json.dumps(m))
        if "parts" in m:  # a Gemini turn (its functionCalls) or its functionResponses
            if m["role"] == "assistant":
                prefix = draw(st.sampled_from(_ODD[dialect]))
                calls = [p["functionCall"] for p in m["parts"] if "functionCall" in p]
                current = {c["id"]: f"{prefix}{k}" for k, c in enumerate(calls)}
            for p in m["parts"]:
                said = p.get("functionCall") or p.get("functionResponse")
                if said:
                    said["id"] = current[said["id"]]
        elif "items" in m:  # a Responses turn (its function_calls) or its outputs
            if m["role"] == "assistant":
                prefix = draw(st.sampled_from(_ODD[dialect]))
                calls = [i for i in m["items"] if i.get("type") == "function_call"]
                current = {c["call_id"]: f"{prefix}{k}" for k, c in enumerate(calls)}
            for i in m["items"]:
                if "call_id" in i:
                    i["call_id"] = current[i["call_id"]]
        elif m["role"] == "assistant":
            prefix = draw(st.sampled_from(_ODD[dialect]))
            blocks = m["content"] if isinstance(m.get("content"), list) else []
            calls = m.get("tool_calls") or [b for b in blocks if b.get("type") == "tool_use"]
            current = {c["id"]: f"{prefix}{k}" for k, c in enumerate(calls)}
            for c in calls:
                c["id"] = current[c["id"]]
        elif m["role"] == "tool":
            m["tool_call_id"] = current[m["tool_call_id"]]
        elif isinstance(m.get("content"), list):
            for b in m["content"]:
                if b.get("type") == "tool_result":
                    b["tool_use_id"] = current[b["tool_use_id"]]
        out.append(m)
    return out


def _with_parts(t: list, dialect: str, draw) -> list:
    codec = DIALECTS[dialect]
    out = []
    for m in t:
        if m["role"] == "user" and isinstance(m["content"], str) and draw(st.booleans()):
            m = thaw(codec.user_message_parts(draw(_PARTS)))
        out.append(m)
    return out


# What providers send that only their own dialect carries (never text of the other's).
SECRET = "REASONING-ONLY-HERE"
_EXTRA = {"reasoning_content": SECRET, "reasoning_details": [
    {"type": "reasoning.text", "text": SECRET, "signature": "s", "index": 0}]}  # fmt: skip
_CALL_EXTRA = {"extra_content": {"google": {"thought_signature": SECRET}}}
_THINKING = [{"type": "thinking", "thinking": SECRET, "signature": "sig"},
             {"type": "redacted_thinking", "data": SECRET}]  # fmt: skip


def _with_fidelity(t: list, dialect: str, draw) -> list:
    """Add reasoning fields, signatures, thinking blocks, refusals and system messages."""
    out = []
    for m in t:
        if m["role"] == "assistant" and "items" in m and draw(st.booleans()):
            secret = {"type": "reasoning", "id": f"rs_secret_{len(out)}", "summary": [
                {"type": "summary_text", "text": SECRET}], "encrypted_content": SECRET}  # fmt: skip
            m = {**m, "items": [secret, *m["items"]]}
            if draw(st.booleans()) and not any(
                i.get("type") == "function_call" for i in m["items"]
            ):
                refusal = {"type": "message", "id": f"msg_refusal_{len(out)}", "role": "assistant",
                           "status": "completed",
                           "content": [{"type": "refusal", "refusal": "I can't."}]}  # fmt: skip
                m = {**m, "items": [secret, refusal]}
        elif m["role"] == "assistant" and "parts" in m and draw(st.booleans()):
            thought = {"text": SECRET, "thought": True, "thoughtSignature": SECRET}
            m = {**m, "parts": [thought, *({**p, "thoughtSignature": SECRET} if "functionCall"
                                           in p else p for p in m["parts"])]}  # fmt: skip
        elif m["role"] == "assistant" and draw(st.booleans()):
            if dialect == "openai":
                m = {**m, **draw(st.sampled_from([_EXTRA, {"reasoning_content": SECRET}]))}
                m["tool_calls"] = [{**c, **_CALL_EXTRA} for c in m.get("tool_calls") or ()] or None
                if m["tool_calls"] is None:
                    del m["tool_calls"]
                    if draw(st.booleans()):  # a refusal, as the API sends it
                        m = {"role": "assistant", "content": None, "refusal": "I can't."}
            elif isinstance(m.get("content"), list):
                kept = [b for b in m["content"] if b.get("type") not in _DROPPED]
                m = {**m, "content": [*draw(st.sampled_from([_THINKING[:1], _THINKING])), *kept]}
        out.append(m)
    if draw(st.booleans()):  # a conversation's own system message, anywhere before a user
        starts = [i for i, m in enumerate(out) if m["role"] == "user" and not any(
            b.get("type") == "tool_result" for b in _blocks_of(m))]  # fmt: skip
        at = draw(st.sampled_from(starts or [0]))
        out.insert(at, {"role": "system", "content": "Be kind."})
    return out


_DROPPED = ("thinking", "redacted_thinking")


def _blocks_of(m: dict) -> list:
    return m["content"] if isinstance(m.get("content"), list) else []


@st.composite
def any_transcript(draw):
    dialect = draw(st.sampled_from(sorted(DIALECTS)))  # every row of the registry
    t = draw(transcripts(dialect, max_turns=3, system=False))
    t = _with_parts(_with_odd_ids(t, dialect, draw), dialect, draw)
    target = draw(st.sampled_from([d for d in sorted(DIALECTS) if d != dialect]))
    return dialect, _with_fidelity(t, dialect, draw), target


def _text(content) -> str:
    if content is None or isinstance(content, str):
        return content or ""
    kinds = ("text", "input_text", "output_text")
    return "".join(b.get("text") or "" for b in content if b.get("type") in kinds)


def _media(block, dialect) -> tuple | None:
    part = DIALECTS[dialect].from_part(block)
    if part is None or part["type"] == "text":
        return None
    return part["type"], part.get("data") or part.get("url"), part.get("data") and part["mimeType"]


def project(messages, dialect: str) -> dict:
    """Return what a conversation says, whatever its dialect: the user's texts and media, the
    calls (name, args), each result with the index of the call it answers, the answers."""
    out = {"system": [], "user": [], "media": [], "calls": [], "results": [], "answers": []}
    index: dict = {}
    for m in thaw(messages):
        role, content = m["role"], m.get("content")
        blocks = content if isinstance(content, list) else []
        if "items" in m:
            _project_items(m, out, index)
        elif "parts" in m:
            _project_parts(m, out, index, dialect)
        elif role == "system":
            out["system"].append(content)
        elif role == "tool":
            out["results"].append((index[m["tool_call_id"]], _text(content)))
        elif role == "assistant":
            said = _text(content) or m.get("refusal") or ""  # a refusal is what was said
            if said:
                out["answers"].append(said)
            for c in m.get("tool_calls") or ():
                index[c["id"]] = len(out["calls"])
                out["calls"].append((c["function"]["name"], json.loads(c["function"]["arguments"])))
            for b in blocks:
                if b.get("type") == "tool_use":
                    index[b["id"]] = len(out["calls"])
                    out["calls"].append((b["name"], b["input"]))
        else:
            out["user"] += [content] if isinstance(content, str) else []
            for b in blocks:
                if b.get("type") == "tool_result":
                    out["results"].append((index[b["tool_use_id"]], _text(b["content"])))
                elif b.get("type") in ("text", "input_text"):
                    out["user"].append(b["text"])
                elif _media(b, dialect):
                    out["media"].append(_media(b, dialect))
    return out


def _project_items(m: dict, out: dict, index: dict) -> None:
    """Project a Responses message of items (a turn's output, or its call outputs)."""
    for i in m["items"]:
        kind = i.get("type")
        if kind == "function_call":
            index[i["call_id"]] = len(out["calls"])
            out["calls"].append((i["name"], json.loads(i["arguments"])))
        elif kind == "function_call_output":
            out["results"].append((index[i["call_id"]], _text(i["output"])))
        elif kind == "message" or (kind is None and i.get("role") == "assistant"):
            content = i["content"]
            said = _text(content) if isinstance(content, str) else "".join(
                p.get("text") or p.get("refusal") or "" for p in content)  # fmt: skip
            if said:
                out["answers"].append(said)


def _project_parts(m: dict, out: dict, index: dict, dialect: str) -> None:
    """Project a Gemini message of parts (a prompt, a turn, its functionResponses)."""
    said = ""
    for p in m["parts"]:
        if "functionCall" in p:
            index[p["functionCall"]["id"]] = len(out["calls"])
            out["calls"].append((p["functionCall"]["name"], p["functionCall"]["args"]))
        elif "functionResponse" in p:
            answer = p["functionResponse"]["response"]
            said_back = answer.get("output", answer.get("error", ""))
            said_back = said_back if isinstance(said_back, str) else _text(said_back)
            out["results"].append((index[p["functionResponse"]["id"]], said_back))
        elif p.get("thought") or "text" not in p:
            if _media(p, dialect):
                out["media"].append(_media(p, dialect))
        elif m["role"] == "assistant":
            said += p["text"]
        else:
            out["user"].append(p["text"])
    if said:
        out["answers"].append(said)


def _spec_valid(body: dict, dialect: str) -> None:
    if available():
        assert spec_problems(body, dialect) == []


@given(any_transcript(), st.text(min_size=1, max_size=5))
def test_a_translated_conversation_is_accepted_and_loses_nothing(case, prompt):
    dialect, t, target = case  # from any row of the registry to any other
    tr = translate(t, target)
    assert not any(dangling(tr.messages).values())
    codec = DIALECTS[target]
    body = codec.body("m", tr.messages.append(codec.user_message(prompt)), [], tr.system, {})
    assert validate_request(thaw(body), target) == []
    _spec_valid(thaw(body), target)
    assert SECRET not in json.dumps(thaw(tr.messages))  # no reasoning crossed over
    was, now = project(t, dialect), project(tr.messages, target)
    if now["system"] != was["system"]:  # the target lifts system text into its body
        assert tr.system == "\n\n".join(was.pop("system")) and now.pop("system") == []
    assert now == was
    back = translate(tr.messages, dialect)  # and home again, still whole
    home = project(back.messages, dialect)
    assert {k: v for k, v in home.items() if k != "system"} == {
        k: v for k, v in now.items() if k != "system"
    }
    # Home, every field its provider sent is still there (ids aside: a reused id moves).
    assert own_fields(translate(t, dialect, keep_system=True).messages) == own_fields(t)


def own_fields(messages) -> list:
    """Return what only a provider's own dialect carries, in order: fields of assistant
    messages and tool calls the loop does not read, thinking blocks."""
    out = []
    for m in thaw(messages):
        if m["role"] != "assistant":
            continue
        if "items" in m:  # a Responses turn: its reasoning items
            out += [i for i in m["items"] if i.get("type") == "reasoning"]
            continue
        if "parts" in m:  # a Gemini turn: its thoughts and signatures
            out += [{k: v for k, v in p.items() if k != "functionCall"} for p in m["parts"]
                    if p.get("thought") or "thoughtSignature" in p]  # fmt: skip
            continue
        out.append({k: v for k, v in m.items() if k not in ("role", "content", "tool_calls")})
        out += [{k: v for k, v in c.items() if k not in ("id", "type", "function")}
                for c in m.get("tool_calls") or ()]  # fmt: skip
        blocks = m["content"] if isinstance(m["content"], list) else []
        out += [b for b in blocks if b.get("type") in _DROPPED]
    return out


@given(any_transcript(), st.text(min_size=1, max_size=5))
def test_the_loop_keeps_system_messages_and_a_request_lifts_them(case, prompt):
    dialect, t, _ = case
    for target in DIALECTS:
        tr = translate(t, target, keep_system=True)
        assert tr.system == "" and project(tr.messages, target)["system"] == project(
            t, dialect)["system"]  # fmt: skip
        codec = DIALECTS[target]
        history = codec.replayable(tr.messages)
        body = thaw(codec.body("m", list(history) + [codec.user_message(prompt)], [], "S", {}))
        assert validate_request(body, target) == []
        if "system" in body:  # lifted into the body (anthropic)
            assert body["system"] == "\n\n".join([*project(t, dialect)["system"], "S"])


# ---- end to end: one id, two dialects, one store -----------------------------------------


@define_tool
def get_weather(city: str) -> str:
    """Return the weather for a city."""
    return f"sunny in {city}"


def test_openai_then_anthropic_then_openai_on_one_id(tmp_path):
    store = sqlite_store(tmp_path / "chat.db")
    odd = {"id": "functions.get_weather:0", "name": "get_weather", "arguments": {"city": "Oslo"}}
    with fake_provider([tool_calls_reply(odd), text_reply("Oslo is sunny."),
                        text_reply("Still sunny."), text_reply("Yes.")]) as fp:  # fmt: skip

        def client(style):
            return create_client(base_url=fp.url, style=style, model="m", store=store,
                                 system_prompt="Be brief.")  # fmt: skip

        run(client("openai"), "Weather in Oslo?", toolkit=[get_weather], conversation_id="c")
        r = run(client("anthropic"), "And now?", toolkit=[get_weather], conversation_id="c")
        assert r["text"] == "Still sunny." and dialect_of(store["get"]("c")) == "anthropic"
        r = run(client("openai"), "Sure?", toolkit=[get_weather], conversation_id="c")
    assert r["text"] == "Yes." and [q["body"] for q in fp.requests]  # every request was valid
    said = project(store["get"]("c"), "openai")
    assert said["user"] == ["Weather in Oslo?", "And now?", "Sure?"]
    assert said["calls"] == [("get_weather", {"city": "Oslo"})]
    assert said["results"] == [(0, "sunny in Oslo")]
    assert said["answers"] == ["Oslo is sunny.", "Still sunny.", "Yes."]

"""The fake provider refuses what the real APIs refuse: every request is checked against the
provider's published request schema (shipped in toolnexus/testing/specs/), over real HTTP."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from dialect_kit import covers, url_of
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import ProviderError, create_client, run, stream
from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.testing import fake_provider, text_reply, transcripts
from toolnexus.testing.specs import derive
from toolnexus.testing.validators import schema_problems, validate_request

DATA = Path(__file__).resolve().parent / "data"  # copied from shared/: see data/README.md
SPECS, FIXTURES = DATA / "specs", DATA / "fixtures" / "sse"
SHIPPED = Path(derive.__file__).resolve().parent
U = {"role": "user", "content": "q"}
# The least each API takes: the base of every refusal below (itself accepted).
VALID = covers(
    {
        "openai": {"model": "m", "messages": [U]},
        "anthropic": {"model": "m", "max_tokens": 64, "messages": [U]},
        "responses": {"model": "m", "input": [U]},
        "gemini": {"contents": [{"role": "user", "parts": [{"text": "q"}]}]},
    },
    "VALID",
)
TOOL = covers({
    "openai": lambda name: {"type": "function", "function": {"name": name, "parameters": {}}},
    "anthropic": lambda name: {"name": name, "input_schema": {"type": "object"}},
    "responses": lambda name: {"type": "function", "name": name, "parameters": {},
                               "strict": False},
    "gemini": lambda name: {"functionDeclarations": [{"name": name, "parametersJsonSchema": {}}]},
}, "TOOL")  # fmt: skip
# Whose error envelope each API answers in (Responses: OpenAI's, with its `param`).
ENVELOPE = covers({"openai": "openai", "anthropic": "anthropic", "responses": "openai",
                   "gemini": "google"}, "ENVELOPE")  # fmt: skip


def post(dialect: str, body: dict) -> httpx.Response:
    with fake_provider([text_reply("ok")]) as fp:
        return httpx.post(url_of(dialect, fp.url), json=body, timeout=10)


def refusal(resp: httpx.Response, dialect: str) -> str:
    """Assert a 400 in the provider's own error shape; return its message."""
    assert resp.status_code == 400, resp.text
    body = resp.json()
    if ENVELOPE[dialect] == "google":
        assert set(body) == {"error"} and body["error"]["status"] == "INVALID_ARGUMENT"
        return body["error"]["message"]
    if ENVELOPE[dialect] == "openai":
        assert set(body) == {"error"}
        assert set(body["error"]) == {"message", "type", "param", "code"}
        assert body["error"]["type"] == "invalid_request_error"
        return body["error"]["message"]
    assert set(body) == {"type", "error"} and body["type"] == "error"
    assert set(body["error"]) == {"type", "message"}
    assert body["error"]["type"] == "invalid_request_error"
    return body["error"]["message"]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_the_least_valid_request_is_accepted(dialect):
    assert post(dialect, VALID[dialect]).status_code == 200


def test_a_missing_max_tokens_on_anthropic_is_refused():
    body = {k: v for k, v in VALID["anthropic"].items() if k != "max_tokens"}
    assert refusal(post("anthropic", body), "anthropic").startswith("max_tokens: a required field")


@pytest.mark.parametrize(
    "dialect, change, path",
    [
        ("openai", {"tempreature": 0.5}, "tempreature"),
        ("anthropic", {"tempreature": 0.5}, "tempreature"),
        ("openai", {"tools": [TOOL["openai"]("weather.get")]}, "tools[0].function.name"),
        ("anthropic", {"tools": [TOOL["anthropic"]("weather.get")]}, "tools[0].name"),
        ("openai", {"messages": [{"role": "robot", "content": "q"}]}, "messages[0].role"),
        ("anthropic", {"messages": [{"role": "robot", "content": "q"}]}, "messages[0].role"),
        ("anthropic", {"messages": [{"role": "user", "content": [{"type": "text", "text": "q",
                                                                  "file_id": None}]}]},
         "messages[0].content[0].file_id"),
        ("openai", {"temperature": "hot"}, "temperature"),
        ("responses", {"tempreature": 0.5}, "tempreature"),
        ("responses", {"input": [U, {"type": "robot", "id": "x"}]}, "input[1].type"),
        ("responses", {"input": [{"role": "robot", "content": "q"}]}, "input[0].role"),
        ("responses", {"input": [{"role": "user", "content": [{"type": "text", "text": "q"}]}]},
         "input[0].content[0].type"),
        ("responses", {"tools": [{"type": "function", "parameters": {}, "strict": False}]},
         "tools[0].name"),
        ("responses", {"tools": [{"type": "function", "name": "f", "parameters": {}}]},
         "tools[0].strict"),
        ("responses", {"input": [U, {"type": "function_call", "call_id": "c", "name": "f",
                                     "arguments": {"a": 1}}, {"type": "function_call_output",
                                                              "call_id": "c", "output": "1"}]},
         "input[1].arguments"),
        ("responses", {"store": "no"}, "store"),
    ],
)  # fmt: skip
def test_what_the_api_refuses_is_answered_400_naming_the_field(dialect, change, path):
    resp = post(dialect, {**VALID[dialect], **change})
    message = refusal(resp, dialect)
    assert message.startswith(path + ": "), message
    if ENVELOPE[dialect] == "openai":
        assert resp.json()["error"]["param"] == path


def test_a_bad_responses_item_type_is_refused_with_the_types_the_schema_offers():
    message = refusal(post("responses", {**VALID["responses"], "input": [{"type": "robot"}]}),
                      "responses")  # fmt: skip
    offered = message.split(" is not one of ", 1)[1]
    for kind in ("message", "function_call", "function_call_output", "reasoning",
                 "item_reference"):  # fmt: skip
        assert f'"{kind}"' in offered


def test_a_responses_user_message_of_parts_is_accepted_though_two_input_item_shapes_fit_it():
    """Read literally (oneOf: exactly one branch), the published InputItem refuses it: it
    is both an EasyInputMessage and an InputMessage. Its discriminator makes it an anyOf."""
    parts = [
        {"type": "input_text", "text": "q"},
        {"type": "input_image", "image_url": "https://x/y.png", "detail": "auto"},
    ]
    body = {**VALID["responses"], "input": [{"role": "user", "content": parts}]}
    assert post("responses", body).status_code == 200


def test_the_schema_judges_a_responses_request_as_sent_not_the_items_the_server_kept():
    """The server's kept items (here one of a built-in tool, in its answer's shape) are not
    the request's: only what the client sent is checked against CreateResponse."""
    with fake_provider([text_reply("ok")]) as fp:
        fp.kept["resp_0"] = [U, {"type": "web_search_call", "id": "ws_1", "status": "done"}]
        body = {**VALID["responses"], "previous_response_id": "resp_0"}
        assert httpx.post(fp.url + "/responses", json=body).status_code == 200
        bad = {**body, "input": [{"role": "robot", "content": "q"}]}
        assert refusal(httpx.post(fp.url + "/responses", json=bad), "responses").startswith(
            "input[0].role: "
        )


def test_a_good_tool_name_passes_where_a_bad_one_is_refused():
    for dialect in sorted(DIALECTS):
        ok = {**VALID[dialect], "tools": [TOOL[dialect]("get_weather-2")]}
        assert post(dialect, ok).status_code == 200


def test_the_schema_check_can_be_left_out_for_a_compatible_providers_extras():
    body = {**VALID["openai"], "provider": {"order": ["x"]}}  # OpenRouter's routing field
    with fake_provider([text_reply("ok")], schema=False) as fp:
        assert httpx.post(url_of("openai", fp.url), json=body).status_code == 200
        broken = {**body, "messages": [{"role": "assistant", "content": ""}]}
        assert httpx.post(url_of("openai", fp.url), json=broken).status_code == 400  # ours stay


def test_a_client_sees_the_schema_refusal_as_a_provider_error():
    with fake_provider([text_reply("ok")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m",
                          body_transform=lambda b: {**b, "max_tokens": "lots"})  # fmt: skip
        with pytest.raises(ProviderError) as e:
            run(c, "hi")
    assert e.value.status == 400 and "max_tokens: 'lots' is not of type 'integer'" in str(e.value)


def test_importing_toolnexus_or_the_fake_provider_loads_no_jsonschema():
    code = (
        "import sys, toolnexus, toolnexus.testing.fake_provider;"
        "print([m for m in ('jsonschema', 'referencing') if m in sys.modules])"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


# ---- the shipped documents are the published ones, cut reproducibly -----------------


def test_the_shipped_specs_are_what_derive_cuts_from_the_published_documents():
    made = derive.derive(SPECS)
    assert sorted(made) == sorted(p.name for p in SHIPPED.glob("*.json"))
    for name, text in made.items():
        assert (SHIPPED / name).read_text(encoding="utf-8") == text, name
        if (SPECS / name).exists():  # data/ has the chat and messages cuts, not this one
            assert (SPECS / name).read_text(encoding="utf-8") == text, name


def test_a_nullable_without_a_type_becomes_an_explicit_null_and_one_beside_a_type_stays():
    doc = {"nullable": True, "description": "d", "oneOf": [{"type": "string", "nullable": True}]}
    assert derive._untyped_nullable(doc) == {
        "description": "d",
        "anyOf": [{"oneOf": [{"type": "string", "nullable": True}]}, {"type": "null"}],
    }


# ---- the test kit's strategies make requests the published schemas accept -------------


def _request(dialect: str, transcript: list, prompt: str) -> dict:
    codec = DIALECTS[dialect]
    tools = [codec.tool_entry({"name": n, "description": "d", "input_schema": {
        "type": "object", "properties": {"a": {"type": "integer"}}}})
        for n in ("add", "get_weather", "search", "lookup_2")]  # fmt: skip
    messages = freeze(transcript).append(codec.user_message(prompt))
    params = (
        {"generationConfig": {"temperature": 0.2}} if dialect == "gemini" else {"temperature": 0.2}
    )  # (Gemini's sampling settings are in its generationConfig)
    return thaw(codec.body("m", messages, tools, "be brief", params))


@given(
    st.sampled_from(sorted(DIALECTS)).flatmap(
        lambda d: st.tuples(st.just(d), transcripts(d, max_turns=3))
    ),
    st.text(min_size=1, max_size=5),
    st.booleans(),
)
def test_requests_built_from_the_kits_transcripts_are_valid_under_the_published_schemas(
    case, prompt, streaming
):
    dialect, transcript = case
    body = _request(dialect, transcript, prompt)
    if streaming:
        body = DIALECTS[dialect].stream_body(body)
    assert validate_request(body, dialect) == []


# ---- replayed answers keep to the request shape --------------------------------------

CITED = {
    "type": "char_location", "cited_text": "grass is green", "document_index": 0,
    "document_title": "facts", "start_char_index": 0, "end_char_index": 14, "file_id": None,
}  # fmt: skip


def test_an_anthropic_answer_with_citations_replays_without_the_response_only_file_id():
    """Failed before: the stored text block kept `file_id`, which requests refuse (400)."""
    answer = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "m",
        "content": [{"type": "text", "text": "It is green.", "citations": [CITED]}],
        "stop_reason": "end_turn", "usage": {"input_tokens": 5, "output_tokens": 3},
    }  # fmt: skip
    with fake_provider([{"status": 200, "body": answer}, text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        first = run(c, "What colour is grass?")
        second = run(c, "Sure?", history=first["messages"])
    assert second["text"] == "yes"
    replayed = fp.requests[1]["body"]["messages"][1]["content"][0]
    assert replayed["citations"] == [{k: v for k, v in CITED.items() if k != "file_id"}]


def _sse(event: str, data: dict) -> str:
    return f"event: {event}\ndata: {json.dumps(data)}\n\n"


def test_a_streamed_citation_replays_without_the_response_only_file_id():
    """Failed before: the citations_delta's `file_id` went back in the next request (400)."""
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
             "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    block = {"type": "text", "text": "", "citations": []}
    recorded = "".join([
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": block}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "citations_delta", "citation": CITED}}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "text_delta", "text": "It is green."}}),
        _sse("content_block_stop", {"type": "content_block_stop", "index": 0}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "end_turn"},
                               "usage": {"output_tokens": 3}}),
        _sse("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip
    with fake_provider([{"sse": recorded}, text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        events = list(stream(c, "What colour is grass?"))
        first = events[-1]["result"]
        assert first["text"] == "It is green."
        assert run(c, "Sure?", history=first["messages"])["text"] == "yes"
    assert "file_id" not in fp.requests[1]["body"]["messages"][1]["content"][0]["citations"][0]


# ---- the recorded streams of real providers, replayed through the fake --------------

RECORDED = sorted(p.stem for p in FIXTURES.glob("*.sse"))


def test_the_recorded_streams_are_here():
    assert len(RECORDED) >= 16, FIXTURES


@pytest.mark.parametrize("name", RECORDED)
def test_a_recorded_stream_is_read_and_what_it_said_is_accepted_on_the_next_request(name):
    meta = json.loads((FIXTURES / f"{name}.json").read_text())
    dialect = "openai" if meta["dialect"].startswith("openai") else "anthropic"
    recorded = (FIXTURES / f"{name}.sse").read_bytes()
    script = [{"sse": recorded, "chunk": 7}, text_reply("and then"), text_reply("done")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=dialect, model=meta.get("model") or "m")
        if "error" in meta["expect"]:  # the stream carries the provider's error
            with pytest.raises(ProviderError):
                list(stream(c, "q"))
            return
        events = list(stream(c, "q"))  # its tool calls (if any) answered, then "and then"
        said = "".join(e["delta"] for e in events if e["type"] == "text")
        assert said.startswith(meta["expect"]["text"])
        again = run(c, "next", history=events[-1]["result"]["messages"])
    assert again["status"] == "done"
    assert all(schema_problems(r["body"], dialect) == [] for r in fp.requests)


@pytest.mark.parametrize(
    "part",
    [
        {"type": "image", "mimeType": "image/PNG", "data": "aGk="},
        {"type": "file", "mimeType": "Application/PDF", "data": "aGk="},
        {"type": "file", "mimeType": "application/pdf", "data": "aGk=", "name": "n" * 600},
    ],
    ids=["image-mime-in-capitals", "pdf-mime-in-capitals", "pdf-named-600-chars"],
)
def test_an_anthropic_media_part_goes_out_in_the_shape_the_request_schema_takes(part):
    """Failed before: the mime type went out as given (the schema's enum is lower case) and
    a document's title was the whole name (the schema takes at most 500 characters)."""
    with fake_provider([text_reply("a picture")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        assert run(c, [{"type": "text", "text": "what is it?"}, part])["text"] == "a picture"
    block = fp.requests[0]["body"]["messages"][0]["content"][1]
    assert block["source"]["media_type"] == part["mimeType"].lower()
    assert len(block.get("title", "")) <= 500


def test_a_thinking_block_cut_before_its_signature_is_not_replayed():
    """Failed before: a stream stopped by max_tokens mid-thinking left a thinking block
    without `signature`, which the request schema requires (400 on the next turn)."""
    start = {"id": "msg_1", "type": "message", "role": "assistant", "model": "m", "content": [],
             "stop_reason": None, "usage": {"input_tokens": 5, "output_tokens": 1}}  # fmt: skip
    thinking = {"type": "thinking", "thinking": ""}
    recorded = "".join([
        _sse("message_start", {"type": "message_start", "message": start}),
        _sse("content_block_start", {"type": "content_block_start", "index": 0,
                                     "content_block": thinking}),
        _sse("content_block_delta", {"type": "content_block_delta", "index": 0,
                                     "delta": {"type": "thinking_delta", "thinking": "Let me"}}),
        _sse("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                               "usage": {"output_tokens": 3}}),
        _sse("message_stop", {"type": "message_stop"}),
    ])  # fmt: skip
    with fake_provider([{"sse": recorded}, text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        first = list(stream(c, "Think hard."))[-1]["result"]
        assert run(c, "Go on.", history=first["messages"])["text"] == "yes"
    assert [m["role"] for m in fp.requests[1]["body"]["messages"]] == ["user", "user"]


@pytest.mark.parametrize("dialect", sorted(DIALECTS))
def test_a_body_that_is_not_an_object_is_refused_in_the_providers_shape(dialect):
    assert "a request body is a JSON object" in refusal(post(dialect, [1, 2]), dialect)


def test_each_missing_required_field_is_named_by_its_own_path():
    assert schema_problems({"messages": [U]}, "anthropic") == [
        "model: a required field is missing ('model' is a required property)",
        "max_tokens: a required field is missing ('max_tokens' is a required property)",
    ]


@pytest.mark.parametrize("block", [{"text": "no type"}, {"type": ["text"], "text": "x"}])
def test_an_anthropic_block_without_a_string_type_is_a_malformed_answer_not_a_later_400(block):
    """Failed before: the block was stored as it came and sent back on the next turn, which
    the request schema refuses (every content block has a string `type`)."""
    answer = {"content": [{"type": "text", "text": "hi"}, block], "stop_reason": "end_turn",
              "usage": {"input_tokens": 5, "output_tokens": 3}}  # fmt: skip
    with fake_provider([{"status": 200, "body": answer}, text_reply("yes")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m", retries=0)
        with pytest.raises(ProviderError, match=r"content\[1\]\.type is not a string"):
            run(c, "Say hi.")


def test_without_jsonschema_the_fake_provider_says_what_to_install():
    """schema=True insists on the published-schema check (the default warns: see
    tests/test_without_testing_extra.py)."""
    code = (
        "import sys; sys.modules['jsonschema'] = None\n"
        "from toolnexus.testing import fake_provider\n"
        "with fake_provider([], schema=False):  # our rules alone need nothing\n"
        "    pass\n"
        "try:\n"
        "    fake_provider([], schema=True)\n"
        "except ImportError as e:\n"
        "    print(e)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pip install 'toolnexus[testing]'" in out.stdout

"""The native Gemini codec (core/wire/gemini.py), rule by rule: its URLs, tools, params,
content parts, the request's contents, the transcript algebra and tool results. Pure,
no I/O."""

from __future__ import annotations

import pytest
from pyrsistent import pvector

from toolnexus.core.errors import ProviderError
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import gemini as G
from toolnexus.core.wire.gemini_schema import UnsupportedSchemaError

PV = type(pvector())


def test_the_module_constants():
    assert G.KEY_ENV == ("GEMINI_API_KEY", "GOOGLE_API_KEY")
    assert G.OWNED_PARAMS == ("model", "contents", "tools", "systemInstruction")
    assert G.VERSION == "v1beta"


# ---- where and how ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("base", "model", "stream", "url"),
    [
        ("https://h", "m", False, "https://h/v1beta/models/m:generateContent"),
        ("https://h//", "models/m", False, "https://h/v1beta/models/m:generateContent"),
        ("https://h/v1", "m", True, "https://h/v1/models/m:streamGenerateContent?alt=sse"),
        ("https://h/v2beta/", "m", False, "https://h/v2beta/models/m:generateContent"),
        ("https://h/version", "m", False, "https://h/version/v1beta/models/m:generateContent"),
        ("https://h/v", "m", False, "https://h/v/v1beta/models/m:generateContent"),
        ("https://h/x1", "m", False, "https://h/x1/v1beta/models/m:generateContent"),
        ("https://h/api", "a/models/m", False, "https://h/api/v1beta/models/a/models/m:"
                                               "generateContent"),
    ],
)  # fmt: skip
def test_model_url(base, model, stream, url):
    assert G.model_url(base, model, stream) == url


def test_url_headers_and_stream_body():
    assert G.url("https://h/") == "https://h/v1beta/models"
    assert G.url("https://h/v1") == "https://h/v1/models"
    assert G.url("https://h/X") == "https://h/X/v1beta/models"  # only slashes go
    assert G.headers("k") == {"x-goog-api-key": "k"}
    assert G.headers(None) == {} and G.headers("") == {}
    body = {"contents": []}
    assert G.stream_body(body) is body


# ---- tools -----------------------------------------------------------------------------


TOOL = {"name": "add", "description": "adds", "input_schema": {"type": "object"}}
DECL = {"name": "add", "description": "adds", "parametersJsonSchema": {"type": "object"}}


def test_a_tool_entry_is_a_tool_of_one_declaration():
    made = G.tool_entry(TOOL)
    assert thaw(made) == {"functionDeclarations": [DECL]}
    assert isinstance(made["functionDeclarations"], PV)


def test_encode_tools_joins_the_declarations_then_the_provider_tools():
    assert G.encode_tools(None) == () and G.encode_tools({}) == ()
    search = {"googleSearch": {}}
    other = {**DECL, "name": "sub"}
    entries = [{"functionDeclarations": [DECL]}, search, {"functionDeclarations": [other]},
               {"functionDeclarations": "x"}]  # fmt: skip
    made = G.encode_tools({"wire": {"gemini": entries}, "tools": []})
    assert isinstance(made, PV)
    assert thaw(made) == [{"functionDeclarations": [DECL, other]}, search,
                          {"functionDeclarations": "x"}]  # fmt: skip
    assert thaw(G.encode_tools({"wire": {"gemini": [search]}})) == [search]
    for toolkit in ({"wire": None, "tools": [TOOL]}, {"wire": {"x": 1}, "tools": [TOOL]}):
        assert thaw(G.encode_tools(toolkit)) == [{"functionDeclarations": [DECL]}]


def test_encode_tools_refuses_a_schema_gemini_does_not_take_naming_the_tool():
    bad = {**TOOL, "input_schema": {"type": "object", "patternProperties": {}}}
    with pytest.raises(UnsupportedSchemaError) as e:
        G.encode_tools({"tools": [bad]})
    assert str(e.value).startswith(
        "tool 'add': Gemini does not take the JSON Schema keyword 'patternProperties' (at #);"
    )


def test_what_the_codec_leaves_as_it_is():
    tools, body = ["t"], {"contents": []}
    assert G.cache_tools(tools) is tools and G.cache_body(body, "conv") is body
    assert G.omissions("gemini-2.5-pro") == frozenset()
    assert G.refused_part(ProviderError("x", status=400)) is None
    assert G.omit(body, frozenset({"encrypted_content"})) is body


# ---- params ----------------------------------------------------------------------------


def test_a_forced_call_holds_for_the_first_turn_only():
    for params in (None, {}, {"toolConfig": "x"}, {"toolConfig": {"functionCallingConfig": 1}},
                   {"toolConfig": {"functionCallingConfig": {"mode": "AUTO"}}},
                   {"toolConfig": {"functionCallingConfig": {"mode": "NONE"}}}):  # fmt: skip
        assert G.later_params(params) is params
    for mode in ("ANY", "VALIDATED"):
        calling = {"mode": mode, "allowedFunctionNames": ["f"], "other": 1}
        params = {"toolConfig": {"functionCallingConfig": calling, "keep": 2}, "x": 3}
        assert thaw(G.later_params(params)) == {
            "toolConfig": {"functionCallingConfig": {"other": 1, "mode": "AUTO"}, "keep": 2},
            "x": 3,
        }


def test_with_output_asks_for_json_with_its_schema():
    spec = {"name": "n", "schema": {"type": "object"}}
    want = {"responseMimeType": "application/json", "responseJsonSchema": {"type": "object"}}
    assert thaw(G.with_output(None, spec)) == {"generationConfig": want}
    assert thaw(G.with_output({"generationConfig": None}, spec)) == {"generationConfig": want}
    given = {"generationConfig": {"temperature": 0, "responseSchema": {"x": 1}}, "y": 1}
    assert thaw(G.with_output(given, spec)) == {"generationConfig": {"temperature": 0, **want},
                                                "y": 1}  # fmt: skip
    with pytest.raises(UnsupportedSchemaError) as e:
        G.with_output({}, {"name": "n", "schema": {"not": {}}})
    assert str(e.value).startswith("output schema 'n': Gemini does not take the JSON Schema "
                                   "keyword 'not' (at #);")  # fmt: skip


# ---- content parts ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("part", "made"),
    [
        ({"type": "text", "text": "hi"}, {"text": "hi"}),
        ({"type": "image", "mimeType": "image/png", "data": "aGk="},
         {"inlineData": {"mimeType": "image/png", "data": "aGk="}}),
        ({"type": "file", "data": "", "url": "https://x/a.pdf"},
         {"inlineData": {"mimeType": None, "data": ""}}),
        ({"type": "image", "url": "data:image/gif;base64,R0"},
         {"inlineData": {"mimeType": "image/gif", "data": "R0"}}),
        ({"type": "file", "url": "https://x/a.bin", "mimeType": "application/zip"},
         {"fileData": {"mimeType": "application/zip", "fileUri": "https://x/a.bin"}}),
        ({"type": "image", "url": "https://x/a.PNG"},
         {"fileData": {"mimeType": "image/png", "fileUri": "https://x/a.PNG"}}),
        ({"type": "audio", "url": "https://x/a.wav", "data": None},
         {"fileData": {"mimeType": "audio/wav", "fileUri": "https://x/a.wav"}}),
        ({"type": "file", "url": "https://x/a.zzz"}, {"fileData": {"fileUri": "https://x/a.zzz"}}),
    ],
)  # fmt: skip
def test_to_part(part, made):
    assert thaw(G.to_part(part)) == made


@pytest.mark.parametrize(
    ("block", "part"),
    [
        ("text", None),
        ({"text": "a", "thought": True}, None),
        ({"functionCall": {"name": "f"}}, None),
        ({"text": "a"}, {"type": "text", "text": "a"}),
        ({"text": "a", "thought": False}, {"type": "text", "text": "a"}),
        ({"text": 3}, None),
        ({"inlineData": {"mimeType": "image/png", "data": "aGk=", "displayName": "a.png"}},
         {"type": "image", "mimeType": "image/png", "data": "aGk=", "name": "a.png"}),
        ({"inlineData": {"mimeType": "audio/wav", "data": "aGk="}},
         {"type": "audio", "mimeType": "audio/wav", "data": "aGk="}),
        ({"inlineData": {"mimeType": "video/mp4", "data": "aGk="}},
         {"type": "file", "mimeType": "video/mp4", "data": "aGk="}),
        ({"inlineData": {"mimeType": 5, "data": "aGk="}}, {"type": "file", "data": "aGk="}),
        ({"inlineData": {"data": 5}}, None),
        ({"inlineData": "x", "fileData": {"fileUri": "https://x/a"}},
         {"type": "file", "url": "https://x/a"}),
        ({"fileData": {"mimeType": "image/jpeg", "fileUri": "gs://b/a.jpg"}},
         {"type": "image", "mimeType": "image/jpeg", "url": "gs://b/a.jpg"}),
        ({"fileData": {"data": "aGk="}}, None),
    ],
)  # fmt: skip
def test_from_part(block, part):
    got = G.from_part(block)
    assert (None if got is None else dict(got)) == part


def test_user_messages():
    assert dict(G.user_message("hi")) == {"role": "user", "content": "hi"}
    made = G.user_message_parts([{"type": "text", "text": "hi"}])
    assert thaw(made) == {"role": "user", "parts": [{"text": "hi"}]}
    assert isinstance(made["parts"], PV)
    image = {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="}
    with pytest.raises(ValueError, match="image part of 5 bytes exceeds max_part_bytes=4"):
        G.user_message_parts([image], max_part_bytes=4)
    assert "inlineData" in G.user_message_parts([image], max_part_bytes=5)["parts"][0]
    with pytest.raises(ValueError):
        G.user_message_parts([{"type": "nope"}])


# ---- the request -----------------------------------------------------------------------


def test_a_message_without_parts_goes_as_its_text():
    blocks = [{"type": "text", "text": "a"}, {"text": 3}, "x", {"text": "b"}]
    for content, text in (("hi", "hi"), (blocks, "ab"), (tuple(blocks), "ab"), (5, ""),
                          (None, "")):  # fmt: skip
        got, _ = G.contents([{"role": "user", "content": content}])
        assert thaw(got) == ([{"role": "user", "parts": [{"text": text}]}] if text else [])


def test_a_request_leaves_out_empty_text_and_unsigned_thoughts():
    parts = [
        {"text": ""},
        {"text": "", "thought": False},
        {"text": "", "thoughtSignature": "s"},
        {"text": "", "a": 1, "b": 2},
        {"text": "t", "thought": True},
        {"text": "t", "thought": True, "thoughtSignature": "s2"},
        "junk",
        {"text": "said"},
    ]
    got, _ = G.contents([{"role": "assistant", "parts": parts}])
    assert got == [{"role": "model", "parts": [parts[2], parts[3], parts[5], parts[7]]}]
    assert got[0]["parts"][3] is parts[7]


def test_a_response_without_a_name_gets_its_calls_name():
    turn = {"role": "assistant", "parts": [{"functionCall": {"id": "c", "name": "f"}},
                                           {"functionCall": {"id": "d"}},
                                           {"functionCall": {"name": "nameless"}}]}  # fmt: skip
    named = {"functionResponse": {"id": "c", "name": "given", "response": {}}}
    results = {"role": "tool", "parts": [
        {"functionResponse": {"id": "c", "response": {}}},
        {"functionResponse": {"id": "d", "name": "", "response": {}}},
        {"functionResponse": {"id": "z", "response": {}}},
        named,
    ]}  # fmt: skip
    got, _ = G.contents([turn, results])
    assert thaw(got[1]) == {"role": "user", "parts": [
        {"functionResponse": {"id": "c", "name": "f", "response": {}}},
        {"functionResponse": {"id": "d", "name": "", "response": {}}},
        {"functionResponse": {"id": "z", "name": "", "response": {}}},
        named,
    ]}  # fmt: skip
    assert got[1]["parts"][3] is named
    # a call of another role names nothing
    got, _ = G.contents([{**turn, "role": "user"}, results])
    assert got[0]["parts"][-2]["functionResponse"]["name"] == ""


def test_contents_lift_system_text_and_join_adjacent_roles():
    msgs = [
        {"role": "system", "content": "s1"},
        {"role": "user", "content": "a"},
        {"role": "developer", "content": [{"type": "text", "text": "s2"}]},
        {"role": "user", "parts": [{"text": "b"}]},
        {"role": "assistant", "content": ""},
        {"role": "tool", "parts": [{"functionResponse": {"id": "c", "name": "f"}}]},
        {"role": "assistant", "content": "x"},
        {"role": "assistant", "parts": [{"text": "y"}]},
        {"role": "user", "content": "c"},
    ]
    got, system = G.contents(msgs)
    assert system == ["s1", "s2"]
    assert G.contents([{"role": "system", "content": 5}]) == ([], [""])
    assert thaw(got) == [
        {"role": "user", "parts": [{"text": "a"}, {"text": "b"},
                                   {"functionResponse": {"id": "c", "name": "f"}}]},
        {"role": "model", "parts": [{"text": "x"}, {"text": "y"}]},
        {"role": "user", "parts": [{"text": "c"}]},
    ]  # fmt: skip


def test_the_body_fields():
    msgs = [{"role": "system", "content": "lifted"}, {"role": "user", "content": "hi"}]
    contents = [{"role": "user", "parts": [{"text": "hi"}]}]
    assert thaw(G.body("m", msgs, (), "sys", None)) == {
        "contents": contents,
        "systemInstruction": {"parts": [{"text": "lifted\n\nsys"}]},
    }
    assert thaw(G.body("m", msgs[1:], ["t"], "", {"x": 1})) == {
        "contents": contents,
        "tools": ["t"],
        "x": 1,
    }
    assert thaw(G.body("m", msgs, (), "", {}))["systemInstruction"] == {
        "parts": [{"text": "lifted"}]
    }
    said = G.body("m", [{"role": "system", "content": ""}, *msgs[1:]], (), "s", {})
    assert thaw(said["systemInstruction"]) == {"parts": [{"text": "s"}]}
    assert isinstance(said["systemInstruction"]["parts"], PV)


def test_replayable_drops_assistant_turns_with_nothing_to_send():
    ok = [{"role": "user", "content": ""}, {"role": "assistant", "content": "x"}]
    assert G.replayable(ok) is ok
    empty = [
        {"role": "assistant", "content": ""},
        {"role": "assistant", "parts": [{"text": ""}]},
        {"role": "assistant", "parts": [{"text": "t", "thought": True}]},
    ]
    got = G.replayable([empty[0], ok[0], empty[1], ok[1], empty[2]])
    assert got == ok
    odd = [{"role": "assistant", "parts": [{"functionResponse": {"id": "c"}}]}]
    assert G.replayable(odd) is odd


# ---- the transcript algebra ------------------------------------------------------------


def test_owns_calls_and_results():
    for parts in ([], (), pvector()):
        assert G.owns({"parts": parts}) is True
    assert G.owns({"parts": "x"}) is False and G.owns({}) is False
    turn = {"role": "assistant", "parts": [{"functionCall": {"id": "a"}}, {"text": "x"},
                                           {"functionCall": {"id": 3}}, "junk",
                                           {"functionCall": "x"},
                                           {"functionCall": {"id": "b"}}]}  # fmt: skip
    assert G.call_ids(turn) == ("a", "b")
    assert G.call_ids({**turn, "role": "user"}) == ()
    assert G.call_ids({"role": "assistant", "content": "x"}) == ()
    a = {"functionResponse": {"id": "a"}}
    b = {"functionResponse": {"name": "f"}}
    results = {"role": "tool", "parts": [a, {"text": "x"}, "junk", {"functionResponse": 1}, b]}
    assert G.result_items(results) == (a, b)
    assert G.result_items({"parts": None}) == () and G.result_items({}) == ()
    assert G.result_ids(results) == ("a", None)
    assert G.result_ids({**results, "role": "user"}) == ()
    assert G.result_ids({"role": "tool", "content": "x"}) == ()


def test_output_items_and_the_results_message():
    assert thaw(G.output_item("c", "out")) == {
        "functionResponse": {"id": "c", "name": "", "response": {"output": "out"}}
    }
    assert thaw(G.output_item("c", "bad", "f", is_error=True)) == {
        "functionResponse": {"id": "c", "name": "f", "response": {"error": "bad"}}
    }
    made = G.results_message([1])
    assert thaw(made) == {"role": "tool", "parts": [1]} and isinstance(made["parts"], PV)


def test_tool_results_go_as_one_message_in_call_order():
    calls = [{"id": "a", "name": "f"}, {"id": "b"}, {"id": "c", "name": None}, {"id": "d"}]
    image = {"type": "image", "mimeType": "image/png", "data": "aGk="}
    results = [
        {"output": "text", "is_error": True},
        {"output": {"k": "é"}},
        {"output": [{"type": "text", "text": "a"}, {"type": "text", "text": " "}, image,
                    {"type": "text", "text": "b"}]},
        {"output": [{"type": "text", "text": " "}]},
    ]  # fmt: skip
    (m,) = G.tool_result_messages(calls, results)
    inline = {"inlineData": {"mimeType": "image/png", "data": "aGk="}}
    assert thaw(m) == {
        "role": "tool",
        "parts": [
            {"functionResponse": {"id": "a", "name": "f", "response": {"error": "text"}}},
            {"functionResponse": {"id": "b", "name": "", "response": {"output": '{"k":"é"}'}}},
            {"functionResponse": {"id": "c", "name": "", "response": {"output": "a\nb"},
                                  "parts": [inline]}},
            {"functionResponse": {"id": "d", "name": "", "response": {"output": "(no output)"}}},
        ],
    }  # fmt: skip
    assert isinstance(m["parts"][2]["functionResponse"]["parts"], PV)
    (m,) = G.tool_result_messages([{"id": "e"}], [{"output": [image]}])
    assert thaw(m["parts"][0]["functionResponse"]) == {
        "id": "e", "name": "", "response": {"output": ""}, "parts": [inline]}  # fmt: skip
    assert G.tool_result_messages([], []) == []
    with pytest.raises(ValueError):
        G.tool_result_messages(calls, results[:1])


@pytest.mark.parametrize(
    ("id", "ok"),
    [("a", True), ("A_b-c.d:9", True), ("x" * 64, True), ("x" * 65, False), ("", False),
     ("a b", False), ("a/b", False), ("a\n", False)],
)  # fmt: skip
def test_valid_call_id(id, ok):
    assert G.valid_call_id(id) is ok

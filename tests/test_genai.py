"""Portable conversations: to_genai / from_genai (the OpenTelemetry GenAI messages) through
every dialect of the registry, checked against the published schema, and the CLI's
export / import over a real SQLite file and the file store."""

from __future__ import annotations

import json
import subprocess
import sys

import jsonschema
import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import from_genai, to_genai
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.parts import UnsupportedPartError
from toolnexus.core.wire.translate import translate
from toolnexus.store import file_store, sqlite_store
from toolnexus.testing import transcripts, validate_request

# The GenAI input-message format as the OpenTelemetry conventions define it
# (open-telemetry/semantic-conventions-genai, docs/gen-ai/gen-ai-input-messages.json):
# its messages, roles, modalities and each part's fields, written out here as a schema.
_MODALITY = {"enum": ["image", "video", "audio", "document"]}


def _part(kind: str, required: list, **props: dict) -> dict:
    fields = {"type": {"const": kind}, **props}
    return {"type": "object", "required": ["type", *required], "properties": fields}


PARTS = {
    "text": _part("text", ["content"], content={"type": "string"}),
    "tool_call": _part("tool_call", ["name"], id={"type": ["string", "null"]},
                       name={"type": "string"}, arguments={}),
    "tool_call_response": _part("tool_call_response", ["response"],
                                id={"type": ["string", "null"]}, response={}),
    "blob": _part("blob", ["modality", "content"], mime_type={"type": ["string", "null"]},
                  modality=_MODALITY, content={"type": "string"}),
    "uri": _part("uri", ["modality", "uri"], mime_type={"type": ["string", "null"]},
                 modality=_MODALITY, uri={"type": "string"}),
    "file": _part("file", ["modality", "file_id"], mime_type={"type": ["string", "null"]},
                  modality=_MODALITY, file_id={"type": "string"}),
    "reasoning": _part("reasoning", ["content"], content={"type": "string"}),
}  # fmt: skip
MESSAGES = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["role", "parts"],
        "properties": {
            "role": {"enum": ["system", "user", "assistant", "tool"]},
            "parts": {"type": "array", "items": {"type": "object", "required": ["type"]}},
            "name": {"type": ["string", "null"]},
        },
    },
}
VALIDATOR = jsonschema.Draft202012Validator(MESSAGES)


def schema_problems(messages: list) -> list[str]:
    """Return the problems of GenAI messages: the published schema's, then each part's own."""
    out = [e.message for e in VALIDATOR.iter_errors(messages)]
    for m in messages if not out else ():
        for p in m.get("parts") or ():
            kind = PARTS.get(p.get("type"), {"required": ["type"]})  # generic parts: a type
            out += [e.message for e in jsonschema.Draft202012Validator(kind).iter_errors(p)]
    return out


def test_the_schema_check_can_fail():
    assert schema_problems([{"role": "user", "parts": [{"type": "text"}]}])
    assert schema_problems([{"role": "user"}])


any_dialect = st.sampled_from(sorted(DIALECTS))  # every row of the registry


@given(any_dialect.flatmap(lambda d: transcripts(d, max_turns=3)), any_dialect, any_dialect)
def test_export_import_export_is_the_same_in_every_dialect(t, target, other):
    exported = to_genai(t)
    assert schema_problems(exported) == []
    assert json.loads(json.dumps(exported)) == exported  # JSON-ready
    back = from_genai(exported, style=target)
    assert translate(back, target, keep_system=True).messages is back  # right for the target
    assert to_genai(back) == exported
    assert to_genai(from_genai(to_genai(back), style=other)) == exported


CLAUDE = "claude-sonnet-4-5"  # Anthropic's own models take thinking back signed only


def request_body(codec, messages):
    """Return the request body to Anthropic's own model, as the flow makes it (without
    what the model refuses: imported, unsigned reasoning)."""
    return thaw(codec.omit(codec.body(CLAUDE, messages, [], "", {}), codec.omissions(CLAUDE)))


@given(any_dialect.flatmap(lambda d: transcripts(d, max_turns=2)), any_dialect)
def test_an_imported_conversation_makes_a_valid_request(t, target):
    codec = DIALECTS[target]
    history = codec.replayable(from_genai(to_genai(t), style=target))
    body = request_body(codec, [*history, codec.user_message("go on")])
    assert validate_request(body, target) == []


TOOL_ROUND = [  # the conventions' own example: docs/gen-ai/non-normative/tests/cases
    {"role": "user", "parts": [{"type": "text", "content": "What's the weather in Paris?"}]},
    {"role": "assistant", "parts": [{"type": "tool_call", "id": "call_VSPygqKTWdrhaFErNvMV18Yl",
                                     "name": "get_weather", "arguments": {"location": "Paris"}}]},
    {"role": "tool", "parts": [{"type": "tool_call_response", "id": "call_VSPygqKTWdrhaFErNvMV18Yl",
                                "response": "rainy, 57°F"}]},
]  # fmt: skip


def test_the_conventions_tool_round_in_each_dialect():
    openai = thaw(from_genai(TOOL_ROUND, style="openai"))
    assert openai[1]["tool_calls"][0]["function"] == {
        "name": "get_weather", "arguments": '{"location":"Paris"}'}  # fmt: skip
    assert openai[2] == {"role": "tool", "tool_call_id": "call_VSPygqKTWdrhaFErNvMV18Yl",
                         "content": "rainy, 57°F"}  # fmt: skip
    anthropic = thaw(from_genai(TOOL_ROUND, style="anthropic"))
    assert anthropic[1]["content"][0]["input"] == {"location": "Paris"}
    assert anthropic[2]["content"][0]["type"] == "tool_result"
    for style in DIALECTS:
        assert to_genai(from_genai(TOOL_ROUND, style=style)) == TOOL_ROUND


PNG = "iVBORw0KGgo="
MEDIA = [
    {"role": "system", "parts": [{"type": "text", "content": "be brief"}]},
    {"role": "user", "parts": [
        {"type": "text", "content": "what are these?"},
        {"type": "blob", "modality": "image", "mime_type": "image/png", "content": PNG},
        {"type": "uri", "modality": "image", "mime_type": None, "uri": "https://x/a.png"},
        {"type": "blob", "modality": "document", "mime_type": "application/pdf",
         "content": "JVBERg=="},
    ]},
    {"role": "assistant", "parts": [{"type": "reasoning", "content": "two images, a pdf"},
                                    {"type": "text", "content": "a chart and a report"}]},
]  # fmt: skip


@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_media_system_and_reasoning_survive_every_dialect(style):
    assert schema_problems(MEDIA) == []
    back = from_genai(MEDIA, style=style)
    assert back[0] == {"role": "system", "content": "be brief"}  # kept in place
    want = thaw(MEDIA)
    if style == "gemini":  # a file URI goes with its media type there: its extension's
        want[1]["parts"][2]["mime_type"] = "image/png"
    assert to_genai(back) == want


@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_imported_reasoning_is_kept_but_never_sent_where_it_needs_a_signature(style):
    asked = {"role": "user", "parts": [{"type": "text", "content": "what are these?"}]}
    back = from_genai([MEDIA[0], asked, MEDIA[2]], style=style)
    codec = DIALECTS[style]
    body = request_body(codec, [*codec.replayable(back), codec.user_message("more")])
    assert validate_request(body, style) == []
    sent = json.dumps(body)
    assert ("two images, a pdf" in sent) == ("reasoning_content" in sent)  # OpenAI-style only
    assert "a chart and a report" in sent


def test_reasoning_of_each_dialect_is_exported():
    anthropic = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "content": [
                {"type": "thinking", "thinking": "hmm", "signature": "sig"},
                {"type": "text", "text": "a"},
            ],
        },
    ]
    responses = [
        {"role": "user", "content": "q"},
        {
            "role": "assistant",
            "items": [
                {
                    "type": "reasoning",
                    "id": "rs_1",
                    "encrypted_content": "x",
                    "summary": [{"type": "summary_text", "text": "hmm"}],
                },
                {"role": "assistant", "content": "a"},
            ],
        },
    ]
    openai = [{"role": "user", "content": "q"},
              {"role": "assistant", "content": "a", "reasoning_content": "hmm"}]  # fmt: skip
    want = [{"type": "reasoning", "content": "hmm"}, {"type": "text", "content": "a"}]
    for t in (anthropic, responses, openai):
        assert to_genai(t)[1] == {"role": "assistant", "parts": want}


def test_audio_goes_where_it_can_and_follows_on_unsupported_part():
    wav = {"type": "blob", "modality": "audio", "mime_type": "audio/wav", "content": "UklGRg=="}
    audio = [{"role": "user", "parts": [wav]}]
    assert to_genai(from_genai(audio, style="openai")) == audio
    with pytest.raises(UnsupportedPartError, match="anthropic cannot carry the audio"):
        from_genai(audio, style="anthropic")
    placed = from_genai(audio, style="anthropic", on_unsupported_part="text")
    assert "omitted" in placed[0]["content"][0]["text"]


def test_ids_a_dialect_refuses_are_remapped_alike():
    odd = json.loads(json.dumps(TOOL_ROUND).replace("call_VSPygqKTWdrhaFErNvMV18Yl", "f.x:0"))
    back = thaw(from_genai(odd, style="anthropic"))
    assert back[1]["content"][0]["id"] == back[2]["content"][0]["tool_use_id"] != "f.x:0"


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ("hi", "a list of"),
        ([{"role": "user"}], "message 0: a GenAI message is an object with a 'role' and a 'parts'"),
        ([{"role": "user", "parts": ["hi"]}], "message 0: every part is an object"),
        ([{"role": "user", "parts": [{"type": "text"}]}], "a text part needs a string 'content'"),
        ([{"role": "bot", "parts": []}], "role 'bot'"),
        ([{"role": "user", "parts": [{"type": "blob", "modality": "image"}]}], "string 'content'"),
    ],
)
def test_bad_messages_are_a_clear_error(messages, message):
    with pytest.raises(ValueError, match=message):
        from_genai(messages)


def test_an_unknown_style_is_a_clear_error():
    with pytest.raises(ValueError, match="unknown style 'cohere'"):
        from_genai([], style="cohere")


# ---- the CLI ---------------------------------------------------------------------------


def cli(*args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolnexus", *args], input=stdin,
                          capture_output=True, text=True, timeout=60)  # fmt: skip


OPENAI_TURNS = [
    {"role": "user", "content": "weather?"},
    {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "w", "arguments": '{"c":"Oslo"}'}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
    {"role": "assistant", "content": "It is sunny."},
]  # fmt: skip


def test_cli_export_then_import_across_sqlite_and_the_file_store(tmp_path):
    sqlite_store(tmp_path / "chats.db")["save"]("work", OPENAI_TURNS)
    db, files = f"sqlite:{tmp_path / 'chats.db'}", f"file:{tmp_path / 'chats'}"
    out = cli("export", "work", "--store", db)
    assert out.returncode == 0, out.stderr
    exported = json.loads(out.stdout)
    assert exported == to_genai(OPENAI_TURNS) and schema_problems(exported) == []
    lines = cli("export", "work", "--store", db, "--lines", "--out", str(tmp_path / "w.jsonl"))
    assert lines.returncode == 0 and lines.stdout == ""
    text = (tmp_path / "w.jsonl").read_text()
    assert [json.loads(line) for line in text.splitlines()] == exported
    done = cli(
        "import", "copy", str(tmp_path / "w.jsonl"), "--store", files, "--style", "anthropic"
    )
    assert done.returncode == 0, done.stderr
    copied = file_store(tmp_path / "chats")["get"]("copy")
    assert copied[2]["content"][0]["type"] == "tool_result" and to_genai(copied) == exported
    (tmp_path / "w.json").write_text(out.stdout)
    again = cli("import", "copy", str(tmp_path / "w.json"), "--store", files)
    assert (
        again.returncode == 1 and "already stored" in again.stderr and "--replace" in again.stderr
    )
    assert file_store(tmp_path / "chats")["get"]("copy") == copied  # untouched
    replaced = cli("import", "copy", "-", "--store", files, "--replace", stdin=out.stdout)
    assert replaced.returncode == 0, replaced.stderr
    assert file_store(tmp_path / "chats")["get"]("copy")[1]["tool_calls"][0]["id"] == "call_1"


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("", "empty"),
        ("[{]", "not a JSON array"),
        ('{"role": "user", "parts": []}\nnope\n', "line 2: not JSON"),
        ('[{"role": "user"}]', "message 0: a GenAI message"),
    ],
)
def test_cli_import_of_bad_input_is_one_line(tmp_path, content, message):
    (tmp_path / "in.json").write_text(content)
    out = cli("import", "x", str(tmp_path / "in.json"), "--store", f"sqlite:{tmp_path / 'c.db'}")
    assert out.returncode == 1 and message in out.stderr
    assert out.stderr.count("\n") == 1 and "Traceback" not in out.stderr


def test_cli_export_of_an_unknown_id_and_import_of_a_missing_file(tmp_path):
    spec = f"sqlite:{tmp_path / 'c.db'}"
    out = cli("export", "nope", "--store", spec)
    assert out.returncode == 1 and "no conversation 'nope'" in out.stderr
    missing = cli("import", "x", str(tmp_path / "missing.json"), "--store", spec)
    assert missing.returncode == 1 and "no such file" in missing.stderr

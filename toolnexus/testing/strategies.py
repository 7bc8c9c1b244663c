"""Hypothesis strategies for transcripts and conversation ids (public: test your own stores).

    from toolnexus.testing import transcripts, conversation_ids
    @given(transcripts(dialect="anthropic"), conversation_ids())
    def test_roundtrip(t, id): ...

Transcripts come as plain lists and dicts (JSON-ready), in the provider's own shape.
"""

from __future__ import annotations

import itertools
import json
import unicodedata

from hypothesis import strategies as st

__all__ = [
    "COLLIDING_IDS",
    "HOSTILE_IDS",
    "conversation_ids",
    "id_pools",
    "transcripts",
]

# Ids that break naive stores: path tricks, whitespace, device names, case and Unicode
# normalization twins, an id that looks like another id's encoded file name, long ones.
HOSTILE_IDS = (
    "../x", "..", ".", "/", "a/b", "a\\b", "a_b", " ", "\t", " a", "a ", "a\nb", "CON", "nul",
    "A", "a", "~YS9i", "-bmexwe", "-x", "x.json", "%2e%2e", "a:b", "*", "?", "'; drop table",
    unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é"),
    "日本語", "🙂", "a" * 200, "é" * 200, "Z" * 101,
)  # fmt: skip

# Pairs of distinct ids that a careless sanitizer or file system maps to one name.
COLLIDING_IDS = (
    ("a/b", "a_b"),
    ("a b", "a_b"),
    ("A", "a"),
    ("../x", "x"),
    (unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")),
    ("~YS9i", "a/b"),
    ("-bmexwe", "a/b"),
    ("x", "x.json"),
    ("a" * 200, "a" * 201),
)

_ID_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_TEXT = st.text(_ID_CHARS, min_size=1, max_size=12)
_NAMES = st.sampled_from(["add", "get_weather", "search", "lookup_2"])
_ARGS = st.dictionaries(
    st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=5),
    st.one_of(st.integers(-1000, 1000), _TEXT, st.booleans(), st.none()),
    max_size=3,
)


def conversation_ids(max_size: int = 200) -> st.SearchStrategy[str]:
    """Return a strategy of conversation ids: ordinary, random Unicode, and hostile ones.

    Ids are non-empty strings without NUL or lone surrogates, up to `max_size` chars.
    """
    hostile = [i for i in HOSTILE_IDS + sum(COLLIDING_IDS, ()) if len(i) <= max_size]
    return st.one_of(
        st.sampled_from(sorted(set(hostile))),
        st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True),
        st.text(_ID_CHARS, min_size=1, max_size=min(max_size, 40)),
    )


def id_pools(ids: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[list[str]]:
    """Return a strategy of small lists of distinct ids.

    With the default ids, a pool often holds one of the COLLIDING_IDS pairs; a given
    `ids` strategy replaces the defaults entirely (pairs included).
    """
    if ids is not None:
        return st.lists(ids, min_size=1, max_size=4, unique=True)
    some = st.lists(conversation_ids(), min_size=1, max_size=4, unique=True)
    pairs = st.sampled_from(COLLIDING_IDS).map(list)
    return st.one_of(some, st.tuples(pairs, some).map(lambda p: list(dict.fromkeys(p[0] + p[1]))))


# ---- transcripts -------------------------------------------------------------------


def _openai_calls(draw, ids: list[str]) -> list[dict]:
    calls = [
        {
            "id": i,
            "type": "function",
            "function": {"name": draw(_NAMES), "arguments": json.dumps(draw(_ARGS))},
        }
        for i in ids
    ]
    return [
        {"role": "assistant", "content": draw(st.none() | _TEXT), "tool_calls": calls},
        *({"role": "tool", "tool_call_id": i, "content": draw(_TEXT)} for i in ids),
    ]


def _anthropic_calls(draw, ids: list[str]) -> list[dict]:
    lead = []
    if draw(st.booleans()):
        lead.append({"type": "thinking", "thinking": draw(_TEXT), "signature": "sig"})
    if draw(st.booleans()):
        lead.append({"type": "text", "text": draw(_TEXT)})
    uses = [{"type": "tool_use", "id": i, "name": draw(_NAMES), "input": draw(_ARGS)} for i in ids]
    results = [
        {
            "type": "tool_result",
            "tool_use_id": i,
            "content": draw(_TEXT | st.builds(lambda t: [{"type": "text", "text": t}], _TEXT)),
            "is_error": draw(st.booleans()),
        }
        for i in ids
    ]
    return [{"role": "assistant", "content": lead + uses}, {"role": "user", "content": results}]


def _responses_said(draw, n: str) -> list[dict]:
    """Return the lead items of a Responses turn: maybe reasoning, maybe a message."""
    lead = []
    if draw(st.booleans()):
        lead.append({"type": "reasoning", "id": f"rs_{n}", "summary": [],
                     "encrypted_content": "gAAAA-encrypted"})  # fmt: skip
    if draw(st.booleans()):
        part = {"type": "output_text", "text": draw(_TEXT), "annotations": [], "logprobs": []}
        lead.append({"type": "message", "id": f"msg_{n}", "role": "assistant",
                     "status": "completed", "content": [part]})  # fmt: skip
    return lead


def _responses_calls(draw, ids: list[str]) -> list[dict]:
    calls = [{"type": "function_call", "call_id": i, "name": draw(_NAMES),
              "arguments": json.dumps(draw(_ARGS))} for i in ids]  # fmt: skip
    outputs = [{"type": "function_call_output", "call_id": i, "output": draw(_TEXT)} for i in ids]
    return [
        {"role": "assistant", "items": [*_responses_said(draw, ids[0]), *calls]},
        {"role": "tool", "items": outputs},
    ]


def _gemini_calls(draw, ids: list[str]) -> list[dict]:
    """Return a Gemini tool round: maybe a thought and text, the calls (the first signed),
    then one message of their functionResponse parts."""
    calls = [{"functionCall": {"id": i, "name": draw(_NAMES), "args": draw(_ARGS)}} for i in ids]
    calls[0] = {**calls[0], "thoughtSignature": "c2lnbmVk"}
    lead = [{"text": draw(_TEXT), "thought": True}] if draw(st.booleans()) else []
    lead += [{"text": draw(_TEXT)}] if draw(st.booleans()) else []
    answers = [{"functionResponse": {"id": c["functionCall"]["id"], "name": c["functionCall"][
        "name"], "response": {"output": draw(_TEXT)}}} for c in calls]  # fmt: skip
    return [{"role": "assistant", "parts": [*lead, *calls]}, {"role": "tool", "parts": answers}]


def _user(draw, dialect: str) -> dict:
    kind = _SHAPES[dialect]["block"]
    if kind and draw(st.booleans()):  # multi-block content
        blocks = draw(st.lists(_TEXT, min_size=1, max_size=3))
        return {"role": "user", "content": [{"type": kind, "text": t} for t in blocks]}
    return {"role": "user", "content": draw(_TEXT)}


def _answer(draw, dialect: str, n: int) -> dict:
    if dialect == "anthropic":
        return {"role": "assistant", "content": [{"type": "text", "text": draw(_TEXT)}]}
    if dialect == "responses" and draw(st.booleans()):
        part = {"type": "output_text", "text": draw(_TEXT), "annotations": [], "logprobs": []}
        said = {"type": "message", "id": f"msg_answer_{n}", "role": "assistant",
                "status": "completed", "content": [part]}  # fmt: skip
        lead = _responses_said(draw, f"answer_{n}")[:1] if draw(st.booleans()) else []
        return {"role": "assistant", "items": [*[i for i in lead if i["type"] == "reasoning"],
                                               said]}  # fmt: skip
    if dialect == "gemini" and draw(st.booleans()):  # its parts, a signature on the text
        return {"role": "assistant", "parts": [{"text": draw(_TEXT), "thoughtSignature": "c2ln"}]}
    return {"role": "assistant", "content": draw(_TEXT)}


# Each dialect's shapes: its tool round, the type of a user text block (None: text only),
# its call id prefix, whether a system message may lead (anthropic carries it in the body).
_SHAPES = {
    "openai": {"calls": _openai_calls, "block": None, "prefix": "call", "system": True},
    "anthropic": {"calls": _anthropic_calls, "block": "text", "prefix": "toolu", "system": False},
    "responses": {"calls": _responses_calls, "block": "input_text", "prefix": "call",
                  "system": True},
    "gemini": {"calls": _gemini_calls, "block": None, "prefix": "call", "system": True},
}  # fmt: skip
DIALECTS = tuple(_SHAPES)


@st.composite
def _transcript(draw, dialect: str, max_turns: int, system: bool | None) -> list[dict]:
    shape = _SHAPES[dialect]
    ids = (f"{shape['prefix']}_{n}" for n in itertools.count())
    out: list[dict] = []
    if system if system is not None else (shape["system"] and draw(st.booleans())):
        out.append({"role": "system", "content": draw(_TEXT)})
    for n in range(draw(st.integers(0, max_turns))):
        out.append(_user(draw, dialect))
        rounds = draw(st.integers(0, 2))
        for _ in range(rounds):  # tool rounds, each with parallel calls
            out += shape["calls"](draw, [next(ids) for _ in range(draw(st.integers(1, 3)))])
        if not rounds or draw(st.booleans()):  # a run stopped by max_turns ends on results
            out.append(_answer(draw, dialect, n))
    return out


def transcripts(
    dialect: str | None = None, *, max_turns: int = 4, system: bool | None = None
) -> st.SearchStrategy[list[dict]]:
    """Return a strategy of valid transcripts: turns with parallel tool-call groups.

    `dialect` is a row of the registry ("openai", "anthropic", "responses", "gemini") or None
    (any). Every tool call is answered right after its message; anthropic user messages
    may hold several text blocks and assistant turns thinking blocks. `system`: None for a
    random leading system message (not anthropic: it carries it in the body), True or
    False to force it. Responses turns hold their items (reasoning with encrypted content,
    messages, function calls) and one message of function_call_output items per round;
    Gemini turns their parts (thoughts, text, signed functionCalls), then one message of
    functionResponse parts.
    """
    if dialect is None:
        return st.one_of(*(transcripts(d, max_turns=max_turns, system=system) for d in DIALECTS))
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {DIALECTS}")
    return _transcript(dialect, max_turns, system)

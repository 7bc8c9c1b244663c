"""The pure transcript algebra: safe cuts, trim, repair, freeze/thaw, for both dialects."""

from __future__ import annotations

import json

import pytest
from dialect_kit import covers
from hypothesis import example, given, settings
from hypothesis import strategies as st
from pyrsistent import pvector

from toolnexus.core import transcript as tx
from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.wire import DIALECTS, view
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.testing import transcripts

ALL = sorted(_REGISTRY)  # every row of the dialect registry

both = pytest.mark.parametrize("dialect", ALL)
# Transcripts cost ~80 draws each: half the profile's examples (scales with HYPOTHESIS_PROFILE).
HALF = settings(max_examples=max(10, settings.default.max_examples // 2))


def _body(t):
    """The messages after a leading system message."""
    return t[1:] if t and tx.is_system(t[0]) else t


def _well_formed(t) -> bool:
    d = tx.dangling(t)
    return not d["unanswered"] and not d["orphaned"]


# ---- the strategies make what the algebra expects ---------------------------------


@both
@HALF
@given(data=st.data())
def test_generated_transcripts_are_well_formed(dialect, data):
    t = data.draw(transcripts(dialect))
    assert _well_formed(t)
    assert all(m["role"] != "tool" for m in t) or dialect != "anthropic"
    assert tx.repair(t) == freeze(t)


# ---- trim ------------------------------------------------------------------------


@both
@given(data=st.data())
def test_trim_keeps_a_safe_suffix_within_budget_when_one_exists(dialect, data):
    t = freeze(data.draw(transcripts(dialect)))
    n = data.draw(st.integers(0, len(t) + 2))
    out = tx.trim(t, n)
    body, kept = _body(t), _body(out)
    # A suffix of the original, plus the kept system message.
    assert list(kept) == list(body[len(body) - len(kept) :])
    assert (len(out) - len(kept)) == (len(t) - len(body))
    # No orphaned tool result and no tool call without its result; a user leads the tail.
    assert _well_formed(out)
    assert not kept or len(kept) == len(body) or tx.is_turn_start(kept[0])
    # Within budget whenever a safe cut within budget exists, and the longest such.
    tails = [len(t) - i for i in tx.safe_cuts(t)]
    fitting = [k for k in tails if k <= n]
    if len(body) <= n:
        assert out == t
    elif fitting:
        assert len(kept) == max(fitting)
    elif tails:  # safety over size: the most recent safe cut
        assert len(kept) == min(tails)


@both
@HALF
@given(data=st.data())
def test_trim_is_idempotent_and_never_grows(dialect, data):
    t = data.draw(transcripts(dialect))
    n = data.draw(st.integers(0, 12))
    once = tx.trim(t, n)
    assert tx.trim(once, n) == once
    assert len(once) <= len(t)


def test_trim_never_starts_at_an_anthropic_tool_result():
    t = [
        {"role": "user", "content": "weather in Paris and Rome?"},
        {
            "role": "assistant",
            "content": [
                {"type": "tool_use", "id": "a", "name": "w", "input": {"city": "Paris"}},
                {"type": "tool_use", "id": "b", "name": "w", "input": {"city": "Rome"}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "sun", "is_error": False},
                {"type": "tool_result", "tool_use_id": "b", "content": "rain", "is_error": False},
            ],
        },
        {"role": "assistant", "content": [{"type": "text", "text": "Sun and rain."}]},
    ]
    out = tx.trim(t, 2)  # neither [results, answer] nor [answer]: the turn stays whole
    assert [m["role"] for m in out] == ["user", "assistant", "user", "assistant"]
    assert tx.is_turn_start(out[0])
    t2 = [*t, {"role": "user", "content": "and Oslo?"}, {"role": "assistant", "content": "snow"}]
    assert [m["content"] for m in tx.trim(t2, 3)] == ["and Oslo?", "snow"]


def test_trim_falls_back_to_the_most_recent_safe_cut_when_nothing_fits():
    calls = [{"id": f"c{i}", "type": "function", "function": {"name": "f", "arguments": "{}"}}
             for i in range(3)]  # fmt: skip
    t = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": calls},
        *({"role": "tool", "tool_call_id": f"c{i}", "content": "ok"} for i in range(3)),
    ]
    out = tx.trim(t, 2)
    assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "tool", "tool"]
    assert _well_formed(out)


@pytest.mark.parametrize("bad", [-1, 1.5, "3", None, True])
def test_trim_refuses_a_bad_budget(bad):
    with pytest.raises(ValueError, match="max_messages"):
        tx.trim([{"role": "user", "content": "hi"}], bad)


def test_trim_does_not_modify_its_input():
    t = [{"role": "user", "content": str(i)} for i in range(5)]
    before = json.dumps(t)
    tx.trim(t, 2)
    assert json.dumps(t) == before


# ---- turn groups -----------------------------------------------------------------


@both
@HALF
@given(data=st.data())
def test_turn_groups_partition_the_transcript_at_safe_cuts(dialect, data):
    t = freeze(data.draw(transcripts(dialect)))
    groups = tx.turn_groups(t)
    assert [m for g in groups for m in g] == list(t)
    assert all(len(g) > 0 for g in groups)
    for g in groups:
        # A turn: led by a user (or the system message, or what precedes the first user),
        # holding no other turn start, and complete: every call with its results.
        assert tx.is_turn_start(g[0]) or tx.is_system(g[0]) or g is groups[0]
        assert not any(tx.is_turn_start(m) for m in g[1:])
        assert _well_formed(g) or tx.is_system(g[0])


# ---- repair ----------------------------------------------------------------------


def _damaged(data, dialect):
    """A valid transcript with a random subset of messages removed."""
    t = data.draw(transcripts(dialect, max_turns=3))
    keep = data.draw(st.lists(st.booleans(), min_size=len(t), max_size=len(t)))
    return [m for m, k in zip(t, keep, strict=True) if k]


@both
@HALF
@given(data=st.data())
def test_repair_makes_any_damaged_transcript_well_formed_and_is_idempotent(dialect, data):
    t = _damaged(data, dialect)
    fixed = tx.repair(t)
    assert _well_formed(fixed)
    assert tx.repair(fixed) == fixed
    assert tx.repair(fixed) is fixed  # a well-formed transcript comes back as is
    # Only tool results change: every other message survives, in order.
    others = [m for m in freeze(t) if not tx.is_tool_result(m)]
    assert [m for m in fixed if not tx.is_tool_result(m)] == others


@both
@HALF
@given(data=st.data())
def test_repair_and_dangling_of_cached_messages_equal_those_of_fresh_copies(dialect, data):
    # Message shapes are cached by identity: a second pass over the same objects must
    # give what value-equal new objects give (which the cache has never seen).
    t = freeze(_damaged(data, dialect))
    first, again = tx.repair(t), tx.repair(t)
    fresh = freeze(json.loads(json.dumps(thaw(t))))
    assert first == again == tx.repair(fresh)
    assert tx.dangling(t) == tx.dangling(t) == tx.dangling(fresh)
    for m in t:
        assert tx._shape(m) == (tx.tool_result_ids(m), tx.tool_call_ids(m))


def test_a_plain_dict_message_is_never_classified_from_a_cache():
    # Only immutable messages are cached: a dict changed in place is read again.
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1"}]}
    t = pvector([{"role": "user", "content": "q"}, call])
    assert tx.dangling(t)["unanswered"] == ("c1",)
    call["tool_calls"] = [{"id": "c2"}]
    assert tx.dangling(t)["unanswered"] == ("c2",)
    assert tx.repair(t)[-1]["tool_call_id"] == "c2"


@both
@HALF
@given(data=st.data())
def test_repair_synthesizes_interrupted_results_in_the_dialect_shape(dialect, data):
    t = _damaged(data, dialect)
    fixed = tx.repair(t)
    original = {json.dumps(thaw(m), sort_keys=True) for m in freeze(t)}
    for m in fixed:
        if tx.is_tool_result(m) and json.dumps(thaw(m), sort_keys=True) not in original:
            # A synthesized result is in the dialect's own shape and says it was interrupted.
            assert DIALECTS[dialect].native(m), m
            said = [i[2] for i in view.read(m) if i[0] == "result"]
            assert any(tx.INTERRUPTED in json.dumps(thaw(c)) for c in said), said


@both
@HALF
@given(data=st.data())
def test_repair_of_a_crash_mid_turn_keeps_the_prefix_and_answers_the_calls(dialect, data):
    t = data.draw(transcripts(dialect))
    k = data.draw(st.integers(0, len(t)))
    cut = t[:k]  # a crash: everything after k is lost, never an orphan
    fixed = tx.repair(cut)
    assert list(fixed[:k]) == list(freeze(cut))
    assert set(tx.dangling(cut)["unanswered"]) == {
        i for m in fixed[k:] for i in tx.tool_result_ids(m)
    }


def test_repair_answers_trailing_openai_calls_and_drops_an_orphan():
    t = [
        {"role": "tool", "tool_call_id": "ghost", "content": "?"},
        {"role": "user", "content": "add"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "a", "type": "function", "function": {"name": "f", "arguments": "{}"}},
                {"id": "b", "type": "function", "function": {"name": "f", "arguments": "{}"}},
            ],
        },
        {"role": "tool", "tool_call_id": "a", "content": "1"},
    ]
    fixed = thaw(tx.repair(t))
    assert fixed == [
        t[1],
        t[2],
        t[3],
        {"role": "tool", "tool_call_id": "b", "content": tx.INTERRUPTED},
    ]


def test_repair_merges_anthropic_results_into_one_user_message():
    t = [
        {"role": "user", "content": [{"type": "text", "text": "go"}]},
        {
            "role": "assistant",
            "content": [
                {"type": "text", "text": "two calls"},
                {"type": "tool_use", "id": "a", "name": "f", "input": {}},
                {"type": "tool_use", "id": "b", "name": "f", "input": {}},
            ],
        },
        {
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "1", "is_error": False},
                {"type": "tool_result", "tool_use_id": "zzz", "content": "?", "is_error": False},
            ],
        },
    ]
    fixed = thaw(tx.repair(t))
    assert len(fixed) == 3
    assert [b["tool_use_id"] for b in fixed[2]["content"]] == ["a", "b"]
    assert fixed[2]["content"][1] == {
        "type": "tool_result",
        "tool_use_id": "b",
        "content": tx.INTERRUPTED,
        "is_error": True,
    }


def test_repair_answers_a_call_left_open_mid_transcript():
    # A hand-written store: the call got no result, then the user spoke again.
    call = {"id": "x", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    t = [
        {"role": "user", "content": "a"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "user", "content": "b"},
    ]
    fixed = thaw(tx.repair(t))
    assert [m["role"] for m in fixed] == ["user", "assistant", "tool", "user"]


# ---- JSON freeze/thaw --------------------------------------------------------------


@HALF
@given(transcripts())
def test_dumps_loads_round_trips(t):
    assert tx.loads(tx.dumps(freeze(t))) == freeze(t)
    assert tx.thaw_transcript(tx.freeze_transcript(t)) == t
    assert json.loads(tx.dumps(t))["version"] == tx.FORMAT_VERSION


def test_loads_reads_a_bare_list_and_refuses_unknown_versions():
    assert tx.loads('[{"role": "user", "content": "hi"}]')[0]["content"] == "hi"
    with pytest.raises(tx.TranscriptFormatError, match="unknown transcript format version 99"):
        tx.loads('{"version": 99, "messages": []}')
    with pytest.raises(tx.TranscriptFormatError, match="not JSON"):
        tx.loads("{")
    with pytest.raises(tx.TranscriptFormatError, match="not a message"):
        tx.loads('{"version": 1, "messages": [{"content": "no role"}]}')


@pytest.mark.parametrize("doc", ['{"version": 1}', '{"version": 1, "messages": null}'])
def test_a_versioned_document_without_its_messages_is_not_an_empty_transcript(doc):
    """Fails on the old main: a document cut short or hand-edited read as no messages, so
    whatever saved it next would have saved over the conversation as if it were new."""
    with pytest.raises(tx.TranscriptFormatError, match="no 'messages'"):
        tx.loads(doc)
    assert tx.loads('{"version": 1, "messages": []}') == pvector()  # empty is still fine


JSONISH = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner),
    max_leaves=6,
)
JUNK_MESSAGE = st.fixed_dictionaries(
    {"role": st.sampled_from(["user", "assistant", "tool", "system"])},
    optional={"content": JSONISH, "tool_calls": JSONISH, "tool_call_id": JSONISH},
)


@given(st.lists(JUNK_MESSAGE, max_size=5))
@example([{"role": "assistant", "content": None, "tool_calls": 5}])
@example([{"role": "assistant", "content": None, "tool_calls": {"id": "c"}}])
@example([{"role": "tool", "tool_call_id": None}])
def test_any_message_maps_are_repaired_or_refused_clearly_never_a_type_error(t):
    """Fails on the old main: `tool_calls: 5` (say, from a hand-edited store) raised a bare
    TypeError from inside repair and dangling, and so from run(history=...)."""
    for look in (tx.repair, tx.dangling, tx.safe_cuts, lambda x: tx.trim(x, 2)):
        try:
            look(t)
        except tx.TranscriptFormatError as e:
            assert "tool_calls" in str(e)


def test_a_history_whose_tool_calls_is_not_a_list_is_a_clear_error():
    from toolnexus import create_in_process_client, run

    c = create_in_process_client(model="m", generate=lambda req: {"content": "ok"})
    bad = {"role": "assistant", "content": None, "tool_calls": 5}
    with pytest.raises(tx.TranscriptFormatError, match="tool_calls must be a list"):
        run(c, "hi", history=[{"role": "user", "content": "q"}, bad])


# ---- the loop repairs loaded history (over the loopback fake provider) ---------------

UNANSWERED = {
    "openai": [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "w", "arguments": "{}"}}
            ],
        },
    ],
    "anthropic": [
        {"role": "user", "content": "weather?"},
        {
            "role": "assistant",
            "content": [{"type": "tool_use", "id": "c1", "name": "w", "input": {}}],
        },
    ],
    "responses": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "items": [{"type": "function_call", "call_id": "c1", "name": "w",
                                         "arguments": "{}"}]},
    ],
    "gemini": [
        {"role": "user", "content": "weather?"},
        {"role": "assistant", "parts": [{"functionCall": {"id": "c1", "name": "w", "args": {}},
                                         "thoughtSignature": "c2ln"}]},
    ],
}  # fmt: skip
SENT_RESULT = {
    "gemini": {
        "role": "tool",
        "parts": [
            {"functionResponse": {"id": "c1", "name": "", "response": {"output": tx.INTERRUPTED}}}
        ],
    },  # fmt: skip
    "responses": {
        "role": "tool",
        "items": [{"type": "function_call_output", "call_id": "c1", "output": tx.INTERRUPTED}],
    },
    "openai": {"role": "tool", "tool_call_id": "c1", "content": tx.INTERRUPTED},
    "anthropic": {
        "role": "user",
        "content": [
            {
                "type": "tool_result",
                "tool_use_id": "c1",
                "content": tx.INTERRUPTED,
                "is_error": True,
            }
        ],
    },
}

covers(UNANSWERED, "UNANSWERED"), covers(SENT_RESULT, "SENT_RESULT")


@both
def test_a_stored_transcript_ending_in_an_unanswered_call_is_sent_repaired(dialect):
    from toolnexus import create_client, run
    from toolnexus.store import in_memory_store
    from toolnexus.testing import fake_provider, text_reply

    store = in_memory_store()
    store["save"]("c", UNANSWERED[dialect])  # a crash mid-turn left the call unanswered
    with fake_provider([text_reply("sunny")]) as fp:
        client = create_client(
            base_url=fp.url, style=dialect, model="m", api_key="k", store=store, retries=0
        )
        r = run(client, "and now?", conversation_id="c")
    codec = DIALECTS[dialect]
    want = [*UNANSWERED[dialect], SENT_RESULT[dialect], codec.user_message("and now?")]
    body = codec.body("m", freeze(want), [], "", {})
    key = next(k for k in ("messages", "input", "contents") if k in body)
    assert fp.requests[0]["body"][key] == thaw(body[key])
    assert r["text"] == "sunny"
    assert thaw(store["get"]("c"))[2] == SENT_RESULT[dialect]

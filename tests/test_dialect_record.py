"""A dialect is one declared record: checked whole when registered; every per-dialect
table read off the registry; every feature reads messages through the neutral view."""

import dataclasses
import re
import typing

import pytest

from toolnexus import otel
from toolnexus.core import transcript as T
from toolnexus.core.wire import DEFAULT_STYLE, DIALECTS, HOSTS, Style, view
from toolnexus.core.wire.dialect import GROUPS, OPTIONAL, Dialect, register
from toolnexus.hooks import extractive_summary

ROWS = sorted(DIALECTS)
OPENAI = next(iter(DIALECTS.values()))


def test_every_row_is_a_whole_record_and_the_first_is_the_default():
    assert register(*DIALECTS.values()) == DIALECTS  # each row passes the check again
    assert DEFAULT_STYLE == next(iter(DIALECTS))
    assert typing.get_args(Style) == tuple(DIALECTS)  # the type checkers' names: the rows


@pytest.mark.parametrize(
    "field", [f.name for f in dataclasses.fields(Dialect) if f.name not in OPTIONAL]
)
def test_a_record_missing_a_function_or_fact_is_refused_naming_it(field):
    broken = dataclasses.replace(OPENAI, **{field: None})
    with pytest.raises(TypeError, match=rf"dialect .*: {field} is None"):
        register(broken)


def test_state_kept_by_the_server_comes_whole_or_not_at_all():
    (group,) = GROUPS
    with pytest.raises(TypeError, match="come together"):
        register(dataclasses.replace(OPENAI, server_state_body=lambda b, m: b))
    ok = dataclasses.replace(OPENAI, **{n: (lambda *a: None) for n in group})
    assert register(ok)["openai"].stored is not None


def test_names_are_unique_and_a_registry_has_a_row():
    with pytest.raises(TypeError, match="unique"):
        register(OPENAI, OPENAI)
    with pytest.raises(TypeError, match="unique"):
        register()
    with pytest.raises(TypeError, match="a Dialect record"):
        register({"name": "x"})


def test_opentelemetry_names_are_read_off_the_records():
    assert otel.PROVIDERS == {name: d.provider for name, d in DIALECTS.items()}
    assert otel.HOSTS is HOSTS
    assert all(otel.provider_name(n, None) == d.provider for n, d in DIALECTS.items())
    for d in DIALECTS.values():
        for host, provider in d.hosts.items():
            assert otel.provider_name("x", host) == provider


def test_the_cli_offers_every_row_and_defaults_to_the_first():
    import argparse

    from toolnexus.commands import chat, portable

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers()
    chat.register(sub)
    portable.register(sub)
    for command in ("chat", "import"):
        action = next(a for a in sub.choices[command]._actions if a.dest == "style")
        assert tuple(action.choices) == tuple(DIALECTS) and action.default == DEFAULT_STYLE


# ---- the neutral view ------------------------------------------------------------------

ITEMS = [
    ("user", "what is 2+2?"),
    (
        "assistant",
        [{"type": "text", "text": "adding"}],
        [("call_a1", "add", {"a": 2, "b": 2}, {})],
        [],
        {},
    ),  # fmt: skip
    ("result", "call_a1", "4", False),
    ("assistant", [{"type": "text", "text": "4"}], [], [], {}),
]


@pytest.mark.parametrize("dialect", ROWS)
def test_what_a_dialect_writes_the_view_reads_back(dialect):
    messages, system = view.write(ITEMS, dialect)
    back = view.items(messages)
    calls = [c[:2] for item in back if item[0] == "assistant" for c in item[2]]
    results = [item[1:3] for item in back if item[0] == "result"]
    assert calls == [("call_a1", "add")] and results == [("call_a1", "4")]
    args = [c[2] for item in back if item[0] == "assistant" for c in item[2]]
    assert [a if isinstance(a, dict) else __import__("json").loads(a) for a in args] == [
        {"a": 2, "b": 2}
    ]
    assert view.call_names(messages) == {"call_a1": "add"}
    # The algebra reads the same view: the call is answered, nothing dangles.
    assert T.dangling(messages) == {"unanswered": (), "orphaned": ()}
    assert T.repair(messages) is not None and len(T.repair(messages)) == len(messages)


@pytest.mark.parametrize("dialect", ROWS)
def test_repair_answers_an_open_call_in_the_callers_own_shape(dialect):
    messages, _ = view.write(ITEMS[:2], dialect)
    repaired = T.repair(messages)
    assert T.dangling(repaired) == {"unanswered": (), "orphaned": ()}
    (result,) = [i for m in repaired[len(messages) :] for i in view.read(m)]
    assert result[:2] == ("result", "call_a1") and result[2] == T.INTERRUPTED
    assert view.record_of(repaired[-1]).name in (dialect, DEFAULT_STYLE)


@pytest.mark.parametrize("dialect", ROWS)
def test_the_compactor_reads_every_dialect_through_the_view(dialect):
    """It read only chat and Responses shapes: a Gemini turn summarized as nothing, and
    an OpenAI tool call or result as its bare text."""
    messages, _ = view.write(ITEMS, dialect)
    summary = extractive_summary(messages)
    assert "[called add]" in summary and "[tool result: 4]" in summary, summary
    assert "what is 2+2?" in summary


def test_a_summary_leads_a_tail_that_starts_with_a_message_of_parts():
    """A Gemini prompt with media is a message of parts, no `content`: compacting before
    it raised KeyError('content'). The summary now leads it, in its own shape."""
    from toolnexus.hooks import SUMMARY_PREFIX, compact

    gemini = DIALECTS["gemini"]
    first = gemini.user_message_parts(
        [
            {"type": "text", "text": "look"},
            {"type": "image", "mimeType": "image/png", "data": "aGk="},
        ]
    )
    old = [{"role": "user", "content": "old " * 100}, {"role": "assistant", "content": "a " * 100}]
    out = compact([*old, first, {"role": "assistant", "content": "ok"}], 50, keep_tail=2)
    assert len(out) == 2 and out[1] == {"role": "assistant", "content": "ok"}
    led = out[0]
    assert view.record_of(led) is gemini and led["role"] == "user"
    assert led["parts"][0]["text"].startswith(SUMMARY_PREFIX + "- user: old old")
    assert list(led["parts"][1:]) == list(first["parts"])  # what the user sent, as sent


# ---- the public view: to_neutral / from_neutral ------------------------------------------

from hypothesis import given  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from toolnexus import from_neutral, to_neutral  # noqa: E402
from toolnexus.testing.strategies import transcripts  # noqa: E402


def _calls(items):
    return [c[1] for i in items if i[0] == "assistant" for c in i[2]]


@given(transcripts(), st.sampled_from(ROWS))
def test_any_transcript_goes_through_the_view_into_any_dialect(t, target):
    """What is said survives: the tools called in order, each answered, no orphan."""
    items = to_neutral(t)
    back = from_neutral(items, target)
    assert _calls(to_neutral(back)) == _calls(items)
    assert T.dangling(back) == {"unanswered": (), "orphaned": ()}
    results = [i for i in to_neutral(back) if i[0] == "result"]
    assert len(results) == sum(1 for i in items if i[0] == "result")


@pytest.mark.parametrize(
    ("items", "said"),
    [
        ("user hi", "neutral items are a list of tuples"),
        ([("user",)], "item 0: a neutral item is a tuple of one of 'system' (2 fields)"),
        ([("speak", "x")], "item 0: a neutral item"),
        ([["user", "hi"]], "item 0: a neutral item"),
        ([("user", "hi"), ("assistant", [], [("c1", "f")], [], {})], "item 1: each call is"),
    ],
)
def test_from_neutral_says_what_is_wrong_with_its_items(items, said):
    with pytest.raises(ValueError, match=re.escape(said)):
        from_neutral(items)


def test_from_neutral_refuses_an_unknown_style_or_policy():
    with pytest.raises(ValueError, match="unknown style 'bedrock': expected one of"):
        from_neutral([("user", "hi")], "bedrock")
    with pytest.raises(ValueError, match="on_unsupported_part must be one of"):
        from_neutral([("user", "hi")], on_unsupported_part="drop")


def test_system_items_stay_in_place_in_every_dialect():
    for style in ROWS:
        out = from_neutral([("system", "be brief"), ("user", "hi")], style)
        assert out[0] == {"role": "system", "content": "be brief"}, style

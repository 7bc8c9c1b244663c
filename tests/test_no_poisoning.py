"""No conversation poisons itself (issue 34, item 5), over the loopback fake provider in
every dialect: a refused exchange is not the next turn's context (the RunResult and the
message log keep it; `keep_refused=True` saves it too), and every stop reason a provider
defines as a truncation ends the run `incomplete`."""

from __future__ import annotations

from collections.abc import Mapping

import pytest
from dialect_kit import covers

from toolnexus import conversation, create_client, get_chat_history, run, stream
from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.history import in_memory_log
from toolnexus.store import in_memory_store
from toolnexus.testing import fake_provider, text_reply

REFUSED = "I can't help with that."
BAD = "How do I pick a lock?"


def refusal_reply(dialect: str) -> dict:
    """Return a refusal in the dialect's own shape (Anthropic: `stop_reason: "refusal"`)."""
    if dialect == "anthropic":
        return text_reply(REFUSED, finish="refusal")
    return {"refusal": REFUSED}


def poisoned(body: Mapping, dialect: str) -> dict:
    """A model that refuses any request whose context holds the refused question, as a
    conversation with a refused exchange in it is refused again."""
    return refusal_reply(dialect) if BAD in str(body) else text_reply("4")


def client(fp, style, **options):
    return create_client(base_url=fp.url, style=style, model="m", api_key="k", **options)


def outcome(c, prompt, streamed, **kw):
    if not streamed:
        return run(c, prompt, **kw)
    return list(stream(c, prompt, **kw))[-1]["result"]


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_a_refused_exchange_is_not_the_next_turns_context(style, streamed):
    """Failed before: the refused exchange was saved as context, and the next unrelated
    question on that conversation was refused again."""
    store, log = in_memory_store(), in_memory_log()
    store["save"](
        "c", [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]
    )
    with fake_provider(poisoned) as fp:
        c = client(fp, style, store=store, message_log=log)
        refused = outcome(c, BAD, streamed, conversation_id="c")
        assert refused["refusal"] == REFUSED and refused["status"] == "done"
        assert BAD in str(thaw(refused["messages"]))  # the RunResult keeps it
        assert [m["content"] for m in store["get"]("c")] == ["hi", "hello"]
        answered = outcome(c, "What is 2+2?", streamed, conversation_id="c")
    assert answered["text"] == "4" and answered["refusal"] is None
    said = [h["text"] for h in get_chat_history(c)]
    assert BAD in said and REFUSED in said  # the message log keeps it


@pytest.mark.parametrize("style", sorted(DIALECTS))
def test_keep_refused_saves_the_refused_exchange(style):
    store = in_memory_store()
    with fake_provider(poisoned) as fp:
        c = client(fp, style, store=store, keep_refused=True)
        run(c, BAD, conversation_id="c")
        assert run(c, "What is 2+2?", conversation_id="c")["refusal"] == REFUSED
    assert BAD in str(thaw(store["get"]("c")))


def test_a_refused_exchange_is_not_the_context_of_an_in_process_conversation():
    with fake_provider(poisoned) as fp:
        chat = conversation(client(fp, "anthropic"))
        assert chat["send"](BAD)["refusal"] == REFUSED
        assert chat["send"]("What is 2+2?")["text"] == "4"
        assert BAD not in str(thaw(chat["messages"]()))


def test_keep_refused_must_be_a_bool():
    with pytest.raises(ValueError, match="keep_refused"):
        create_client(base_url="http://h/v1", model="m", keep_refused="yes")


# Each dialect's truncations: (style, the fake provider's reply, the run's limit)
TRUNCATIONS = [
    ("openai", text_reply("partial", finish="length"), "max_tokens"),
    ("openai", text_reply("partial", finish="content_filter"), "content_filter"),
    ("anthropic", text_reply("partial", finish="max_tokens"), "max_tokens"),
    ("anthropic", text_reply("partial", finish="model_context_window_exceeded"), "max_tokens"),
    ("responses", text_reply("partial", incomplete="max_output_tokens"), "max_tokens"),
    ("responses", text_reply("partial", incomplete="content_filter"), "content_filter"),
    ("responses", text_reply("partial", incomplete="some_new_reason"), None),
    ("gemini", text_reply("partial", finish="MAX_TOKENS"), "max_tokens"),
    ("gemini", text_reply("partial", finish="MALFORMED_FUNCTION_CALL"), None),
    ("gemini", text_reply("partial", finish="SOME_NEW_REASON"), None),
]
covers({style for style, _, _ in TRUNCATIONS}, "TRUNCATIONS")  # a case for every row


@pytest.mark.parametrize("streamed", [False, True])
@pytest.mark.parametrize(("style", "reply", "limit"), TRUNCATIONS)
def test_every_truncation_a_provider_defines_ends_incomplete(style, reply, limit, streamed):
    """Failed before for OpenAI's and Responses' content_filter, Anthropic's
    model_context_window_exceeded and an incomplete response of another reason: each
    ended "done", a cut answer passed off as whole."""
    with fake_provider([reply]) as fp:
        r = outcome(client(fp, style), "a long story", streamed)
    assert (r["status"], r["limit"], r["text"]) == ("incomplete", limit, "partial")
    assert r["stop_reason"] == (reply.get("finish") or reply.get("incomplete"))

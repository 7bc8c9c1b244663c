"""show() and plain(): conversations readable in a terminal and a notebook, and JSON-ready."""

from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus import create_client, define_tool, plain, run, show, stream, toolkit
from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.history import in_memory_log
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

ALL = sorted(_REGISTRY)  # every row of the dialect registry

HOSTILE = '<script>alert("x")</script> & <b>'


@define_tool
def lookup(q: str) -> str:
    """Look something up."""
    return f"found {HOSTILE}"


def weather_run(style: str):
    script = [tool_calls_reply(("lookup", {"q": "paris"})), text_reply("It is sunny <ok>.")]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, style=style, model="m", api_key="k")
        return run(c, f"weather? {HOSTILE}", toolkit=toolkit(lookup))


@pytest.mark.parametrize("style", ALL)
def test_a_run_result_shows_roles_calls_results_and_usage(style):
    r = weather_run(style)
    text = repr(show(r))
    lines = text.splitlines()
    assert lines[0] == f"user: weather? {HOSTILE}"
    assert 'assistant -> lookup({"q": "paris"})' in lines
    assert f"tool lookup: found {HOSTILE}" in lines
    assert "assistant: It is sunny <ok>." in lines
    assert "usage: 20 prompt + 10 completion = 30 tokens" in lines
    assert lines[-1] == "status: done after 2 turn(s), model fake-model"


@pytest.mark.parametrize("style", ALL)
def test_html_escapes_every_piece_of_text(style):
    page = show(weather_run(style))._repr_html_()
    assert "<script>" not in page and HOSTILE not in page
    assert page.count("<b>") == len(show(weather_run(style)).rows)  # only our own labels
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; &lt;b&gt;" in page
    assert "It is sunny &lt;ok&gt;." in page and "<b>assistant calls</b> <code>lookup(" in page


def test_stream_events_show_joined_text_and_tool_rows():
    script = [tool_calls_reply(("lookup", {"q": "x"})), text_reply("Done <now>.", chunk=3)]
    with fake_provider(script) as fp:
        c = create_client(base_url=fp.url, model="m", api_key="k")
        events = list(stream(c, "go", toolkit=toolkit(lookup)))
    text = repr(show(events))
    assert 'assistant -> lookup({"q": "x"})' in text and "assistant: Done <now>." in text
    assert f"tool lookup: found {HOSTILE}" in text and text.endswith("status: done")
    assert "Done &lt;now&gt;." in show(events)._repr_html_()


def test_a_message_log_query_shows_time_conversation_and_direction():
    from toolnexus import ask, create_in_process_client, get_chat_history

    c = create_in_process_client(
        model="m", generate=lambda req: {"content": "hi <there>"}, message_log=in_memory_log()
    )
    ask(c, "hello", id="u-1")
    lines = repr(show(get_chat_history(c))).splitlines()
    assert len(lines) == 2 and "UTC, u-1] hello" in lines[0] and lines[0].startswith("user: [")
    assert lines[1].startswith("assistant: [") and lines[1].endswith("] hi <there>")


def test_show_refuses_what_it_cannot_read():
    with pytest.raises(TypeError, match="show\\(\\) takes a transcript"):
        show(42)


def test_plain_makes_results_json_ready():
    """Failed before: json.dumps(r["usage"]) raised 'FrozenMap is not JSON serializable'."""
    r = weather_run("openai")
    data = json.loads(json.dumps(plain(r)))
    assert data["usage"] == {"prompt_tokens": 20, "completion_tokens": 10, "total_tokens": 30}
    assert data["messages"] == thaw(r["messages"])


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=5),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=3), inner, max_size=3)
    ),
    max_leaves=12,
)


@given(json_values)
def test_plain_of_frozen_json_is_the_json(value):
    assert plain(freeze(value)) == value
    assert json.loads(json.dumps(plain(freeze(value)))) == value

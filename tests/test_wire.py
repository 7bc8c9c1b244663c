"""Pure codecs: round trips, usage sums, tool-result shapes, request bodies."""

import json

from hypothesis import given
from hypothesis import strategies as st

from toolnexus import tool, toolkit
from toolnexus.core.tool import tool_result
from toolnexus.core.wire import anthropic, openai
from toolnexus.core.wire.common import ZERO_USAGE, add_usage, to_json, usage
from toolnexus.core.wire.generated import parse_generated
from toolnexus.testing import anthropic_response, openai_response

names = st.from_regex(r"[a-zA-Z_][a-zA-Z0-9_-]{0,20}", fullmatch=True)
json_scalars = st.none() | st.booleans() | st.integers() | st.text(max_size=20)
args = st.dictionaries(st.text(max_size=8), json_scalars, max_size=4)
counts = st.integers(min_value=0, max_value=10**6)
replies = st.one_of(
    st.builds(lambda t, p, c: {"content": t, "usage": {"prompt_tokens": p, "completion_tokens": c}},
              st.text(min_size=1), counts, counts),
    st.builds(
        lambda calls, p, c: {
            "tool_calls": [
                {"id": f"id{i}", "name": n, "arguments": a} for i, (n, a) in enumerate(calls)
            ],
            "usage": {"prompt_tokens": p, "completion_tokens": c},
        },
        st.lists(st.tuples(names, args), min_size=1, max_size=5), counts, counts,
    ),
)  # fmt: skip


def _expected_calls(reply):
    return [(c["id"], c["name"], c["arguments"]) for c in reply.get("tool_calls", [])]


@given(replies)
def test_openai_round_trip(reply):
    turn = openai.parse_response(openai_response(reply))
    assert turn["text"] == reply.get("content", "")
    got = [(c["id"], c["name"], json.loads(c["arguments"])) for c in turn["tool_calls"]]
    assert got == _expected_calls(reply)
    assert turn["usage"]["total_tokens"] == sum(reply["usage"].values())
    # The assistant message replays exactly what was decoded.
    msg = json.loads(to_json(turn["message"]))
    assert [c["function"]["name"] for c in msg.get("tool_calls", [])] == [c[1] for c in got]


@given(replies)
def test_anthropic_round_trip(reply):
    turn = anthropic.parse_response(anthropic_response(reply))
    assert turn["text"] == reply.get("content", "")
    got = [(c["id"], c["name"], dict(c["arguments"])) for c in turn["tool_calls"]]
    assert got == _expected_calls(reply)
    assert dict(turn["usage"]) == usage(
        reply["usage"]["prompt_tokens"], reply["usage"]["completion_tokens"]
    )
    assert all(b["type"] != "text" or b["text"] for b in turn["message"]["content"])


@given(st.lists(st.tuples(counts, counts), max_size=10))
def test_usage_sums(pairs):
    total = ZERO_USAGE
    for p, c in pairs:
        total = add_usage(total, usage(p, c))
    assert total["prompt_tokens"] == sum(p for p, _ in pairs)
    assert total["completion_tokens"] == sum(c for _, c in pairs)
    assert total["total_tokens"] == total["prompt_tokens"] + total["completion_tokens"]


@given(st.lists(st.tuples(st.text(max_size=5), st.booleans()), min_size=1, max_size=8))
def test_tool_result_shapes_for_parallel_calls(outs):
    calls = [{"id": f"c{i}", "name": "t"} for i in range(len(outs))]
    results = [tool_result(o, e) for o, e in outs]
    oa = openai.tool_result_messages(calls, results)
    assert [dict(m) for m in oa] == [
        {"role": "tool", "tool_call_id": f"c{i}", "content": o} for i, (o, _) in enumerate(outs)
    ]
    (msg,) = anthropic.tool_result_messages(calls, results)
    assert msg["role"] == "user"
    assert [(b["type"], b["tool_use_id"], b["content"], b["is_error"]) for b in msg["content"]] == [
        ("tool_result", f"c{i}", o, e) for i, (o, e) in enumerate(outs)
    ]


def test_bodies_omit_empty_tools_and_system():
    msgs = [openai.user_message("hi")]
    b = openai.body("m", msgs, openai.encode_tools(toolkit()), "", {})
    assert "tools" not in b and b["messages"] == msgs
    b = openai.body("m", msgs, [], "be brief", {"temperature": 0})
    assert b["messages"][0] == {"role": "system", "content": "be brief"} and b["temperature"] == 0
    a = anthropic.body("m", msgs, anthropic.encode_tools(toolkit()), "", {})
    assert "system" not in a and "tools" not in a and a["max_tokens"] == 4096
    tk = toolkit(tool("x", "X.", None, lambda a: ""))
    a = anthropic.body("m", msgs, anthropic.encode_tools(tk), "sys", {})
    assert a["system"] == "sys" and a["tools"][0]["name"] == "x"


def test_urls_and_headers():
    assert openai.url("http://h/v1") == "http://h/v1/chat/completions"
    assert anthropic.url("http://h") == "http://h/v1/messages"
    assert anthropic.url("http://h/v1") == "http://h/v1/messages"
    assert openai.headers("k") == {"Authorization": "Bearer k"}
    assert anthropic.headers("k") == {"x-api-key": "k", "anthropic-version": "2023-06-01"}
    assert openai.headers(None) == {}


def test_generated_replies_get_ids_and_json_arguments():
    t = parse_generated({"tool_calls": [{"name": "a", "arguments": {"x": 1}}]}, 3)
    (c,) = t["tool_calls"]
    assert c["id"] == "call_3_0" and json.loads(c["arguments"]) == {"x": 1}
    assert t["message"]["content"] is None

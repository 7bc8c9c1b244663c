"""Cross-dialect translation (core/wire/translate.py), rule by rule and fast: which
dialect a message tells, which messages are right as they are, system messages made text,
call ids kept, remapped and paired with their results, and the face's errors. Pure, no
I/O (tests/test_translate.py holds the slow properties against the published schemas)."""

from __future__ import annotations

import re

import pytest
from pyrsistent import pset

from toolnexus.core.frozen import freeze, thaw
from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire import translate as T
from toolnexus.core.wire.parts import UnsupportedPartError

FRESH = re.compile(r"^[A-Za-z0-9_-]{1,20}_[0-9a-f]{10}$")


def call(id, name="f", arguments='{"a": 1}'):
    return {"id": id, "type": "function", "function": {"name": name, "arguments": arguments}}


def asks(*ids):
    return {"role": "assistant", "content": None, "tool_calls": [call(i) for i in ids]}


def tool(id, content="r"):
    return {"role": "tool", "tool_call_id": id, "content": content}


def use(id):
    return {"type": "tool_use", "id": id, "name": "f", "input": {}}


def result(id, content="r"):
    return {"type": "tool_result", "tool_use_id": id, "content": content}


USER = {"role": "user", "content": "q"}
SYSTEM = {"role": "system", "content": "be brief"}


# ---- ids --------------------------------------------------------------------------


@pytest.mark.parametrize("dialect", list(DIALECTS))
def test_an_id_must_be_a_non_empty_string_first(dialect):
    assert not T.valid_tool_id(None, dialect)
    assert not T.valid_tool_id("", dialect)
    assert not T.valid_tool_id(7, dialect)
    assert T.valid_tool_id("call_1", dialect)


def test_each_dialect_s_own_id_rule_decides_the_rest():
    assert T.valid_tool_id("x" * 40, "openai") and not T.valid_tool_id("x" * 41, "openai")
    assert not T.valid_tool_id("a.b", "anthropic") and T.valid_tool_id("a-b_1", "anthropic")
    assert T.OPENAI_ID_MAX == 40


def test_a_fresh_id_is_deterministic_short_valid_and_avoids_taken_names():
    new = T._fresh("functions.get:0", 0, set())
    assert FRESH.match(new) and new.startswith("functions_get_0_")
    assert T._fresh("functions.get:0", 0, set()) == new
    assert T._fresh("functions.get:0", 1, set()) != new
    assert T._fresh("functions.get:0", -1, set()) != new
    assert all(T.valid_tool_id(new, d) for d in DIALECTS)
    again = T._fresh("functions.get:0", 0, {new})
    assert FRESH.match(again) and again != new
    assert T._fresh("functions.get:0", 0, {"other"}) == new
    long = T._fresh("a" * 30, 0, set())
    assert long.startswith("a" * 20 + "_") and len(long) == 31
    assert T._fresh("", 0, set()).startswith("call_") and T._fresh(None, 0, set()).startswith(
        "call_"
    )
    assert T._fresh("...", 0, set()).startswith("____")


def test_in_order_hands_out_an_old_id_s_new_ids_in_order_then_the_last():
    order = T._InOrder({"a": ["a1", "a2"], "b": ["b1"], "e": []})
    assert order.get("a") == "a1" and order.get("a") == "a2" and order.get("a") == "a2"
    assert order.get("b") == "b1" and order.get("b") == "b1"
    assert order.get("x") is None and order.get("x", "d") == "d"
    assert order.get("e", "d") == "d"
    assert order.items() == [("a", "a1"), ("a", "a2"), ("b", "b1")]


def test_the_plan_keeps_valid_first_ids_and_gives_reused_ones_fresh_ones():
    messages = freeze([USER, asks("c1", "c1"), tool("c1", "x"), tool("c1", "y"), asks("c1")])
    plan = T._id_plan(messages, "openai")
    assert plan[0].items() == []
    (first, second) = [new for _, new in plan[1].items()]
    assert first == "c1" and FRESH.match(second)
    assert plan[2].items() == [("c1", "c1")] and plan[3].items() == [("c1", second)]
    (third,) = [new for _, new in plan[4].items()]
    assert third not in ("c1", second) and FRESH.match(third)


def test_the_plan_gives_an_orphan_result_its_own_id_or_a_fresh_one():
    messages = freeze([USER, tool("ok"), tool("bad.id"), tool("bad.id")])
    plan = T._id_plan(messages, "anthropic")
    assert plan[1].items() == [("ok", "ok")]
    (new,) = [n for _, n in plan[2].items()]
    assert FRESH.match(new) and plan[3].items() == [("bad.id", new)]


def test_a_user_message_ends_the_calls_a_later_result_may_answer():
    messages = freeze([asks("c"), USER, tool("c")])
    plan = T._id_plan(messages, "openai")
    assert plan[2].items() == [("c", "c")]
    # an invalid id, answered after the user spoke: its own fresh id, not the call's
    messages = freeze([asks("c.1"), USER, tool("c.1")])
    plan = T._id_plan(messages, "anthropic")
    (called,) = [n for _, n in plan[0].items()]
    (answered,) = [n for _, n in plan[2].items()]
    assert FRESH.match(answered) and answered != called
    # without the user message between them the result takes its call's id
    plan = T._id_plan(freeze([asks("c.1"), tool("c.1")]), "anthropic")
    assert plan[1].items() == [("c.1", called)]


def test_a_system_message_ends_them_too_but_an_assistant_text_does_not():
    plan = T._id_plan(freeze([asks("c.1"), SYSTEM, tool("c.1")]), "anthropic")
    assert plan[2].items() != [("c.1", plan[0].items()[0][1])]
    said = {"role": "assistant", "content": "wait"}
    plan = T._id_plan(freeze([asks("c.1"), said, tool("c.1")]), "anthropic")
    assert plan[2].items() == [("c.1", plan[0].items()[0][1])]


# ---- which dialect a message tells -----------------------------------------------------


def test_a_message_tells_its_dialect_by_what_only_one_has():
    ev = T._evidence
    assert ev({"role": "assistant", "items": []}) == "responses"
    assert ev({"role": "model", "parts": [{"text": "a"}]}) == "gemini"
    assert ev({"role": "tool", "tool_call_id": "c", "content": "4"}) == "openai"
    assert ev({"role": "developer", "content": "d"}) == "openai"
    assert ev({"role": "user", "content": "x", "tool_calls": [call("c")]}) == "openai"
    assert ev({"role": "assistant", "content": None}) == "openai"
    assert ev({"role": "user", "content": None}) is None
    assert ev({"role": "user", "content": [{"type": "input_text", "text": "a"}]}) == "responses"
    both = [{"type": "input_text", "text": "a"}, {"type": "image_url", "image_url": {}}]
    assert ev({"role": "user", "content": both}) == "responses"
    image = [{"type": "image_url", "image_url": {"url": "u"}}, {"type": "tool_result"}]
    assert ev({"role": "user", "content": image}) == "openai"
    assert ev({"role": "user", "content": [{"type": "text"}, result("c")]}) == "anthropic"
    assert ev({"role": "user", "content": [{"type": "text", "text": "a"}, "junk"]}) is None
    assert ev({"role": "assistant", "content": "a"}) is None


def test_the_blocks_of_a_message_are_its_mappings_and_text_has_none():
    assert T._blocks({"content": [{"type": "text"}, "x", 3]}) == [{"type": "text"}]
    assert T._blocks({"content": "text"}) == ()
    assert T._blocks({"content": None}) == ()


def test_a_transcript_s_dialect_is_its_latest_telling_message_s():
    anth = {"role": "user", "content": [result("c")]}
    assert T.dialect_of([]) is None
    assert T.dialect_of([tool("c"), anth, USER]) == "anthropic"
    assert T.dialect_of([anth, tool("c")]) == "openai"
    assert T.dialect_of([USER, {"role": "assistant", "content": "a"}]) is None


# ---- right as it is --------------------------------------------------------------------


def test_a_system_message_is_right_where_kept_or_where_the_dialect_takes_it():
    assert T._native(freeze(SYSTEM), "openai")
    assert not T._native(freeze(SYSTEM), "anthropic")
    assert T._native(freeze(SYSTEM), "anthropic", keep_system=True)
    parts = freeze({"role": "system", "content": [{"type": "input_text", "text": "s"}]})
    assert T._native(parts, "responses", keep_system=True)
    assert not T._native(parts, "openai", keep_system=True)


def test_a_message_only_another_dialect_has_is_not_right():
    assert not T._native(freeze(tool("c")), "anthropic")
    assert T._native(freeze(tool("c")), "openai")
    assert T._native(freeze(USER), "anthropic")
    assert not T._native(freeze({"role": "assistant", "content": ""}), "openai")


def test_a_system_message_s_content_is_text_or_only_the_dialect_s_text_parts():
    def ok(content, dialect):
        return T._native_system({"role": "system", "content": content}, dialect)

    assert ok("s", "anthropic") and ok("", "anthropic")
    assert ok([{"type": "text", "text": "a"}, {"type": "text", "text": "b"}], "openai")
    assert not ok([{"type": "input_text", "text": "a"}], "openai")
    assert ok([{"type": "input_text", "text": "a"}], "responses")
    assert not ok([], "openai") and not ok(None, "openai")
    assert not ok([{"type": "text", "text": "a"}, "junk"], "openai")
    assert not ok([{"type": "text", "text": 3}], "openai")
    assert not ok([{"type": "text"}], "openai")
    assert T._TEXT_PART["responses"] == "input_text" and T._TEXT_PART["openai"] == "text"


def test_a_system_message_made_text_joins_its_text_and_places_media_by_policy():
    sm = T._system_message
    assert sm({"role": "developer", "content": "d", "name": "x"}, "openai", "error") == {
        "role": "developer",
        "content": "d",
    }
    blocks = [
        {"type": "text", "text": "a"},
        {"type": "input_text", "text": "b"},
        {"type": "output_text", "text": 3},
        "junk",
        {"type": "text", "text": "c"},
    ]
    assert sm({"role": "system", "content": blocks}, "anthropic", "error") == {
        "role": "system",
        "content": "abc",
    }
    image = {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    message = {"role": "system", "content": [{"type": "text", "text": "a"}, image]}
    with pytest.raises(UnsupportedPartError) as e:
        sm(message, "anthropic", "error")
    assert str(e.value) == (
        "anthropic cannot carry the image https://x/a.png (unknown type) part: "
        "not in a system message"
    )
    assert sm(message, "anthropic", "text")["content"] == (
        "a[image https://x/a.png (unknown type) omitted: not supported by anthropic]"
    )


def test_plain_text_is_a_user_or_assistant_with_non_empty_text_and_nothing_else():
    assert T._plain_text({"role": "user", "content": "q"})
    assert T._plain_text({"role": "assistant", "content": "a"})
    assert not T._plain_text({"role": "system", "content": "s"})
    assert not T._plain_text({"role": "user", "content": ""})
    assert not T._plain_text({"role": "user", "content": ["q"]})
    assert not T._plain_text({"role": "user", "content": "q", "name": "n"})
    assert not T._plain_text({"role": "user"})

    class Text(str):
        pass

    assert not T._plain_text({"role": "user", "content": Text("q")})


def test_a_message_is_right_with_its_ids_only_when_each_id_is_valid_there():
    assert T._right(freeze(USER), "openai", False) == (True, ())
    assert T._right(freeze(asks("c1", "c2")), "openai", False) == (True, ("c1", "c2"))
    assert T._right(freeze(asks("c.1")), "openai", False) == (True, ("c.1",))
    assert T._right(freeze(tool("x" * 41)), "openai", False) == (False, ())
    # the calls of a message that is no assistant's are not its calls
    assert T._right(freeze(tool("c")), "openai", False) == (True, ())


def test_native_call_ids_are_each_right_message_s_calls_once():
    nc = T.native_call_ids
    assert nc([asks("c1"), tool("c1"), asks("c2")], "openai") == pset(["c1", "c2"])
    assert nc([asks("c1"), asks("c1")], "openai") is None
    assert nc([asks("c1", "c1")], "openai") is None
    assert nc([asks("c.1")], "anthropic") is None
    assert nc([SYSTEM], "anthropic") is None
    assert nc([SYSTEM], "anthropic", keep_system=True) == pset()
    taken = pset(["z"])
    assert nc([USER], "openai", taken=taken) is taken
    assert nc([asks("c")], "openai", taken=taken) == pset(["z", "c"])


# ---- the face --------------------------------------------------------------------------


def test_the_face_refuses_an_unknown_dialect_or_policy_naming_the_choices():
    with pytest.raises(ValueError) as e:
        T.translate([], "klingon")
    assert str(e.value) == f"unknown dialect 'klingon': expected one of {T.DIALECTS}"
    with pytest.raises(ValueError) as e:
        T.translate([], "openai", on_unsupported_part="drop")
    assert str(e.value) == "on_unsupported_part must be one of ('error', 'text')"
    assert T.DIALECTS == tuple(DIALECTS)


def test_a_transcript_right_as_it_is_comes_back_as_the_same_object():
    frozen = freeze([SYSTEM, USER, asks("c1"), tool("c1")])
    t = T.translate(frozen, "openai")
    assert t.messages is frozen and t.system == "" and t.ids == {}


def test_system_texts_are_lifted_out_joined_or_kept_in_place():
    t = T.translate([SYSTEM, USER, {"role": "system", "content": "and kind"}], "anthropic")
    assert thaw(t.messages) == [USER] and t.system == "be brief\n\nand kind"
    kept = T.translate([SYSTEM, USER, asks("c.1"), tool("c.1")], "anthropic", keep_system=True)
    assert thaw(kept.messages)[0] == SYSTEM and kept.system == ""
    assert [m["role"] for m in kept.messages] == ["system", "user", "assistant", "user"]


def test_a_system_message_of_parts_is_made_text_and_kept_in_place_when_asked():
    parts = {"role": "system", "content": [{"type": "input_text", "text": "s"}]}
    t = T.translate([parts, asks("c.1"), tool("c.1")], "anthropic", keep_system=True)
    msgs = thaw(t.messages)
    assert msgs[0] == {"role": "system", "content": "s"}
    assert msgs[1]["role"] == "assistant" and msgs[2]["role"] == "user"
    t = T.translate([parts, USER], "anthropic")
    assert thaw(t.messages) == [USER] and t.system == "s"
    t = T.translate([parts, USER], "openai", keep_system=True)
    assert thaw(t.messages) == [{"role": "system", "content": "s"}, USER]


def test_ids_are_remapped_consistently_and_mapped_back_to_the_originals():
    t = T.translate([USER, asks("c.1", "c.1"), tool("c.1", "a"), tool("c.1", "b")], "anthropic")
    msgs = thaw(t.messages)
    first, second = (u["id"] for u in msgs[1]["content"])
    assert FRESH.match(first) and FRESH.match(second) and first != second
    assert [(r["tool_use_id"], r["content"]) for r in msgs[2]["content"]] == [
        (first, "a"),
        (second, "b"),
    ]
    assert t.ids == {first: "c.1", second: "c.1"}
    assert T.translate([USER, asks("c1"), tool("c1")], "anthropic").ids == {}


def test_messages_right_as_they_are_are_kept_the_same_objects_among_rewritten_ones():
    frozen = freeze([USER, asks("c1"), tool("c1"), {"role": "assistant", "content": "done"}])
    t = T.translate(frozen, "anthropic")
    assert t.messages[0] is frozen[0] and t.messages[3] is frozen[3]
    assert thaw(t.messages[1]) == {
        "role": "assistant",
        "content": [use("c1") | {"input": {"a": 1}}],
    }
    assert thaw(t.messages[2]) == {"role": "user", "content": [result("c1")]}


def test_a_native_results_message_after_rewritten_results_joins_them():
    # an anthropic results message after a rewritten one: one user message of results
    native = {"role": "user", "content": [result("c2")]}
    frozen = freeze([USER, asks("c1", "c2"), tool("c1"), native])
    msgs = thaw(T.translate(frozen, "anthropic").messages)
    assert msgs[2] == {"role": "user", "content": [result("c1"), result("c2")]}
    assert len(msgs) == 3


def test_results_continue_only_rewritten_results_with_results():
    assert not T._continues_results(freeze(tool("c")), [])
    assert T._continues_results(freeze(tool("c")), [("result", "c", "r", False)])
    assert not T._continues_results(freeze(tool("c")), [("user", "u")])
    assert not T._continues_results(freeze(USER), [("result", "c", "r", False)])


def test_to_dialect_is_translate_s_messages_with_its_policy():
    audio = {"type": "input_audio", "input_audio": {"data": "UklGRg==", "format": "wav"}}
    t = [{"role": "user", "content": [{"type": "text", "text": "hear"}, audio]}]
    with pytest.raises(UnsupportedPartError):
        T.to_dialect(t, "anthropic")
    msgs = thaw(T.to_dialect(t, "anthropic", on_unsupported_part="text"))
    assert msgs[0]["content"][1]["text"].startswith("[audio")
    frozen = freeze([USER])
    assert T.to_dialect(frozen, "anthropic") is frozen


# ---- the survivors' rules ----------------------------------------------------------------


def test_the_verdicts_are_booleans():
    assert T.valid_tool_id(None, "openai") is False
    assert T._plain_text({"role": "user"}) is False
    assert T._native(freeze(tool("c")), "anthropic") is False


def test_a_message_telling_another_dialect_is_not_right_even_where_its_shape_is_taken():
    other = freeze({"role": "user", "content": [{"type": "input_text", "text": "a"}]})
    assert DIALECTS["openai"].native(other)  # a chat user message may hold any parts
    assert T._native(other, "openai") is False


def test_in_order_hands_out_three_new_ids_in_their_order():
    order = T._InOrder({"a": ["a1", "a2", "a3"]})
    assert [order.get("a") for _ in range(4)] == ["a1", "a2", "a3", "a3"]


def test_a_reused_id_s_fresh_name_is_of_its_occurrence():
    plan = T._id_plan(freeze([asks("c1", "c1", "c1")]), "openai")
    news = [new for _, new in plan[0].items()]
    assert news[0] == "c1"
    assert news[1] == T._fresh("c1", 1, {"c1"})
    assert news[2] == T._fresh("c1", 2, {"c1", news[1]})
    assert news[1].startswith("c1_") and news[2].startswith("c1_")


def test_an_orphan_s_fresh_name_is_its_own_and_reserved():
    messages = freeze([tool("bad.id"), USER, tool("bad.id")])
    plan = T._id_plan(messages, "anthropic")
    (first,) = [n for _, n in plan[0].items()]
    (second,) = [n for _, n in plan[2].items()]
    assert first.startswith("bad_id_") and second.startswith("bad_id_") and first != second


def test_a_fresh_name_avoids_an_id_kept_as_it_is():
    taken = T._fresh("c.1", 0, set())
    plan = T._id_plan(freeze([asks(taken, "c.1")]), "anthropic")
    kept, new = [n for _, n in plan[0].items()]
    assert kept == taken and new != taken and FRESH.match(new)


def test_a_native_message_whose_ids_are_kept_stays_the_same_object():
    own = freeze([{"role": "assistant", "content": [use("t2")]},
                  {"role": "user", "content": [result("t2")]}])  # fmt: skip
    frozen = freeze([USER, asks("c1"), tool("c1")]).extend(own)
    t = T.translate(frozen, "anthropic")
    assert t.messages[3] is frozen[3] and t.messages[4] is frozen[4]


def test_a_system_message_right_where_kept_is_kept_the_same_object():
    frozen = freeze([SYSTEM, USER, asks("c.1"), tool("c.1")])
    t = T.translate(frozen, "anthropic", keep_system=True)
    assert t.messages[0] is frozen[0]


def test_a_system_message_s_media_is_placed_naming_the_dialect():
    image = {"type": "image_url", "image_url": {"url": "https://x/a.png"}}
    t = T.translate([{"role": "system", "content": [image]}, USER], "anthropic",
                    on_unsupported_part="text")  # fmt: skip
    assert t.system == "[image https://x/a.png (unknown type) omitted: not supported by anthropic]"


def test_a_developer_message_is_a_system_message_too():
    developer = freeze({"role": "developer", "content": "d"})
    assert T._native(developer, "anthropic", keep_system=True) is True
    assert T._native(developer, "anthropic") is False


def test_a_transcript_whose_system_messages_stay_in_place_is_kept_as_it_is():
    frozen = freeze([SYSTEM, USER])
    assert T.translate(frozen, "anthropic", keep_system=True).messages is frozen
    assert T._unchanged(frozen, "anthropic", True) and not T._unchanged(frozen, "anthropic", False)

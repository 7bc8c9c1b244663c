"""The dialect record's check, rule by rule: each kind of field (facts, names, hosts,
functions, optional ones, groups) refused with its exact message, and what passes."""

from __future__ import annotations

import dataclasses

import pytest

from toolnexus.core.wire import DIALECTS
from toolnexus.core.wire.dialect import GROUPS, OPTIONAL, register

OPENAI = next(iter(DIALECTS.values()))


def _refusal(**changes) -> str:
    with pytest.raises(TypeError) as e:
        register(dataclasses.replace(OPENAI, **changes))
    return str(e.value)


@pytest.mark.parametrize("fact", ["name", "provider"])
@pytest.mark.parametrize("value", ["", " x", "x ", 3, None])
def test_a_fact_is_a_non_empty_trimmed_string(fact, value):
    said = _refusal(**{fact: value})
    name = value if fact == "name" else "openai"
    assert said == f"dialect {name!r}: {fact} is {value!r}"


@pytest.mark.parametrize("field", ["key_env", "owned_params"])
@pytest.mark.parametrize("value", [["A"], ("A", 1), "A", None])
def test_names_are_a_tuple_of_strings(field, value):
    assert _refusal(**{field: value}) == f"dialect 'openai': {field} is {value!r}"


@pytest.mark.parametrize("value", [{"h": 1}, {1: "p"}, [("h", "p")], None])
def test_hosts_map_strings_to_strings(value):
    assert _refusal(hosts=value) == f"dialect 'openai': hosts is {value!r}"


def test_a_value_is_shown_cut_to_80_characters():
    said = _refusal(provider="y" * 200 + " ")
    assert said == "dialect 'openai': provider is " + repr("y" * 200 + " ")[:80]


def test_a_function_field_is_callable_and_only_optional_ones_may_be_none():
    assert _refusal(url="https://x") == "dialect 'openai': url is 'https://x'"
    assert _refusal(owns=3) == "dialect 'openai': owns is 3"
    ok = dataclasses.replace(
        OPENAI, owns=None, model_url=None, hosts={}, key_env=(), owned_params=()
    )
    assert register(ok)["openai"] is ok
    assert OPTIONAL >= {"owns", "model_url"} and "url" not in OPTIONAL


def test_a_group_given_in_part_names_the_group_and_what_was_given():
    (group,) = GROUPS
    said = _refusal(stored=lambda *a: None, forgotten=lambda *a: None)
    assert said == (f"dialect 'openai': {sorted(group)} come together, got ['forgotten', 'stored']")


def test_the_registry_keeps_the_order_given_and_refuses_a_duplicate_name():
    other = dataclasses.replace(OPENAI, name="other")
    assert list(register(other, OPENAI)) == ["other", "openai"]
    with pytest.raises(TypeError) as e:
        register(OPENAI, other, OPENAI)
    assert (
        str(e.value)
        == "dialect names must be unique and at least one: ['openai', 'other', 'openai']"
    )
    with pytest.raises(TypeError) as e:
        register()
    assert str(e.value) == "dialect names must be unique and at least one: []"
    with pytest.raises(TypeError) as e:
        register(OPENAI, "x")
    assert str(e.value) == "a dialect is a Dialect record, got str"


def test_the_registry_is_read_only():
    with pytest.raises(TypeError):
        register(OPENAI)["x"] = OPENAI  # type: ignore[index]


def test_a_record_is_frozen_keyword_only_and_slotted_with_no_hosts_by_default():
    values = {f.name: getattr(OPENAI, f.name) for f in dataclasses.fields(OPENAI)}
    with pytest.raises(TypeError):
        type(OPENAI)(*values.values())
    with pytest.raises(dataclasses.FrozenInstanceError):
        OPENAI.name = "x"  # type: ignore[misc]
    assert not hasattr(OPENAI, "__dict__")
    bare = type(OPENAI)(**{k: v for k, v in values.items() if k != "hosts"})
    assert dict(bare.hosts) == {} and register(bare)["openai"].hosts == {}
    with pytest.raises(TypeError):
        bare.hosts["h"] = "p"  # type: ignore[index]

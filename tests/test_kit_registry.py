"""The test kit's registry (testing.registry.FAKES): one declared record per dialect, checked
whole, covering exactly the core registry's rows; every kit table is read off it."""

from __future__ import annotations

import importlib
from dataclasses import fields, replace

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.frozen import thaw
from toolnexus.core.wire import DIALECTS, view
from toolnexus.testing.fakes import OPTIONAL, Fake, register
from toolnexus.testing.registry import FAKES
from toolnexus.testing.strategies import transcripts_of
from toolnexus.testing.validators import SPECS, VALIDATORS, validate_request

ALL = list(DIALECTS)  # every row of the dialect registry
fake_provider = importlib.import_module("toolnexus.testing.fake_provider")
fake_replies = importlib.import_module("toolnexus.testing.fake_replies")
profiles = importlib.import_module("toolnexus.testing.profiles")


def test_the_kits_fakes_are_the_core_registrys_rows_in_its_order():
    assert list(FAKES) == ALL
    assert all(isinstance(f, Fake) and f.name == name for name, f in FAKES.items())


def test_a_core_row_without_its_fake_fails_at_registration():
    rows = {**DIALECTS, "newdialect": object()}
    with pytest.raises(TypeError, match="newdialect.*fake_<name>"):
        register(rows, *FAKES.values())
    with pytest.raises(TypeError, match="once each"):
        register(DIALECTS, *FAKES.values(), next(iter(FAKES.values())))


REQUIRED = [f.name for f in fields(Fake) if f.name not in OPTIONAL]


@pytest.mark.parametrize("field", REQUIRED)
def test_a_fake_without_a_field_it_needs_is_refused_naming_it(field):
    whole = list(FAKES.values())
    broken = replace(whole[0], **{field: None})
    with pytest.raises(TypeError, match=f"{field} is None"):
        register(DIALECTS, broken, *whole[1:])


def test_the_fields_that_come_together_come_together():
    whole = list(FAKES.values())
    half = replace(whole[0], expand=lambda body, kept: (body, None), keep=None)
    with pytest.raises(TypeError, match="come together"):
        register(DIALECTS, half, *whole[1:])
    with pytest.raises(TypeError, match="a Fake record"):
        register(DIALECTS, object(), *whole[1:])


def test_every_kit_table_is_read_off_the_registry():
    assert sorted(fake_provider.PATHS.values()) == sorted(ALL)
    assert list(SPECS) == list(VALIDATORS) == list(fake_replies.RESPONSES) == ALL
    for name, f in FAKES.items():
        assert fake_provider._dialect_of_path("/v1" + f.path) == name
        assert fake_replies.RESPONSES[name] is f.response and VALIDATORS[name] is f.rules
    assert {p["style"] for p in profiles.PROFILES.values()} <= set(ALL)
    for name in ALL:  # a plain provider answers failures in a profile that exists
        assert profiles.default_profile(name) in profiles.PROFILES


def test_every_profile_names_its_type_of_every_failure():
    for name, p in profiles.PROFILES.items():
        for kind, row in profiles.FAILURES.items():
            assert p["error_types"][kind] in row[1:3], (name, kind)
    fake = next(iter(FAKES.values()))
    with pytest.raises(TypeError, match="lacks"):
        profiles._profile("bare", fake, {"source": "s"})


@pytest.mark.parametrize("dialect", ALL)
@given(data=st.data())
def test_a_row_without_flourishes_gets_transcripts_of_neutral_items(dialect, data):
    """A new dialect is drawn without a strategy edit: its record writes neutral items,
    and the request of each transcript is one its API takes, every call answered."""
    bare = replace(FAKES[dialect], flourishes=None)
    transcript = data.draw(transcripts_of(bare, max_turns=3))
    items = view.items(transcript)
    calls = [c[0] for i in items if i[0] == "assistant" for c in i[2]]
    assert sorted(calls) == sorted(i[1] for i in items if i[0] == "result")
    codec = DIALECTS[dialect]
    prompt = codec.user_message("go on")
    body = thaw(codec.body("m", [*codec.replayable(transcript), prompt], [], "", {}))
    assert validate_request(body, dialect) == []

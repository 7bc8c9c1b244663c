"""The rules of core/errors.py no other test asserts: the excerpt's 500 characters and its
count of what was cut (after a first cut at 4 x limit + 64), ProviderError's defaults,
scrub_error's whole copy, scrub_chain through causes, contexts and cycles, status_error's
scrubbed url and body."""

from __future__ import annotations

import pytest

from toolnexus.core.errors import ProviderError, excerpt, scrub_chain, scrub_error, status_error

KEY = "sk-abcdefghijklmnop"


def test_an_excerpt_keeps_500_characters_and_counts_the_rest():
    assert excerpt("x" * 500) == "x" * 500
    assert excerpt("x" * 501) == "x" * 500 + "... [1 more chars]"
    # the text is first cut at 4 x 500 + 64 characters (bounded work), then counted
    assert excerpt("x" * 3000) == "x" * 500 + "... [1564 more chars]"
    assert excerpt("x" * 30, limit=5) == "xxxxx... [25 more chars]"  # 4 x 5 + 64 > 30


def test_a_provider_error_has_empty_texts_by_default():
    e = ProviderError("m")
    assert (e.body, e.url, e.headers, e.status) == ("", "", {}, None)
    assert (e.network, e.retry_after) == (False, None)
    assert (e.error_type, e.code) == (None, None)


def test_scrub_error_copies_every_field_with_the_secret_masked():
    inner = RuntimeError(f"inner {KEY}")
    try:
        try:
            raise inner
        except RuntimeError:
            raise ProviderError(
                f"outer {KEY}", status=401, body=f"body {KEY}", url=f"http://h/?k={KEY}",
                headers={"x-echo": f"v {KEY}", "n": 3}, network=True, retry_after=2.5,
                error_type=f"t {KEY}", code=f"c {KEY}",
            ) from None  # fmt: skip
    except ProviderError as caught:
        error = caught
    error.streamed = True
    out = scrub_error(error, [KEY])
    assert str(out) == "outer ***" and out.status == 401
    assert (out.body, out.url) == ("body ***", "http://h/?k=***")
    assert out.headers == {"x-echo": "v ***", "n": 3}
    assert (out.network, out.retry_after, out.error_type, out.code) == (True, 2.5, "t ***", "c ***")
    assert out.streamed is True and out.__traceback__ is error.__traceback__
    assert str(inner) == "inner ***"  # the chain of the error it was made from: scrubbed
    plain = scrub_error(ProviderError("m", headers=None), [KEY])
    assert plain.streamed is False and plain.headers == {}


def test_scrub_error_takes_headers_that_are_no_mapping_as_none():
    e = ProviderError("m")
    e.headers = [("x", KEY)]
    assert scrub_error(e, [KEY]).headers == {}


def test_scrub_chain_follows_causes_and_contexts_and_stops_at_a_cycle():
    a, b, c = ValueError(f"a {KEY}"), KeyError(f"b {KEY}"), OSError(f"c {KEY}")
    a.__cause__, a.__context__ = b, None
    b.__context__ = c
    c.__context__ = a  # a cycle
    assert scrub_chain(a, [KEY]) is a
    assert [str(x.args[0]) for x in (a, b, c)] == ["a ***", "b ***", "c ***"]


def test_status_error_scrubs_its_url_and_reads_bad_bytes():
    e = status_error(f"http://h/v1?key={KEY}", 500, {"x": KEY}, b"oops \xff")
    assert e.url == f"http://h/v1?key={KEY}"  # no secrets given: nothing to mask
    e = status_error(f"http://h/v1?key={KEY}", 500, {"x": KEY}, b"oops \xff " + KEY.encode(), [KEY])
    assert e.url == "http://h/v1?key=***" and e.body == "oops \ufffd ***"
    assert str(e) == "POST http://h/v1?key=*** returned 500: oops \ufffd ***"
    assert e.headers == {"x": "***"} and e.status == 500


@pytest.mark.parametrize("secrets", [[KEY], lambda s: s.replace(KEY, "<k>")])
def test_secrets_may_be_values_or_a_scrubber(secrets):
    assert "sk-" not in excerpt(f"key {KEY}", secrets)

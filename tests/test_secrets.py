"""core.secrets: every form of a secret is scrubbed; DSN passwords are found leniently."""

from __future__ import annotations

import json
import re
import urllib.parse

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.errors import ProviderError, excerpt, scrub_error, status_error
from toolnexus.core.secrets import MIN_SECRET, dsn_passwords, redact_dsn, scrubber

# Secrets from one alphabet, surrounding text from another: a fragment found in the
# output can only have come from the secret.
SECRET_CHARS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789+/=_-@%"
secrets = st.text(alphabet=SECRET_CHARS, min_size=12, max_size=80)
prose = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ,.:{}\"'", max_size=60)


def plain(text: str) -> str:
    """What a reader could recover from a text: escapes decoded, line breaks joined."""
    text = re.sub(r"\\u([0-9a-fA-F]{4})", lambda m: chr(int(m[1], 16)), text)
    text = text.replace("\\/", "/").replace("\\n", "").replace("\n", "")
    return urllib.parse.unquote(text).replace("\n", "")


def fragments(secret: str) -> set[str]:
    return {secret[i : i + 12] for i in range(len(secret) - 11)}


def forms(secret: str, cut: int) -> dict[str, str]:
    """The forms an echoed secret takes in the wild."""
    cut = max(1, min(cut, len(secret) - 1))
    return {
        "exact": secret,
        "partly masked": secret[:-3] + "...",
        "prefix": secret[:12],
        "url-encoded": urllib.parse.quote(secret, safe=""),
        "url-encoded lower hex": re.sub(
            r"%[0-9A-F]{2}", lambda m: m[0].lower(), urllib.parse.quote(secret, safe="")
        ),
        "json": json.dumps(secret)[1:-1],
        "json \\u": "".join(f"\\u{ord(c):04x}" for c in secret),
        "json \\/": secret.replace("/", "\\/"),
        "split": secret[:cut] + "\n" + secret[cut:],
        "split crlf indent": secret[:cut] + "\r\n    " + secret[cut:],
        "split escaped": secret[:cut] + "\\n" + secret[cut:],
        "split url-encoded": secret[:cut] + "%0A" + secret[cut:],
    }


@given(secrets, prose, prose, st.integers(1, 80), st.data())
def test_no_fragment_of_a_secret_survives_in_any_form(secret, before, after, cut, data):
    name = data.draw(st.sampled_from(sorted(forms(secret, cut))))
    text = before + forms(secret, cut)[name] + after
    out = scrubber([secret])(text)
    assert not any(f in plain(out) or f in out for f in fragments(secret)), (name, out)
    if any(f in plain(text) for f in fragments(secret)):  # a form long enough to matter
        assert "***" in out


@given(secrets, prose)
def test_text_without_the_secret_is_unchanged(secret, text):
    assert scrubber([secret])(text) == text


@given(st.lists(secrets, min_size=1, max_size=3), prose)
def test_several_secrets_are_all_scrubbed(many, text):
    out = scrubber(many)(" ".join(many) + text)
    assert not any(f in out for s in many for f in fragments(s))


def test_short_and_missing_secrets_are_skipped():
    scrub = scrubber([None, "", "ab" * (MIN_SECRET // 2 - 1) if MIN_SECRET > 2 else "", "abcd"])
    assert scrub("x abcd y ab") == "x *** y ab"
    assert scrubber([])("anything") == "anything"


def test_a_secret_at_the_cut_of_an_excerpt_is_still_scrubbed():
    secret = "sk-" + "Q" * 40
    text = "x" * 480 + secret
    out = excerpt(text, (secret,), limit=500)
    assert "QQQQQQQQQQQQ" not in out and len(out) <= 540


def test_scrub_error_scrubs_message_body_url_and_headers():
    secret = "sk-abcdefghijklmnopqrst"
    e = ProviderError(f"bad {secret}", status=500, body=secret, url=f"http://h/?k={secret}",
                      headers={"x-echo": secret}, retry_after=3)  # fmt: skip
    out = scrub_error(e, [secret])
    assert secret not in str(out) + out.body + out.url + json.dumps(out.headers)
    assert (out.status, out.retry_after) == (500, 3)
    # The given error is scrubbed too: raised `from None` while handling it, the copy
    # still carries it as __context__, where code walking the chain would read it.
    assert secret not in str(e) + e.body + e.url


def test_a_masked_error_carries_only_scrubbed_copies_in_its_chain():
    secret = "sk-abcdefghijklmnopqrst"
    try:
        try:
            raise ProviderError(f"error event echoing {secret}", body=secret)
        except ProviderError as e:
            raise scrub_error(e, [secret]) from None
    except ProviderError as masked:
        chain = [masked, masked.__context__]
    assert chain[1] is not None
    assert all(secret not in f"{c} {c.args} {c.body}" for c in chain)


def test_status_error_is_bounded_and_scrubbed():
    secret = "sk-abcdefghijklmnopqrst"
    body = json.dumps({"error": {"message": "key " + urllib.parse.quote(secret) + "!" * 900}})
    e = status_error("http://h/v1/messages", 401, {"retry-after": "1"}, body.encode(), (secret,))
    assert e.status == 401 and e.headers == {"retry-after": "1"}
    assert "abcdefghijkl" not in str(e) and len(e.body) < 600


# ---- DSNs --------------------------------------------------------------------------

PASSWORDS = ["my%secret", "p@ss@word", "with/slash", "hash#tag", "q?mark", "colon:in", "%zz%"]


@pytest.mark.parametrize("password", PASSWORDS)
def test_a_url_dsn_password_is_found_and_redacted_however_odd(password):
    dsn = f"postgresql://me:{password}@db.example:5432/app?sslmode=require"
    assert password in dsn_passwords(dsn)
    red = redact_dsn(dsn)
    assert password not in red and red.startswith("postgresql://me:***@db.example:5432/app")


@given(st.text(alphabet=SECRET_CHARS + "#?:/", min_size=MIN_SECRET, max_size=40))
def test_any_url_password_is_redacted(password):
    dsn = f"postgresql://user:{password}@host/db"
    assert password not in redact_dsn(dsn)
    assert not any(password in scrubber(dsn_passwords(dsn))(t) for t in (dsn, f"at {dsn}!"))


def test_conninfo_and_query_passwords():
    assert dsn_passwords("host=db password='it''s long' user=me") == ("it's long",)
    assert redact_dsn("host=db password='it''s long' user=me") == "host=db password=*** user=me"
    assert redact_dsn("postgresql://db/app?password=x%2By&user=me") == (
        "postgresql://db/app?password=***&user=me"
    )
    assert set(dsn_passwords("postgresql://db/app?password=x%2By")) == {"x%2By", "x+y"}
    assert redact_dsn("postgresql://db/app") == "postgresql://db/app"
    assert dsn_passwords("postgresql://u@db/app") == ()

"""The rules of core/secrets.py no other test asserts, exactly: the scrubber's output equals
a brute-force model (every run of 12+ characters of a secret, a shorter secret only whole,
its encodings only whole; overlapping or touching finds masked as one), escaped texts
masked from the first to the last character of the escapes that spell the secret, the
encodings' exact forms, and the DSN parser's edges."""

from __future__ import annotations

import base64

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.secrets import (
    dsn_passwords,
    encodings,
    redact_dsn,
    scrub_text,
    scrub_value,
    scrubber,
)

LONG = "sk-ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # no character twice: one alignment per find
MID = "qrstuvwxyz01"  # exactly 12: found whole only
SHORT = "pw89"  # 4: found whole only
SECRETS = (LONG, MID, SHORT)


def model(text: str, secrets=SECRETS) -> str:
    """Mask every run of min(12, len) characters or more of a secret, and every whole
    encoding; merge overlapping and touching finds."""
    spans = []
    for s in secrets:
        w = min(12, len(s))
        for i in range(len(text)):
            for j in range(i + w, len(text) + 1):
                if text[i:j] in s:
                    spans.append((i, j))
        for form in encodings(s):
            at = text.find(form)
            while at >= 0:
                spans.append((at, at + len(form)))
                at = text.find(form, at + 1)
    merged: list[list[int]] = []
    for a, b in sorted(spans):
        if merged and a <= merged[-1][1]:
            merged[-1][1] = max(merged[-1][1], b)
        else:
            merged.append([a, b])
    out, pos = [], 0
    for a, b in merged:
        out += [text[pos:a], "***"]
        pos = b
    return "".join([*out, text[pos:]])


def cut(s):
    return st.tuples(st.integers(0, len(s)), st.integers(0, len(s))).map(
        lambda ij: s[min(ij) : max(ij)]
    )


piece = st.one_of(cut(LONG), cut(MID), st.just(SHORT), st.text("abc.", max_size=4))


@given(st.lists(piece, max_size=8).map("".join))
def test_the_scrubber_masks_exactly_what_the_model_masks(text):
    assert scrub_text(text, SECRETS) == model(text)


@pytest.mark.parametrize(
    "text",
    [
        LONG,
        "x" + LONG + "y",
        LONG[:12],
        LONG[:11],  # one short of a run: kept
        LONG[-12:],
        LONG[-11:],
        "a" + LONG[5:17] + "b" + LONG[10:22],  # two finds, one character apart
        LONG[:14] + LONG[12:26],  # two finds overlapping in the text
        LONG[:12] + LONG[3:15],  # touching: one mask
        MID,
        MID[:11],
        SHORT + SHORT,
        "pw8" + "9",
        "no secret here at all, none",
        LONG[5:17] + LONG[4],  # a find at the start: never grown past it (to the end)
    ],
)
def test_fixed_texts_match_the_model(text):
    assert scrub_text(text, SECRETS) == model(text)


def test_nothing_to_hide_gives_the_text_back():
    scrub = scrubber([None, "", "abc"])  # skipped: none, empty, under 4 characters
    text = "abc " * 5
    assert scrub(text) is text
    assert scrubber([SHORT])("pw8") == "pw8"  # shorter than any form
    assert scrubber([SHORT])(5) == 5  # not a text: as it is


@pytest.mark.parametrize(
    "text, masked",
    [
        ("k=%70%77%38%39!", "k=***!"),  # every character escaped
        ("k=p%77%389!", "k=***!"),  # escapes inside, literal at both ends
        ("k=pw8\\u0039!", "k=***!"),  # a JSON \\u escape at the end
        ("k=\\u0070w89!", "k=***!"),  # and at the start
        ("k=pw\n  89!", "k=***!"),  # a line break and the next line's indent
        ("k=pw\r\n89!", "k=***!"),
        ("k=pw\r89!", "k=***!"),  # a carriage return alone
        ("k=pw\\n89!", "k=***!"),  # an escaped line break
        ("k=pw%0A89!", "k=***!"),  # a percent-escaped line break
        ("k=pw%0D89!", "k=***!"),
        ("%25 and pw89", "%25 and ***"),  # an escape elsewhere, the secret plain
        ("pw89 then %41", "*** then %41"),
        ("a\\\\b pw89", "a\\\\b ***"),
    ],
)
def test_an_escaped_secret_is_masked_from_its_first_escape_to_its_last(text, masked):
    assert scrub_text(text, [SHORT]) == masked


def test_a_unicode_escape_reads_all_four_digits():
    assert scrub_text("k=pw\\u26039!", ["pw\u26039"]) == "k=***!"


def test_an_encoding_is_masked_whole_and_never_grown():
    hexed = LONG.encode().hex()
    assert scrub_text(hexed[0] + hexed + hexed[-1], [LONG]) == hexed[0] + "***" + hexed[-1]


def test_a_json_short_escape_decodes_to_its_character():
    assert scrub_text('k="a\\/b99"', ["a/b99"]) == 'k="***"'
    assert scrub_text('k="a\\"b99"', ['a"b99']) == 'k="***"'
    assert scrub_text('k="a\\\\b99"', ["a\\b99"]) == 'k="***"'


def test_a_long_secret_escaped_is_masked_by_its_fragments_too():
    escaped = "".join(f"%{ord(c):02X}" for c in LONG[:12])
    assert scrub_text(f"[{escaped}]", [LONG]) == "[***]"
    assert scrub_text(f"[{escaped[:-3]}]", [LONG]) == f"[{escaped[:-3]}]"  # 11: kept


def test_the_encodings_of_a_secret():
    raw = b"sk-abcdefghij"
    forms = encodings(raw.decode())
    assert forms[:2] == (raw.hex(), raw.hex().upper())
    assert base64.b64encode(raw).decode()[:17] in forms  # alignment 0: 13 bytes, 17 whole
    for pad in (1, 2):  # the secret after 1 or 2 other bytes: only its own characters
        full = base64.b64encode(b"\0" * pad + raw).decode()
        start, end = -(-8 * pad // 6), (8 * (pad + len(raw))) // 6
        assert full[start:end] in forms
        assert full[start - 1 : end] not in forms
    assert encodings("x" * 11) == () and len(encodings("x" * 12)) > 0
    assert encodings("\ud83d" * 12)[0] == ("\ud83d" * 12).encode("utf-8", "surrogatepass").hex()
    url_safe = encodings("??????>>>>>>")  # bytes whose base64 holds + and /
    assert any("-" in f or "_" in f for f in url_safe) and any(
        "+" in f or "/" in f for f in url_safe
    )


def test_scrub_value_masks_keys_too():
    assert scrub_value({f"k {SHORT}": [SHORT]}, scrubber([SHORT])) == {"k ***": ["***"]}


@pytest.mark.parametrize(
    "dsn, passwords",
    [
        ("postgresql://u:pw@h/db", ("pw",)),
        ("postgresql://u@h/db", ()),  # no password
        ("postgresql://h/db", ()),  # no userinfo
        ("postgresql://:pw@h", ("pw",)),  # an empty user
        ("postgresql://u:p@ss@h/db", ("p@ss",)),  # the userinfo ends at the last @
        ("postgresql://u:@h/db", ()),  # an empty password: nothing
        ("postgresql://u:a%20b@h", ("a%20b", "a b")),  # raw and decoded
        ("postgresql://u:a%ffb@h", ("a%ffb",)),  # not UTF-8 decoded: raw only
        ("u:pw@h", ()),  # no scheme: no userinfo
        ("host=h password='it''s' user=u", ("it's",)),
        ("host=h password='it\\'s' user=u", ("it's",)),
        ("host=h password='open to the end", ("open to the end",)),  # never closed
        ("host=h password=' user=u", (" user=u",)),
        ("host=h password='' user=u", ()),  # empty
        ("host=h password=a b c user=u", ("a b c",)),
        ("postgresql://h/db password=x", ()),  # a URL: no conninfo words read
    ],
)
def test_dsn_passwords_at_their_edges(dsn, passwords):
    assert dsn_passwords(dsn) == passwords


def test_redact_dsn_masks_what_dsn_passwords_finds():
    assert redact_dsn(5) == "***"
    assert redact_dsn("postgresql://u@h/db") == "postgresql://u@h/db"
    assert redact_dsn("postgresql://u@h:5432/db") == "postgresql://u@h:5432/db"  # a port
    assert redact_dsn("postgresql://u:p@ss@h/db") == "postgresql://u:***@h/db"
    assert dsn_passwords(5) == ()

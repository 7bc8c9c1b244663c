"""Secret hygiene: scrub every form of a secret from text before it leaves the library.

    scrub = scrubber(("sk-proj-...", dsn_password))
    scrub("401: bad key sk-proj-...")          # -> "401: bad key ***"

A secret is found in `text` as the exact value, as any 12-character fragment of it
(a provider that echoes a key "partly masked" still shows most of it), URL-encoded
(`%2B`), JSON-escaped (`\\u002b`, `\\/`, `\\"`) and split across a line break; a
secret of 12 characters or more also whole as hex and base64 (standard and URL-safe, at
any alignment, so inside a longer encoded text such as a Basic or `Bearer` header a
tool echoed). Each finding is replaced by `***` in the original text. Pure: no I/O, no state.

Secrets shorter than `MIN_SECRET` characters are not searched for: masking every "ab"
in a message would destroy it, and a value that short protects nothing anyway.
"""

from __future__ import annotations

import base64
import re
from bisect import bisect_right
from collections.abc import Callable, Iterable
from functools import cache
from typing import Any
from urllib.parse import unquote

from .walk import map_strings

__all__ = [
    "FRAGMENT",
    "MIN_SECRET",
    "MASK",
    "scrubber",
    "encodings",
    "scrub_text",
    "scrub_value",
    "dsn_passwords",
    "redact_dsn",
]

FRAGMENT = 12  # any run of this many characters of a secret counts as the secret
MIN_SECRET = 4
MASK = "***"
# No mutant: an alias for annotations only (strings here, never evaluated).
Scrub = Callable[[str], str]  # pragma: no mutate

# Escapes whose decoded form may spell a secret: %XX, \uXXXX, JSON's short escapes;
# line breaks (real or JSON-escaped, with the next line's indent) decode to nothing.
_ESCAPES = re.compile(r"%[0-9A-Fa-f]{2}|\\u[0-9A-Fa-f]{4}|\\[\\\"/]|(?:\\[rn]|\r\n?|\n)[ \t]*")


def _pieces(secret: str) -> tuple[int, tuple[tuple[int, str], ...]]:
    """Return (fragment length, aligned pieces (offset, text)) to search a secret by.

    Every window of `w` characters of the secret holds one whole aligned piece of
    length w // 2, so finding the pieces (fast, in C) finds every fragment.
    """
    w = min(FRAGMENT, len(secret))
    if w < FRAGMENT:  # a short secret is only ever found whole
        return w, ((0, secret),)
    k = w // 2
    return w, tuple((o, secret[o : o + k]) for o in range(0, len(secret) - k + 1, k))


def _runs(text: str, secret: str, w: int, pieces: tuple) -> list[tuple[int, int]]:
    """Return the spans of `text` that match a run of at least `w` characters of `secret`."""
    spans = []
    for offset, piece in pieces:
        at = text.find(piece)
        while at >= 0:
            # Grow the match both ways while text and secret agree (same alignment).
            a, b = at, at + len(piece)
            while a > 0 and a - at + offset > 0 and text[a - 1] == secret[a - 1 - at + offset]:
                a -= 1
            while (
                b < len(text)
                and b - at + offset < len(secret)
                and (text[b] == secret[b - at + offset])
            ):
                b += 1
            if b - a >= w:
                spans.append((a, b))
            at = text.find(piece, at + 1)
    return spans


def _decoded(text: str) -> tuple[str, list[int], list[int], list[int]]:
    """Return the text with escapes decoded and line breaks dropped, and a position map.

    The map is three parallel lists per piece: its start in the view, its start in
    the text, and its length in the text (-1 for a literal run, mapped one to one).
    """
    view: list[str] = []
    vstart: list[int] = []
    ostart: list[int] = []
    olen: list[int] = []
    pos, vpos = 0, 0
    for m in _ESCAPES.finditer(text):
        if m.start() > pos:
            vstart.append(vpos), ostart.append(pos), olen.append(-1)
            view.append(text[pos : m.start()])
            vpos += m.start() - pos
        token = m.group()
        char = _unescape(token)
        if char:
            vstart.append(vpos), ostart.append(m.start()), olen.append(len(token))
            view.append(char)
            vpos += 1
        pos = m.end()
    if pos < len(text):
        vstart.append(vpos), ostart.append(pos), olen.append(-1)
        view.append(text[pos:])
    return "".join(view), vstart, ostart, olen


def _unescape(token: str) -> str:
    if token[0] == "%":
        return _joined(chr(int(token[1:], 16)))
    if token[:2] == "\\u":
        return _joined(chr(int(token[2:], 16)))
    if token[0] == "\\" and token[1] in '\\"/':
        return token[1]
    return ""  # a line break: dropped, so a secret split over two lines joins up


def _joined(char: str) -> str:
    return "" if char in "\r\n" else char  # an escaped line break joins lines too


def _to_text(v: int, end: bool, vstart: list, ostart: list, olen: list) -> int:
    """Return the text position of view position `v` (its end, exclusive, when `end`)."""
    i = bisect_right(vstart, v) - 1
    if olen[i] < 0:
        return ostart[i] + (v - vstart[i]) + (1 if end else 0)
    return ostart[i] + (olen[i] if end else 0)


def _merge(spans: list[tuple[int, int]]) -> list[tuple[int, int]]:
    out: list[list[int]] = []
    for a, b in sorted(spans):
        if out and a <= out[-1][1]:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return [(a, b) for a, b in out]


def encodings(secret: str) -> tuple[str, ...]:
    """Return the hex and base64 forms of a secret of FRAGMENT+ characters: hex in both
    cases, and the base64 characters that its bytes alone decide at each of the three
    alignments it may have inside a longer encoded text, standard and URL-safe.

    >>> encodings("short")
    ()
    >>> forms = encodings("sk-abcdefghijklmnop")
    >>> base64.b64encode(b"Bearer sk-abcdefghijklmnop").decode()[10:30] in "".join(forms)
    True
    """
    if len(secret) < FRAGMENT:  # a short one's encodings would mask ordinary text
        return ()
    raw = secret.encode("utf-8", "surrogatepass")
    out = [raw.hex(), raw.hex().upper()]
    for pad in range(3):
        full = base64.b64encode(b"\0" * pad + raw).decode("ascii")
        # Characters made of the padding's bits, or of the end's partial group, vary
        # with what surrounds the secret: keep only those its own bytes decide.
        start, end = -(-8 * pad // 6), (8 * (pad + len(raw))) // 6
        form = full[start:end]
        out.extend((form, form.replace("+", "-").replace("/", "_")))
    return tuple(dict.fromkeys(out))


def _forms(secrets: Iterable[str | None]) -> tuple[tuple[str, int, tuple], ...]:
    """Return (form, the run that counts, its pieces) of each secret and each encoding: a
    secret's fragments count, an encoding only whole (few finds: the scrubber is on the
    path of every tool result and model answer)."""
    out: dict[str, tuple[str, int, tuple]] = {}
    for s in secrets:
        if isinstance(s, str) and len(s) >= MIN_SECRET and s not in out:
            out[s] = (s, *_pieces(s))
    for s in list(out):
        for form in encodings(s):
            out.setdefault(form, (form, len(form), ((0, form),)))
    return tuple(out.values())


def scrub_text(text: str, secrets: Iterable[str | None]) -> str:
    """Return `text` with every form of every secret replaced by '***' (see the module doc).

    >>> scrub_text("key=sk-proj-ABCDEFGHIJKLMNOP", ["sk-proj-ABCDEFGHIJKLMNOP"])
    'key=***'
    >>> scrub_text("echo: sk-proj-ABCDEFGHIJ...", ["sk-proj-ABCDEFGHIJKLMNOP"])
    'echo: ***...'
    """
    return scrubber(secrets)(text)


def scrubber(secrets: Iterable[str | None]) -> Scrub:
    """Return `scrub(text) -> text` that masks every form of the given secrets.

    None, empty and too-short values are skipped; with nothing to hide it returns its
    input unchanged.

    >>> scrub = scrubber(["p@ss/word+1234"])
    >>> scrub("url: p%40ss%2Fword%2B1234, json: p@ss\\\\/word\\\\u002b1234")
    'url: ***, json: ***'
    >>> scrub("split: p@ss/wo\\nrd+1234 here")
    'split: *** here'
    """
    forms = _forms(secrets)
    if not forms:
        return _same
    shortest = min(w for _, w, _ in forms)  # escapes and line breaks only lengthen a form
    # Every finding holds one of these whole (see _pieces): a text holding none of them,
    # and no escape, is returned at once (the usual case, on every answer and result).
    needles = tuple(dict.fromkeys(piece for _, _, pieces in forms for _, piece in pieces))

    def scrub(text: str) -> str:
        if not isinstance(text, str) or len(text) < shortest:
            return text
        escaped = _may_escape(text) and _ESCAPES.search(text) is not None
        if not escaped and not any(n in text for n in needles):
            return text
        spans = [span for s, w, pieces in forms for span in _runs(text, s, w, pieces)]
        if escaped:
            view, vstart, ostart, olen = _decoded(text)
            for s, w, pieces in forms:
                for a, b in _runs(view, s, w, pieces):
                    spans.append(
                        (
                            _to_text(a, False, vstart, ostart, olen),
                            _to_text(b - 1, True, vstart, ostart, olen),
                        )
                    )
        if not spans:
            return text
        out, pos = [], 0
        for a, b in _merge(spans):
            out.append(text[pos:a])
            out.append(MASK)
            pos = b
        out.append(text[pos:])
        return "".join(out)

    return scrub


def _may_escape(text: str) -> bool:
    """Whether `text` holds a character every escape starts with (found in C, where the
    escapes' pattern walks the text in Python's regex engine)."""
    return "%" in text or "\\" in text or "\n" in text or "\r" in text


def _same(text: str) -> str:
    return text


def scrub_value(value: Any, scrub: Scrub) -> Any:
    """Return `value` (maps, sequences, strings: a tool result, say) with `scrub` applied
    to every string in it, keys included; the same object when nothing changed.

    >>> from toolnexus.core.frozen import FrozenMap
    >>> scrub = scrubber(["sk-abcdefghijkl"])
    >>> out = scrub_value(FrozenMap({"output": "boom sk-abcdefghijkl", "n": 1}), scrub)
    >>> out == FrozenMap({"output": "boom ***", "n": 1})
    True
    """
    return map_strings(value, scrub, keys=True)


# ---- DSNs: lenient, so an address psycopg cannot parse is still scrubbed -------

# Every password-like parameter: password, sslpassword, passwd, pwd, *secret*, *token*.
_SECRET_KEY = r"[A-Za-z_]*(?:password|passwd|pwd|secret|token)[A-Za-z_]*"


@cache
def _dsn_patterns() -> tuple[re.Pattern, re.Pattern]:
    """Return (query password, conninfo password): compiled on first use (DSNs are rare;
    `import toolnexus` does not pay for two case-insensitive patterns)."""
    query = re.compile(rf"([?&;]{_SECRET_KEY}=)([^&#]*)", re.IGNORECASE)
    # key=value conninfo: password='it''s' / 'it\'s' or password=secret; a quote never
    # closed runs to the end (libpq refuses it, and all of it may be the password).
    # Unquoted, the bare words after it (no "=": not the next key) count too: libpq
    # refuses such a DSN, and they may be the rest of a password with a space in it.
    conninfo = re.compile(
        rf"((?<![A-Za-z_]){_SECRET_KEY}\s*=\s*)('(?:[^'\\]|\\.|'')*'?|\S+(?:\s+(?![\w.-]*\s*=)\S+)*)",
        re.IGNORECASE,
    )
    return query, conninfo


def _userinfo(dsn: str) -> tuple[int, int] | None:
    """Return the span of the password in `scheme://user:password@host...`, if any.

    The userinfo ends at the LAST '@' (a raw '@', '/', '%' or '#' in a password is a
    mistake users make, and a strict parser would then show it).
    """
    scheme = dsn.find("://")
    if scheme < 0:
        return None
    start = scheme + 3
    at = dsn.rfind("@", start)
    if at < 0:
        return None
    colon = dsn.find(":", start, at)
    return (colon + 1, at) if colon >= 0 else None


def dsn_passwords(dsn: str) -> tuple[str, ...]:
    """Return every password a DSN holds, raw and percent-decoded (never raises).

    >>> dsn_passwords("postgresql://u:my%secret@host/db")
    ('my%secret',)
    >>> dsn_passwords("host=db password='it''s long' user=me")
    ("it's long",)
    """
    if not isinstance(dsn, str):
        return ()
    found: list[str] = []
    span = _userinfo(dsn)
    if span is not None:
        found.append(dsn[span[0] : span[1]])
    query, conninfo = _dsn_patterns()
    found.extend(m.group(2) for m in query.finditer(dsn))
    if "://" not in dsn:
        for m in conninfo.finditer(dsn):
            value = m.group(2)
            if value[:1] == "'":
                closed = len(value) > 1 and value.endswith("'")
                value = (value[1:-1] if closed else value[1:]).replace("''", "'")
                value = value.replace("\\'", "'")
            found.append(value)
    out: list[str] = []
    for value in found:
        for form in (value, unquote(value, errors="strict") if _decodable(value) else value):
            if form and form not in out:
                out.append(form)
    return tuple(out)


def _decodable(value: str) -> bool:
    try:
        unquote(value, errors="strict")
    except UnicodeDecodeError:
        return False
    return True


def redact_dsn(dsn: str) -> str:
    """Return a URL or conninfo DSN with every password replaced by '***' (never raises).

    >>> redact_dsn("postgresql://u:my%secret@host/db")
    'postgresql://u:***@host/db'
    >>> redact_dsn("postgresql://me:s3cret@db/app?sslmode=require&password=x")
    'postgresql://me:***@db/app?sslmode=require&password=***'
    >>> redact_dsn("host=db password=s3cret user=me"), redact_dsn("redis://:pw@h:6379/0")
    ('host=db password=*** user=me', 'redis://:***@h:6379/0')
    """
    if not isinstance(dsn, str):
        return MASK
    query, conninfo = _dsn_patterns()
    if "://" not in dsn:
        return conninfo.sub(lambda m: m.group(1) + MASK, dsn)
    span = _userinfo(dsn)
    if span is not None:
        dsn = dsn[: span[0]] + MASK + dsn[span[1] :]
    return query.sub(lambda m: m.group(1) + MASK, dsn)

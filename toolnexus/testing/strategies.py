"""Hypothesis strategies for transcripts and conversation ids (public: test your own stores).

    from toolnexus.testing import transcripts, conversation_ids
    @given(transcripts(dialect="anthropic"), conversation_ids())
    def test_roundtrip(t, id): ...

Transcripts come as plain lists and dicts (JSON-ready), in the provider's own shape.
"""

from __future__ import annotations

import itertools
import unicodedata
from types import SimpleNamespace

from hypothesis import strategies as st

from ..core.frozen import thaw
from ..core.wire import view
from .fakes import Fake, Flourishes
from .registry import FAKES, fake_of

__all__ = [
    "COLLIDING_IDS",
    "HOSTILE_IDS",
    "conversation_ids",
    "id_pools",
    "transcripts",
    "transcripts_of",
]

# Ids that break naive stores: path tricks, whitespace, device names, case and Unicode
# normalization twins, an id that looks like another id's encoded file name, long ones.
HOSTILE_IDS = (
    "../x", "..", ".", "/", "a/b", "a\\b", "a_b", " ", "\t", " a", "a ", "a\nb", "CON", "nul",
    "A", "a", "~YS9i", "-bmexwe", "-x", "x.json", "%2e%2e", "a:b", "*", "?", "'; drop table",
    unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é"),
    "日本語", "🙂", "a" * 200, "é" * 200, "Z" * 101,
)  # fmt: skip

# Pairs of distinct ids that a careless sanitizer or file system maps to one name.
COLLIDING_IDS = (
    ("a/b", "a_b"),
    ("a b", "a_b"),
    ("A", "a"),
    ("../x", "x"),
    (unicodedata.normalize("NFC", "é"), unicodedata.normalize("NFD", "é")),
    ("~YS9i", "a/b"),
    ("-bmexwe", "a/b"),
    ("x", "x.json"),
    ("a" * 200, "a" * 201),
)

_ID_CHARS = st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00")
_TEXT = st.text(_ID_CHARS, min_size=1, max_size=12)
_NAMES = st.sampled_from(["add", "get_weather", "search", "lookup_2"])
_ARGS = st.dictionaries(
    st.text(st.characters(min_codepoint=97, max_codepoint=122), min_size=1, max_size=5),
    st.one_of(st.integers(-1000, 1000), _TEXT, st.booleans(), st.none()),
    max_size=3,
)


def conversation_ids(max_size: int = 200) -> st.SearchStrategy[str]:
    """Return a strategy of conversation ids: ordinary, random Unicode, and hostile ones.

    Ids are non-empty strings without NUL or lone surrogates, up to `max_size` chars.
    """
    hostile = [i for i in HOSTILE_IDS + sum(COLLIDING_IDS, ()) if len(i) <= max_size]
    return st.one_of(
        st.sampled_from(sorted(set(hostile))),
        st.from_regex(r"[A-Za-z0-9_-]{1,24}", fullmatch=True),
        st.text(_ID_CHARS, min_size=1, max_size=min(max_size, 40)),
    )


def id_pools(ids: st.SearchStrategy[str] | None = None) -> st.SearchStrategy[list[str]]:
    """Return a strategy of small lists of distinct ids.

    With the default ids, a pool often holds one of the COLLIDING_IDS pairs; a given
    `ids` strategy replaces the defaults entirely (pairs included).
    """
    if ids is not None:
        return st.lists(ids, min_size=1, max_size=4, unique=True)
    some = st.lists(conversation_ids(), min_size=1, max_size=4, unique=True)
    pairs = st.sampled_from(COLLIDING_IDS).map(list)
    return st.one_of(some, st.tuples(pairs, some).map(lambda p: list(dict.fromkeys(p[0] + p[1]))))


# ---- transcripts -------------------------------------------------------------------

# What a dialect's flourishes draw with (see testing.fakes.Flourishes): hypothesis'
# strategies, and the neutral text, tool names and arguments.
KIT = SimpleNamespace(st=st, text=_TEXT, names=_NAMES, args=_ARGS)
DIALECTS = tuple(FAKES)


def _user(draw, block: str | None) -> dict:
    if block and draw(st.booleans()):  # multi-block content
        blocks = draw(st.lists(_TEXT, min_size=1, max_size=3))
        return {"role": "user", "content": [{"type": block, "text": t} for t in blocks]}
    return {"role": "user", "content": draw(_TEXT)}


def _answer(draw, own: Flourishes, n: int) -> dict:
    made = own.answer(draw, n, KIT) if own.answer is not None else None
    return made if made is not None else {"role": "assistant", "content": draw(_TEXT)}


@st.composite
def _transcript(draw, own: Flourishes, max_turns: int, system: bool | None) -> list[dict]:
    """Return a transcript in a dialect's own shapes (its flourishes)."""
    ids = (f"{own.prefix}_{n}" for n in itertools.count())
    out: list[dict] = []
    if system if system is not None else (own.system and draw(st.booleans())):
        out.append({"role": "system", "content": draw(_TEXT)})
    for n in range(draw(st.integers(0, max_turns))):
        out.append(_user(draw, own.block))
        rounds = draw(st.integers(0, 2))
        for _ in range(rounds):  # tool rounds, each with parallel calls
            out += own.calls(draw, [next(ids) for _ in range(draw(st.integers(1, 3)))], KIT)
        if not rounds or draw(st.booleans()):  # a run stopped by max_turns ends on results
            out.append(_answer(draw, own, n))
    return out


def _said(draw) -> list[dict]:
    return [{"type": "text", "text": draw(_TEXT)}] if draw(st.booleans()) else []


@st.composite
def _neutral(draw, dialect: str, max_turns: int, system: bool | None) -> list[dict]:
    """Return a transcript drawn as neutral items and written by the dialect's record (a
    row with no flourishes of its own); a system text its messages cannot hold is lifted
    out by the writer, and left out."""
    ids = (f"call_{n}" for n in itertools.count())
    items: list[tuple] = []
    if system if system is not None else draw(st.booleans()):
        items.append(("system", draw(_TEXT)))
    for _ in range(draw(st.integers(0, max_turns))):
        items.append(("user", draw(_TEXT)))
        rounds = draw(st.integers(0, 2))
        for _ in range(rounds):
            made = [(next(ids), draw(_NAMES), draw(_ARGS), {})
                    for _ in range(draw(st.integers(1, 3)))]  # fmt: skip
            items.append(("assistant", _said(draw), made, [], {}))
            items += [("result", c[0], draw(_TEXT), draw(st.booleans())) for c in made]
        if not rounds or draw(st.booleans()):
            items.append(("assistant", [{"type": "text", "text": draw(_TEXT)}], [], [], {}))
    messages, _ = view.write(items, dialect)
    return thaw(messages)


def transcripts(
    dialect: str | None = None, *, max_turns: int = 4, system: bool | None = None
) -> st.SearchStrategy[list[dict]]:
    """Return a strategy of valid transcripts: turns with parallel tool-call groups.

    `dialect` is a row of the registry (`toolnexus.core.wire.DIALECTS`) or None (any).
    Every tool call is answered right after its message. Each dialect's own shapes are
    its kit module's flourishes: anthropic user messages may hold several text blocks
    and assistant turns thinking blocks; Responses turns hold their items (reasoning
    with encrypted content, messages, function calls) and one message of
    function_call_output items per round; Gemini turns their parts (thoughts, text,
    signed functionCalls), then one message of functionResponse parts. A row without
    flourishes gets neutral items written by its record. `system`: None for a random
    leading system message (where the dialect's messages hold one: anthropic carries it
    in the body), True or False to force it.
    """
    if dialect is None:
        return st.one_of(*(transcripts(d, max_turns=max_turns, system=system) for d in DIALECTS))
    return transcripts_of(fake_of(dialect), max_turns=max_turns, system=system)


def transcripts_of(
    fake: Fake, *, max_turns: int = 4, system: bool | None = None
) -> st.SearchStrategy[list[dict]]:
    """Return a strategy of valid transcripts in the dialect of one kit record: its
    flourishes, else neutral items written by its core record."""
    if fake.flourishes is None:
        return _neutral(fake.name, max_turns, system)
    return _transcript(fake.flourishes, max_turns, system)

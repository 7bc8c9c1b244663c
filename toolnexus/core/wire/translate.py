"""Cross-dialect translation of transcripts, pure: continue any conversation on either dialect.

    translated = translate(stored, "anthropic")   # Translated(messages, system, ids)
    to_dialect(stored, "openai")                  # just the messages

Each message is read by its shape (either dialect, even mixed) and written in the
target's: system messages become a `system` message (openai) or are lifted out into
`Translated.system` for the request's top-level `system` (anthropic); tool calls and
results become `tool_use`/`tool_result` blocks in the assistant and the next user
message, or `tool_calls` and `tool` messages; tool ids are remapped to the target's
rules, the same way for a call and its results; content parts are mapped per dialect
(`parts.py`), and what the target cannot carry follows `on_unsupported_part`.
Anthropic thinking blocks are dropped on the way to openai (their signatures mean
nothing to another provider), and so is every field of an OpenAI-style message the
other dialect cannot carry (`reasoning_content`, `reasoning_details`, a tool call's
`extra_content`, `annotations`): one provider's reasoning never becomes text of
another's. A refusal becomes the answer's text. With `keep_system` system messages
stay in place (the loop keeps them in what it saves). A message already right for the
target is kept as is (the same object), so translating a transcript to its own dialect
is the identity. Returns new values; never modifies the input.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from pyrsistent import PSet, PVector, pset, pvector

from ..frozen import FrozenMap
from ..transcript import freeze_transcript
from . import DIALECTS as CODECS
from . import parts as P
from . import view
from .chat import CHAT_BLOCKS as _OPENAI_BLOCKS
from .chat import CHAT_ROLES as _OPENAI_ROLES
from .responses_items import RESPONSES_BLOCKS as _RESPONSES_BLOCKS
from .writers import part_of

__all__ = [
    "Translated",
    "dialect_of",
    "native_call_ids",
    "to_dialect",
    "translate",
    "valid_tool_id",
]

DIALECTS = tuple(CODECS)  # the registry's rows (core.wire.DIALECTS)
OPENAI_ID_MAX = 40
_SYSTEM_ROLES = frozenset({"system", "developer"})


class Translated(NamedTuple):
    """A translation: the messages, the system text lifted out (anthropic), new id -> old id."""

    messages: PVector
    system: str
    ids: FrozenMap


def valid_tool_id(id: Any, dialect: str) -> bool:
    """Return whether a tool call id meets a dialect's rules.

    >>> valid_tool_id("functions.get_weather:0", "anthropic"), valid_tool_id("x" * 41, "openai")
    (False, False)
    """
    if not isinstance(id, str) or not id:
        return False
    return CODECS[dialect].valid_call_id(id)  # each dialect's own rule


# ---- reading the dialect off the shapes -----------------------------------------------


def _blocks(message: Mapping) -> Sequence:
    content = message.get("content")
    if isinstance(content, Sequence) and not isinstance(content, str):
        return [b for b in content if isinstance(b, Mapping)]
    return ()


def _evidence(message: Mapping) -> str | None:
    """Return the dialect a message can only belong to, or None if valid in several."""
    owner = view.record_of(message)
    if owner.owns is not None:
        return owner.name
    role = message.get("role")
    if role in _OPENAI_ROLES or message.get("tool_calls"):
        return "openai"
    if role == "assistant" and message.get("content") is None:
        return "openai"
    kinds = {b.get("type") for b in _blocks(message)}
    if kinds & _RESPONSES_BLOCKS:
        return "responses"
    if kinds & _OPENAI_BLOCKS:
        return "openai"
    if kinds - {"text"}:
        return "anthropic"
    return None


def dialect_of(transcript: Sequence[Mapping]) -> str | None:
    """Return the dialect the shapes of a transcript tell ("openai", "anthropic",
    "responses"), or None.

    None when nothing tells (empty, or plain text valid in both). A mixed transcript
    gets the dialect of its latest telling message: the one it was last continued in.

    >>> dialect_of([{"role": "user", "content": "hi"}]) is None
    True
    >>> dialect_of([{"role": "tool", "tool_call_id": "c", "content": "4"}])
    'openai'
    """
    for message in reversed(transcript):
        found = _evidence(message)
        if found is not None:
            return found
    return None


def _native(message: Mapping, dialect: str, keep_system: bool = False) -> bool:
    """Return whether a message is right for `dialect` as it is (tool ids aside).

    With `keep_system`, a system message stays where it is in any dialect (an Anthropic
    request lifts it into the top-level `system`: see anthropic.body). A message that
    can only be another dialect's is not right; the rest is each dialect's own rule.
    """
    if message.get("role") in _SYSTEM_ROLES:  # its content in the dialect's own text parts
        return _native_system(message, dialect) and (keep_system or CODECS[dialect].native(message))
    only = _evidence(message)
    if only is not None and only != dialect:
        return False
    return CODECS[dialect].native(message)


# Each dialect's text part, the one part a system message may list there (chat "text",
# Responses "input_text", Anthropic "text" blocks): read off each codec's own writer.
_TEXT_PART = {
    d: c.to_part(FrozenMap({"type": "text", "text": "-"})).get("type") for d, c in CODECS.items()
}
_TEXT_KINDS = frozenset({"text", "input_text", "output_text"})


def _native_system(message: Mapping, dialect: str) -> bool:
    """Return whether a system message's content is text, or the dialect's text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return True
    blocks, own = _blocks(message), _TEXT_PART[dialect]
    return (
        bool(blocks)
        and len(blocks) == len(content)
        and all(b.get("type") == own and isinstance(b.get("text"), str) for b in blocks)
    )


def _system_message(message: Mapping, dialect: str, policy: str) -> FrozenMap:
    """Return a system message with its content as text, valid in every dialect: its text
    parts joined, each media part as `policy` says (no dialect takes media there)."""
    content = message.get("content")
    if isinstance(content, str):
        return FrozenMap({"role": message.get("role"), "content": content})
    said = []
    for b in _blocks(message):
        if b.get("type") in _TEXT_KINDS:
            said.append(b["text"] if isinstance(b.get("text"), str) else "")
        else:
            part = part_of(b, "openai")
            said.append(P.unsupported(part, dialect, policy, "not in a system message")["text"])
    return FrozenMap({"role": message.get("role"), "content": "".join(said)})


def _plain_text(message: Mapping) -> bool:
    """Return whether a message is just {role: user|assistant, content: non-empty text}."""
    if len(message) != 2:
        return False
    content = message.get("content")
    return type(content) is str and content != "" and message.get("role") in _TEXT_ROLES


_TEXT_ROLES = frozenset({"user", "assistant"})


def _right(message: Mapping, dialect: str, keep_system: bool) -> tuple[bool, tuple]:
    """Return (whether a message is right for `dialect` as it is, ids included; its call ids)."""
    if _plain_text(message):  # most of a conversation: right in both dialects, no ids
        return True, ()
    calls = tuple(_call_ids(message)) if message.get("role") == "assistant" else ()
    ids = calls + tuple(_result_ids(message))
    verdict = _native(message, dialect, keep_system) and all(valid_tool_id(i, dialect) for i in ids)
    return verdict, calls


def _unchanged(messages: Sequence[Mapping], dialect: str, keep_system: bool) -> bool:
    """Return whether a transcript is right for `dialect` as it is (each call id used once)."""
    return native_call_ids(messages, dialect, keep_system=keep_system) is not None


def native_call_ids(
    messages: Sequence[Mapping],
    dialect: str,
    *,
    keep_system: bool = False,
    taken: PSet | None = None,
) -> PSet | None:
    """Return the call ids of `messages` (with `taken`) if `translate` would keep them as
    they are, else None: each message right for `dialect`, each call id used once (also
    not in `taken`, the call ids of the messages before them).

    So for a transcript whose messages before are right, with call ids `taken`, the
    whole is right exactly when this is not None (the flow checks only new messages).

    >>> native_call_ids([{"role": "user", "content": "hi"}], "openai")
    pset()
    >>> call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c1", "type":
    ...         "function", "function": {"name": "f", "arguments": "{}"}}]}
    >>> native_call_ids([call], "openai", taken=pset(["c1"])) is None
    True
    """
    taken = taken if taken is not None else pset()
    new: set = set()
    for m in messages:
        right, calls = _right(m, dialect, keep_system)
        if not right:
            return None
        for i in calls:
            if i in new or i in taken:
                return None
            new.add(i)
    return taken.update(new) if new else taken


# ---- tool ids --------------------------------------------------------------------------


def _call_ids(message: Mapping) -> tuple:
    return view.record_of(message).call_ids(message)  # its shape's rule, whatever the role


def _result_ids(message: Mapping) -> tuple:
    return view.result_ids(message)


def _fresh(id: Any, n: int, taken: set) -> str:
    # Deterministic (a hash of the id and its occurrence) and valid in both dialects:
    # at most 31 characters of [A-Za-z0-9_-]. A taken name (the same id remapped on an
    # earlier save: its occurrence count restarts once that remap is stored) tries the
    # next hash of the same length, so ids never grow from one save to the next.
    text = id if isinstance(id, str) else ""
    base = re.sub(r"[^A-Za-z0-9_-]", "_", text)[:20] or "call"
    for attempt in range(len(taken) + 1):  # at most len(taken) names can be taken
        salt = f"{text}\x00{n}" + (f"\x00{attempt}" if attempt else "")
        new = f"{base}_{hashlib.blake2b(salt.encode(), digest_size=16).hexdigest()[:10]}"
        if new not in taken:
            return new
    raise ValueError(f"no free tool id for {id!r}")  # unreachable: see the range


class _InOrder:
    """A message's {old id: new ids}: `get` hands out the new ids of an old one in order,
    so two calls of one turn sharing an id, and their results, pair up in order."""

    __slots__ = ("_news", "_next")  # pragma: no mutate

    def __init__(self, news: Mapping[Any, list]):
        self._news, self._next = dict(news), dict.fromkeys(news, 0)

    def get(self, old: Any, default: Any = None) -> Any:
        news = self._news.get(old)
        if not news:
            return default
        k = self._next[old]
        self._next[old] = k + 1
        return news[min(k, len(news) - 1)]  # a repeated orphan result: the last one

    def items(self) -> list[tuple]:
        return [(old, new) for old, news in self._news.items() for new in news]


def _id_plan(messages: Sequence[Mapping], dialect: str) -> list[_InOrder]:
    """Return, per message, the new id of each of its calls and results (`_InOrder`).

    An id keeps itself when the target accepts it and it is its first call; any other
    (invalid, or a later call reusing an id, in the same turn too) gets a fresh one. A
    result takes the id its call got in the messages just before it, in call order.
    """
    seen: dict = {}
    kept: set = set()
    for m in messages:
        for i in _call_ids(m):
            if valid_tool_id(i, dialect) and i not in seen:
                kept.add(i)
            seen[i] = seen.get(i, 0) + 1
    taken, counts, current, plan = set(kept), {}, {}, []
    for m in messages:
        calls = _call_ids(m)
        if calls:
            current = {}
            for i in calls:
                n = counts.get(i, 0)
                counts[i] = n + 1
                new = i if (n == 0 and i in kept) else _fresh(i, n, taken)
                taken.add(new)
                current.setdefault(i, []).append(new)
            plan.append(_InOrder(current))
            current = {i: list(news) for i, news in current.items()}  # results take them
            continue
        results = _result_ids(m)
        assigned: dict = {}
        for i in results:
            if not current.get(i):  # an orphan result (or one more than its calls)
                last = assigned[i][-1] if assigned.get(i) else None
                fresh = i if valid_tool_id(i, dialect) else _fresh(i, -1, taken)
                current[i] = [last or fresh]
                taken.add(current[i][0])
            queue = current[i]
            new = queue.pop(0) if len(queue) > 1 else queue[0]
            assigned.setdefault(i, []).append(new)
        plan.append(_InOrder(assigned))
        if not results and m.get("role") in ("user", "system"):
            current = {}
    return plan


# ---- the face ------------------------------------------------------------------------


def translate(
    transcript: Sequence[Mapping],
    dialect: str,
    *,
    on_unsupported_part: str = "error",
    keep_system: bool = False,
) -> Translated:
    """Return a transcript in `dialect`, the system text lifted out of it, and the id map.

    For "anthropic", system messages leave the messages: `system` holds their text
    (joined by blank lines) for the request's top-level `system`. `ids` maps each
    remapped tool id to the original one. A transcript already right for `dialect`
    comes back as the same object. `on_unsupported_part`: "error" raises a ValueError
    naming what the dialect cannot carry, "text" puts a placeholder in its place.
    `keep_system=True` keeps system messages in place in either dialect (what the loop
    does, so a saved conversation never loses them; an Anthropic request lifts them
    into its `system` when it is built): `system` is then "".

    >>> t = translate([{"role": "system", "content": "be brief"},
    ...                {"role": "user", "content": "hi"}], "anthropic")
    >>> [m["role"] for m in t.messages], t.system
    (['user'], 'be brief')
    """
    if dialect not in DIALECTS:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {DIALECTS}")
    if on_unsupported_part not in P.POLICIES:
        raise ValueError(f"on_unsupported_part must be one of {P.POLICIES}")
    frozen = freeze_transcript(transcript)
    if _unchanged(frozen, dialect, keep_system):
        return Translated(frozen, "", FrozenMap())
    plan = _id_plan(frozen, dialect)
    moved = [any(k != v for k, v in p.items()) for p in plan]
    out: list = []
    system: list = []
    pending: list = []  # items of messages being rewritten, written out together

    def write() -> None:
        msgs, texts = view.write(pending, dialect, on_unsupported_part)
        out.extend(msgs)
        system.extend(texts)
        pending.clear()

    for m, ids, remapped in zip(frozen, plan, moved, strict=True):
        native = _native(m, dialect, keep_system)
        if not native and m.get("role") in _SYSTEM_ROLES:
            # Its content made text the dialect takes (media as the policy says): kept in
            # place, or lifted out by the writer (anthropic without keep_system).
            m = _system_message(m, dialect, on_unsupported_part)
            if keep_system:
                write()
                out.append(m)
                continue
        if not remapped and native and not _continues_results(m, pending):
            write()
            out.append(m)
        else:
            pending.extend(view.read(m, ids))
    write()
    renamed = {new: old for p in plan for old, new in p.items() if old != new}
    return Translated(pvector(out), "\n\n".join(system), FrozenMap(renamed))


def _continues_results(message: Mapping, pending: list) -> bool:
    # Anthropic results of one turn go in ONE user message: a native results message
    # right after rewritten results joins them.
    return bool(pending) and pending[-1][0] == "result" and bool(_result_ids(message))


def to_dialect(
    transcript: Sequence[Mapping], dialect: str, *, on_unsupported_part: str = "error"
) -> PVector:
    """Return the messages of `translate(transcript, dialect)` (system text: see translate).

    >>> m = to_dialect([{"role": "user", "content": "q"},
    ...     {"role": "assistant", "content": None, "tool_calls": [{"id": "f.x:0",
    ...      "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
    ...     {"role": "tool", "tool_call_id": "f.x:0", "content": "4"}], "anthropic")
    >>> m[1]["content"][0]["id"] == m[2]["content"][0]["tool_use_id"], m[2]["role"]
    (True, 'user')
    """
    return translate(transcript, dialect, on_unsupported_part=on_unsupported_part).messages

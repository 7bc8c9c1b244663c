"""Store decorators: each is a function `store -> store`, curried where it takes parameters.

    capped_store(40)                 a decorator;  capped_store(40, s)  a store
    toolz.pipe(sqlite_store("chat.db"), encrypted(key), capped_store(40))

Every decorator passes the store's other keys through ("delete", "ids", "lock", your
own), wrapping those that take an id when it changes ids (so `namespaced` locks the
namespaced id), and sets a readable "desc". Each builds its map with `fused.derive`,
which drops the store's fused calls that need what it replaced (a fused call never
bypasses a decorator), and declares again what stays true: the "view" (what `get`
returns right after `save`, see `stored_view`) where it still knows it, and the id-taking
fused calls of a decorator that only maps ids (`namespaced`, `sanitize_ids`).
"""

from __future__ import annotations

import base64
import hashlib
import inspect
import math
import re
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import Any

from toolz.functoolz import curry as _toolz_curry
from toolz.functoolz import instanceproperty, no_default

from ..core import transcript as tx
from ..core.extras import needs_extra
from ..core.scope import scope_of, within
from .document import parse_document
from .errors import StoreCorruptError
from .fused import declared, derive, fuse, stored_view, view
from .scoped import scoped_log

__all__ = [
    "DecryptionError",
    "capped_store",
    "encrypted",
    "namespaced",
    "observed",
    "read_through",
    "retention",
    "sanitize_id",
    "sanitize_ids",
]


class DecryptionError(Exception):
    """A stored conversation cannot be decrypted with the given key (never read as 'no history')."""


class curry(_toolz_curry):
    """toolz's curry, whose signature reads as the plain function's.

    toolz shows every parameter not given yet as `= '__no__default__'`, so
    `help(capped_store)` read `capped_store(n: 'int' = '__no__default__', ...)`; here a
    parameter without a default has none, as in the function's own signature (and
    `capped_store(40)` shows `(store: 'Mapping') -> 'dict'`). Currying is toolz's.
    """

    @instanceproperty
    def __signature__(self) -> inspect.Signature:
        # No mutant: turned to None it drops super()'s hidden __class__ cell, and
        # tools/mutate.py swaps a function's code in place only when its cells match (it
        # could never run); test_decorator_signatures.py asserts what this line gives.
        sig = super().__signature__  # pragma: no mutate
        params = [
            p.replace(default=p.empty) if p.default is no_default else p
            for p in sig.parameters.values()
        ]
        return sig.replace(parameters=params)


def _desc(store: Mapping) -> str:
    return store.get("desc") or "store"


def _same_view(store: Mapping) -> dict:
    """Return the store's "view" declared again, for a decorator whose get and save keep
    what get returns after save (they only map ids, or watch)."""
    inner = stored_view(store)
    return {} if inner is None else {"view": view(inner)}


def _keyed(store: Mapping, key: Callable[[str], str], before_save: Callable | None = None) -> dict:
    """Return the store's fused calls declared again for a decorator that only maps ids to
    `key(id)` (and may write a side record first, `before_save(id)`): the same round
    trips under the decorator's ids, bound to its own get, save and lock by `derive`."""
    found = {n: declared(store, n) for n in _KEYED}
    pre = before_save or (lambda id: None)

    def lock_load(id):
        return found["lock_load"].call(key(id))

    def save_release(held, id, t):
        pre(id)
        return found["save_release"].call(held, key(id), t)

    def save_logged(id, t, rows, entries):
        pre(id)
        return found["save_logged"].call(key(id), t, rows, entries)

    def save_logged_release(held, id, t, rows, entries):
        pre(id)
        return found["save_logged_release"].call(held, key(id), t, rows, entries)

    def fork(src, dst, at, check):
        pre(dst)
        return found["fork"].call(key(src), key(dst), at, check)

    calls = {"lock_load": lock_load, "save_release": save_release, "save_logged": save_logged,
             "save_logged_release": save_logged_release, "fork": fork}  # fmt: skip
    out = {n: fuse(calls[n], *f.needs, where=f.where) for n, f in found.items() if f is not None}
    return {**out, **_same_view(store)}


# The fused calls that take conversation ids (store.fused): a decorator mapping ids keeps them.
_KEYED = ("lock_load", "save_release", "save_logged", "save_logged_release", "fork")


def _check_store(store: Any, who: str) -> None:
    if not (
        isinstance(store, Mapping) and callable(store.get("get")) and callable(store.get("save"))
    ):
        raise TypeError(
            f"{who}: expected a store (a mapping with callable 'get' and 'save'),"
            f" got {type(store).__name__}"
        )


# ---- capped ----------------------------------------------------------------


@curry
def capped_store(n: int, store: Mapping, *, keep: int | None = None) -> dict:
    """Return `store` keeping at most the `n` most recent messages of each conversation.

    Trims on save with `transcript.trim`: cuts only at safe boundaries (a tool result
    never loses its call; if no safe tail fits, the most recent safe tail is kept) and
    keeps a leading system message outside the budget. With `keep=m` (m <= n), a
    conversation past `n` is cut to `m`, and left alone until it passes `n` again: the
    front of the prompt then holds for n - m messages between cuts, so a provider's
    prompt cache keeps hitting (`keep` defaults to `n`: a cut on every save past `n`).

    >>> from toolnexus.store import in_memory_store
    >>> s = capped_store(2, in_memory_store())
    >>> s["save"]("a", [{"role": "user", "content": str(i)} for i in range(5)])
    >>> [m["content"] for m in s["get"]("a")], s["desc"]
    (['3', '4'], 'capped(2, in_memory())')
    >>> s = capped_store(4, in_memory_store(), keep=2)
    >>> s["save"]("a", [{"role": "user", "content": str(i)} for i in range(4)])
    >>> len(s["get"]("a")), s["desc"]
    (4, 'capped(4, keep=2, in_memory())')
    """
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise ValueError(f"capped_store: n must be an integer >= 1, got {n!r}")
    if keep is not None and (
        not isinstance(keep, int) or isinstance(keep, bool) or not 1 <= keep <= n
    ):
        raise ValueError(f"capped_store: keep must be an integer from 1 to n={n}, got {keep!r}")
    _check_store(store, "capped_store")
    inner_save, inner_view = store["save"], stored_view(store)
    cut = (lambda t: tx.trim(t, n)) if keep is None or keep == n else (
        lambda t: tx.trim_past(t, n, keep))  # fmt: skip

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        inner_save(id, cut(transcript))

    seen = {} if inner_view is None else {"view": view(lambda t: inner_view(cut(t)))}
    shown = f"{n}" if keep is None or keep == n else f"{n}, keep={keep}"
    return derive(store, fused=seen, save=save, desc=f"capped({shown}, {_desc(store)})")


# ---- sanitized ids -----------------------------------------------------------

# A sanitized id is a lowercase name of [a-z0-9_-], 1..100 chars, never starting with
# "-" unless we made it. Lowercase-only and base32 (not base64) so that case-insensitive
# file systems (macOS, Windows) cannot merge two ids; Windows device names are encoded.
_PLAIN = re.compile(r"[a-z0-9_][a-z0-9_-]{0,99}")
_RESERVED = frozenset(
    ["con", "prn", "aux", "nul"] + [f"{p}{i}" for p in ("com", "lpt") for i in range(10)]
)
_ENCODED, _HASHED, _NAME = "-b", "-h", "-n"  # prefixes no plain id can have
# No mutant: 100 -> 101 lets an encoded key of 101 characters through, and none has
# that length ("-b" + unpadded base32 of n bytes: 98 for 61 bytes, 100 for 62, 103 for 63).
_MAX = 100  # pragma: no mutate


def sanitize_id(id: str) -> str:
    """Return a backend-safe key for a conversation id: injective, a plain lowercase name.

    Plain ids (lowercase letters, digits, '_' and '-', not starting with '-', up to 100
    chars, not a Windows device name) are their own key. Others become '-b' + lowercase
    base32 of their UTF-8 (reversible); ids too long for that become '-h' + SHA-256 hex
    (distinct ids collide only if SHA-256 does). Keys match [a-z0-9_-]{1,100}.

    >>> sanitize_id("user-42"), sanitize_id("a/b"), sanitize_id("a_b"), sanitize_id("A")
    ('user-42', '-bmexwe', 'a_b', '-bie')
    >>> len(sanitize_id("x" * 200)), sanitize_id("x" * 200)[:2]
    (66, '-h')
    """
    if not isinstance(id, str) or id == "":
        raise ValueError(f"a conversation id must be a non-empty string, got {id!r}")
    if _PLAIN.fullmatch(id) and id not in _RESERVED:
        return id
    raw = id.encode("utf-8", "surrogatepass")
    encoded = base64.b32encode(raw).decode("ascii").rstrip("=").lower()
    if len(_ENCODED) + len(encoded) <= _MAX:
        return _ENCODED + encoded
    return _HASHED + hashlib.sha256(raw).hexdigest()


def _unsanitize(key: str) -> str | None:
    """Return the id of a reversible key; None for hashed, side and foreign keys."""
    if _PLAIN.fullmatch(key) and key not in _RESERVED:
        return key
    if key.startswith(_ENCODED):
        body = key[len(_ENCODED) :].upper()
        try:
            return base64.b32decode(body + "=" * (-len(body) % 8)).decode("utf-8", "surrogatepass")
        except ValueError:
            return None
    return None


def sanitize_ids(store: Mapping) -> dict:
    """Return `store` seeing only sanitized keys (see `sanitize_id`): safe as file or key names.

    Two distinct ids never share a key. For ids too long to encode reversibly the key is
    a hash; when the store has "ids", a side record under '-n' + the hash keeps the id so
    `ids()` can list it.
    """
    _check_store(store, "sanitize_ids")
    ops: dict[str, Any] = {"desc": f"sanitized({_desc(store)})"}

    def name_key(key: str) -> str | None:
        return _NAME + key[len(_HASHED) :] if key.startswith(_HASHED) else None

    def get(id: str):
        return store["get"](sanitize_id(id))

    def side_record(id: str) -> None:
        side = name_key(sanitize_id(id))
        if side and "ids" in store:  # the name first: a transcript is never listed nameless
            store["save"](side, [{"role": "toolnexus.id", "content": id}])

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        side_record(id)
        store["save"](sanitize_id(id), transcript)

    scope = within(("sanitize_ids",), sanitize_id, _unsanitize, scope_of(store), total=True)
    ops.update(get=get, save=save, scope=scope)
    if callable(store.get("lock")):
        ops["lock"] = lambda id: store["lock"](sanitize_id(id))  # the key's lock
    if "delete" in store:

        def delete(id: str) -> None:
            key = sanitize_id(id)
            store["delete"](key)
            if name_key(key) and "ids" in store:
                store["delete"](name_key(key))

        ops["delete"] = delete
    if "ids" in store:

        def ids() -> tuple[str, ...]:
            found = []
            for key in store["ids"]():
                if name_key(key):
                    side = store["get"](name_key(key))
                    found.append(side[0].get("content") if side else None)
                else:
                    found.append(_unsanitize(key))
            return tuple(i for i in found if isinstance(i, str))

        ops["ids"] = ids
    return derive(store, fused=_keyed(store, sanitize_id, side_record), **ops)


# ---- namespaced --------------------------------------------------------------


def _is_log(m: Any) -> bool:
    return isinstance(m, Mapping) and all(callable(m.get(k)) for k in ("record", "query", "clear"))


@curry
def namespaced(prefix: str, store: Mapping) -> dict:
    """Return `store` keeping this tenant's conversations under the backend id `prefix:id`.

    The prefix may not contain ':', so tenants 'a' and 'ab' can never reach each other's
    ids; `ids()` lists only this tenant's ids, without the prefix. The store declares its
    "scope", which a client applies to its message log, lookup tool, forget and traces
    alike; given a message log instead of a store, returns that log in the same scope.

    >>> from toolnexus.store import in_memory_store
    >>> shared = in_memory_store()
    >>> a, b = namespaced("a", shared), namespaced("ab", shared)
    >>> a["save"]("b:x", [{"role": "user", "content": "hi"}])
    >>> b["get"](":x") is None, a["ids"](), shared["ids"]()
    (True, ('b:x',), ('a:b:x',))
    """
    if not isinstance(prefix, str) or not prefix or ":" in prefix:
        raise ValueError(
            f"namespaced: prefix must be a non-empty string without ':', got {prefix!r}"
        )
    head = prefix + ":"
    scope = within(
        ("namespaced", prefix),
        lambda id: head + id,
        lambda k: k[len(head) :] if k.startswith(head) else None,
        scope_of(store),
    )
    if _is_log(store):
        return scoped_log(scope, store["unscoped"] if "unscoped" in store else store)
    _check_store(store, "namespaced")
    ops: dict[str, Any] = {
        "get": lambda id: store["get"](head + id),
        "save": lambda id, t: store["save"](head + id, t),
        "desc": f"namespaced({prefix!r}, {_desc(store)})",
        "scope": scope,
    }
    if callable(store.get("lock")):
        ops["lock"] = lambda id: store["lock"](head + id)  # the backend id's lock
    if "delete" in store:
        ops["delete"] = lambda id: store["delete"](head + id)
    if "ids" in store:
        ops["ids"] = lambda: tuple(k[len(head) :] for k in store["ids"]() if k.startswith(head))
    return derive(store, fused=_keyed(store, lambda id: head + id), **ops)


# ---- observed ------------------------------------------------------------------


@curry
def observed(
    store: Mapping,
    *,
    on_get: Callable[[str, Any], Any] | None = None,
    on_save: Callable[[str, Any], Any] | None = None,
    on_delete: Callable[[str], Any] | None = None,
) -> dict:
    """Return `store` calling `on_get(id, transcript_or_None)`, `on_save(id, transcript)`
    and `on_delete(id)` after each successful operation (for audit, counting, tracing).

    A callback's exception propagates: an audit that fails is not silently skipped.

    >>> from toolnexus.store import in_memory_store
    >>> seen = []
    >>> s = observed(in_memory_store(), on_save=lambda id, t: seen.append((id, len(t))))
    >>> s["save"]("a", [{"role": "user", "content": "hi"}]); seen
    [('a', 1)]
    """
    _check_store(store, "observed")
    ops: dict[str, Any] = {"desc": f"observed({_desc(store)})"}
    if on_get is not None:

        def get(id: str):
            found = store["get"](id)
            on_get(id, found)
            return found

        ops["get"] = get
    if on_save is not None:

        def save(id: str, transcript: Sequence[Mapping]) -> None:
            store["save"](id, transcript)
            on_save(id, transcript)

        ops["save"] = save
    if on_delete is not None and "delete" in store:

        def delete(id: str) -> None:
            store["delete"](id)
            on_delete(id)

        ops["delete"] = delete
    return derive(store, fused=_same_view(store), **ops)  # its get and save change nothing


# ---- read-through cache --------------------------------------------------------


@curry
def read_through(cache: Mapping, store: Mapping) -> dict:
    """Return `store` behind a cache store: reads try the cache first, then fill it.

    A save invalidates the cached copy, writes the store, then caches what the store
    now returns (its `stored_view` of the transcript, e.g. trimmed by `capped_store`;
    else read back), so a warm cache returns exactly what a cold one would. A delete
    removes both. The cache needs "delete". Its "lock" is the store's (never the
    cache's). It is only as fresh as this process knows: use it when one process writes
    a given conversation (sticky sessions), since another process's save does not reach
    this cache.
    """
    _check_store(cache, "read_through (cache)")
    _check_store(store, "read_through")
    if not callable(cache.get("delete")):
        raise ValueError("read_through: the cache store needs 'delete' (to invalidate entries)")

    def get(id: str):
        found = cache["get"](id)
        if found is not None:
            return found
        found = store["get"](id)
        if found is not None:
            cache["save"](id, found)
        return found

    inner_view = stored_view(store)

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        cache["delete"](id)  # first: a failed save must not leave a stale copy readable
        store["save"](id, transcript)
        now = inner_view(transcript) if inner_view is not None else store["get"](id)
        if now is not None:
            cache["save"](id, now)

    ops: dict[str, Any] = {
        "get": get,
        "save": save,
        "desc": f"read_through({_desc(cache)}, {_desc(store)})",
    }
    if "delete" in store:

        def delete(id: str) -> None:
            cache["delete"](id)
            store["delete"](id)
            cache["delete"](id)

        ops["delete"] = delete
    return derive(store, fused=_same_view(store), **ops)  # it returns what the store does


# ---- retention -------------------------------------------------------------------

# The save time lives in a side record of the same backend, under this reserved
# prefix: the transcript itself stays in the provider's shape (so an appending
# backend still appends), and the time survives restarts with the data.
SAVED_AT = "toolnexus:saved-at:"


def _seconds(max_age: timedelta | float) -> float:
    secs = max_age.total_seconds() if isinstance(max_age, timedelta) else max_age
    if isinstance(secs, bool) or not isinstance(secs, (int, float)) or not secs >= 0:
        raise ValueError(f"retention: max_age must be a timedelta or seconds >= 0, got {max_age!r}")
    if math.isinf(secs):
        raise ValueError("retention: max_age must be finite (leave retention out to keep forever)")
    return float(secs)


@curry
def retention(
    max_age: timedelta | float, store: Mapping, *, now: Callable[[], float] = time.time
) -> dict:
    """Return `store` where conversations not saved within `max_age` read as absent.

    `max_age` is a timedelta or seconds; `now` is the clock (seconds, injectable for
    tests). Each save records its time in a side record 'toolnexus:saved-at:<id>' in the
    same backend (ids starting with that prefix are refused). An expired conversation is
    deleted on read where the store has "delete". A conversation saved before retention
    was added starts its clock when first read.
    """
    age = _seconds(max_age)
    _check_store(store, "retention")

    def meta_id(id: str) -> str:
        if isinstance(id, str) and id.startswith(SAVED_AT):
            raise ValueError(f"retention: ids starting with {SAVED_AT!r} are reserved")
        return SAVED_AT + id

    def stamp(id: str) -> None:
        store["save"](meta_id(id), [{"role": "toolnexus.meta", "saved_at": now()}])

    def saved_at(id: str) -> float | None:
        meta = store["get"](meta_id(id))
        if meta is None:
            return None
        try:
            return float(meta[0]["saved_at"])
        except (LookupError, TypeError, ValueError):
            raise StoreCorruptError(f"retention: bad save-time record for {id!r}") from None

    def is_expired(saved: float | None) -> bool:
        return saved is not None and now() - saved > age

    def get(id: str):
        saved = saved_at(id)
        if is_expired(saved):
            if "delete" in store:
                store["delete"](id)
                store["delete"](meta_id(id))
            return None
        found = store["get"](id)
        if found is not None and saved is None:
            stamp(id)
        return found

    # Its save declares no stored view: what get returns depends on the clock.
    def save(id: str, transcript: Sequence[Mapping]) -> None:
        stamp(id)  # first: a failed save then only extends the old transcript's life
        store["save"](id, transcript)

    ops: dict[str, Any] = {"get": get, "save": save,
                           "desc": f"retention({age:g}s, {_desc(store)})"}  # fmt: skip
    if "delete" in store:

        def delete(id: str) -> None:
            store["delete"](id)
            store["delete"](meta_id(id))

        ops["delete"] = delete
    if "ids" in store:

        def ids() -> tuple[str, ...]:
            keys = tuple(store["ids"]())
            return tuple(
                k for k in keys if not k.startswith(SAVED_AT) and not is_expired(saved_at(k))
            )

        ops["ids"] = ids
    return derive(store, **ops)


# ---- encrypted -------------------------------------------------------------------

ENCRYPTED_ROLE = "toolnexus.encrypted"


def _fernet(key: Any):
    with needs_extra("encrypted"):
        from cryptography.fernet import Fernet  # lazy: an optional dependency (toolnexus[crypto])

    if callable(getattr(key, "encrypt", None)) and callable(getattr(key, "decrypt", None)):
        return key  # a Fernet or MultiFernet (key rotation)
    try:
        return Fernet(key)
    except (ValueError, TypeError):
        # Never echo the key: it would end up in a log.
        raise ValueError(
            "encrypted: key must be a Fernet key (32 url-safe base64-encoded bytes, "
            "from Fernet.generate_key()) or a Fernet/MultiFernet object"
        ) from None


@curry
def encrypted(key: Any, store: Mapping) -> dict:
    """Return `store` encrypting each transcript at rest with Fernet (`toolnexus[crypto]`).

    The backend holds a one-message transcript `[{"role": "toolnexus.encrypted",
    "content": <Fernet token of the versioned JSON transcript>}]`, so it sees no text,
    roles or message count. A wrong key raises DecryptionError, never "no history".
    Put it innermost (next to the backend): a decorator outside it sees the plain
    transcript. `key` is a Fernet key or a Fernet/MultiFernet (for key rotation).
    """
    box = _fernet(key)
    _check_store(store, "encrypted")

    def get(id: str):
        found = store["get"](id)
        if found is None:
            return None
        if len(found) != 1 or found[0].get("role") != ENCRYPTED_ROLE:
            raise StoreCorruptError(
                f"conversation {id!r} in {_desc(store)} is not encrypted"
                " (was it saved without encrypted()?)"
            )
        from cryptography.fernet import InvalidToken

        try:
            plain = box.decrypt(str(found[0].get("content")).encode("ascii"))
        except (InvalidToken, UnicodeEncodeError):
            raise DecryptionError(
                f"cannot decrypt conversation {id!r} in {_desc(store)}: wrong key, or the data"
                " was altered"
            ) from None
        try:
            return parse_document(plain)[0]
        except tx.TranscriptFormatError as e:
            msg = f"conversation {id!r}: decrypted data is not a transcript: {e}"
            raise StoreCorruptError(msg) from None

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        token = box.encrypt(tx.dumps(tx.freeze_transcript(transcript)).encode("utf-8"))
        store["save"](id, [{"role": ENCRYPTED_ROLE, "content": token.decode("ascii")}])

    # A store that keeps its one-message ciphertext as given gives back the plain value.
    seen = {"view": view(tx.freeze_transcript)} if stored_view(store) is not None else {}
    return derive(store, fused=seen, get=get, save=save, desc=f"encrypted({_desc(store)})")

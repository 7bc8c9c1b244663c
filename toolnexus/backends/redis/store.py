"""The Redis store: a list of JSON messages and a small head hash per conversation (redis-py)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from contextlib import contextmanager
from functools import partial
from typing import Any

from pyrsistent import pvector

from ...core.bounds import memo_bytes_bound
from ...core.extras import needs_extra
from ...core.transcript import freeze_transcript
from ...store import _rows
from ...store.errors import StoreCorruptError, StoreUnavailableError
from ...store.fused import derive, fuse, view
from ...store.locks import LockLostError, paired_lock
from . import connect as _connect
from .lock import Taken, redis_lock

__all__ = ["redis_store"]

# KEYS: head, list, ids set, lock. ARGV: mode, expected version/count/digest, new
# version/count/digest, id, the lock token (or ""), then the messages to push. An append
# only happens if the head is still the one the plan was made against (compare-and-set;
# no head at all is the empty transcript, so a new conversation's first save is an
# append too), so the whole save is one atomic step that never writes over another's.
# A replace with a token happens only while the lock key still holds it (-3: the lock
# was lost, expired while its holder paused, and the next holder may have saved: a
# replace would wipe that turn). Key types are checked before any write, because Redis
# does not roll a script back when a command in it fails. RPUSH goes in chunks because
# Lua's unpack has a small limit.
_SAVE = (
    """
local kinds = {'hash', 'list', 'set'}
for i = 1, 3 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= kinds[i] then return -2 end
end
if ARGV[1] == 'append' then
  local h = redis.call('HMGET', KEYS[1], 'version', 'count', 'digest')
  if not h[1] and not h[2] and not h[3] then h = {ARGV[2], '0', 'GENESIS'} end  -- absent: empty
  if h[1] ~= ARGV[2] or h[2] ~= ARGV[3] or h[3] ~= ARGV[4] then return 0 end
  if redis.call('LLEN', KEYS[2]) ~= tonumber(ARGV[3]) then return -1 end
else
  if ARGV[9] ~= '' and redis.call('GET', KEYS[4]) ~= ARGV[9] then return -3 end
  redis.call('DEL', KEYS[2])
end
for i = 10, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[2], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[1], 'version', ARGV[5], 'count', ARGV[6], 'digest', ARGV[7])
redis.call('SADD', KEYS[3], ARGV[8])
return 1
"""
).replace("GENESIS", _rows.GENESIS)  # an absent conversation is the empty transcript

# The save (an append) and the unlock in one script (see redis_store's "save_release").
# The unlock (compare-and-delete on the token) only follows a save that went through:
# any other result leaves the lock held, for the general save and the usual release.
# 1: saved and released; 2: saved (the head had not moved: nothing of another's was
# touched), but the lock was no longer ours (lost).
_SAVE_RELEASE = (
    _SAVE.rstrip().removesuffix("return 1")
    + """if redis.call('GET', KEYS[4]) == ARGV[9] then
  redis.call('DEL', KEYS[4])
  return 1
end
return 2
"""
)

# KEYS: lock, head, list. ARGV: token, ttl ms, the first row to read. Take the lock (SET
# NX PX) and read the transcript in one step: {0} when the lock is held elsewhere, {-2}
# for wrong key types (checked first, so nothing is taken), else {1, version, count,
# digest, the list's length, rows from the first asked...}.
_LOAD = """
local kinds = {'hash', 'list'}
for i = 2, 3 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= kinds[i - 1] then return {-2} end
end
if not redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then return {0} end
local h = redis.call('HMGET', KEYS[2], 'version', 'count', 'digest')
local out = {1, h[1], h[2], h[3], redis.call('LLEN', KEYS[3])}
local rows = redis.call('LRANGE', KEYS[3], tonumber(ARGV[3]), -1)
for i = 1, #rows do out[i + 5] = rows[i] end
return out
"""


# Reads of a conversation by the head alone between two that compare every row (see _read).
RECHECK = 16


def _text(value: Any) -> Any:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def _int(value: Any) -> Any:
    try:
        return int(_text(value))
    except (TypeError, ValueError):
        return _text(value)  # left as is: decode_rows names it as the bad value


def redis_store(
    client_or_url: Any,
    prefix: str = "toolnexus:",
    *,
    lock_timeout: float = 60.0,
    lock_ttl: float = 10.0,
) -> dict:
    """Return a durable store in Redis (a redis-py client or a redis:// URL).

    Per conversation: a list of JSON messages at `{prefix}m:{id}`, a head hash at
    `{prefix}c:{id}` and the id in the set `{prefix}ids`. Each save is one Lua script:
    it appends only the new messages when the stored transcript is a prefix of the new
    one, else replaces the list. Its "lock" is a `redis_lock` on the same client (keys
    `{prefix}lock:{id}`, renewed while held, freed `lock_ttl` seconds after a crash),
    which the client takes by default around get -> run -> save: processes and hosts
    asking on one id lose no turn (a lock not taken within `lock_timeout` seconds raises
    LockTimeoutError). A save while this process holds the lock never replaces the list
    unless the lock is still its own: a holder that paused past the ttl appends if
    nothing was saved meanwhile, else gets LockLostError, and the turn another writer
    saved is kept.

    Its fused "lock_load" and "save_release" (see store.fused) make the usual exchange
    two round trips: one script takes the lock and reads the transcript, another appends
    the exchange and releases the lock (a decorator that replaces get, save or lock drops
    them: it is never bypassed).
    """
    with needs_extra("redis_store"):
        import redis  # noqa: F401

    st = _Redis(_connect.redis_client(client_or_url), prefix, lock_timeout, lock_ttl)

    def get(id: str):
        return _get(st, id)

    def save(id: str, transcript: Sequence[Mapping]) -> None:
        _save(st, id, transcript)

    def delete(id: str) -> None:
        _delete(st, id)

    def ids() -> tuple:
        return _ids(st)

    def fork(src: str, dst: str, at: int | None = None, check=None) -> int:
        """Copy `src` (its first `at` messages) to `dst` on the server: see store.fork."""
        st.memo.forget(dst)
        with _errors(st, src):
            return _fork(st.client, st.copy, partial(_keys, st), st.ids_key, st.desc, src, dst,
                         at, check)  # fmt: skip

    def lock_load(id: str) -> tuple[Any, Any]:
        """Take `id`'s lock and read its transcript: one round trip when the lock is free."""
        return _lock_load(st, id)

    def save_release(held: Any, id: str, transcript: Sequence[Mapping]) -> BaseException | None:
        """Save `transcript`, then release `held`: one round trip when this process saw the
        stored head last (the usual exchange); return a release's error, raise a save's."""
        return _save_release(st, held, id, transcript, save)

    return derive(
        {
            "get": get,
            "save": save,
            "delete": delete,
            "ids": ids,
            "lock": st.lock,
            "desc": st.desc,
            "fused": {
                "view": view(freeze_transcript),
                "fork": fuse(fork, "get", "save"),
                "lock_load": fuse(lock_load, "get", "lock"),
                "save_release": fuse(save_release, "save", "lock"),
            },
        }
    )  # binds the fused calls to these operations


class _Redis:
    """What one Redis store holds: its client, scripts, keys, memo and lock."""

    __slots__ = ("client", "prefix", "desc", "script", "load_script", "release_script", "copy",
                 "ids_key", "memo", "lock")  # fmt: skip

    def __init__(self, client: Any, prefix: str, lock_timeout: float, lock_ttl: float):
        self.client, self.prefix = client, prefix
        self.desc = f"redis({_connect.redis_address(client)!r}, prefix={prefix!r})"
        self.script = client.register_script(_SAVE)
        self.load_script = client.register_script(_LOAD)
        self.release_script = client.register_script(_SAVE_RELEASE)
        self.copy = client.register_script(_FORK)
        self.ids_key = prefix + "ids"
        self.memo = _rows.Memo(max_bytes=memo_bytes_bound(os.environ))
        self.lock = paired_lock(
            lambda: redis_lock(client, ttl=lock_ttl, prefix=prefix + "lock:", timeout=lock_timeout)
        )


def _keys(st: _Redis, id: str) -> tuple[str, str]:
    _rows.check_text_id(id, st.desc)
    return st.prefix + "c:" + id, st.prefix + "m:" + id


@contextmanager
def _errors(st: _Redis, id: str | None):
    """Turn redis-py's errors into the store's: down, wrong key types, refused."""
    import redis as redis_py

    try:
        yield
    except (redis_py.ConnectionError, redis_py.TimeoutError) as e:
        raise _connect.redis_unavailable(st.client, e, st.desc) from None
    except redis_py.ResponseError as e:
        if "WRONGTYPE" in str(e) and id is not None:
            raise StoreCorruptError(
                f"{st.desc}: conversation {id!r:.120} is not a transcript: {e}"
            ) from None
        raise StoreUnavailableError(f"{st.desc} refused: {e}") from None


def _get(st: _Redis, id: str):
    known = st.memo.known(id)
    k = len(known.transcript) if known is not None else 0
    return _read(st, id, known, k, _snapshot(st, id, k))


def _snapshot(st: _Redis, id: str, k: int) -> tuple:
    """Return (version, count, digest, the list's length, its rows from k on): one MULTI,
    one consistent snapshot."""
    head_key, list_key = _keys(st, id)
    with _errors(st, id):
        pipe = st.client.pipeline(transaction=True)
        pipe.hmget(head_key, "version", "count", "digest")
        pipe.llen(list_key)
        pipe.lrange(list_key, k, -1)
        (version, count, digest), length, bodies = pipe.execute()
    return version, count, digest, length, bodies


def _read(st: _Redis, id: str, known: Any, k: int, snapshot: Sequence) -> Any:
    """Return the transcript of a snapshot of the rows from k (`known`'s count) on.

    The head vouches for what this process knows (see Memo.read_past): the list is as
    long as the head says, and the digest chained on over the new rows is the head's.
    Otherwise (history rewritten, rows missing) all rows are read and checked. Redis
    keeps no stamp of rows changed by hand, so one set in place (LSET) behind the
    stores' back, without moving the head, is seen at once by a process that has not
    read the conversation, and by one that has within RECHECK reads (every RECHECK-th
    read compares all rows).
    """
    version, count, digest, length, bodies = snapshot
    if known is not None and version is not None and _int(count) == _int(length):
        head = (_int(version), _int(count), _text(digest))
        rows = list(enumerate(bodies, k))
        got = st.memo.read_past(id, known, head, None, rows, recheck=RECHECK)
        if got is not None:
            return got
    if k:
        version, count, digest, _, bodies = _snapshot(st, id, 0)
    return _decoded(st, id, version, count, digest, bodies)


def _decoded(st: _Redis, id: str, version: Any, count: Any, digest: Any, bodies: Sequence) -> Any:
    """Return the transcript of a head and ALL its rows, checked (see Memo.read)."""
    if version is None and count is None:
        if bodies:
            raise StoreCorruptError(f"{st.desc}: conversation {id!r:.120} has rows but no head")
        # Seen absent: a save appends (no edit stamps in Redis: the head alone vouches).
        st.memo.remember(id, pvector(), _rows.GENESIS, 0, (), None, True)
        return None
    head = (_int(version), _int(count), _text(digest))
    return st.memo.read_list(st.desc, id, *head, bodies, stamp=None)


def _script_args(id: str, plan: _rows.Plan, expected: _rows.Head | None, token: str) -> list:
    exp = expected or _rows.Head("", "", "")
    args = ["append" if plan.append else "replace", str(exp.version), str(exp.count)]
    args += [exp.digest, str(plan.head.version), str(plan.head.count), plan.head.digest, id]
    return [*args, token, *plan.encoded]


def _run(st: _Redis, id: str, plan: _rows.Plan, expected: _rows.Head | None, token: str) -> int:
    head_key, list_key = _keys(st, id)
    args = _script_args(id, plan, expected, token)
    done = st.script(keys=[head_key, list_key, st.ids_key, st.prefix + "lock:" + id], args=args)
    if done == -3:
        raise _lost(st.desc, id)
    return done


def _fence(st: _Redis, id: str) -> str:
    """Return the token of `id`'s lock if this process holds it (its saves are then
    written only while the lock is still theirs), else ""."""
    made = st.lock.peek()
    return (made.token_of(id) or "") if made is not None else ""


def _save(st: _Redis, id: str, transcript: Sequence[Mapping]) -> None:
    frozen = _rows.frozen(transcript)
    head_key, _ = _keys(st, id)
    token, memo = _fence(st, id), st.memo
    with _errors(st, id):
        # The usual save (what this process last saw stored, plus new messages) is
        # one round trip: the script appends only if the head is still that one.
        extend = _rows.plan_extend(id, frozen, memo)
        done = _run(st, id, extend[1], extend[0], token) if extend is not None else 0
        if done == 0:
            version, count, digest = st.client.hmget(head_key, "version", "count", "digest")
            stored = None
            if count is not None:
                stored = _rows.Head(_int(version), _int(count), _text(digest))
            plan = _rows.plan_save(id, stored, frozen, memo)
            done = _run(st, id, plan, stored, token)
        else:
            plan = extend[1]
        if done == 0:  # someone saved in between: a full replace is always correct
            plan = _rows.plan_save(id, None, frozen, memo)
            done = _run(st, id, plan, None, token)
        if done < 0:
            why = "its list length does not match its head" if done == -1 else "wrong key types"
            raise StoreCorruptError(f"{st.desc}: conversation {id!r:.120} is corrupt: {why}")
    memo.saved(id, frozen, plan)


def _delete(st: _Redis, id: str) -> None:
    head_key, list_key = _keys(st, id)
    st.memo.forget(id)
    with _errors(st, id):
        pipe = st.client.pipeline(transaction=True)
        pipe.delete(head_key, list_key)
        pipe.srem(st.ids_key, id)
        pipe.execute()


def _ids(st: _Redis) -> tuple:
    with _errors(st, None):
        members = st.client.smembers(st.ids_key)
    return tuple(sorted(_text(m) for m in members))


def _lock_load(st: _Redis, id: str) -> tuple[Any, Any]:
    head_key, list_key = _keys(st, id)
    known = st.memo.known(id)
    k = len(known.transcript) if known is not None else 0

    def first_try(key: str, token: str, ttl_ms: int) -> Any:
        with _errors(st, id):
            out = st.load_script(keys=[key, head_key, list_key], args=[token, ttl_ms, k])
        if out[0] == -2:
            raise StoreCorruptError(f"{st.desc}: conversation {id!r:.120} has wrong key types")
        return out if out[0] == 1 else None

    held, out = st.lock.made().take_with(id, first_try)
    try:  # held elsewhere at first: waited for, so read now
        if out is None:
            return held, _get(st, id)
        return held, _read(st, id, known, k, (*out[1:5], out[5:]))
    except BaseException:
        _exit_quietly(held)
        raise


def _save_release(
    st: _Redis, held: Any, id: str, transcript: Sequence[Mapping], save: Any
) -> BaseException | None:
    try:  # a transcript refused before any write: released all the same
        frozen = _rows.frozen(transcript)
        extend = _rows.plan_extend(id, frozen, st.memo) if isinstance(held, Taken) else None
    except BaseException:
        _exit_quietly(held)
        raise
    if extend is not None and _saved_released(st, held, id, *extend):
        st.memo.saved(id, frozen, extend[1])
        return None
    # The head moved (or nothing to plan from): the general save, then the release.
    try:
        save(id, frozen)
    except BaseException:
        _exit_quietly(held)
        raise
    try:
        held.__exit__(None, None, None)
    except Exception as e:
        return e
    return None


def _saved_released(st: _Redis, held: Any, id: str, expected: Any, plan: Any) -> bool:
    """Append and release in one script; return whether it saved (else still held)."""
    head_key, list_key = _keys(st, id)

    def via(key: str, token: str) -> bool | None:
        args = _script_args(id, plan, expected, token)
        with _errors(st, id):
            done = st.release_script(keys=[head_key, list_key, st.ids_key, key], args=args)
        return {1: True, 2: False}.get(done)  # else not saved: still held

    try:
        return bool(held.release_with(via))
    except BaseException:
        _exit_quietly(held)
        raise


def _lost(desc: str, id: str) -> LockLostError:
    return LockLostError(
        f"{desc}: the lock on conversation {id!r:.120} expired while its exchange ran "
        "(the process paused longer than the lock's ttl): the save was refused, so nothing "
        "another writer saved since is overwritten; this exchange was not saved, ask again"
    )


def _exit_quietly(held: Any) -> None:
    """Release `held` after an error that the caller raises (a second one is not news)."""
    try:
        held.__exit__(None, None, None)
    except Exception:
        pass


# KEYS: src head, src list, dst head, dst list, ids set. ARGV: src's expected version,
# count and digest, the count to copy, the fork's digest, the dst id. Compare-and-set on
# src's head (it may have moved since it was read); the copy never leaves the server.
_FORK = """
local h = redis.call('HMGET', KEYS[1], 'version', 'count', 'digest')
if h[1] ~= ARGV[1] or h[2] ~= ARGV[2] or h[3] ~= ARGV[3] then return 0 end
local kinds = {'hash', 'list', 'set'}
for i = 3, 5 do
  local t = redis.call('TYPE', KEYS[i]).ok
  if t ~= 'none' and t ~= kinds[i - 2] then return -2 end
end
redis.call('DEL', KEYS[4])
local n = tonumber(ARGV[4])
for i = 0, n - 1, 1000 do
  redis.call('RPUSH', KEYS[4], unpack(redis.call('LRANGE', KEYS[2], i, math.min(i + 999, n - 1))))
end
redis.call('HSET', KEYS[3], 'version', ARGV[1], 'count', ARGV[4], 'digest', ARGV[5])
redis.call('SADD', KEYS[5], ARGV[6])
return 1
"""


def _fork(client: Any, copy: Any, keys: Any, ids_key: str, desc: str, src, dst, at, check) -> int:
    """Check the cut, then copy on the server; again if src moved in between."""
    from ...store.forks import decode_row, forked_digest

    (src_head, src_list), (dst_head, dst_list) = keys(src), keys(dst)
    while True:
        version, count, digest = (_text(v) for v in client.hmget(src_head, "version", "count",
                                                                 "digest"))  # fmt: skip
        if count is None:
            raise KeyError(f"no conversation {src!r} to fork")
        count = int(count)
        n = count if at is None else at
        if n > count:
            raise ValueError(f"at={at} is past the end of {src!r} ({count} messages)")
        if check is not None and n < count:
            check(decode_row(desc, src, _int(version), client.lindex(src_list, n)))
        args = [version, count, digest, n, forked_digest(digest, count, n), dst]
        done = copy(keys=[src_head, src_list, dst_head, dst_list, ids_key], args=args)
        if done == -2:
            raise StoreCorruptError(f"{desc}: conversation {dst!r:.120} has wrong key types")
        if done == 1:
            return n

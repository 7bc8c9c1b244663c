"""The Redis lock: SET NX PX with a token, released by compare-and-delete, renewed while
held; a store's fused calls take it with their first read and release it in their save."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from functools import partial
from typing import Any

from ...core.extras import needs_extra
from ...store import _rows
from ...store.locks import _per_id, _poll, _queued, _warn_lost, local_lock

__all__ = ["redis_lock", "RedisLock", "Taken"]


class Taken:
    """A lock taken by `redis_lock(...).take_with`: already entered; `__exit__` releases it.

    `release_with(via)` lets a store release it inside its own script (one round trip
    for a save and the unlock): see `redis_lock`.
    """

    __slots__ = ("_release", "_queued", "_open")

    def __init__(self, release: Callable, queued: AbstractContextManager) -> None:
        self._release, self._queued, self._open = release, queued, True

    def __enter__(self) -> Taken:
        return self

    def __exit__(self, *exc: Any) -> None:
        """Release the lock (once: a second exit does nothing)."""
        self._finish(None)

    def release_with(self, via: Callable[[str, str], bool | None]) -> bool:
        """Release through `via(key, token)`: True (it unlocked our token), False (it found
        the lock not ours: lost, warned) or None (it did not unlock: still held).

        Return whether the lock is released now. If `via` raises, the lock is still held.
        """
        if not self._open:
            return True
        return self._finish(via)

    def _finish(self, via: Callable | None) -> bool:
        if not self._open:
            return True
        try:
            if not self._release(via):
                return False  # `via` left it held: the caller exits it later
        except BaseException:
            if via is not None:
                raise  # still held: the caller's exit releases it the usual way
            self._open = False  # a failed unlock: this process lets go all the same
            self._queued.__exit__(None, None, None)
            raise
        self._open = False
        self._queued.__exit__(None, None, None)
        return True


# KEYS[1] lock key; ARGV[1] our token (ARGV[2] ttl in ms): act only on our own lock.
_RENEW = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""
_RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) end
return 0
"""


def redis_lock(
    redis_client_or_url: Any,
    ttl: float = 10.0,
    *,
    timeout: float = 60.0,
    prefix: str = "toolnexus:lock:",
) -> RedisLock:
    """Return a lock per conversation in Redis, for many processes and hosts.

    SET NX PX with a random token; released only if the token is still ours (a Lua
    compare-and-delete); renewed every ttl/3 while held, so a long run keeps it and a
    crashed holder frees it after `ttl` seconds. One background thread renews every
    lock this value holds (one pipelined round trip per period) and ends when none is
    held: taking a lock starts no thread of its own.
    """
    with needs_extra("redis_lock"):
        import redis  # noqa: F401

    from .connect import redis_client

    return RedisLock(_RedisLock(redis_client(redis_client_or_url), ttl, prefix), timeout)


class RedisLock:
    """A `redis_lock`: `lock(id)` is the context manager held around an exchange; a store on
    the same client takes it with its first read (`take_with`) and fences its saves by its
    token (`token_of`)."""

    __slots__ = ("_st", "_timeout", "_queue", "_hold")

    def __init__(self, st: _RedisLock, timeout: float) -> None:
        self._st, self._timeout = st, timeout
        # Threads of this process queue here, whichever way they take.
        self._queue = local_lock(timeout)
        self._hold = _per_id(partial(_redis_take, st), timeout, self._queue)

    def __call__(self, id: str) -> AbstractContextManager:
        return self._hold(id)

    def take_with(self, id: str, first_try: Callable[[str, str, int], Any]) -> tuple[Taken, Any]:
        """Take `id`'s lock, trying `first_try(key, token, ttl_ms)` first; return
        (the entered lock, what the first try returned).

        `first_try` is a store's script that sets the lock key to `token` (SET NX PX
        semantics) and reads in the same round trip; it returns None when the lock is
        held elsewhere, and the take then waits as usual (within the lock's timeout).
        """
        st = self._st
        key, token = st.prefix + _rows.check_text_id(id, st.what), secrets.token_hex(16)

        def take_now(deadline: float) -> tuple[Any, threading.Event]:
            value = first_try(key, token, st.ttl_ms)
            if value is None:
                _redis_poll(st, key, token, max(0.0, deadline - time.monotonic()))
            return value, _redis_track(st, key, token)

        queued, (value, lost) = _queued(self._queue, id, self._timeout, take_now)
        return Taken(partial(_redis_release, st, id, key, token, lost), queued), value

    def token_of(self, id: str) -> str | None:
        """Return the token of `id`'s lock while this value holds it, else None: a store
        writes only if the lock key still holds it (its save is fenced by the lock)."""
        st = self._st
        with st.guard:
            entry = st.held.get(st.prefix + id)
        return entry[0] if entry is not None else None


def _redis_take(st: _RedisLock, id: str, seconds: float) -> Callable[[], None]:
    key, token = st.prefix + _rows.check_text_id(id, st.what), secrets.token_hex(16)
    _redis_poll(st, key, token, seconds)
    return partial(_redis_release, st, id, key, token, _redis_track(st, key, token))


class _RedisLock:
    """What one redis_lock holds: its client, scripts, the locks held and their renewer."""

    __slots__ = ("client", "what", "renew", "unlock", "ttl", "ttl_ms", "prefix", "held",
                 "guard", "renewer")  # fmt: skip

    def __init__(self, client: Any, ttl: float, prefix: str):
        from .connect import redis_address

        self.client, self.ttl, self.prefix = client, ttl, prefix
        self.what = f"redis_lock({redis_address(client)!r})"
        self.renew, self.unlock = client.register_script(_RENEW), client.register_script(_RELEASE)
        self.ttl_ms = max(1, int(ttl * 1000))
        self.held: dict[str, tuple[str, threading.Event]] = {}  # key -> (token, lost)
        self.guard = threading.Lock()
        self.renewer: list[threading.Thread] = []  # the running renewer, if any


def _redis_renew_held(st: _RedisLock) -> None:
    """The renewer: every ttl/3, renew every lock held (one pipelined round trip)."""
    import redis as redis_py

    while True:
        time.sleep(st.ttl / 3)
        with st.guard:
            if not st.held:
                st.renewer.clear()  # under the guard: a take now starts a new renewer
                return
            batch = list(st.held.items())
        pipe = st.client.pipeline(transaction=False)
        for key, (token, _) in batch:
            st.renew(keys=[key], args=[token, st.ttl_ms], client=pipe)
        try:
            results = pipe.execute()
        except redis_py.RedisError:
            continue  # a blip: try again next period, the ttl still covers them
        for (_, (_, lost)), renewed in zip(batch, results, strict=True):
            if not renewed:
                lost.set()


def _redis_poll(st: _RedisLock, key: str, token: str, seconds: float) -> None:
    import redis as redis_py

    from .connect import redis_unavailable

    try:
        set_key = partial(st.client.set, key, token, nx=True, px=st.ttl_ms)
        _poll(lambda: bool(set_key()), seconds, st.what)
    except (redis_py.ConnectionError, redis_py.TimeoutError) as e:
        raise redis_unavailable(st.client, e, st.what) from None


def _redis_track(st: _RedisLock, key: str, token: str) -> threading.Event:
    """Hand a taken lock to the renewer; return the event it sets if the lock is lost."""
    lost = threading.Event()
    with st.guard:
        st.held[key] = (token, lost)
        if not st.renewer or not st.renewer[0].is_alive():
            st.renewer[:] = ()
            name = f"toolnexus-redis-lock {st.prefix}"
            st.renewer.append(
                threading.Thread(target=_redis_renew_held, args=(st,), name=name, daemon=True)
            )
            st.renewer[0].start()
    return lost


def _redis_untrack(st: _RedisLock, key: str) -> None:
    with st.guard:
        st.held.pop(key, None)


def _redis_release(
    st: _RedisLock, id: str, key: str, token: str, lost: threading.Event, via: Any = None
) -> bool:
    """Unlock (or let `via(key, token)`, a store's script, do it); return False when
    `via` left it held (its save did not go through), else True."""
    import redis as redis_py

    from .connect import redis_unavailable

    if via is None:
        _redis_untrack(st, key)  # even if the unlock fails: the renewer stops renewing it
    # Read before the unlock: a renewal already under way when we let go may
    # find the key gone, which says nothing about the time we held it.
    was_lost = lost.is_set()
    try:
        released = st.unlock(keys=[key], args=[token]) if via is None else via(key, token)
    except (redis_py.ConnectionError, redis_py.TimeoutError) as e:
        raise redis_unavailable(st.client, e, st.what) from None
    if released is None:  # `via` left it held (its save did not go through)
        return False
    _redis_untrack(st, key)
    if was_lost or not released:
        _warn_lost(f"{st.what} for {id!r:.120}")
    return True

"""Per-conversation locks: `fn(id) -> context manager` held around get -> run -> save.

`local_lock` serves one process; `file_lock` several processes on one host;
`redis_lock` and `postgres_lock` many processes on many hosts. A lock not taken
within its timeout raises LockTimeoutError: a run never goes on without its lock.

Every shipped durable store carries the cross-process lock that suits it under its
"lock" key (`paired_lock` makes it on first use), and the client takes that lock by
default, so processes racing on one conversation id lose no turn without any option.
"""

from __future__ import annotations

import os
import secrets
import threading
import time
import warnings
from collections.abc import Callable
from contextlib import AbstractContextManager, contextmanager
from functools import partial
from pathlib import Path
from typing import Any

from ..backends.postgres.lock import PgLock
from ..backends.postgres.lock import advisory_key as _advisory_key  # noqa: F401  # tests reach it here
from ..backends.postgres.lock import take as take_pg
from ..backends.redis.lock import Held, Taken
from ..core.extras import needs_extra

__all__ = [
    "local_lock",
    "file_lock",
    "redis_lock",
    "postgres_lock",
    "paired_lock",
    "LockTimeoutError",
    "LockLostError",
]


class LockTimeoutError(TimeoutError):
    """A conversation lock could not be taken in time (the run never goes on without it)."""


class LockLostError(RuntimeError):
    """A conversation lock was lost while held (it expired, or its session ended), so the
    save was refused: whatever another writer saved since is kept, and this exchange is
    not acknowledged (ask again)."""


class _Local:
    """One id's in-process lock, entered by `with`: see `local_lock`."""

    __slots__ = ("_locks", "_guard", "_timeout", "_id", "_entry")

    def __init__(self, locks: dict, guard: threading.Lock, timeout: float, id: str) -> None:
        self._locks, self._guard, self._timeout, self._id = locks, guard, timeout, id
        self._entry: list | None = None

    def __enter__(self) -> _Local:
        with self._guard:
            entry = self._locks.get(self._id)
            if entry is None:
                # A Lock, not an RLock: the async driver may release it from another thread.
                entry = self._locks[self._id] = [threading.Lock(), 0]
            entry[1] += 1  # holders and waiters: the entry goes when the last one leaves
        if not entry[0].acquire(timeout=self._timeout):
            self._leave(entry)
            raise LockTimeoutError(
                f"conversation lock for {self._id!r} not taken within {self._timeout}s"
            )
        self._entry = entry
        return self

    def __exit__(self, *exc: Any) -> None:
        entry, self._entry = self._entry, None
        if entry is None:  # never taken, or let go already: never release another's hold
            return
        entry[0].release()
        self._leave(entry)

    def _leave(self, entry: list) -> None:
        with self._guard:
            entry[1] -= 1
            if not entry[1]:
                del self._locks[self._id]


def local_lock(timeout: float = 60.0) -> Callable[[str], AbstractContextManager]:
    """Return an in-process lock per conversation id (the default for a store with no "lock")."""
    locks: dict[str, list] = {}  # id -> [its Lock, how many hold or wait for it]
    guard = threading.Lock()

    def hold(id: str) -> _Local:
        return _Local(locks, guard, timeout, id)

    return hold


def paired_lock(make: Callable[[], Callable]) -> Callable[[str], AbstractContextManager]:
    """Return a lock made by `make()` on its first use: the "lock" a store pairs itself with.

    Made lazily, so a store that is never locked creates no lock files, pools or
    threads. `close()` closes the made lock if it has a "close" (a pool it owns).
    """
    made: list = []
    guard = threading.Lock()

    def inner() -> Callable[[str], AbstractContextManager]:
        """Return the made lock, making it now if this is its first use."""
        if not made:
            with guard:
                if not made:
                    made.append(make())
        return made[0]

    def lock(id: str) -> AbstractContextManager:
        return inner()(id)

    def close() -> None:
        with guard:
            inner = made.pop() if made else None
        if callable(getattr(inner, "close", None)):
            inner.close()

    def peek() -> Callable[[str], AbstractContextManager] | None:
        """Return the made lock, or None if it was never used (a save then holds nothing)."""
        return made[0] if made else None

    lock.close = close  # type: ignore[attr-defined]
    lock.inner = inner  # type: ignore[attr-defined]  # what a store's fused calls use
    lock.peek = peek  # type: ignore[attr-defined]  # what a store's fenced saves ask
    return lock


# ---- cross-process locks ---------------------------------------------------
# Each one is a `take(id, seconds) -> release` function wrapped by `_per_id`: threads
# of one process first queue on the local lock, so only one of them at a time polls
# the shared backend. Like the local lock, these are not reentrant (taking an id you
# hold times out), and may be released from another thread than the one that took
# them (the async driver enters and exits them in worker threads).

Take = Callable[[str, float], Callable[[], None]]


def _per_id(
    take: Take, timeout: float, inner: Callable | None = None
) -> Callable[[str], AbstractContextManager]:
    inner = inner or local_lock(timeout)

    @contextmanager
    def hold(id: str):
        deadline = time.monotonic() + timeout
        with inner(id):
            release = take(id, max(0.0, deadline - time.monotonic()))
            try:
                yield
            finally:
                release()

    return hold


def _queued(queue: Callable, id: str, timeout: float, take: Callable[[float], Any]) -> tuple:
    """Enter `id`'s place in this process's queue (`queue`, a local lock), then call
    `take(deadline)`; return (the entered queue entry, what `take` returned). A failed
    take leaves the queue. For the takes a store's fused calls make (see `_per_id`)."""
    deadline = time.monotonic() + timeout
    queued = queue(id)
    queued.__enter__()
    try:
        return queued, take(deadline)
    except BaseException:
        queued.__exit__(None, None, None)
        raise


def _poll(try_once: Callable[[], bool], seconds: float, what: str) -> None:
    """Call `try_once` until it returns True, backing off from 1 ms to 50 ms; time out."""
    deadline = time.monotonic() + seconds
    pause = 0.001
    while not try_once():
        if time.monotonic() >= deadline:
            raise LockTimeoutError(f"{what} not taken within {seconds:.3g}s")
        time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
        pause = min(pause * 2, 0.05)


def _lock_file_name(id: str) -> str:
    from ..backends.file.store import file_name_for

    return file_name_for(id) + ".lock"  # injective, never a path, under 255 bytes


def file_lock(directory: str | os.PathLike, timeout: float = 60.0) -> Callable:
    """Return a lock per conversation for several processes on one host (fcntl.flock).

    Each id locks its own file under `directory` (named like the file store names
    ids). The files stay after release: removing them would race with a waiter.
    """
    import fcntl

    root = Path(directory)
    root.mkdir(parents=True, exist_ok=True)

    def take(id: str, seconds: float) -> Callable[[], None]:
        fd = os.open(root / _lock_file_name(id), os.O_RDWR | os.O_CREAT, 0o644)

        def try_once() -> bool:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return True
            except BlockingIOError:
                return False

        try:
            _poll(try_once, seconds, f"file lock for {id!r:.120} in {str(root)!r}")
        except BaseException:
            os.close(fd)
            raise

        def release() -> None:
            # Closing the descriptor drops the flock even if the unlock were to fail.
            try:
                fcntl.flock(fd, fcntl.LOCK_UN)
            finally:
                os.close(fd)

        return release

    return _per_id(take, timeout)


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


def _warn_lost(what: str) -> None:
    warnings.warn(
        f"{what} was lost while held (expired or its session ended): another process may "
        "have written the conversation at the same time",
        RuntimeWarning,
        stacklevel=4,
    )


def redis_lock(
    redis_client_or_url: Any,
    ttl: float = 10.0,
    *,
    timeout: float = 60.0,
    prefix: str = "toolnexus:lock:",
) -> Callable:
    """Return a lock per conversation in Redis, for many processes and hosts.

    SET NX PX with a random token; released only if the token is still ours (a Lua
    compare-and-delete); renewed every ttl/3 while held, so a long run keeps it and a
    crashed holder frees it after `ttl` seconds. One background thread renews every
    lock this value holds (one pipelined round trip per period) and ends when none is
    held: taking a lock starts no thread of its own.
    """
    with needs_extra("redis_lock"):
        import redis  # noqa: F401

    from ..backends.postgres.connect import redis_client

    st = _RedisLock(redis_client(redis_client_or_url), ttl, prefix)

    def take(id: str, seconds: float) -> Callable[[], None]:
        key, token = prefix + id, secrets.token_hex(16)
        _redis_poll(st, key, token, seconds)
        return partial(_redis_release, st, id, key, token, _redis_track(st, key, token))

    queue = local_lock(timeout)  # threads of this process queue here, whichever way they take

    def take_with(id: str, first_try: Callable[[str, str, int], Any]) -> tuple[Taken, Any]:
        """Take `id`'s lock, trying `first_try(key, token, ttl_ms)` first; return
        (the entered lock, what the first try returned).

        `first_try` is a store's script that sets the lock key to `token` (SET NX PX
        semantics) and reads in the same round trip; it returns None when the lock is
        held elsewhere, and the take then waits as usual (within the lock's timeout).
        """
        key, token = prefix + id, secrets.token_hex(16)

        def take_now(deadline: float) -> tuple[Any, threading.Event]:
            value = first_try(key, token, st.ttl_ms)
            if value is None:
                _redis_poll(st, key, token, max(0.0, deadline - time.monotonic()))
            return value, _redis_track(st, key, token)

        queued, (value, lost) = _queued(queue, id, timeout, take_now)
        return Taken(partial(_redis_release, st, id, key, token, lost), queued), value

    def token_of(id: str) -> str | None:
        """Return the token of `id`'s lock while this value holds it, else None: a store
        writes only if the lock key still holds it (its save is fenced by the lock)."""
        with st.guard:
            entry = st.held.get(prefix + id)
        return entry[0] if entry is not None else None

    hold = _per_id(take, timeout, queue)
    hold.take_with = take_with  # type: ignore[attr-defined]
    hold.token_of = token_of  # type: ignore[attr-defined]
    return hold


class _RedisLock:
    """What one redis_lock holds: its client, scripts, the locks held and their renewer."""

    __slots__ = ("client", "what", "renew", "unlock", "ttl", "ttl_ms", "prefix", "held",
                 "guard", "renewer")  # fmt: skip

    def __init__(self, client: Any, ttl: float, prefix: str):
        from ..backends.postgres.connect import redis_address

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

    from ..backends.postgres.connect import redis_unavailable

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

    from ..backends.postgres.connect import redis_unavailable

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


def postgres_lock(
    pool_or_dsn: Any,
    *,
    timeout: float = 60.0,
    connect_timeout: float = 10.0,
    max_held: int | None = None,
) -> Callable:
    """Return a lock per conversation as a PostgreSQL advisory lock, for many processes and hosts.

    Holds a dedicated pooled connection while held (a pool shared with a store needs
    a connection more than the locks held at once); the server frees the lock if that
    session dies. Waits use `lock_timeout`, so no polling. Getting a connection waits at
    most `connect_timeout`, whatever `timeout` is (a server that is down fails after
    `connect_timeout`; a short lock timeout still allows a slow connect). With
    `max_held`, at most that many locks of this value are held at once (the others wait,
    within `timeout`): a pool shared with a store then always keeps a connection for it.
    """
    with needs_extra("postgres_lock"):
        import psycopg  # noqa: F401

    from ..backends.postgres.connect import pg_pool

    if max_held is not None and (not isinstance(max_held, int) or max_held < 1):
        raise ValueError(f"postgres_lock: max_held must be an integer >= 1, got {max_held!r}")

    pool, address, owned = pg_pool(pool_or_dsn, timeout=connect_timeout, max_size=64)
    what = f"postgres_lock({address!r})"
    st = PgLock(pool, owned, what, connect_timeout, max_held, LockTimeoutError, _warn_lost)
    queue = local_lock(timeout)  # threads of this process queue here, whichever way they take

    def take(id: str, seconds: float) -> Callable[[], None]:
        return take_pg(st, id, seconds, None)[0]

    def take_on(id: str, also: Callable[[Any], Any] | None = None) -> Held:
        """Take `id`'s lock as `with lock(id)` does; return it entered, its session's
        connection as `.conn` (autocommit), for a store's statements while it is held.

        `also(conn)` sends a store's statement in the same round trip as the take
        (psycopg's pipeline mode) and returns its cursor: `.first` is that cursor when
        the lock was free at once, else None (read again: it ran before the lock was).
        """

        def take_now(deadline: float) -> tuple[Callable[[], None], Any, Any]:
            return take_pg(st, id, max(0.0, deadline - time.monotonic()), also)

        queued, (release, conn, first) = _queued(queue, id, timeout, take_now)
        return Held(release, queued, conn, first)

    def conn_of(id: str) -> Any:
        """Return the connection holding `id`'s lock while this value holds it, else None."""
        return st.holding.get(id)

    hold = _per_id(take, timeout, queue)
    hold.take_on = take_on  # type: ignore[attr-defined]
    hold.conn_of = conn_of  # type: ignore[attr-defined]
    # A pool made from a DSN is ours: `lock.close()` closes it (a caller's pool is theirs).
    hold.close = pool.close if owned else (lambda: None)
    return hold

"""The rules of store/locks.py no other test asserts, without a server and on a fake clock:
`_poll`'s back-off (1 ms doubling to 50 ms, the last pause cut to the deadline, a timeout
at the deadline itself), the time `_per_id` and `_queued` hand on, `PairedLock`'s
peek/close, the local lock's timeout and message, where `_warn_lost` points."""

from __future__ import annotations

import warnings

import pytest

from toolnexus.store import locks as L
from toolnexus.store.locks import LockTimeoutError


class Clock:
    """time.monotonic and time.sleep for locks.py: sleeping moves the clock, and is recorded."""

    def __init__(self, now: float = 100.0) -> None:
        self.now, self.slept = now, []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch):
    c = Clock()
    monkeypatch.setattr(L.time, "monotonic", c.monotonic)
    monkeypatch.setattr(L.time, "sleep", c.sleep)
    return c


def failing(times: int):
    """A try_once that fails `times` times, then succeeds (and never loops for ever)."""
    tries = []

    def try_once() -> bool:
        tries.append(1)
        assert len(tries) < 100, "polled past the deadline"
        return len(tries) > times

    return try_once


def test_poll_backs_off_from_one_millisecond_doubling_up_to_fifty(clock):
    L._poll(failing(8), 10.0, "the lock")
    assert clock.slept == pytest.approx([0.001, 0.002, 0.004, 0.008, 0.016, 0.032, 0.05, 0.05])


def test_poll_cuts_its_last_pause_to_the_deadline_and_times_out_at_it(clock):
    with pytest.raises(LockTimeoutError, match=r"^the lock for 'c' not taken within 0.0025s$"):
        L._poll(failing(50), 0.0025, "the lock for 'c'")
    assert clock.slept == pytest.approx([0.001, 0.0015])


def test_poll_times_out_at_once_when_no_time_is_left(clock):
    with pytest.raises(LockTimeoutError, match=r"^x not taken within 0s$"):
        L._poll(failing(50), 0.0, "x")
    assert clock.slept == []
    L._poll(failing(0), 0.0, "x")  # a first try that takes it needs no time


def test_per_id_hands_take_what_is_left_of_the_timeout_never_less_than_zero(clock):
    asked = []

    def take(id, seconds):
        asked.append((id, seconds))
        return lambda: asked.append("released")

    def slow_queue(id):  # the local queue took 3 s of the 2 s
        asked.append(f"queued {id}")
        clock.now += 3.0
        return L.local_lock(5.0)(id)

    with L._per_id(take, 2.0, slow_queue)("c"):
        pass
    with L._per_id(take, 2.0)("d"):
        pass
    assert asked == ["queued c", ("c", 0.0), "released", ("d", 2.0), "released"]


def test_queued_hands_take_the_deadline_and_leaves_the_queue_when_take_fails(clock):
    queue = L.local_lock(1.0)
    entered, deadlines = [], []

    def track(id):
        entered.append(id)
        return queue(id)

    held, got = L._queued(track, "c", 2.5, lambda deadline: deadlines.append(deadline) or "ok")
    assert (entered, deadlines, got) == (["c"], [102.5], "ok")
    held.__exit__(None, None, None)

    def refuse(deadline):
        raise LockTimeoutError("no")

    with pytest.raises(LockTimeoutError):
        L._queued(queue, "c", 1.0, refuse)
    with queue("c"):  # the failed take left its place in the queue
        pass


def test_a_paired_lock_is_made_once_on_first_use_and_closed_once():
    made, closed = [], []

    class Made:
        def __call__(self, id):
            made.append(id)
            return L.local_lock(1.0)(id)

        def close(self):
            closed.append(1)

    paired = L.paired_lock(lambda: made.append(1) or Made())
    assert paired.peek() is None and made == []
    with paired("c"):
        pass
    first = paired.peek()
    assert isinstance(first, Made) and paired.made() is first and made == [1, "c"]
    paired.close()
    assert closed == [1] and paired.peek() is None
    paired.close()  # nothing made: nothing to close
    assert closed == [1]
    assert paired.made() is not first and made == [1, "c", 1]  # a later use makes another


def test_a_paired_lock_whose_lock_has_no_close_closes_quietly():
    paired = L.paired_lock(lambda: L.local_lock(1.0))
    paired.made()
    paired.close()
    assert paired.peek() is None


def test_the_local_lock_times_out_after_its_timeout_naming_the_id_and_the_seconds():
    import time

    lock = L.local_lock(timeout=0.05)
    with lock("c"):
        start = time.monotonic()
        with pytest.raises(
            LockTimeoutError, match=r"^conversation lock for 'c' not taken within 0.05s$"
        ):
            with lock("c"):
                pass
        assert 0.04 <= time.monotonic() - start < 1.0
    assert L.local_lock.__defaults__ == (60.0,)


def test_a_lock_lost_warns_at_the_code_that_took_the_lock():
    def release():  # as a backend's release calls it
        L._warn_lost("the lock for 'c'")

    def exit_lock():
        release()

    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        exit_lock()  # stacklevel 4: the frame above release's caller: this line
    (w,) = seen
    assert w.category is RuntimeWarning and w.filename == __file__
    assert (
        w.lineno
        == test_a_lock_lost_warns_at_the_code_that_took_the_lock.__code__.co_firstlineno + 9
    )
    assert str(w.message).startswith("the lock for 'c' was lost while held (expired or its")


def test_the_local_lock_hands_itself_to_with_and_forgets_an_id_when_its_last_user_leaves():
    lock = L.local_lock(timeout=0.05)
    (kept,) = [c.cell_contents for c in lock.__closure__ if isinstance(c.cell_contents, dict)]
    with lock("c") as held:
        assert isinstance(held, L._Local)
        assert kept["c"][1] == 1  # one holder
        with pytest.raises(LockTimeoutError):
            with lock("c"):
                pass
        assert kept["c"][1] == 1  # the waiter that timed out left
    assert kept == {}
    with lock("c"), lock("d"):
        assert {k: v[1] for k, v in kept.items()} == {"c": 1, "d": 1}
    assert kept == {}

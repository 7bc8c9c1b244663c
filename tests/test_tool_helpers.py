"""drivers.helpers: calls offered to helper threads, taken back by the offering thread
when no helper got to them (what sync.overlap runs a turn's calls on)."""

import threading
import time

import pytest

from toolnexus import define_tool, toolkit
from toolnexus.core.frozen import FrozenMap
from toolnexus.drivers.helpers import Helpers
from toolnexus.drivers.sync import overlap


def test_an_offer_a_helper_took_runs_there_and_its_result_comes_back():
    helpers = Helpers(2, "t-helper")
    try:
        started = threading.Event()

        def work() -> str:
            started.set()
            return threading.current_thread().name

        offer = helpers.offer(work)
        assert started.wait(5)  # a helper runs it while this thread does nothing
        assert not offer.take()  # the helper has it: this thread cannot claim it
        assert offer.result() == "t-helper"
    finally:
        helpers.close()


def test_an_offer_taken_back_is_never_run_by_a_helper():
    helpers = Helpers(1, "t-helper")
    try:
        ran = []
        offers = [helpers.offer(ran.append, n) for n in range(50)]
        taken = [o for o in offers if o.take()]  # whoever wins, each runs exactly once
        for o in taken:
            o.fn(*o.args)
        for o in offers:
            if o not in taken:
                o.result()
        assert sorted(ran) == list(range(50))
    finally:
        helpers.close()


def test_a_helpers_error_is_raised_in_the_thread_waiting_for_it():
    helpers = Helpers(1, "t-helper")
    try:
        go = threading.Event()

        def boom() -> None:
            go.set()
            raise KeyError("from the helper")

        offer = helpers.offer(boom)
        assert go.wait(5)
        assert not offer.take()
        with pytest.raises(KeyError, match="from the helper"):
            offer.result()
    finally:
        helpers.close()


def test_overlap_runs_every_call_of_a_turn_at_once_and_returns_them_in_order():
    """Four calls that only return once all four are running: the first on this thread,
    the other three on three helpers."""
    barrier = threading.Barrier(4, timeout=5)

    @define_tool
    def meet(n: int) -> str:
        """Return when all four calls are here."""
        barrier.wait()
        return str(n)

    helpers = Helpers(3, "t-helper")
    try:
        calls = [{"name": "meet", "args": FrozenMap({"n": n})} for n in range(4)]
        ran = overlap(helpers, toolkit(meet), calls)
        assert [r["output"] for r, _ in ran] == ["0", "1", "2", "3"]
    finally:
        helpers.close()


def test_close_stops_the_threads_and_refuses_new_offers():
    helpers = Helpers(2, "t-helper-close")
    started = threading.Event()
    offer = helpers.offer(started.set)
    assert started.wait(5) and not offer.take()
    offer.result()
    helpers.close()
    deadline = time.monotonic() + 5
    while any(t.name == "t-helper-close" for t in threading.enumerate()):
        assert time.monotonic() < deadline, "a helper thread outlived close()"
        time.sleep(0.01)
    with pytest.raises(RuntimeError, match="closed"):
        helpers.offer(started.set)

"""Properties of the async driver's pure helpers: what `_is_async` says of a tool's
function is what `inspect` says of it and of its `__call__`, for every kind of callable."""

from __future__ import annotations

import functools
import inspect

from hypothesis import given
from hypothesis import strategies as st

from toolnexus.drivers.aio import _is_async


def plain(args):
    return args


async def coro(args):
    return args


def gen(args):
    yield args


async def agen(args):
    yield args


class AsyncCall:
    async def __call__(self, args):
        return args


class PlainCall:
    def __call__(self, args):
        return args


class Methods:
    def plain(self, args):
        return args

    async def coro(self, args):
        return args


def wrapped(fn):
    """A decorated function (what define_tool's validated run is): its own code decides."""

    @functools.wraps(fn)
    def run(args):
        return fn(args)

    return run


def marked(fn):
    """A plain def carrying a coroutine marker attribute: left to inspect to judge."""

    def run(args):
        return fn(args)

    run._is_coroutine_marker = object()
    return run


CALLABLES = [plain, coro, gen, agen, AsyncCall(), PlainCall(), Methods().plain, Methods().coro,
             functools.partial(coro), functools.partial(plain), lambda args: args,
             wrapped(coro), wrapped(plain), marked(coro), marked(plain), print, len]  # fmt: skip


@given(st.sampled_from(CALLABLES))
def test_is_async_says_what_inspect_says(fn):
    expected = inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(
        getattr(fn, "__call__", None)  # noqa: B004
    )
    assert _is_async(fn) is expected


def test_is_async_of_plain_and_async_defs():
    assert _is_async(coro) and _is_async(AsyncCall()) and _is_async(Methods().coro)
    assert not _is_async(plain) and not _is_async(gen) and not _is_async(agen)

"""What a dialect's fake is: one declared record of everything the test kit serves,
checks and draws in that dialect.

This module imports no dialect's fake. Each `testing/fake_<name>.py` ends with its `FAKE`,
a `Fake`; `testing.registry.FAKES` is the kit's registry of them, built by `register`,
which checks each record whole and that the records cover exactly the rows of the core
registry (`toolnexus.core.wire.DIALECTS`): a new dialect without its fake fails at
import. The fake provider, its replies, the validators, the profiles and the transcript
strategies read these records and name no dialect.

The fields:
- `name`: the core registry row it fakes; `path`: the end of its request path (the
  fake provider's `PATHS`); `serves(path)`: whether a request path is this dialect's
  (None: the path ends with `path`); `stream_path(path)`: whether a request's URL asks
  for a stream (None: only its body's `"stream": true` does);
- answers: `response(reply, model, seq)` the whole answer body; `stream(reply, body,
  model, seq)` its SSE events (bytes each, with the reply's `stream_error`);
  `refusal(problems)` the 400 body of an invalid request, in the provider's envelope;
- checks: `rules(body)` the documented rules no schema says (problems, one string each);
  `spec` (shipped document, request body schema); `spec_validator()` and
  `spec_problems(body, limit)` for a spec read its own way (None: an OpenAPI document,
  read by `testing.validators`; both or neither);
- server state (both or neither): `expand(body, kept)` the request as the server reads
  it and the 400 of state it does not keep; `keep(kept, body, reply, model, seq)`;
- profiles: `profiles`, the named servers that speak it (name -> profile fields, see
  `testing.profiles`); the first is its plain provider's, a fake with none answers in
  the first row's. `stream_failed(stream, cut, type, message)`: a failing stream in the
  dialect's own events (None: the profile's error frame and stream quirks apply);
  `index_calls(stream, whole)`: its stream with every tool call at index 0 (a
  profile's `tool_index` quirk; None: its streams have no such index);
- `flourishes`: the dialect's own shapes in drawn transcripts (None: transcripts are
  neutral items written by its core record, `view.write`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["Fake", "Flourishes", "register", "OPTIONAL", "GROUPS"]

Fn = Callable[..., Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Flourishes:
    """A dialect's own shapes in drawn transcripts (`testing.strategies`).

    `calls(draw, ids, kit)` the messages of one tool round calling `ids`; `answer(draw,
    n, kit)` its own final answer of turn `n`, or None for the plain one; `block` the
    type of a user text block (None: text only); `prefix` its call ids'; `system`
    whether a system message may lead. `kit` holds hypothesis' `st` and the neutral
    strategies `text`, `names`, `args`.
    """

    calls: Fn
    answer: Fn | None = None
    block: str | None = None
    prefix: str = "call"
    system: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Fake:
    """One dialect's fake: what the test kit serves, checks and draws in it."""

    name: str
    path: str
    response: Fn
    stream: Fn
    refusal: Fn
    rules: Fn
    spec: tuple[str, str]
    profiles: Mapping[str, Mapping] = field(default_factory=lambda: MappingProxyType({}))
    serves: Fn | None = None
    stream_path: Fn | None = None
    spec_validator: Fn | None = None
    spec_problems: Fn | None = None
    expand: Fn | None = None
    keep: Fn | None = None
    stream_failed: Fn | None = None
    index_calls: Fn | None = None
    flourishes: Flourishes | None = None


# Fields a fake may leave None, and the ones that come together or not at all.
OPTIONAL = frozenset({"serves", "stream_path", "spec_validator", "spec_problems", "expand",
                      "keep", "stream_failed", "index_calls", "flourishes"})  # fmt: skip
GROUPS = (frozenset({"spec_validator", "spec_problems"}), frozenset({"expand", "keep"}))


def _field_ok(name: str, value: Any) -> bool:
    """Return whether one field of a fake holds what it should."""
    if value is None:
        return name in OPTIONAL
    if name in ("name", "path"):
        return isinstance(value, str) and bool(value) and value == value.strip()
    if name == "spec":
        return (
            isinstance(value, tuple)
            and len(value) == 2
            and all(isinstance(v, str) and v for v in value)
        )
    if name == "profiles":
        return isinstance(value, Mapping) and all(
            isinstance(k, str) and isinstance(v, Mapping) for k, v in value.items()
        )
    if name == "flourishes":
        return isinstance(value, Flourishes) and callable(value.calls)
    return callable(value)


def _check(f: Any) -> None:
    """Raise TypeError naming what is wrong with a record that is not a whole fake."""
    if not isinstance(f, Fake):
        raise TypeError(f"a dialect's fake is a Fake record, got {type(f).__name__}")
    for each in fields(f):
        value = getattr(f, each.name)
        if not _field_ok(each.name, value):
            raise TypeError(f"fake {f.name!r}: {each.name} is {value!r:.80}")
    for group in GROUPS:
        given = {n for n in group if getattr(f, n) is not None}
        if given and given != group:
            raise TypeError(f"fake {f.name!r}: {sorted(group)} come together, got {sorted(given)}")


def register(rows: Mapping[str, Any], *fakes: Fake) -> Mapping[str, Fake]:
    """Return the kit's registry: `fakes` by name in the order of `rows` (the core
    registry), each checked whole; TypeError unless they cover exactly its rows."""
    for f in fakes:
        _check(f)
    names = [f.name for f in fakes]
    if len(set(names)) != len(names) or set(names) != set(rows):
        raise TypeError(
            f"the kit's fakes {names} must cover the dialect registry's rows {list(rows)}, "
            "once each: a dialect needs its testing/fake_<name>.py"
        )
    paths = [f.path for f in fakes]
    if len(set(paths)) != len(paths):
        raise TypeError(f"the fakes' request paths must differ: {paths}")
    by_name = {f.name: f for f in fakes}
    return MappingProxyType({name: by_name[name] for name in rows})

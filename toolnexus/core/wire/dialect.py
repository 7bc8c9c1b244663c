"""What a dialect is: one declared record of every function and fact the library reads.

Rule 1: this module imports no dialect. Each dialect module ends with its `DIALECT`, a
`Dialect`; `core.wire.DIALECTS` is the registry of them, built by `register`, which
checks each record whole. Everything per dialect elsewhere (key variables, OpenTelemetry
names, hosts, CLI choices, the fake provider's paths, the kit's strategies) is read off
these records, so a new dialect is a codec and one registry row.

The groups of fields:
- facts: `name`, `key_env`, `provider` (OpenTelemetry's `gen_ai.provider.name`), `hosts`
  (a well-known host -> provider name), `owned_params` (body fields `request_params`
  may not name);
- the request: `url`, `headers`, `body`, `stream_body`, `user_message`,
  `user_message_parts`, `later_params`, `with_output`, `cache_body`, `cache_tools`,
  `tool_entry`, `encode_tools`, `omissions`, `omit`, `refused_part`;
- the answer: `parse_response`, `stream_start`, `stream_event`, `stream_turn`,
  `tool_result_messages`, `replayable`, `valid_call_id`;
- parts: `to_part` (a neutral part in the dialect's content), `from_part` (back);
- the neutral view (see `view.py`): `owns` (a message only this dialect writes; None for
  the role-and-content shape the chat dialects share), `read` (a message's neutral
  items), `write` (neutral items as messages), `native` (a message right as it is);
- the tool-call algebra (see `core.transcript`): `call_ids`, `result_ids`, `gathers`
  (a turn's results share one message), `close` (results for calls left open),
  `keep_results`;
- optional, None where the dialect has none: `model_url` (a URL naming the model),
  `server_state_body`, `stored`, `forgotten` (state kept by the server; all or none).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

__all__ = ["Dialect", "register", "OPTIONAL", "GROUPS"]

Fn = Callable[..., Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Dialect:
    """One wire dialect: its facts and every function the library reads of it."""

    name: str
    key_env: tuple[str, ...]
    provider: str
    owned_params: tuple[str, ...]
    url: Fn
    headers: Fn
    body: Fn
    stream_body: Fn
    user_message: Fn
    user_message_parts: Fn
    later_params: Fn
    with_output: Fn
    cache_body: Fn
    cache_tools: Fn
    tool_entry: Fn
    encode_tools: Fn
    omissions: Fn
    omit: Fn
    refused_part: Fn
    parse_response: Fn
    stream_start: Fn
    stream_event: Fn
    stream_turn: Fn
    tool_result_messages: Fn
    replayable: Fn
    valid_call_id: Fn
    to_part: Fn
    from_part: Fn
    owns: Fn | None
    read: Fn
    write: Fn
    native: Fn
    call_ids: Fn
    result_ids: Fn
    gathers: Fn
    close: Fn
    keep_results: Fn
    hosts: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))
    model_url: Fn | None = None
    server_state_body: Fn | None = None
    stored: Fn | None = None
    forgotten: Fn | None = None


# Fields a dialect may leave None, and the ones that come together or not at all.
OPTIONAL = frozenset({"owns", "model_url", "server_state_body", "stored", "forgotten"})
GROUPS = (frozenset({"server_state_body", "stored", "forgotten"}),)
_FACTS = {"name", "provider"}
_NAMES = {"key_env", "owned_params"}


def _check(d: Any) -> None:
    """Raise TypeError naming what is wrong with a record that is not a whole dialect."""
    if not isinstance(d, Dialect):
        raise TypeError(f"a dialect is a Dialect record, got {type(d).__name__}")
    for f in fields(d):
        value = getattr(d, f.name)
        if f.name in _FACTS:
            ok = isinstance(value, str) and bool(value) and value == value.strip()
        elif f.name in _NAMES:
            ok = isinstance(value, tuple) and all(isinstance(v, str) for v in value)
        elif f.name == "hosts":
            ok = isinstance(value, Mapping) and all(
                isinstance(k, str) and isinstance(v, str) for k, v in value.items()
            )
        else:
            ok = callable(value) or (value is None and f.name in OPTIONAL)
        if not ok:
            raise TypeError(f"dialect {d.name!r}: {f.name} is {value!r:.80}")
    for group in GROUPS:
        given = {n for n in group if getattr(d, n) is not None}
        if given and given != group:
            raise TypeError(
                f"dialect {d.name!r}: {sorted(group)} come together, got {sorted(given)}"
            )


def register(*dialects: Dialect) -> Mapping[str, Dialect]:
    """Return the registry of `dialects` by name, each checked whole (TypeError if not),
    in the order given: the first is the default."""
    for d in dialects:
        _check(d)
    names = [d.name for d in dialects]
    if len(set(names)) != len(names) or not names:
        raise TypeError(f"dialect names must be unique and at least one: {names}")
    return MappingProxyType({d.name: d for d in dialects})

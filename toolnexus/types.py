"""Shapes of toolnexus values for type checkers: RunResult, stream events, tool results, stores.

Values are immutable maps at run time (pyrsistent); these TypedDicts describe their keys
so `r["text"]` is a `str` to mypy and a typo in a key is an error. A store is the one
shape you write yourself: a dict of two functions, optionally more.

    from toolnexus.types import Store

    def my_store() -> Store:
        data: dict = {}
        return {"get": data.get, "save": data.__setitem__}
"""

# No `from __future__ import annotations`: NotRequired must be seen when each class is made,
# so `Usage.__required_keys__` (runtime introspection) holds only the three counts.
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, NotRequired, TypeAlias, TypedDict

__all__ = [
    "DoneEvent",
    "Message",
    "PendingEvent",
    "RefusalEvent",
    "RunResult",
    "Store",
    "StreamEvent",
    "TextEvent",
    "ThinkingEvent",
    "ToolCall",
    "ToolCallEvent",
    "ToolResult",
    "ToolResultEvent",
    "Transcript",
    "Usage",
    "UsageEvent",
]

Message: TypeAlias = Mapping[str, Any]
"""One message in the provider's own shape (openai or anthropic)."""

Transcript: TypeAlias = Sequence[Message]
"""A conversation: a pvector of pmaps from toolnexus, any sequence of mappings from you."""


class Usage(TypedDict):
    """Token counts, summed over a run's turns; the details only where a provider reports
    them (`prompt_tokens` counts every input token, cached ones included)."""

    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    cache_read_tokens: NotRequired[int]
    cache_write_tokens: NotRequired[int]
    reasoning_tokens: NotRequired[int]


class ToolResult(TypedDict):
    """What a tool returns (or what its return value is turned into)."""

    output: Any
    is_error: bool
    metadata: Mapping[str, Any]


class ToolCall(TypedDict):
    """One tool call of a run, with its result."""

    id: str
    name: str
    args: Mapping[str, Any]
    output: Any
    is_error: bool
    metadata: Mapping[str, Any]


class RunResult(TypedDict):
    """What `run`, `ask` and `arun` return (and a stream's `done` event carries)."""

    text: str
    messages: Transcript
    tool_calls: Sequence[ToolCall]
    tool_call_count: int
    turns: int
    usage: Usage
    model: str
    status: Literal["done", "pending", "incomplete"]
    limit: Literal["max_turns", "max_tokens", "content_filter"] | None
    pending: Any
    output: Any  # the answer parsed by output_schema (None without one)
    stop_reason: str | None  # the last model turn's own value, verbatim
    refusal: str | None  # a refusal's text, else None
    served_by: Mapping[str, Any]  # {style, model, base_url} of the client of the last turn


class TextEvent(TypedDict):
    """A piece of the answer's text, as it arrives."""

    type: Literal["text"]
    delta: str


class ThinkingEvent(TypedDict):
    """A piece of the model's thinking (Anthropic thinking, `reasoning_content`): not text."""

    type: Literal["thinking"]
    delta: str


class RefusalEvent(TypedDict):
    """A piece of a refusal's text (OpenAI `delta.refusal`)."""

    type: Literal["refusal"]
    delta: str


class ToolCallEvent(TypedDict):
    """The model asked for a tool."""

    type: Literal["tool_call"]
    id: str
    name: str
    args: Mapping[str, Any]


class ToolResultEvent(TypedDict):
    """A tool finished."""

    type: Literal["tool_result"]
    id: str
    name: str
    output: Any
    is_error: bool


class UsageEvent(TypedDict):
    """One turn's token counts."""

    type: Literal["usage"]
    usage: Usage


class PendingEvent(TypedDict):
    """A tool suspended the run, waiting for the host's answer to `request`."""

    type: Literal["pending"]
    request: Any


class DoneEvent(TypedDict):
    """The last event: the run's result (what `run` returns)."""

    type: Literal["done"]
    result: RunResult


StreamEvent: TypeAlias = (
    TextEvent
    | ThinkingEvent
    | RefusalEvent
    | ToolCallEvent
    | ToolResultEvent
    | UsageEvent
    | PendingEvent
    | DoneEvent
)
"""Any event `stream` / `astream` yields; narrow it on `event["type"]`."""


class Store(TypedDict):
    """A store: `{"get", "save"}` functions, and optionally `delete`, `ids`, `desc`, `lock`."""

    get: Callable[[str], Transcript | None]
    save: Callable[[str, Transcript], Any]
    delete: NotRequired[Callable[[str], Any]]
    ids: NotRequired[Callable[[], Any]]
    desc: NotRequired[str]
    lock: NotRequired[Callable[[str], Any]]
    # Its fused calls, declared as data: {name: Fused(call, needs, where)} (see
    # toolnexus.store.fused); a decorator built with derive drops what it invalidates.
    fused: NotRequired[Mapping[str, Any]]

"""`python -m toolnexus chat | show | ids`: talk to a real endpoint; read back what a store keeps.

    python -m toolnexus chat --base-url https://api.openai.com/v1 --model gpt-4.1-mini --id work
    python -m toolnexus show work
    python -m toolnexus ids

The key comes from the environment (OPENAI_API_KEY / OPENROUTER_API_KEY, or
ANTHROPIC_API_KEY with --style anthropic). Failures are one line on stderr.
"""

from __future__ import annotations

import argparse
import inspect
import json
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

STORE_HELP = "memory | file:DIR | sqlite:PATH (default: file store under the user data dir)"
TOOL_OUTPUT_CHARS = 200


class CommandError(Exception):
    """A mistake the user can fix (a bad --store, an unknown id): printed as one line."""


# ---- stores ---------------------------------------------------------------------


def default_store_spec() -> str:
    """Return the default --store: a file store under the user's data directory."""
    base = os.environ.get("XDG_DATA_HOME") or Path.home() / ".local" / "share"
    return f"file:{Path(base) / 'toolnexus' / 'chat'}"


def _sqlite_store() -> Callable:
    try:
        from toolnexus.store import sqlite_store  # once the store package exports it
    except ImportError:
        try:
            from toolnexus.store.sqlite import sqlite_store
        except ImportError:
            raise CommandError(
                "--store sqlite:PATH needs toolnexus.store.sqlite_store, "
                "which this installation does not have; use file:DIR"
            ) from None
    return sqlite_store


def open_store(spec: str | None) -> dict:
    """Return the store a --store spec names: memory, file:DIR or sqlite:PATH."""
    spec = spec or default_store_spec()
    kind, _, where = spec.partition(":")
    if kind == "memory" and not where:
        from toolnexus.store import in_memory_store

        return in_memory_store()
    if kind == "file" and where:
        from toolnexus.store import file_store

        return file_store(Path(where).expanduser())
    if kind == "sqlite" and where:
        return _sqlite_store()(Path(where).expanduser())
    raise CommandError(f"unknown --store {spec!r}: use memory, file:DIR or sqlite:PATH")


def _desc(store: Mapping) -> str:
    return store.get("desc") or "the store"


# ---- rendering (pure) -------------------------------------------------------------


def _json(value: Any) -> str:
    from pyrsistent import thaw

    return json.dumps(thaw(value), ensure_ascii=False, default=str, separators=(", ", ": "))


def _short(text: str, limit: int = TOOL_OUTPUT_CHARS) -> str:
    one_line = " ".join(str(text).split())
    return one_line if len(one_line) <= limit else one_line[:limit] + "..."


def tool_call_line(name: str, args: Any) -> str:
    """Return how a tool call is shown: `[tool] name {"arg": 1}`."""
    return f"[tool] {name} {_json(args if args is not None else {})}"


def tool_result_line(output: Any, is_error: bool = False) -> str:
    """Return how a tool result is shown (one line, shortened)."""
    return f"  {'error' if is_error else '->'} {_short(output)}"


def _text_of(content: Any) -> str:
    """Return the text of message content: a string, or the text of its parts/blocks."""
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    texts = []
    for part in content:
        if isinstance(part, Mapping) and isinstance(part.get("text"), str):
            texts.append(part["text"])
        elif isinstance(part, Mapping) and part.get("type") not in ("tool_use", "tool_result"):
            texts.append(f"[{part.get('type', 'part')}]")
    return "\n".join(texts)


def _lines_of(m: Mapping, names: dict) -> list[str]:
    """Return the readable lines of one message (either dialect); `names` maps call ids to tools."""
    role = m.get("role", "?")
    content = m.get("content")
    lines = []
    if role == "tool":  # openai tool result
        name = names.get(m.get("tool_call_id"), m.get("tool_call_id", "?"))
        return [f"tool {name}: {_text_of(content)}"]
    text = _text_of(content)
    if text:
        lines.append(f"{role}: {text}")
    for call in m.get("tool_calls") or ():  # openai assistant calls
        fn = call.get("function", {})
        names[call.get("id")] = fn.get("name", "?")
        args = fn.get("arguments", "")
        lines.append(f"{role} -> {fn.get('name', '?')}({args})")
    blocks = () if content is None or isinstance(content, str) else content
    for block in blocks:
        if not isinstance(block, Mapping):
            continue
        if block.get("type") == "tool_use":  # anthropic call
            names[block.get("id")] = block.get("name", "?")
            lines.append(f"{role} -> {block.get('name', '?')}({_json(block.get('input', {}))})")
        elif block.get("type") == "tool_result":  # anthropic result
            name = names.get(block.get("tool_use_id"), block.get("tool_use_id", "?"))
            label = "tool error" if block.get("is_error") else "tool"
            lines.append(f"{label} {name}: {_text_of(block.get('content'))}")
    return lines or [f"{role}:"]


def render_transcript(messages: Iterable[Mapping], system: str | None = None) -> str:
    """Return a transcript (openai or anthropic shape) as readable text, one entry per line."""
    names: dict = {}
    lines = [f"system: {system}"] if system else []
    for m in messages:
        lines.extend(_lines_of(m, names))
    # continuation lines are indented, so each entry stays visibly one entry
    return "\n".join(line.replace("\n", "\n  ") for line in lines)


# ---- the REPL ---------------------------------------------------------------------


def _input_lines(stdin: TextIO, interactive: bool) -> Iterator[str]:
    """Yield the user's lines: with a prompt and line editing on a terminal, plain when piped."""
    if interactive:
        while True:
            try:
                yield input("you> ")
            except EOFError:
                print(file=sys.stdout)
                return
    else:
        for line in stdin:
            yield line.rstrip("\r\n")


def _streamer() -> Callable | None:
    """Return toolnexus.stream when this installation has it (the REPL then prints as it comes)."""
    import toolnexus

    return getattr(toolnexus, "stream", None)


def _call_kwargs(fn: Callable, tk: Any, history: Any, cid: str | None) -> dict:
    """Return keyword arguments for run/stream: the id when remembering, else the history."""
    params = inspect.signature(fn).parameters
    kw: dict = {"toolkit": tk}
    if cid is not None:
        kw["conversation_id" if "conversation_id" in params else "id"] = cid
    elif "history" in params:
        kw["history"] = history
    return kw


def _turn_by_run(client: Any, prompt: str, kw: dict, out: TextIO):
    from toolnexus import run

    r = run(client, prompt, **kw)
    for call in r["tool_calls"]:
        print(tool_call_line(call["name"], call["args"]), file=out)
        print(tool_result_line(call["output"], call["is_error"]), file=out)
    print(r["text"], file=out, flush=True)
    return r


def show_events(events: Iterable[Mapping], out: TextIO):
    """Print stream events as they come (text deltas inline, tool calls on their own lines).

    Return the RunResult of the "done" event (None if the stream had none).
    """
    result, mid_line = None, False
    for ev in events:
        kind = ev.get("type")
        if kind == "text" and ev.get("delta"):
            out.write(ev["delta"])
            out.flush()
            mid_line = not ev["delta"].endswith("\n")
        elif kind in ("tool_call", "tool_result"):
            if mid_line:
                out.write("\n")
                mid_line = False
            line = (
                tool_call_line(ev.get("name", "?"), ev.get("args"))
                if kind == "tool_call"
                else tool_result_line(ev.get("output", ""), ev.get("is_error", False))
            )
            print(line, file=out, flush=True)
        elif kind == "done":
            result = ev.get("result")
    print(file=out, flush=True)
    return result


def _turn_by_stream(stream: Callable, client: Any, prompt: str, kw: dict, out: TextIO):
    return show_events(stream(client, prompt, **kw), out)


def chat(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """Run the chat REPL: one turn per input line until EOF, Ctrl-C, /exit or /quit."""
    from toolnexus import create_client, run, toolkit

    stdin, out = stdin or sys.stdin, out or sys.stdout
    store = open_store(args.store) if args.id else None
    options = {"store": store} if store is not None else {}
    client = create_client(base_url=args.base_url, model=args.model, style=args.style,
                           system_prompt=args.system or "", **options)  # fmt: skip
    tk = toolkit(skills_dir=args.skills) if args.skills else None
    stream = _streamer()
    history: Any = ()
    interactive = stdin is sys.stdin and stdin.isatty()
    try:
        for line in _input_lines(stdin, interactive):
            prompt = line.strip()
            if not prompt:
                continue
            if prompt in ("/exit", "/quit"):
                break
            kw = _call_kwargs(stream or run, tk, history, args.id)
            r = (
                _turn_by_stream(stream, client, prompt, kw, out)
                if stream
                else _turn_by_run(client, prompt, kw, out)
            )
            if r is not None:
                history = r["messages"]
    except KeyboardInterrupt:  # Ctrl-C ends the session like Ctrl-D: no traceback
        print(file=out)
    return 0


def show(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print a stored conversation readably, its turns numbered (with the `fork --at` of each)."""
    from .fork import render_turns

    store = open_store(args.store)
    transcript = store["get"](args.id)
    if not transcript:
        raise CommandError(f"no conversation {args.id!r} in {_desc(store)}")
    print(render_turns(transcript), file=out or sys.stdout)
    return 0


def ids(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the ids of the conversations in a store, one per line."""
    store = open_store(args.store)
    if not callable(store.get("ids")):
        raise CommandError(f"{_desc(store)} cannot list its conversations")
    for i in store["ids"]():
        print(i, file=out or sys.stdout)
    return 0


# ---- errors and registration ---------------------------------------------------------


def one_line_error(e: BaseException) -> str:
    """Return the single line a failure is reported as (a hint added for the usual causes)."""
    from toolnexus import ProviderError

    text = " ".join(str(e).split())
    if isinstance(e, ProviderError) and e.status in (401, 403):
        text += " (check the API key in the environment)"
    elif isinstance(e, ProviderError) and e.status == 404:
        text += " (check --base-url and --model)"
    return f"toolnexus: error: {text}"


def _guarded(fn: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """Wrap a command so expected failures print one line on stderr and exit 1."""
    from toolnexus import ProviderError
    from toolnexus.store import StoreCorruptError, StoreUnavailableError

    expected = (ProviderError, CommandError, StoreCorruptError, StoreUnavailableError, ValueError)

    def run(args: argparse.Namespace) -> int:
        try:
            return fn(args)
        except (*expected, OSError) as e:  # OSError: a directory we cannot create or read
            print(one_line_error(e), file=sys.stderr)
            return 1

    return run


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `chat`, `show` and `ids` commands."""
    c = sub.add_parser("chat", help="chat with an OpenAI- or Anthropic-style endpoint")
    c.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1")
    c.add_argument("--model", required=True)
    c.add_argument("--style", choices=("openai", "anthropic"), default="openai")
    c.add_argument("--id", help="remember the conversation under this id (in --store)")
    c.add_argument("--store", help=STORE_HELP)
    c.add_argument("--system", help="the system prompt")
    c.add_argument("--skills", type=Path, help="a directory of skills (**/SKILL.md)")
    c.set_defaults(func=_guarded(chat))

    s = sub.add_parser("show", help="print a stored conversation")
    s.add_argument("id")
    s.add_argument("--store", help=STORE_HELP)
    s.set_defaults(func=_guarded(show))

    i = sub.add_parser("ids", help="list the conversations in a store")
    i.add_argument("--store", help=STORE_HELP)
    i.set_defaults(func=_guarded(ids))

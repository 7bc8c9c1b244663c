"""`python -m toolnexus chat | show | ids`: talk to a real endpoint; read back what a store keeps.

    python -m toolnexus chat --base-url https://api.openai.com/v1 --model gpt-4.1-mini --id work
    python -m toolnexus show work
    python -m toolnexus ids

The key comes from the environment (OPENAI_API_KEY / OPENROUTER_API_KEY, or
ANTHROPIC_API_KEY with --style anthropic). A failed answer is one line on stderr and the
session goes on; lines starting with "/" are commands for the chat itself (/help), never
sent to the model. With --id, the conversation lives in --store, every exchange is
recorded in a message log next to it (`history search` finds it), and each exchange
runs under a lock (--lock) so two chats on one id queue instead of losing a turn.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TextIO

from ..core.wire import DEFAULT_STYLE, DIALECTS
from .places import (
    STORE_HELP,
    CommandError,
    closing_places,
    describe,
    lock_for,
    log_for,
    open_store,
)

TOOL_OUTPUT_CHARS = 200
SLASH_HELP = """commands (never sent to the model):
  /help            this list
  /reset           forget this conversation and start afresh
  /history [TEXT]  search the message log of this conversation
  /show            print the conversation so far
  /fork NEW        copy this conversation to id NEW and continue there
  /model [NAME]    show the model, or switch to NAME
  /quit            leave (also /exit, Ctrl-D); Ctrl-C stops an answer
  //text           send "/text" to the model"""
QUIT = object()  # what a slash command returns to end the session
CANCELLED = "[cancelled]"


def _desc(store: Mapping) -> str:
    return describe(store)


# ---- rendering (pure) -------------------------------------------------------------


def _json(value: Any) -> str:
    from ..core.frozen import thaw

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


def render_transcript(messages: Iterable[Mapping], system: str | None = None) -> str:
    """Return a transcript (openai or anthropic shape) as readable text, one entry per line."""
    from toolnexus.display import text_of_rows, transcript_rows

    return text_of_rows(transcript_rows(messages, system))


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


def _readline_history(interactive: bool) -> Callable[[], None]:
    """Load the line-editing history on a terminal; return the function that saves it."""
    if not interactive:
        return lambda: None
    try:
        import readline
    except ImportError:  # not on every platform (Windows): the chat works without it
        return lambda: None
    from .places import data_dir

    path = data_dir() / "chat_history"
    try:
        readline.read_history_file(path)
    except OSError:  # none yet
        pass

    def save() -> None:
        try:  # only where the data directory exists: no directory made for it
            readline.set_history_length(1000)
            readline.write_history_file(path)
        except OSError:
            pass

    return save


def parse_slash(line: str) -> tuple[str, str] | None:
    """Return (command, argument) for a chat command line, or None for text for the model.

    >>> parse_slash("/fork  work-2 "), parse_slash("hello"), parse_slash("//etc")
    (('fork', 'work-2'), None, None)
    """
    if not line.startswith("/") or line.startswith("//"):
        return None
    name, _, arg = line[1:].partition(" ")
    return name.strip().lower(), arg.strip()


def show_events(events: Iterable[Mapping], out: TextIO, done: list | None = None):
    """Print stream events as they come (text deltas inline, tool calls on their own lines).

    Return the RunResult of the "done" event (None if the stream had none); it is also
    appended to `done` as soon as it arrives (a Ctrl-C after it cancels nothing).
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
            if done is not None:
                done.append(result)
    print(file=out, flush=True)
    return result


class Session(dict):
    """The chat's state: client, model, id, history (without an id), store, log, options."""


def _client(s: Mapping, model: str) -> Any:
    from toolnexus import create_client

    a = s["args"]
    extra = {k: s[k] for k in ("store", "lock") if s.get(k) is not None}
    if s.get("log") is not None:
        extra["message_log"] = s["log"]
    return create_client(base_url=a.base_url, model=model, style=a.style,
                         system_prompt=a.system or "", retries=a.retries, **extra)  # fmt: skip


def _turn(s: Mapping, prompt: str, out: TextIO) -> Session:
    """Run one exchange, printing it as it streams; return the new session.

    Ctrl-C stops this answer only: the stream is closed, so nothing of the exchange is
    saved and the conversation lock is released; the session goes on. A Ctrl-C after the
    answer ended (it is saved by then) cancels nothing: the answer stands.
    """
    from toolnexus import stream

    kw: dict = {"toolkit": s["toolkit"]}
    if s["id"] is not None:
        kw["conversation_id"] = s["id"]
    else:
        kw["history"] = s["history"]
    events = stream(s["client"], prompt, **kw)
    done: list = []
    try:
        result = show_events(events, out, done)
    except KeyboardInterrupt:
        events.close()
        if not done:
            print(f"\n{CANCELLED}", file=out, flush=True)
            return Session(s)
        result = done[0]
    finally:
        events.close()
    if result is not None and s["id"] is None:
        return Session(s, history=result["messages"])
    return Session(s)


def _transcript(s: Mapping) -> Any:
    return s["store"]["get"](s["id"]) if s["id"] is not None else s["history"]


def _slash(s: Session, name: str, arg: str, out: TextIO) -> Session | object:
    """Run one chat command; return the new session (or QUIT). Nothing reaches the model."""
    if name in ("quit", "exit"):
        return QUIT
    if name == "help":
        print(SLASH_HELP, file=out)
    elif name == "reset":
        if s["id"] is not None:
            store = s["store"]
            store["delete"](s["id"]) if callable(store.get("delete")) else store["save"](
                s["id"], []
            )
        print("conversation cleared", file=out)
        return Session(s, history=())
    elif name == "show":
        print(render_transcript(_transcript(s) or ()) or "(nothing yet)", file=out)
    elif name == "history":
        _history(s, arg, out)
    elif name == "fork":
        return _fork(s, arg, out)
    elif name == "model":
        if not arg:
            print(f"model: {s['model']}", file=out)
        else:
            print(f"model: {arg}", file=out)
            return Session(s, model=arg, client=_client(s, arg))
    else:
        print(f"unknown command /{name}; /help lists them (//text sends /text)", file=out)
    return s


def _history(s: Mapping, text: str, out: TextIO) -> None:
    from toolnexus.display import log_rows, text_of_rows

    if s.get("log") is None:
        print("no message log (--log none)", file=out)
        return
    found = s["log"]["query"](contains=text or None, conversation_id=s["id"], limit=50)
    print(text_of_rows(log_rows(found)) or "(no messages found)", file=out)


def _fork(s: Session, new: str, out: TextIO) -> Session:
    """Copy the conversation to id `new` (get + save) and continue there."""
    if not new:
        print("usage: /fork NEW", file=out)
        return s
    if s["store"] is None:
        print("/fork needs a stored conversation: start the chat with --id", file=out)
        return s
    store = s["store"]
    if store["get"](new):
        print(f"conversation {new!r} already exists; pick another id", file=out)
        return s
    store["save"](new, _transcript(s) or [])
    print(f"forked {s['id']!r} to {new!r}; now in {new!r}", file=out)
    return Session(s, id=new)


def _start(args: argparse.Namespace) -> Session:
    """Return the first session of a chat: store, log and lock from the options."""
    from toolnexus import toolkit

    store = open_store(args.store) if args.id else None
    log = log_for(args.log, args.store) if args.id else None
    lock = lock_for(args.lock, args.store, store) if store is not None else None
    tk = toolkit(skills_dir=args.skills) if args.skills else None
    s = Session(args=args, store=store, log=log, lock=lock, id=args.id, history=(),
                model=args.model, toolkit=tk)  # fmt: skip
    return Session(s, client=_client(s, args.model))


def chat(args: argparse.Namespace, stdin: TextIO | None = None, out: TextIO | None = None) -> int:
    """Run the chat REPL: one exchange per line until EOF, /quit, or Ctrl-C at the prompt.

    Return 0, or 1 when an exchange failed (each failure is printed and the chat goes on).
    """
    stdin, out = stdin or sys.stdin, out or sys.stdout
    s = _start(args)
    interactive = stdin is sys.stdin and stdin.isatty()
    save_history = _readline_history(interactive)
    failed = False
    try:
        for line in _input_lines(stdin, interactive):
            prompt = line.strip()
            if not prompt:
                continue
            command = parse_slash(prompt)
            try:
                if command is None:
                    s = _turn(s, prompt[1:] if prompt.startswith("//") else prompt, out)
                    continue
                result = _slash(s, *command, out)
            except Exception as e:  # a failed answer or command is shown; the chat goes on
                print(one_line_error(e), file=sys.stderr, flush=True)
                failed = True
                continue
            if result is QUIT:
                break
            s = result  # type: ignore[assignment]
    except KeyboardInterrupt:  # Ctrl-C at the prompt ends the session like Ctrl-D
        print(file=out)
    finally:
        save_history()
        if s.get("log") is not None and callable(s["log"].get("close")):
            s["log"]["close"]()
    return 1 if failed else 0


def ids(args: argparse.Namespace, out: TextIO | None = None) -> int:
    """Print the ids of the conversations in a store, one per line (creating nothing)."""
    store = open_store(args.store, read_only=True)
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
    from toolnexus.core.extras import MissingExtraError
    from toolnexus.store import StoreCorruptError, StoreUnavailableError

    expected = (ProviderError, CommandError, StoreCorruptError, StoreUnavailableError, ValueError,
                MissingExtraError)  # fmt: skip

    def run(args: argparse.Namespace) -> int:
        try:
            with closing_places():  # what the command opened is closed when it ends
                return fn(args)
        except BrokenPipeError:
            raise  # the reader went away (`| head -1`): main ends quietly
        except (*expected, OSError) as e:  # OSError: a directory we cannot create or read
            print(one_line_error(e), file=sys.stderr)
            return 1

    return run


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `chat` and `ids` commands."""
    c = sub.add_parser("chat", help="chat with a chat completions, Anthropic or Responses endpoint")
    c.add_argument("--base-url", required=True, help="e.g. https://api.openai.com/v1")
    c.add_argument("--model", required=True)
    c.add_argument("--style", choices=tuple(DIALECTS), default=DEFAULT_STYLE,
                   help="the wire dialect: " + ", ".join(DIALECTS))  # fmt: skip
    c.add_argument("--id", help="remember the conversation under this id (in --store)")
    c.add_argument("--store", help=STORE_HELP)
    c.add_argument("--system", help="the system prompt")
    c.add_argument("--skills", type=Path, help="a directory of skills (**/SKILL.md)")
    c.add_argument(
        "--lock",
        default="auto",
        help="auto (the store's own lock, else a file lock beside a file or SQLite store) "
        "| local (this process only) | file:DIR",
    )
    c.add_argument(
        "--log",
        help="message-log file (SQLite), or none (default with --id: history.db next to the "
        "store; the default store's is `history search`'s default)",
    )
    c.add_argument("--retries", type=int, default=2, help="retries of a failed request (2)")
    c.set_defaults(func=_guarded(chat))

    i = sub.add_parser("ids", help="list the conversations in a store")
    i.add_argument("--store", help=STORE_HELP)
    i.set_defaults(func=_guarded(ids))

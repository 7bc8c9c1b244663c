"""The chat, show and ids commands, driven with piped stdin against the loopback fake provider."""

import io
import json
import os
import signal
import subprocess
import sys

import pytest
from hypothesis import given
from hypothesis import strategies as st

import toolnexus
from toolnexus.cli import main
from toolnexus.commands.chat import render_transcript, show_events
from toolnexus.core.wire import DIALECTS as _REGISTRY
from toolnexus.testing import fake_provider, text_reply, tool_calls_reply

ALL = sorted(_REGISTRY)  # every row of the dialect registry

KEY = "sk-chat-test-secret-0042"


def cli(*argv, stdin="", env=None, timeout=60):
    """Run `python -m toolnexus ARGV` in a child process with piped stdin."""
    full_env = {**os.environ, "OPENAI_API_KEY": KEY, "ANTHROPIC_API_KEY": KEY, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", *map(str, argv)],
        input=stdin,
        capture_output=True,
        text=True,
        env=full_env,
        timeout=timeout,
    )


def in_process(monkeypatch, capsys, *argv, stdin=""):
    """Run the same command in this process (faster), with `stdin` as its standard input."""
    monkeypatch.setattr(sys, "stdin", io.StringIO(stdin))
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


def write_skill(root, name, description, body):
    d = root / name
    d.mkdir(parents=True)
    (d / "SKILL.md").write_text(f"---\nname: {name}\ndescription: {description}\n---\n{body}\n")


def test_chat_over_piped_stdin_remembers_across_invocations(tmp_path, monkeypatch, capsys):
    store = f"file:{tmp_path / 'store'}"
    skills = tmp_path / "skills"
    write_skill(skills, "greet", "Greets people.", "Say hello warmly.")
    script = [
        tool_calls_reply(("skill", {"name": "greet"})),
        text_reply("Hello, friend!"),
        text_reply("You said hi before."),
    ]
    with fake_provider(script) as fp:
        first = cli("chat", "--base-url", fp.url, "--model", "m", "--id", "c1", "--store", store,
                    "--system", "Be warm.", "--skills", skills, stdin="hi\n")  # fmt: skip
        second = cli("chat", "--base-url", fp.url, "--model", "m", "--id", "c1", "--store", store,
                     stdin="\nwhat did I say?\n")  # fmt: skip
    assert first.returncode == 0 and first.stderr == ""
    assert '[tool] skill {"name": "greet"}' in first.stdout
    assert "Hello, friend!" in first.stdout and "Traceback" not in first.stderr
    assert second.returncode == 0 and "You said hi before." in second.stdout
    sys_msg = fp.requests[0]["body"]["messages"][0]
    assert sys_msg["role"] == "system" and sys_msg["content"].startswith(
        "Be warm.\n\nSkills provide"
    )
    assert fp.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"  # the key from the env
    replayed = [m.get("content") for m in fp.requests[2]["body"]["messages"]]
    assert (
        replayed[0] == "hi" and "Hello, friend!" in replayed and replayed[-1] == "what did I say?"
    )

    code, shown, _ = in_process(monkeypatch, capsys, "show", "c1", "--store", store)
    lines = shown.splitlines()
    assert code == 0 and lines[:2] == ["-- turn 1 --", "user: hi"]
    assert 'assistant -> skill({"name": "greet"})' in lines
    assert 'tool skill: <skill_content name="greet">' in lines and "  Say hello warmly." in lines
    assert "assistant: You said hi before." in lines
    assert in_process(monkeypatch, capsys, "ids", "--store", store)[:2] == (0, "c1\n")


def test_an_unreachable_endpoint_is_one_line_without_a_traceback():
    down = cli("chat", "--base-url", "http://127.0.0.1:9/v1", "--model", "m", stdin="hi\n")
    assert down.returncode == 1 and down.stdout == ""
    assert down.stderr.startswith("toolnexus: error: POST http://127.0.0.1:9/v1/chat/completions")
    assert len(down.stderr.splitlines()) == 1


def test_a_rejected_key_is_one_line_and_never_shown(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    script = [{"status": 401, "body": {"error": {"message": f"Incorrect API key {KEY}"}}}]
    with fake_provider(script) as fp:
        code, out, err = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url,
                                    "--model", "m", stdin="hi\n")  # fmt: skip
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "401" in err and "check the API key" in err and KEY not in err


# `python -m toolnexus` as from a terminal: a process started in the background (a CI
# job, `cmd &`) inherits SIGINT ignored, and Python then never raises KeyboardInterrupt.
SIGINT_DEFAULT = (
    "import runpy, signal; signal.signal(signal.SIGINT, signal.default_int_handler); "
    "runpy.run_module('toolnexus', run_name='__main__', alter_sys=True)"
)


def test_ctrl_c_exits_cleanly(tmp_path):
    with fake_provider([text_reply("first answer")]) as fp:
        env = {**os.environ, "OPENAI_API_KEY": KEY}
        p = subprocess.Popen(
            [sys.executable, "-c", SIGINT_DEFAULT, "chat", "--base-url", fp.url, "--model", "m"],
            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=env,
        )  # fmt: skip
        p.stdin.write("hello\n")
        p.stdin.flush()
        assert p.stdout.readline() == "first answer\n"  # now it waits on stdin
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=30)
    assert p.returncode == 0 and "Traceback" not in err and err == ""


@pytest.mark.parametrize("style", ALL)
def test_unknown_model_is_one_line(monkeypatch, capsys, style):
    script = [{"status": 404, "body": {"error": {"message": "model 'nope' does not exist"}}}]
    with fake_provider(script) as fp:
        code, out, err = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url,
                                    "--model", "nope", "--style", style, stdin="hi\n")  # fmt: skip
    assert code == 1 and out == "" and len(err.splitlines()) == 1
    assert "404" in err and "does not exist" in err and "check --base-url and --model" in err


def test_anthropic_style_with_memory_and_without_an_id(monkeypatch, capsys):
    monkeypatch.setenv("ANTHROPIC_API_KEY", KEY)
    with fake_provider([text_reply("one"), text_reply("two")]) as fp:
        code, out, _ = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url,
                                  "--model", "claude", "--style", "anthropic", "--system",
                                  "Terse.", stdin="a\nb\n/exit\nnot sent\n")  # fmt: skip
    assert code == 0 and out.split() == ["one", "two"]
    assert len(fp.requests) == 2 and fp.requests[0]["path"] == "/v1/messages"
    assert fp.requests[0]["headers"]["x-api-key"] == KEY
    second = fp.requests[1]["body"]
    assert second["system"] == "Terse."
    assert [m["role"] for m in second["messages"]] == ["user", "assistant", "user"]  # in-process


def test_sqlite_store_round_trip(tmp_path, monkeypatch, capsys):
    store = f"sqlite:{tmp_path / 'chat.db'}"
    with fake_provider([text_reply("stored!")]) as fp:
        code, out, err = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url,
                                    "--model", "m", "--store", store, "--id", "s/1",
                                    stdin="keep this\n")  # fmt: skip
    if code and "needs toolnexus.store.sqlite_store" in err:
        pytest.skip("the sqlite store is not in this tree yet")
    assert (code, out) == (0, "stored!\n")
    assert in_process(monkeypatch, capsys, "show", "s/1", "--store", store)[1] == (
        "-- turn 1 --\nuser: keep this\nassistant: stored!\n"
    )
    assert in_process(monkeypatch, capsys, "ids", "--store", store)[1] == "s/1\n"


def test_store_mistakes_are_clear(tmp_path, monkeypatch, capsys):
    code, _, err = in_process(monkeypatch, capsys, "ids", "--store", "redis")
    assert code == 1 and "unknown --store 'redis'" in err
    code, _, err = in_process(monkeypatch, capsys, "show", "nobody", "--store", f"file:{tmp_path}")
    assert (
        code == 1
        and err.strip() == f"toolnexus: error: no conversation 'nobody' in file('{tmp_path}')"
    )
    assert in_process(monkeypatch, capsys, "ids", "--store", "memory")[:2] == (0, "")


def test_default_store_is_under_the_data_dir(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path))
    with fake_provider([text_reply("ok")]) as fp:
        in_process(monkeypatch, capsys, "chat", "--base-url", fp.url, "--model", "m", "--id", "d",
                   stdin="x\n")  # fmt: skip
    assert (tmp_path / "toolnexus" / "chat" / "d.json").exists()
    assert in_process(monkeypatch, capsys, "ids")[1] == "d\n"


@pytest.mark.skipif(not hasattr(toolnexus, "stream"), reason="toolnexus.stream not here yet")
def test_chat_streams_text_and_tool_calls_as_they_come(tmp_path, monkeypatch, capsys):
    write_skill(tmp_path, "greet", "Greets.", "Be nice.")
    script = [
        tool_calls_reply(("skill", {"name": "greet"})),
        text_reply("Hi there, nice to meet you"),
    ]
    with fake_provider(script) as fp:
        code, out, _ = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url, "--model", "m",
                                  "--skills", tmp_path, stdin="hi\n")  # fmt: skip
    assert code == 0 and fp.requests[0]["body"].get("stream") is True
    assert out.startswith('[tool] skill {"name": "greet"}\n')
    assert out.rstrip().endswith("Hi there, nice to meet you")


def test_stream_events_print_as_they_come():
    out = io.StringIO()
    events = [
        {"type": "text", "delta": "Let me "},
        {"type": "text", "delta": "check."},
        {"type": "tool_call", "id": "1", "name": "add", "args": {"a": 1}},
        {"type": "tool_result", "id": "1", "name": "add", "output": "2\n", "is_error": False},
        {"type": "usage", "usage": {}},
        {"type": "text", "delta": "It is 2."},
        {"type": "done", "result": {"text": "It is 2."}},
    ]
    assert show_events(events, out) == {"text": "It is 2."}
    assert out.getvalue() == 'Let me check.\n[tool] add {"a": 1}\n  -> 2\nIt is 2.\n'


# ---- rendering, both dialects -----------------------------------------------------------

words = st.text(alphabet="abcdefgh ", min_size=1, max_size=12).map(str.strip).filter(bool)


@st.composite
def openai_transcripts(draw):
    msgs = []
    for i in range(draw(st.integers(0, 4))):
        msgs.append({"role": "user", "content": draw(words)})
        if draw(st.booleans()):
            cid = f"c{i}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": None,
                    "tool_calls": [
                        {
                            "id": cid,
                            "type": "function",
                            "function": {"name": "add", "arguments": "{}"},
                        }
                    ],
                }
            )
            msgs.append({"role": "tool", "tool_call_id": cid, "content": draw(words)})
        msgs.append({"role": "assistant", "content": draw(words)})
    return msgs


@st.composite
def anthropic_transcripts(draw):
    msgs = []
    for i in range(draw(st.integers(0, 4))):
        msgs.append({"role": "user", "content": draw(words)})
        if draw(st.booleans()):
            cid = f"t{i}"
            msgs.append(
                {
                    "role": "assistant",
                    "content": [
                        {"type": "text", "text": draw(words)},
                        {"type": "tool_use", "id": cid, "name": "add", "input": {"a": 1}},
                    ],
                }
            )
            msgs.append(
                {
                    "role": "user",
                    "content": [
                        {"type": "tool_result", "tool_use_id": cid, "content": draw(words)}
                    ],
                }
            )
        msgs.append({"role": "assistant", "content": [{"type": "text", "text": draw(words)}]})
    return msgs


@given(st.one_of(openai_transcripts(), anthropic_transcripts()))
def test_render_shows_every_text_and_names_every_tool_result(messages):
    text = render_transcript(messages)
    lines = text.splitlines() if text else []
    assert len(lines) >= len(messages)
    for m in messages:
        content = m.get("content")
        pieces = [content] if isinstance(content, str) else [
            b.get("text") or b.get("content") for b in content or []
            if b.get("type") in ("text", "tool_result")]  # fmt: skip
        for piece in pieces:
            assert piece in text
    assert not any(line.startswith("tool c") or line.startswith("tool t") for line in lines)
    results = sum(m["role"] == "tool" for m in messages) + sum(
        b.get("type") == "tool_result" for m in messages if isinstance(m["content"], list)
        for b in m["content"]
    )  # fmt: skip
    assert sum(line.startswith("tool add: ") for line in lines) == results


def test_render_a_stored_openai_transcript_with_a_system_prompt():
    messages = json.loads(
        '[{"role": "system", "content": "S"}, {"role": "user", "content": [{"type": "text",'
        ' "text": "look"}, {"type": "image_url", "image_url": {"url": "x"}}]}]'
    )
    # Media shows by its kind, the same in every dialect (read through the neutral view).
    assert render_transcript(messages) == "system: S\nuser: look\n  [image]"


class _CtrlCAfterTheAnswer(io.StringIO):
    """Output where Ctrl-C lands once, on the first line break written after the answer's
    text: the moment between a finished answer and the next prompt."""

    def __init__(self):
        super().__init__()
        self.fired = False

    def write(self, text):
        if not self.fired and text == "\n" and "answer" in self.getvalue():
            self.fired = True
            raise KeyboardInterrupt
        return super().write(text)


def test_a_ctrl_c_after_the_answer_ended_keeps_the_answer():
    """Fails on the old main: a Ctrl-C landing after the `done` event (the exchange was
    already saved) printed [cancelled] and dropped the answer from the session's history,
    so the next prompt went out without the answer the user had read."""
    from toolnexus import create_in_process_client
    from toolnexus.commands.chat import CANCELLED, Session, _turn

    client = create_in_process_client(model="m", generate=lambda req: {"content": "the answer"})
    s = Session(client=client, id=None, history=(), toolkit=None)
    out = _CtrlCAfterTheAnswer()
    after = _turn(s, "question", out)
    assert out.fired and CANCELLED not in out.getvalue()
    assert [m["content"] for m in after["history"]] == ["question", "the answer"]


def test_responses_style_chats_with_memory_over_the_responses_path(monkeypatch, capsys):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    with fake_provider([text_reply("one"), text_reply("two")]) as fp:
        code, out, _ = in_process(monkeypatch, capsys, "chat", "--base-url", fp.url,
                                  "--model", "gpt", "--style", "responses", "--system",
                                  "Terse.", stdin="a\nb\n/exit\n")  # fmt: skip
    assert code == 0 and out.split() == ["one", "two"]
    assert [r["path"] for r in fp.requests] == ["/v1/responses"] * 2
    assert fp.requests[0]["headers"]["Authorization"] == f"Bearer {KEY}"
    second = fp.requests[1]["body"]
    assert second["instructions"] == "Terse." and second["store"] is False
    assert [i.get("content") for i in second["input"] if i.get("role") == "user"] == ["a", "b"]

"""The main job: `python -m toolnexus demo`, twice, remembers the conversation."""

import subprocess
import sys


def demo(store):
    return subprocess.run(
        [sys.executable, "-m", "toolnexus", "demo", "--store", f"file:{store}"],
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    ).stdout


def test_demo_runs_twice_and_remembers(tmp_path):
    first = demo(tmp_path)
    assert "tool get_weather(city='Paris')" in first and "tool add(a=2, b=2) -> 4" in first
    assert "answer: In Paris it is 18°C and sunny, and 2 + 2 = 4." in first
    assert "stored messages: 5" in first
    second = demo(tmp_path)
    assert "remembered 5 messages" in second
    assert "Last time I said: 'In Paris it is 18°C and sunny" in second
    assert "stored messages: 7" in second


def test_demo_default_store_is_under_the_data_dir(tmp_path):
    env = {"XDG_DATA_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    out = subprocess.run(
        [sys.executable, "-m", "toolnexus", "demo"],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    ).stdout
    # the default store of every command (ids and show find it there)
    assert str(tmp_path / "toolnexus" / "chat") in out

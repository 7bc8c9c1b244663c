"""The tour's fake provider starts on the runtime install alone (no jsonschema): it checks
requests by its own rules and says once that the published-schema checks are off."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# A process where jsonschema and referencing cannot be imported, as after `pip install -e .`.
BLOCKED = "import sys; sys.modules['jsonschema'] = None; sys.modules['referencing'] = None\n"
TWO_PROVIDERS = """
from toolnexus import ask, create_client
from toolnexus.testing import fake_provider, text_reply

for n in range(2):
    with fake_provider([text_reply("ok")]) as fp:
        c = create_client(base_url=fp.url, style="anthropic", model="m")
        assert ask(c, "hi")["text"] == "ok"
    with fake_provider([text_reply("ok")]) as fp:  # our own rules still refuse
        c = create_client(base_url=fp.url, style="openai", model="m")
        import httpx
        r = httpx.post(fp.url + "/chat/completions", json={"model": "m", "messages": []})
        assert r.status_code == 400, r.text
print("done")
"""


def _run(code: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=60)  # fmt: skip


def test_the_fake_provider_runs_without_jsonschema_and_warns_once():
    out = _run(BLOCKED + TWO_PROVIDERS)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "done"
    assert out.stderr.count("SchemaChecksSkipped") == 1, out.stderr
    assert "pip install 'toolnexus[testing]'" in out.stderr


def test_schema_true_insists_on_jsonschema():
    code = BLOCKED + (
        "from toolnexus.testing import fake_provider\n"
        "try:\n    fake_provider([], schema=True)\nexcept ImportError as e:\n"
        "    assert 'toolnexus[testing]' in str(e); print('refused')\n"
    )
    out = _run(code)
    assert out.stdout.strip() == "refused", out.stderr


def test_with_jsonschema_there_is_no_warning_and_the_schema_is_checked():
    out = _run(TWO_PROVIDERS)
    assert out.returncode == 0, out.stderr
    assert "SchemaChecksSkipped" not in out.stderr

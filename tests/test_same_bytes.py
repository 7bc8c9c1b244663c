"""Order is data; the same state sends the same bytes (issue 35).

One scripted conversation per dialect (a tool whose parameters are out of alphabetical
order, a model that calls it with its arguments in that order, a prompt of parts, a
structured-output schema of {"reasoning", "answer"}) runs in three processes with other
PYTHONHASHSEEDs (tests/bytes_probe.py): every request body is byte-identical across
them, and the request of the second exchange is the same whether the conversation was
warm in this runtime or loaded cold from each store by a new one.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolnexus.core.frozen import FrozenMap, freeze, thaw
from toolnexus.core.transcript import dumps, freeze_transcript, loads
from toolnexus.core.wire import DIALECTS

HERE = Path(__file__).parent
PARAMS = ["zeta", "alpha", "mid", "beta"]


def _store_urls(tmp: Path) -> list[str]:
    urls = [f"file:{tmp / 'files'}", f"sqlite:{tmp / 'probe.db'}"]
    for name in ("TOOLNEXUS_TEST_REDIS_URL", "TOOLNEXUS_TEST_POSTGRES_DSN"):
        if os.environ.get(name):
            urls.append(os.environ[name])
    return urls


@pytest.fixture(scope="module")
def probes(tmp_path_factory) -> list[dict]:
    urls = _store_urls(tmp_path_factory.mktemp("bytes"))
    root = str(HERE.parent)
    out = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed,
               "PYTHONPATH": os.pathsep.join([root, os.environ.get("PYTHONPATH", "")])}  # fmt: skip
        done = subprocess.run([sys.executable, str(HERE / "bytes_probe.py"), *urls], env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == 0, done.stderr[-3000:]
        out.append(json.loads(done.stdout))
    return out


@pytest.mark.parametrize("style", DIALECTS)
def test_every_request_is_the_same_bytes_in_every_process(probes, style):
    first, *others = [p[style] for p in probes]
    assert len(first["warm"]) == 3
    for other in others:
        assert other == first


@pytest.mark.parametrize("style", DIALECTS)
def test_a_cold_load_from_any_store_sends_what_the_warm_runtime_sends(probes, style):
    bodies = probes[0][style]
    cold = {k: v for k, v in bodies.items() if k != "warm"}
    assert {"file", "sqlite"} <= set(cold)
    for store, body in cold.items():
        assert body == bodies["warm"][2], store


def _objects(value):
    """Every JSON object in a value (as json.loads keeps it: in the text's order)."""
    if isinstance(value, dict):
        yield value
        for v in value.values():
            yield from _objects(v)
    elif isinstance(value, list):
        for v in value:
            yield from _objects(v)


def _order_of(objects, keys: set) -> list[list]:
    return [list(o) for o in objects if set(o) == keys]


@pytest.mark.parametrize("style", DIALECTS)
def test_the_authors_and_the_providers_order_goes_out(probes, style):
    first, _, third = (json.loads(b) for b in probes[0][style]["warm"])
    # the tool's parameters in signature order, in the declaration and its required list
    declared = [o for o in _objects(first) if "properties" in o and "zeta" in o["properties"]]
    assert declared and all(list(o["properties"]) == PARAMS for o in declared)
    assert all(o["required"] == PARAMS for o in declared)
    # the structured-output schema as given: reasoning, then answer
    schemas = [o["properties"] for o in _objects(third) if "reasoning" in o.get("properties", {})]
    assert schemas and all(list(p) == ["reasoning", "answer"] for p in schemas)
    # the tool input replayed as the provider sent it (an object, or JSON text)
    inputs = _order_of(_objects(third), set(PARAMS))
    for o in _objects(third):
        for v in o.values():
            if isinstance(v, str) and v.startswith("{") and "zeta" in v:
                inputs.append(list(json.loads(v)))
    assert inputs and all(order == PARAMS for order in inputs)


# ---- a message's JSON comes back in the order it went in ---------------------------

_KEYS = st.text(st.characters(codec="utf-8", exclude_categories=["Cs"]), max_size=6)
_JSON = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(_KEYS, inner, max_size=5),
    max_leaves=12,
)
MESSAGES = st.lists(
    st.builds(lambda extra, content: {"role": "user", **extra, "content": content},
              st.dictionaries(_KEYS.filter(lambda k: k not in ("role", "content")), _JSON,
                              max_size=5), _JSON),
    min_size=1, max_size=4,
)  # fmt: skip


def _ordered(value):
    """A value with its objects as key-value lists: equal only when the order is too."""
    if isinstance(value, dict):
        return [[k, _ordered(v)] for k, v in value.items()]
    if isinstance(value, list | tuple):
        return [_ordered(v) for v in value]
    return value


@given(MESSAGES)
def test_freeze_thaw_and_the_transcript_document_keep_every_objects_order(messages):
    frozen = freeze_transcript(messages)
    assert all(type(m) is FrozenMap for m in frozen)
    assert _ordered(thaw(frozen)) == _ordered(messages)
    assert _ordered(thaw(loads(dumps(frozen)))) == _ordered(messages)
    assert freeze(frozen) is frozen


def test_a_frozen_map_is_an_immutable_value_with_pmaps_verbs():
    m = FrozenMap({"b": 1, "a": 2})
    assert list(m.set("c", 3)) == ["b", "a", "c"] and list(m) == ["b", "a"]
    assert list(m.set("b", 9)) == ["b", "a"] and m.set("b", 9)["b"] == 9
    assert m.discard("zz") is m and list(m.discard("b")) == ["a"]
    with pytest.raises(KeyError):
        m.remove("zz")
    assert list(m.update({"z": 0}, a=5)) == ["b", "a", "z"] and m.update(a=5)["a"] == 5
    for mutate in (lambda: m.__setitem__("x", 1), lambda: m.pop("a"), m.clear, m.popitem,
                   lambda: m.setdefault("x", 1), lambda: m.__delitem__("a")):  # fmt: skip
        with pytest.raises(TypeError, match="immutable"):
            mutate()
    n = m
    n |= {"x": 1}
    assert list(n) == ["b", "a", "x"] and list(m) == ["b", "a"]
    assert hash(m) == hash(FrozenMap({"a": 2, "b": 1})) and m == {"a": 2, "b": 1}
    assert m.copy() is m and json.dumps(m) == '{"b": 1, "a": 2}'
    import copy
    import pickle

    assert pickle.loads(pickle.dumps(m)) == m and type(copy.deepcopy(m)) is FrozenMap
    assert list(pickle.loads(pickle.dumps(m))) == ["b", "a"]


@pytest.mark.parametrize("style", DIALECTS)
def test_each_request_extends_the_last_one_as_a_byte_prefix(probes, style):
    """What a provider's prefix cache needs: the next request starts with the bytes of the
    previous one up to the end of its last message (then the new messages follow)."""
    bodies = probes[0][style]["warm"]
    for before, after in zip(bodies, bodies[1:], strict=False):
        # the history: the body's first array of objects (messages, input, contents...)
        history = next(v for v in json.loads(before).values() if isinstance(v, list) and v)
        last = json.dumps(history[-1], ensure_ascii=False, separators=(",", ":"))
        end = before.rindex(last) + len(last)
        assert after[:end] == before[:end]

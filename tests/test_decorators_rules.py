"""The rules of store/decorators.py no other test asserts: the id-taking fused calls a
decorator that maps ids declares again (every argument handed on, the side record first),
`keep`'s bounds and cut, each sanitize_id boundary (device names, 100 characters, lone
surrogates), the scopes and logs of namespaced and sanitize_ids, read_through's fills and
deletes, retention's side record and delete, encrypted's key checks, and every refusal
naming its decorator."""

from __future__ import annotations

import base64
import inspect
import sys

import pytest
from cryptography.fernet import Fernet

from toolnexus.core.extras import MissingExtraError
from toolnexus.core.scope import scope_of
from toolnexus.history import in_memory_log
from toolnexus.store import (
    capped_store,
    encrypted,
    in_memory_store,
    namespaced,
    observed,
    read_through,
    retention,
    sanitize_ids,
)
from toolnexus.store.decorators import SAVED_AT, _unsanitize, sanitize_id
from toolnexus.store.fused import declared, derive, fuse, stored_view, view


def msgs(*contents):
    return [{"role": "user", "content": c} for c in contents]


# ---- the fused calls a decorator that maps ids keeps -------------------------------------


def fused_store():
    """A store whose five id-taking fused calls record what they are handed."""
    calls: list = []

    def record(name):
        return lambda *args: calls.append((name, *args)) or name

    base = in_memory_store()
    fused = {
        "lock_load": fuse(record("lock_load"), "get", "lock", where="db"),
        "save_release": fuse(record("save_release"), "save", "lock", where="db"),
        "save_logged": fuse(record("save_logged"), "save", where="db"),
        "save_logged_release": fuse(record("save_logged_release"), "save", "lock", where="db"),
        "fork": fuse(record("fork"), "get", "save", where="db"),
        "view": view(lambda t: t),
    }
    return derive(base, fused=fused), calls


@pytest.mark.parametrize(
    "wrap, key",
    [(lambda s: namespaced("t", s), "t:"), (sanitize_ids, "")],
    ids=["namespaced", "sanitize_ids"],
)
def test_a_decorator_mapping_ids_hands_every_argument_on_under_its_keys(wrap, key):
    store, calls = fused_store()
    mapped = wrap(store)
    for name in ("lock_load", "save_release", "save_logged", "save_logged_release", "fork"):
        f = declared(mapped, name)
        assert f is not None and f.where == "db", name
    check = print
    assert declared(mapped, "lock_load").call("c") == "lock_load"
    assert declared(mapped, "save_release").call("H", "c", "T") == "save_release"
    assert declared(mapped, "save_logged").call("c", "T", "R", "E") == "save_logged"
    assert declared(mapped, "save_logged_release").call("H", "c", "T", "R", "E") == (
        "save_logged_release"
    )
    assert declared(mapped, "fork").call("a", "b", 3, check) == "fork"
    assert calls == [
        ("lock_load", f"{key}c"),
        ("save_release", "H", f"{key}c", "T"),
        ("save_logged", f"{key}c", "T", "R", "E"),
        ("save_logged_release", "H", f"{key}c", "T", "R", "E"),
        ("fork", f"{key}a", f"{key}b", 3, check),
    ]
    assert stored_view(mapped) is not None  # it maps ids only: get after save unchanged


def test_sanitize_ids_writes_a_long_id_s_name_first_in_every_fused_save():
    seen: list = []
    mapped = sanitize_ids(fused_store_with_ids(seen))
    long_id = "x" * 150
    key = sanitize_id(long_id)
    side = "-n" + key[2:]
    for name, args in [
        ("save_release", ("H", long_id, "T")),
        ("save_logged", (long_id, "T", "R", "E")),
        ("save_logged_release", ("H", long_id, "T", "R", "E")),
        ("fork", ("a", long_id, None, print)),
    ]:
        seen.clear()
        declared(mapped, name).call(*args)
        assert seen == [side, (name, key)], name


def fused_store_with_ids(seen):
    """A store with "ids" whose saves and fused saves append to `seen` in order."""
    base = in_memory_store()
    plain_save = base["save"]

    def save(id, t):
        seen.append(id)
        plain_save(id, t)

    def fused(name):
        def call(*args):
            keys = [a for a in args if isinstance(a, str) and a.startswith("-h")]
            seen.append((name, keys[-1]))

        return call

    return derive(
        base,
        save=save,
        fused={n: fuse(fused(n), "save") for n in
               ("save_release", "save_logged", "save_logged_release", "fork")},
    )  # fmt: skip


# ---- capped ----------------------------------------------------------------------------


@pytest.mark.parametrize("keep", [0, 5, True, "2", 2.0])
def test_keep_must_be_an_integer_from_one_to_n(keep):
    with pytest.raises(
        ValueError, match=r"^capped_store: keep must be an integer from 1 to n=4, got "
    ):
        capped_store(4, in_memory_store(), keep=keep)


def test_keep_may_be_n_or_one():
    assert capped_store(4, in_memory_store(), keep=4)["desc"] == "capped(4, in_memory())"
    assert capped_store(4, in_memory_store(), keep=1)["desc"] == "capped(4, keep=1, in_memory())"


def test_a_store_past_n_is_cut_to_keep():
    s = capped_store(4, in_memory_store(), keep=2)
    s["save"]("a", msgs(*"abcde"))
    assert [m["content"] for m in s["get"]("a")] == ["d", "e"]
    assert [m["content"] for m in stored_view(s)(msgs(*"abcde"))] == ["d", "e"]


def test_a_store_without_desc_is_named_store():
    bare = {"get": lambda id: None, "save": lambda id, t: None}
    assert capped_store(2, bare)["desc"] == "capped(2, store)"


@pytest.mark.parametrize(
    "make, who",
    [
        (lambda s: capped_store(2, s), "capped_store"),
        (sanitize_ids, "sanitize_ids"),
        (lambda s: namespaced("t", s), "namespaced"),
        (lambda s: observed(s, on_get=print), "observed"),
        (lambda s: read_through(s, in_memory_store()), r"read_through \(cache\)"),
        (lambda s: read_through(in_memory_store(), s), "read_through"),
        (lambda s: retention(60, s), "retention"),
        (lambda s: encrypted(Fernet.generate_key(), s), "encrypted"),
    ],
)
def test_a_non_store_is_refused_by_the_decorator_s_name(make, who):
    with pytest.raises(TypeError, match=rf"^{who}: expected a store"):
        make({"get": print})


# ---- sanitized ids ---------------------------------------------------------------------


@pytest.mark.parametrize("name", ["con", "prn", "aux", "nul", "com0", "com9", "lpt0", "lpt9"])
def test_windows_device_names_are_encoded(name):
    assert sanitize_id(name) == "-b" + base64.b32encode(name.encode()).decode().rstrip("=").lower()
    assert _unsanitize(sanitize_id(name)) == name and _unsanitize(name) is None


@pytest.mark.parametrize("name", ["com10", "lpt10", "cons", "x" * 100])
def test_other_plain_names_are_their_own_key(name):
    assert sanitize_id(name) == name and _unsanitize(name) == name


def test_an_id_whose_encoding_takes_exactly_100_characters_is_encoded_not_hashed():
    # base32 of 61 bytes is 98 characters without padding: "-b" + 98 = 100
    exact, over = "A" * 61, "A" * 62
    assert len(sanitize_id(exact)) == 100 and sanitize_id(exact).startswith("-b")
    assert _unsanitize(sanitize_id(exact)) == exact
    assert sanitize_id(over).startswith("-h") and len(sanitize_id(over)) == 66
    assert "=" not in sanitize_id("A")  # base32's padding is dropped, and put back to read
    # only "=" is stripped: "ABCDW" encodes to IFBEGRCX, whose last X stays
    assert sanitize_id("ABCDW") == "-bifbegrcx" and _unsanitize("-bifbegrcx") == "ABCDW"


def test_a_lone_surrogate_is_encoded_and_read_back():
    odd = "half \ud83d"
    assert _unsanitize(sanitize_id(odd)) == odd


def test_a_long_id_s_name_is_kept_as_a_toolnexus_id_record():
    backing: dict = {}
    s = sanitize_ids(in_memory_store(backing))
    s["save"]("x" * 150, msgs("hi"))
    side = "-n" + sanitize_id("x" * 150)[2:]
    assert [dict(m) for m in in_memory_store(backing)["get"](side)] == [
        {"role": "toolnexus.id", "content": "x" * 150}
    ]


def test_sanitize_ids_declares_a_total_scope_over_the_store_s():
    s = sanitize_ids(namespaced("t", in_memory_store()))
    scope = s["scope"]
    assert scope == scope_of(s) and scope.steps == (("sanitize_ids",), ("namespaced", "t"))
    assert scope.key("A") == "t:-bie" and scope.owns("t:-bie") == "A"
    hashed = scope.key("x" * 150)
    assert scope.owns(hashed) is None and scope.mine(hashed)  # total: a hash is still its own
    assert not scope.mine("u:" + sanitize_id("x" * 150))


# ---- namespaced --------------------------------------------------------------------------


def test_namespaced_declares_its_scope_over_the_store_s():
    s = namespaced("t", sanitize_ids(in_memory_store()))
    scope = s["scope"]
    assert scope.steps == (("namespaced", "t"), ("sanitize_ids",))
    assert scope.key("A") == sanitize_id("t:A") and scope.owns(sanitize_id("t:A")) == "A"
    assert scope.owns(sanitize_id("u:A")) is None


def test_namespaced_given_a_log_returns_it_in_the_scope():
    log = in_memory_log()
    tenant = namespaced("t", log)
    assert tenant["scope"] == scope_of(namespaced("t", in_memory_store()))
    assert tenant["unscoped"] is log
    again = namespaced("u", tenant)  # a scoped log: scoped from the log under it, composed
    assert again["unscoped"] is log
    assert again["scope"].key("c") == "t:u:c"
    not_a_log = {"record": print, "query": print}  # no clear: a store's check refuses it
    with pytest.raises(TypeError, match="^namespaced: expected a store"):
        namespaced("t", not_a_log)


# ---- read_through -------------------------------------------------------------------------


def recording_store(log, name):
    base = in_memory_store()
    return derive(
        base,
        save=lambda id, t: log.append((name, "save", id)) or base["save"](id, t),
        delete=lambda id: log.append((name, "delete", id)) or base["delete"](id),
        desc=name,
    )


def test_read_through_fills_the_cache_on_a_miss_and_deletes_it_on_both_sides():
    log: list = []
    cache, store = recording_store(log, "cache"), recording_store(log, "store")
    store["save"]("c", msgs("hi"))
    s = read_through(cache, store)
    assert s["desc"] == "read_through(cache, store)"
    log.clear()
    assert [m["content"] for m in s["get"]("c")] == ["hi"]
    assert log == [("cache", "save", "c")]
    assert [m["content"] for m in cache["get"]("c")] == ["hi"]
    log.clear()
    s["delete"]("c")
    assert log == [("cache", "delete", "c"), ("store", "delete", "c"), ("cache", "delete", "c")]


def test_read_through_refuses_a_cache_without_delete_saying_why():
    cache = {"get": lambda id: None, "save": lambda id, t: None}
    with pytest.raises(ValueError, match=r"^read_through: the cache store needs 'delete' \(to"):
        read_through(cache, in_memory_store())


def test_read_through_keeps_the_store_s_view():
    s = read_through(in_memory_store(), capped_store(1, in_memory_store()))
    assert [m["content"] for m in stored_view(s)(msgs("a", "b"))] == ["b"]


# ---- retention ------------------------------------------------------------------------------


def test_retention_keeps_the_save_time_in_a_meta_record_and_deletes_it_too():
    backing: dict = {}
    s = retention(60, in_memory_store(backing), now=lambda: 1000.0)
    assert s["desc"] == "retention(60s, in_memory())"
    s["save"]("c", msgs("hi"))
    assert SAVED_AT == "toolnexus:saved-at:"
    meta = in_memory_store(backing)["get"]("toolnexus:saved-at:c")
    assert [dict(m) for m in meta] == [{"role": "toolnexus.meta", "saved_at": 1000.0}]
    s["delete"]("c")
    assert in_memory_store(backing)["ids"]() == ()


def test_retention_refuses_an_infinite_age_saying_what_to_do():
    with pytest.raises(
        ValueError, match=r"^retention: max_age must be finite \(leave retention out"
    ):
        retention(float("inf"), in_memory_store())


# ---- encrypted -----------------------------------------------------------------------------


def test_an_object_with_encrypt_but_no_decrypt_is_no_key():
    class Half:
        def encrypt(self, data):
            return data

    with pytest.raises(ValueError, match=r"^encrypted: key must be a Fernet key \(32 url-safe"):
        encrypted(Half(), in_memory_store())
    with pytest.raises(ValueError, match="or a Fernet/MultiFernet object$"):
        encrypted(b"short", in_memory_store())


def test_encrypted_without_cryptography_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "cryptography.fernet", None)
    with pytest.raises(MissingExtraError, match=r"^encrypted needs the 'cryptography' package"):
        encrypted(b"k", in_memory_store())


# ---- the curried signature -------------------------------------------------------------


def test_the_curried_signature_has_no_toolz_placeholder_defaults():
    sig = capped_store.__signature__
    assert sig == inspect.signature(capped_store.func)
    assert sig.parameters["n"].default is inspect.Parameter.empty

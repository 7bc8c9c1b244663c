"""The rules of core/scope.py no other test asserts: a scope without `mine` owns what
`owns` names, scopes hash by their steps, the identity owns every key, and `mine`
answers True or False."""

from __future__ import annotations

from toolnexus.core.scope import IDENTITY, Scope, within


def prefixed(p):
    return (lambda i: p + i), (lambda k: k[len(p) :] if k.startswith(p) else None)


def test_a_scope_without_mine_owns_what_owns_names():
    key, owns = prefixed("a:")
    s = Scope(("a",), key, owns)
    assert s.mine("a:c") is True and s.mine("b:c") is False


def test_equal_scopes_hash_alike_and_key_a_dict():
    one = Scope(("a",), *prefixed("a:"))
    two = Scope(("a",), *prefixed("a:"))
    assert hash(one) == hash(two) == hash(("a",))
    assert {one: 1}[two] == 1 and len({one, two, Scope(("b",), *prefixed("b:"))}) == 2


def test_the_identity_owns_every_key():
    assert IDENTITY.mine("anything") is True and IDENTITY.owns("x") == "x"
    assert IDENTITY.key("x") == "x" and not IDENTITY and repr(IDENTITY) == "Scope(identity)"


def test_mine_answers_true_or_false():
    a = within(("a",), *prefixed("a:"))
    t = within(("t",), *prefixed("t:"), a)
    assert t.mine("a:t:c") is True
    assert t.mine("b:t:c") is False  # not the inner scope's
    assert t.mine("a:u:c") is False  # the inner's, not this step's

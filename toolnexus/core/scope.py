"""Tenant scopes: how a store decorator maps conversation ids, as a value.

A decorator that maps ids (`namespaced`, `sanitize_ids`, your own) declares what it does
as the store's "scope": `key(id)` is the id the backend sees, `mine(key)` whether a
backend key is this scope's, and `owns(key)` the id it stands for (None when it is not
this scope's, or when the mapping cannot be undone, as for a hashed key). The
client applies the store's scope to everything else keyed by a conversation (the
message log, the lookup tool, forget, the runtime's memos and traces), so a tenant's
conversation "c" is one key everywhere. Two scopes are equal when their steps are.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any

__all__ = ["Scope", "IDENTITY", "scope_of", "within"]


class Scope:
    """How ids map to backend keys: `key`, its partial inverse `owns`, and the steps made of."""

    __slots__ = ("steps", "key", "owns", "mine")

    def __init__(
        self,
        steps: tuple[Hashable, ...],
        key: Callable[[str], str],
        owns: Callable[[str], str | None],
        mine: Callable[[str], bool] | None = None,
    ) -> None:
        self.steps, self.key, self.owns = steps, key, owns
        self.mine = mine or (lambda k: owns(k) is not None)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Scope) and other.steps == self.steps

    def __hash__(self) -> int:
        return hash(self.steps)

    def __bool__(self) -> bool:  # the identity scope maps nothing
        return bool(self.steps)

    def __repr__(self) -> str:
        return f"Scope({', '.join(map(repr, self.steps)) or 'identity'})"


IDENTITY = Scope((), lambda id: id, lambda key: key, lambda key: True)


def scope_of(m: Any) -> Scope:
    """Return the scope a store (or log) declares, else IDENTITY.

    >>> scope_of({}) is IDENTITY
    True
    """
    found = m.get("scope") if isinstance(m, Mapping) else None
    return found if isinstance(found, Scope) else IDENTITY


def within(
    step: Hashable,
    key: Callable[[str], str],
    owns: Callable[[str], str | None],
    inner: Scope = IDENTITY,
    *,
    total: bool = False,
) -> Scope:
    """Return the scope of a decorator mapping ids by `key` (inverse `owns`) over a store
    whose own scope is `inner`: its ids are mapped first, then the inner store's.
    `total`: every key is this decorator's (it encodes ids, it keeps no tenant apart), so
    a key it cannot name (`owns` None) is still its own.

    >>> head = within(("namespaced", "a"), lambda i: "a:" + i,
    ...               lambda k: k[2:] if k.startswith("a:") else None)
    >>> s = within(("namespaced", "t"), lambda i: "t:" + i,
    ...            lambda k: k[2:] if k.startswith("t:") else None, head)
    >>> s.key("c"), s.owns("a:t:c"), s.owns("a:u:c"), s.owns("b:t:c")
    ('a:t:c', 'c', None, None)
    """

    def composed_owns(k: str) -> str | None:
        theirs = inner.owns(k)
        return None if theirs is None else owns(theirs)

    def composed_mine(k: str) -> bool:
        if not inner.mine(k):
            return False
        theirs = inner.owns(k)
        if theirs is None:  # the inner mapping cannot be undone: only a total step is sure
            return total
        return total or owns(theirs) is not None

    return Scope((step, *inner.steps), lambda id: inner.key(key(id)), composed_owns,
                 composed_mine)  # fmt: skip

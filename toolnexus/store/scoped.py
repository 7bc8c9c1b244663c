"""A message log seen through a tenant scope: the ids a store decorator maps, mapped alike.

The log records the backend key of each conversation (`scope.key(id)`); a query answers
only this scope's entries, with their ids as the scope knows them; clearing touches only
this scope's conversations. So two tenants sharing one log never read or clear each
other's entries, even under the same conversation name.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from ..core.frozen import FrozenMap
from ..core.scope import IDENTITY, Scope, scope_of
from .fused import declared, derive, fuse

__all__ = ["scoped_log", "align_log"]


def _mapped(entry: Any, key: Callable[[str], str]) -> Any:
    cid = entry.get("conversation_id") if isinstance(entry, Mapping) else None
    if cid is None:
        return entry
    return entry.set("conversation_id", key(cid)) if isinstance(entry, FrozenMap) else {
        **entry, "conversation_id": key(cid)}  # fmt: skip


def _query(log: Mapping, scope: Scope) -> Callable[..., tuple]:
    inner = log["query"]

    def query(**filters: Any) -> tuple:
        cid = filters.get("conversation_id")
        if cid is not None:
            if not isinstance(cid, str):
                raise TypeError(f"conversation_id must be a string, got {type(cid).__name__}")
            found = inner(**{**filters, "conversation_id": scope.key(cid)})
            return tuple(e.set("conversation_id", cid) for e in found)
        # No id: every entry of this scope, the limit applied after the scope's filter.
        limit = filters.get("limit")
        found = inner(**{**filters, "limit": None})
        mine = []
        for e in found:
            k = e["conversation_id"]
            if k is not None and scope.mine(k):  # an id it cannot name shows as its key
                mine.append(e.set("conversation_id", scope.owns(k) or k))
        return tuple(mine if limit is None else mine[max(len(mine) - limit, 0) :])

    return query


def _clear(log: Mapping, scope: Scope) -> Callable[..., int]:
    inner = log["clear"]

    def clear(before: Any = None, *, conversation_id: str | None = None) -> int:
        if conversation_id is not None:
            return inner(before=before, conversation_id=scope.key(conversation_id))
        # Only this scope's conversations: a tenant never clears another's entries.
        keys = {e["conversation_id"] for e in log["query"]() if e["conversation_id"]}
        return sum(inner(before=before, conversation_id=k) for k in sorted(keys)
                   if scope.mine(k))  # fmt: skip

    return clear


def scoped_log(scope: Scope, log: Mapping) -> dict:
    """Return `log` seen through `scope`: entries recorded under `scope.key(id)`, queries and
    clears limited to the scope's conversations. Does not modify `log`."""
    if not scope:
        return dict(log)
    key = scope.key
    record, many = log["record"], log.get("record_many")
    ops: dict[str, Any] = {
        "record": lambda e: record(_mapped(e, key)),
        "query": _query(log, scope),
        "clear": _clear(log, scope),
        "scope": scope,
        "unscoped": log,
        "desc": f"scoped({scope!r}, {log.get('desc', 'message_log')})",
    }
    if callable(many):
        ops["record_many"] = lambda es: many([_mapped(e, key) for e in es])
    rows = declared(log, "rows")
    fused = {}
    if rows is not None:  # the rows of a save's own statement, under the scope's keys too
        call = rows.call
        fused["rows"] = fuse(lambda es: call([_mapped(e, key) for e in es]), *rows.needs,
                             where=rows.where)  # fmt: skip
    return derive(log, fused=fused, **ops)


def align_log(store: Mapping, log: Mapping | None, *, auto: bool = True) -> Mapping | None:
    """Return `log` in the scope of `store`: as it is when it already shares it, else seen
    through the store's scope (a log the client scoped before is unwrapped first); a log
    scoped otherwise is refused with a ValueError."""
    if not isinstance(log, Mapping):
        return log  # None, or not a log: the client's own checks say so
    if log.get("scoped_by_client") and isinstance(log.get("unscoped"), Mapping):
        log = log["unscoped"]
    want, has = scope_of(store), scope_of(log)
    if has == want:
        return log
    if has is not IDENTITY and has:
        raise ValueError(
            f"message_log is scoped {has!r} but the store {want!r}: a log must share its "
            "store's tenant scope (apply the same id decorators to both, or to the store only "
            "and let the client scope the log)"
        )
    if not auto:
        return log
    return {**scoped_log(want, log), "scoped_by_client": True}

"""Stores: `{"get", "save"}` closures (plus optional "delete", "ids", "lock", "desc").

The contracts and the pure algebra live here (decorators, fused calls, forks, checks);
each database's store, lock and bundle lives in its folder under `toolnexus.backends`,
re-exported below. Every durable store carries a cross-process "lock" the client takes
by default.
"""

# Public names loaded on first access (a database's module, and its driver, only then).
_LAZY = {
    "DecryptionError": ".decorators",
    "capped_store": ".decorators",
    "encrypted": ".decorators",
    "namespaced": ".decorators",
    "observed": ".decorators",
    "read_through": ".decorators",
    "retention": ".decorators",
    "sanitize_ids": ".decorators",
    "stored_view": ".fused",
    "derive": ".fused",
    "fuse": ".fused",
    "Fused": ".fused",
    "view": ".fused",
    "check_store": ".check",
    "StoreCorruptError": ".errors",
    "StoreUnavailableError": ".errors",
    "StoreReadOnlyError": ".errors",
    "fork": ".forks",
    "rewind": ".forks",
    "turn_boundaries": ".forks",
    "LockTimeoutError": ".locks",
    "LockLostError": ".locks",
    "local_lock": ".locks",
    "paired_lock": ".locks",
    "in_memory_store": "..backends.memory.store",
    "memory_backend": "..backends.memory.bundle",
    "file_store": "..backends.file.store",
    "sanitized_file_store": "..backends.file.store",
    "file_lock": "..backends.file.lock",
    "file_backend": "..backends.file.bundle",
    "sqlite_store": "..backends.sqlite.store",
    "sqlite_backend": "..backends.sqlite.bundle",
    "redis_store": "..backends.redis.store",
    "redis_lock": "..backends.redis.lock",
    "redis_backend": "..backends.redis.bundle",
    "postgres_store": "..backends.postgres.store",
    "postgres_lock": "..backends.postgres.lock",
    "postgres_backend": "..backends.postgres.bundle",
    "open_backend": "..backends.urls",
}

__all__ = [
    "StoreCorruptError",
    "StoreUnavailableError",
    "StoreReadOnlyError",
    "LockTimeoutError",
    "LockLostError",
    "check_store",
    "in_memory_store",
    "file_store",
    "DecryptionError",
    "capped_store",
    "encrypted",
    "namespaced",
    "observed",
    "read_through",
    "retention",
    "sanitize_ids",
    "sanitized_file_store",
    "stored_view",
    "derive",
    "fuse",
    "Fused",
    "view",
    "local_lock",
    "paired_lock",
    "sqlite_store",
    "redis_store",
    "postgres_store",
    "memory_backend",
    "file_backend",
    "postgres_backend",
    "redis_backend",
    "sqlite_backend",
    "open_backend",
    "file_lock",
    "redis_lock",
    "postgres_lock",
    "fork",
    "rewind",
    "turn_boundaries",
]


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(_LAZY[name], __name__), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

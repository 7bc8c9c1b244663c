"""Stores: `{"get", "save"}` closures (plus optional "delete", "ids", "lock", "desc").

Every durable store here carries a cross-process "lock" the client takes by default.
"""

# Public names loaded on first access (backends import their drivers only then).
_LAZY = {
    "DecryptionError": "decorators",
    "capped_store": "decorators",
    "encrypted": "decorators",
    "namespaced": "decorators",
    "observed": "decorators",
    "read_through": "decorators",
    "retention": "decorators",
    "sanitize_ids": "decorators",
    "sanitized_file_store": "decorators",
    "check_store": "check",
    "stored_view": "decorators",
    "StoreCorruptError": "errors",
    "StoreUnavailableError": "errors",
    "StoreReadOnlyError": "errors",
    "file_store": "..backends.file.store",
    "fork": "forks",
    "rewind": "forks",
    "turn_boundaries": "forks",
    "LockTimeoutError": "locks",
    "LockLostError": "locks",
    "file_lock": "locks",
    "local_lock": "locks",
    "paired_lock": "locks",
    "postgres_lock": "locks",
    "redis_lock": "locks",
    "in_memory_store": "..backends.memory.store",
    "postgres_store": "..backends.postgres.store",
    "postgres_backend": "..backends.postgres.bundle",
    "redis_backend": "..backends.postgres.bundle",
    "sqlite_backend": "..backends.postgres.bundle",
    "open_backend": "..backends.postgres.bundle",
    "redis_store": "..backends.redis.store",
    "sqlite_store": "..backends.sqlite.store",
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
    "local_lock",
    "paired_lock",
    "sqlite_store",
    "redis_store",
    "postgres_store",
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

        value = getattr(
            importlib.import_module(
                _LAZY[name] if _LAZY[name].startswith(".") else f".{_LAZY[name]}", __name__
            ),
            name,
        )
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))

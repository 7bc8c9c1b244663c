"""Errors raised by stores."""

__all__ = ["StoreCorruptError", "StoreUnavailableError", "StoreReadOnlyError"]


class StoreCorruptError(Exception):
    """Stored data for a conversation is not a valid transcript (never read as 'no history')."""


class StoreUnavailableError(Exception):
    """A store backend is down or refused the operation; names the backend, never a password."""


class StoreReadOnlyError(PermissionError):
    """A store's file or database is read-only: nothing can be saved there (a permanent
    condition that no retry cures, so never a StoreUnavailableError)."""

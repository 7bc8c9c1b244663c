"""Errors raised by stores."""

__all__ = ["StoreCorruptError", "StoreUnavailableError"]


class StoreCorruptError(Exception):
    """Stored data for a conversation is not a valid transcript (never read as 'no history')."""


class StoreUnavailableError(Exception):
    """A store backend is down or refused the operation; names the backend, never a password."""

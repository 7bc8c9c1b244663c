"""The providers' published request schemas, as a check for tests: the test kit's own.

`spec_problems(body, dialect)` returns the published request schema's problems with a
request body (none: the schema accepts it), read by `toolnexus.testing.validators`
(`schema_problems`) from the cuts shipped in `toolnexus/testing/specs/`, which
tests/test_fake_provider_schema.py checks are derive.py's cuts of `tests/data/specs`.
One reading of the schemas for the fake provider and the tests: `nullable` as the specs'
README says, a `oneOf` with a `discriminator` as an `anyOf`.
"""

from __future__ import annotations

from typing import Any

from toolnexus.testing.validators import schema_problems

ALL = 1000  # every problem, not the fake provider's first three


def available() -> bool:
    """Whether jsonschema is here (the schemas themselves ship with the kit)."""
    try:
        import jsonschema  # noqa: F401
    except ImportError:
        return False
    return True


def spec_problems(body: Any, dialect: str) -> list[str]:
    """Return the published schema's problems with a request body (empty: valid)."""
    return schema_problems(body, dialect, limit=ALL)

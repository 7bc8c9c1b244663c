"""The test kit's registry: each dialect's fake by name, in the core registry's order.

Every table per dialect in the kit (the fake provider's paths and answers, the
validators' schemas and rules, the profiles, the transcript strategies) is read off these
records (see fakes.py). `register` checks that they cover exactly the rows of
`toolnexus.core.wire.DIALECTS`: a dialect added there without its
`testing/fake_<name>.py` fails here, at import.
"""

from __future__ import annotations

from ..core.wire import DIALECTS
from . import fake_anthropic, fake_gemini, fake_openai, fake_responses
from .fakes import Fake, register

__all__ = ["FAKES", "Fake", "fake_of"]

FAKES = register(DIALECTS, fake_openai.FAKE, fake_anthropic.FAKE, fake_responses.FAKE,
                 fake_gemini.FAKE)  # fmt: skip


def fake_of(dialect: str) -> Fake:
    """Return a dialect's fake (ValueError naming the rows for one the kit has not)."""
    if dialect not in FAKES:
        raise ValueError(f"unknown dialect {dialect!r}: expected one of {sorted(FAKES)}")
    return FAKES[dialect]

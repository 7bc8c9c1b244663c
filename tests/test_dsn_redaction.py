"""Every password-like DSN parameter is redacted in desc and errors, in URI and key=value
forms; an unparsable DSN shows no fragment of its password."""

from __future__ import annotations

import pytest

from toolnexus.core.secrets import dsn_passwords, redact_dsn

SECRET = "hunter2-Zq8v"


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://me@db/app?sslmode=verify-full&sslpassword={SECRET}",
        f"postgresql://me@db/app?sslpassword={SECRET}&sslmode=require",
        f"host=db user=me sslpassword={SECRET} sslmode=require",
        f"host=db user=me sslpassword='{SECRET} x' sslmode=require",
        f"host=db user=me password='{SECRET} never closed",
        f"host=db user=me PASSWORD = {SECRET}",
    ],
)
def test_password_like_parameters_are_redacted_in_both_forms(dsn):
    assert SECRET not in redact_dsn(dsn)
    assert SECRET[:6] not in redact_dsn(dsn)
    assert any(SECRET in p for p in dsn_passwords(dsn))


def test_other_parameters_stay_readable():
    assert redact_dsn("host=db user=me sslmode=require") == "host=db user=me sslmode=require"
    assert redact_dsn("postgresql://me@db/app?sslmode=require") == (
        "postgresql://me@db/app?sslmode=require"
    )


@pytest.mark.parametrize(
    "dsn",
    [
        f"postgresql://u@127.0.0.1:1/db?sslpassword={SECRET}",
        f"host=127.0.0.1 port=1 user=u sslpassword={SECRET}",
        f"host=127.0.0.1 port=1 password={SECRET} {SECRET[:5]}",  # unparsable: a stray word
        f"host=127.0.0.1 port=1 password='{SECRET}",  # unparsable: a quote never closed
        f"postgresql://u:{SECRET}%zz@127.0.0.1:1/db",  # unparsable: a raw '%'
    ],
)
def test_a_store_on_any_such_dsn_never_shows_a_fragment_of_the_password(dsn):
    from toolnexus.store import postgres_store

    store = postgres_store(dsn, timeout=1)
    assert SECRET[:5] not in store["desc"]
    with pytest.raises(Exception) as e:
        store["get"]("x")
    chain, seen = [], e.value
    while seen is not None:  # the whole chain: what any code walking it would read
        chain.append(f"{type(seen).__name__}: {seen} {getattr(seen, 'args', '')}")
        seen = seen.__cause__ or seen.__context__
    assert all(SECRET[:5] not in text for text in chain), chain

"""The rules of core/bounds.py: the memo's byte bound read from the environment (its
default, spaces around it, zero, and each kind of text that is not a number of bytes)."""

from __future__ import annotations

import pytest

from toolnexus.core.bounds import DEFAULT_MEMO_BYTES, UNENCODED_MESSAGE_BYTES, memo_bytes_bound


def test_the_default_bounds():
    assert DEFAULT_MEMO_BYTES == 16 * 1024 * 1024 == 16_777_216
    assert UNENCODED_MESSAGE_BYTES == 512


@pytest.mark.parametrize("env", [{}, {"TOOLNEXUS_MEMO_BYTES": ""}, {"TOOLNEXUS_MEMO_BYTES": " \t"}])
def test_no_value_is_the_default(env):
    assert memo_bytes_bound(env) == 16_777_216


@pytest.mark.parametrize("raw, bound", [("0", 0), (" 7 ", 7), ("\t64000000\n", 64_000_000)])
def test_a_number_of_bytes_trimmed(raw, bound):
    assert memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": raw, "OTHER": "x"}) == bound


@pytest.mark.parametrize("raw", ["-1", "1e6", "1.5", "16MiB", "²", "١٢", "+5", "1 000"])
def test_what_is_not_a_number_of_bytes_is_refused(raw):
    with pytest.raises(ValueError) as e:
        memo_bytes_bound({"TOOLNEXUS_MEMO_BYTES": f" {raw} "})
    assert str(e.value) == f"TOOLNEXUS_MEMO_BYTES must be a number of bytes, got {raw!r}"


def test_only_its_own_variable_is_read():
    assert memo_bytes_bound({"MEMO_BYTES": "5", "toolnexus_memo_bytes": "5"}) == 16_777_216

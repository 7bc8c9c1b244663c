"""Shared fixtures: a bounded hypothesis profile and the real servers (Redis, PostgreSQL)."""

from __future__ import annotations

import os
import tempfile
import uuid

import pytest
from hypothesis import HealthCheck, settings

# Bounded in CI so the suite stays fast; `HYPOTHESIS_PROFILE=dev` explores more.
# The suite's profile is derandomized: every run tries the same examples, so a green
# suite stays green (no run depends on luck). "dev" explores more, with fresh randomness.
settings.register_profile(
    "ci",
    max_examples=60,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=300, deadline=None)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

REQUIRE = os.environ.get("TOOLNEXUS_REQUIRE_SERVICES") == "1"


# Which variable names each server, with the address the docs use (docs/guide.md).
SERVICES = {
    "Redis": ("TOOLNEXUS_TEST_REDIS_URL", "redis://127.0.0.1:6379/0"),
    "PostgreSQL": ("TOOLNEXUS_TEST_POSTGRES_DSN", "postgresql://postgres@127.0.0.1:5432/test"),
}


def skip_reason(what: str, why: str) -> str:
    """Return the skip reason for a missing server: why, and which variable to set."""
    var, example = SERVICES[what]
    return f"{what} not available: {why} (set {var}, e.g. {var}={example})"


def _unavailable(what: str, why: str):
    if REQUIRE:
        pytest.fail(f"{what} is required (TOOLNEXUS_REQUIRE_SERVICES=1) but {why}")
    pytest.skip(skip_reason(what, why))


@pytest.fixture(scope="session")
def redis_url() -> str:
    """The test Redis URL (TOOLNEXUS_TEST_REDIS_URL), checked reachable; else skip or fail."""
    url = os.environ.get("TOOLNEXUS_TEST_REDIS_URL")
    if not url:
        _unavailable("Redis", "TOOLNEXUS_TEST_REDIS_URL is not set")
    try:
        import redis

        redis.Redis.from_url(url, socket_connect_timeout=2).ping()
    except Exception as e:  # any failure to reach it is a reason to skip (or fail in CI)
        _unavailable("Redis", f"{type(e).__name__}: {e}")
    return url


@pytest.fixture(scope="session")
def postgres_dsn() -> str:
    """The test PostgreSQL DSN (TOOLNEXUS_TEST_POSTGRES_DSN), checked reachable; else skip/fail."""
    dsn = os.environ.get("TOOLNEXUS_TEST_POSTGRES_DSN")
    if not dsn:
        _unavailable("PostgreSQL", "TOOLNEXUS_TEST_POSTGRES_DSN is not set")
    try:
        import psycopg

        with psycopg.connect(dsn, connect_timeout=3) as conn:
            conn.execute("select 1")
    except Exception as e:
        _unavailable("PostgreSQL", f"{type(e).__name__}: {e}")
    return dsn


@pytest.fixture(scope="session", autouse=True)
def _temporary_files_under_basetemp(tmp_path_factory: pytest.TempPathFactory):
    """Every temporary file of the run, its children's too, lands under pytest's basetemp.

    The README and docs blocks, the notebooks and their kernels call `tempfile` as a
    reader would; without this each run left about 22 entries in the system's
    temporary directory. pytest prunes its basetemp (the last three runs are kept).
    """
    where = str(tmp_path_factory.mktemp("tmp"))
    before = os.environ.get("TMPDIR"), tempfile.tempdir
    os.environ["TMPDIR"], tempfile.tempdir = where, where
    yield
    tempfile.tempdir = before[1]
    if before[0] is None:
        os.environ.pop("TMPDIR", None)
    else:
        os.environ["TMPDIR"] = before[0]


@pytest.fixture
def unique() -> str:
    """A short unique name, for tables, key prefixes and ids that must not clash across tests."""
    return "t" + uuid.uuid4().hex[:12]

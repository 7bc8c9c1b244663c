"""A CLI command closes what it opened: the PostgreSQL pool behind --store is closed
when the command ends (not left to the collector, its threads running), and a store and
its log at one place share one bundle (one pool, not two)."""

from __future__ import annotations

import threading

from toolnexus.cli import main


def _pools() -> set[str]:
    """The names of the psycopg pools whose worker threads are alive."""
    return {t.name.split("-worker-")[0] for t in threading.enumerate() if "-worker-" in t.name}


def test_a_command_closes_the_pool_it_opened(postgres_dsn, unique, capsys):
    before = _pools()
    for argv in (["ids", "--store", postgres_dsn], ["show", unique, "--store", postgres_dsn]):
        main(argv)
        assert _pools() == before, argv  # the pool's workers are gone with the command
    capsys.readouterr()


def test_a_store_and_its_log_share_one_bundle(postgres_dsn, unique):
    from toolnexus.commands.places import closing_places, open_store, parse_store_spec, place_log

    before = _pools()
    with closing_places():
        store = open_store(postgres_dsn)
        log = place_log(parse_store_spec(postgres_dsn))
        assert store["get"](unique) is None
        assert list(log["query"](conversation_id=unique)) == []
        assert open_store(postgres_dsn) is store  # the place opened once
        assert len(_pools() - before) == 1
    assert _pools() == before

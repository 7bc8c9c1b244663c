"""One folder per database: its store, lock, message log, connection helpers and bundle.

memory/, file/, sqlite/, redis/, postgres/: everything that imports sqlite3, redis or
psycopg lives in that database's folder. The contracts and the pure algebra (store
decorators, rows, checks, log entries) stay in `toolnexus.store` and `toolnexus.history`,
which re-export every public name from here.
"""

"""SQLite: the store and message log in one file (stdlib sqlite3, WAL)."""

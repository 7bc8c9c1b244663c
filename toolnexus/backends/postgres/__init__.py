"""PostgreSQL: the store, its advisory lock and the message log on one psycopg pool."""

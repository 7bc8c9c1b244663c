"""Redis: the store and its lock on one redis-py client."""

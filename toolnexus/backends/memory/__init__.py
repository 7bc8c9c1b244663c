"""The in-memory database: the default store and a message log kept in process."""

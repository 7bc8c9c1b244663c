"""Files on one host: a JSON file per conversation, file locks beside it."""

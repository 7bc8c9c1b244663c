"""These files are read by mypy (tests/test_typing.py), never imported or run by pytest."""

collect_ignore_glob = ["*.py"]

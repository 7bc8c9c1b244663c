"""The providers' published request schemas, cut down (see README.md beside this file)."""

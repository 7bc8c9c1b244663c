"""The PostgreSQL store's SQL: its tables and statements (rendered once per table), and
the DDL of the edit stamps that let a read go on from what it knows (`add_stamps`, run
in the caller's transaction)."""

from __future__ import annotations

import hashlib
import re
from typing import Any

__all__ = ["identifiers", "statements", "fork_statements", "ddl_key", "add_stamps"]

_NAME = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]{0,62}\.)?[A-Za-z_][A-Za-z0-9_]{0,48}")


def identifiers(table: str):
    """Return the (messages, heads) table identifiers of a checked table name."""
    from psycopg import sql

    if not isinstance(table, str) or not _NAME.fullmatch(table):
        raise ValueError(f"table must be a plain SQL name like 'toolnexus_messages', got {table!r}")
    *schema, name = table.split(".")
    return sql.Identifier(*schema, name), sql.Identifier(*schema, name + "_heads")


# The head moved (only if it is still the expected one) and the new rows added after it.
_APPEND = """WITH head AS (UPDATE {heads} SET version = %s, count = %s, digest = %s
        WHERE id = %s AND version = %s AND count = %s AND digest = %s RETURNING id),
    added AS (INSERT INTO {messages} (id, seq, body)
        SELECT head.id, %s + t.i - 1, t.body
        FROM head, json_array_elements_text(%s::json) WITH ORDINALITY t(body, i))"""


# A new conversation's first rows and its head (only if it still has none: a save that
# got there first makes this write nothing, and the caller saves the general way).
_CREATE = """WITH head AS (INSERT INTO {heads} (id, version, count, digest)
        VALUES (%s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id),
    added AS (INSERT INTO {messages} (id, seq, body)
        SELECT head.id, %s + t.i - 1, t.body
        FROM head, json_array_elements_text(%s::json) WITH ORDINALITY t(body, i))"""


def statements(table: str) -> dict:
    """Return the store's statements over `table`, rendered once."""
    from psycopg import sql

    messages, heads = identifiers(table)
    q = {
        "create": """
            CREATE TABLE IF NOT EXISTS {heads} (id text PRIMARY KEY, version integer NOT NULL,
                count integer NOT NULL, digest text NOT NULL, edited text);
            CREATE TABLE IF NOT EXISTS {messages} (id text NOT NULL, seq integer NOT NULL,
                body text NOT NULL, PRIMARY KEY (id, seq))""",
        # One statement: one snapshot, even while another session saves; keyed on the id
        # first, so "no head, yet rows" (corrupt) differs from "absent". The rows from
        # seq %s on: what this process knows is not read again (see _rows.read_joined).
        # The rows come as ONE array in seq order (received binary: each body as its own
        # length and bytes, nothing to split or unescape), with their count and first and
        # last seq: one value to receive, not a row of six per message (see
        # _split.split_aggregated). Each body as its UTF-8 (bytea: a copy in a UTF-8
        # database), what the memo keeps and a request carries: not decoded here to be
        # encoded again.
        "get": """SELECT h.version, h.count, h.digest, h.edited, m.n, m.lo, m.hi, m.bodies
            FROM (SELECT %s::text AS id) k LEFT JOIN {heads} h ON h.id = k.id
            LEFT JOIN LATERAL (SELECT count(*) AS n, min(seq) AS lo, max(seq) AS hi,
                array_agg(convert_to(body, 'UTF8') ORDER BY seq) AS bodies
                FROM {messages} WHERE id = k.id AND seq >= %s) m ON true""",
        # The same, a row per message: what a read falls back on when the joined text does
        # not split into its rows (a corrupt row, a missing one: decode_rows names it).
        "get_rows": """SELECT h.version, h.count, h.digest, h.edited, m.seq, m.body
            FROM (SELECT %s::text AS id) k LEFT JOIN {heads} h ON h.id = k.id
            LEFT JOIN {messages} m ON m.id = k.id AND m.seq >= %s ORDER BY m.seq""",
        # Locks the head row (creating a placeholder of version 0 the first time, so two
        # first saves queue up instead of colliding) and returns what is stored.
        "lock_head": """INSERT INTO {heads} (id, version, count, digest) VALUES (%s, 0, 0, '')
            ON CONFLICT (id) DO UPDATE SET id = excluded.id RETURNING version, count, digest""",
        "clear": "DELETE FROM {messages} WHERE id = %s",
        # The new messages and the head in one statement (one round trip, whatever the
        # count): a data-modifying WITH runs exactly once, read or not.
        "write": """WITH added AS (INSERT INTO {messages} (id, seq, body)
                SELECT %s, %s + t.i - 1, t.body
                FROM json_array_elements_text(%s::json) WITH ORDINALITY t(body, i))
            UPDATE {heads} SET version = %s, count = %s, digest = %s WHERE id = %s""",
        # The usual save of a service (append to the transcript this process last saw
        # stored) as one autocommit statement: the head moves and the rows are added only
        # if the head is still the expected one; it returns 1 then, else 0 and writes
        # nothing (the caller then saves the general way).
        "extend": _APPEND + " SELECT count(*) FROM head",
        # The same, plus the exchange's message-log rows ({log}: the log's own INSERT,
        # which adds them only if "head" has a row, i.e. the append happened), in the same
        # statement and commit.
        "extend_logged": _APPEND + ", logged AS ({{log}}) SELECT count(*) FROM head",
        # The same two for a conversation this process saw absent (the empty transcript).
        "start": _CREATE + " SELECT count(*) FROM head",
        "start_logged": _CREATE + ", logged AS ({{log}}) SELECT count(*) FROM head",
        "drop_head": "DELETE FROM {heads} WHERE id = %s",
        # A table whose edit stamps could not be added (see add_stamps): all rows, always.
        "get_unstamped": """SELECT h.version, h.count, h.digest, NULL, m.n, m.lo, m.hi, m.bodies
            FROM (SELECT %s::text AS id) k LEFT JOIN {heads} h ON h.id = k.id
            LEFT JOIN LATERAL (SELECT count(*) AS n, min(seq) AS lo, max(seq) AS hi,
                array_agg(convert_to(body, 'UTF8') ORDER BY seq) AS bodies
                FROM {messages} WHERE id = k.id AND seq >= %s) m ON true""",
        "get_unstamped_rows": """SELECT h.version, h.count, h.digest, NULL, m.seq, m.body
            FROM (SELECT %s::text AS id) k LEFT JOIN {heads} h ON h.id = k.id
            LEFT JOIN {messages} m ON m.id = k.id AND m.seq >= %s ORDER BY m.seq""",
        "ids": "SELECT id FROM {heads} ORDER BY id",
    }
    # Rendered once: a composed statement would be rendered again on every execute.
    return {
        k: sql.SQL(v).format(messages=messages, heads=heads).as_string(None) for k, v in q.items()
    }


def ddl_key(table: str) -> int:
    """Return the advisory lock key of `table`'s DDL."""
    # An advisory lock key so concurrent first uses create the tables one at a time
    # (CREATE TABLE IF NOT EXISTS alone can still collide on the catalog).
    digest = hashlib.blake2b(f"toolnexus-ddl:{table}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


# The edit stamps (see _rows.UNKNOWN): a statement that updates, deletes or truncates
# message rows, whoever runs it (this library's replace and delete, or anyone by hand),
# gives each conversation it touched a fresh "edited" stamp on its head. One function per
# schema (its argument names the heads table); inserts need none (a new row is past what a
# reader knows, or its count says so).
_STAMP_FUNCTION = """CREATE OR REPLACE FUNCTION {function}() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'TRUNCATE' THEN
    EXECUTE format('UPDATE %s SET edited = md5(random()::text || clock_timestamp()::text)',
                   TG_ARGV[0]);
  ELSE
    EXECUTE format('UPDATE %s SET edited = md5(random()::text || clock_timestamp()::text) '
                   'WHERE id IN (SELECT id FROM gone)', TG_ARGV[0]);
  END IF;
  RETURN NULL;
END $$"""
_STAMP_TRIGGERS = {
    "toolnexus_updated": "AFTER UPDATE ON {messages} REFERENCING OLD TABLE AS gone",
    "toolnexus_deleted": "AFTER DELETE ON {messages} REFERENCING OLD TABLE AS gone",
    "toolnexus_truncated": "AFTER TRUNCATE ON {messages}",
}


def add_stamps(conn: Any, table: str) -> bool:
    """Give `table` its edit stamps if it lacks them (made before they existed), in the
    caller's transaction (which holds the table's DDL lock); return whether it has them.
    Refused (a role may not alter a table it does not own): False, and every read then
    checks all rows, as reads always did."""
    import psycopg
    from psycopg import sql

    messages, heads = identifiers(table)
    schema, name = conn.execute(
        "SELECT n.nspname, c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = "
        "c.relnamespace WHERE c.oid = to_regclass(%s)", (messages.as_string(None),)
    ).fetchone()  # fmt: skip
    have = {r[0] for r in conn.execute(
        "SELECT tgname FROM pg_trigger WHERE tgrelid = to_regclass(%s)",
        (messages.as_string(None),))}  # fmt: skip
    column = conn.execute(
        "SELECT 1 FROM pg_attribute WHERE attrelid = to_regclass(%s) AND attname = "
        "'edited' AND NOT attisdropped", (heads.as_string(None),)
    ).fetchone()  # fmt: skip
    if column and set(_STAMP_TRIGGERS) <= have:
        return True
    function = sql.Identifier(schema, "toolnexus_edited_v1")
    target = sql.Literal(sql.Identifier(schema, name + "_heads").as_string(None))
    try:
        with conn.transaction():  # a savepoint: a refusal leaves the tables made
            if not column:
                conn.execute(sql.SQL("ALTER TABLE {} ADD COLUMN IF NOT EXISTS edited text")
                             .format(heads))  # fmt: skip
            # One function per schema, shared by its tables: made under a lock of its own.
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (ddl_key("function"),))
            found = conn.execute("SELECT to_regprocedure(%s)",
                                 (function.as_string(None) + "()",)).fetchone()  # fmt: skip
            if found[0] is None:
                conn.execute(sql.SQL(_STAMP_FUNCTION).format(function=function))
            for trigger, when in _STAMP_TRIGGERS.items():
                if trigger not in have:
                    statement = (
                        "CREATE TRIGGER {trigger} "
                        + when
                        + (" FOR EACH STATEMENT EXECUTE FUNCTION {function}({target})")
                    )
                    conn.execute(sql.SQL(statement).format(
                        trigger=sql.Identifier(trigger), messages=messages,
                        function=function, target=target))  # fmt: skip
    except psycopg.errors.InsufficientPrivilege:
        return False
    return True


def fork_statements(table: str) -> dict:
    """Return the statements of a fork on the server over `table`, rendered once."""
    from psycopg import sql

    messages, heads = identifiers(table)
    q = {
        # FOR SHARE: no save of src can change it until the copy commits.
        "src_head": "SELECT version, count, digest FROM {heads} WHERE id = %s FOR SHARE",
        "row": "SELECT body FROM {messages} WHERE id = %s AND seq = %s",
        "copy": """INSERT INTO {messages} (id, seq, body)
            SELECT %s, seq, body FROM {messages} WHERE id = %s AND seq < %s""",
        "put_head": "UPDATE {heads} SET version = %s, count = %s, digest = %s WHERE id = %s",
    }
    return {
        k: sql.SQL(v).format(messages=messages, heads=heads).as_string(None) for k, v in q.items()
    }

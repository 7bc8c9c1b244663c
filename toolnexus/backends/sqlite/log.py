"""The SQLite message log: WAL, an index on time, and an FTS5 index for text search.

Text search is exact whatever the index: FTS5 only narrows the candidates, and a
literal casefolded substring check (a Python function registered on the connection)
has the final word, so FTS query syntax in a user's text is never interpreted.
"""

from __future__ import annotations

import re
import sqlite3
import threading
from collections.abc import Iterable, Mapping
from datetime import datetime
from pathlib import Path

from ...core.frozen import FrozenMap
from ...history.entry import check_entry, check_query, cutoff, fold, from_micros, micros
from ...store.errors import StoreCorruptError, StoreReadOnlyError, StoreUnavailableError
from .connect import read_only, sqlite_errors, sqlite_wal

__all__ = ["sqlite_log", "trigram_supported", "word_prefilter"]

_SCHEMA = """
CREATE TABLE IF NOT EXISTS messages (
    seq INTEGER PRIMARY KEY,
    id TEXT NOT NULL UNIQUE,
    conversation_id TEXT,
    text TEXT NOT NULL,
    ts INTEGER NOT NULL,
    direction TEXT NOT NULL CHECK (direction IN ('user', 'ai'))
);
CREATE INDEX IF NOT EXISTS messages_ts ON messages (ts, seq);
CREATE INDEX IF NOT EXISTS messages_conversation_ts ON messages (conversation_id, ts, seq);
"""

# The FTS table holds the casefolded text, its rowid is messages.seq.
_FTS = {
    # Every 3-character window is a token: a quoted phrase is an exact substring query.
    "trigram": "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5("
    "folded, tokenize = 'trigram case_sensitive 1')",
    # Older SQLite: whole words only, so the index can only rule rows out (a prefilter).
    "unicode61": "CREATE VIRTUAL TABLE IF NOT EXISTS messages_fts USING fts5("
    "folded, tokenize = 'unicode61 remove_diacritics 0')",
}

_COLUMNS = "id, conversation_id, text, ts, direction"
# The same read back, the text columns as their bytes (see _to_entry).
_AS_BYTES = (
    "CAST(id AS BLOB), CAST(conversation_id AS BLOB), CAST(text AS BLOB), ts, "
    "CAST(direction AS BLOB)"
)


def trigram_supported() -> bool:
    """Return True when this SQLite has the FTS5 trigram tokenizer (3.34+)."""
    try:
        con = sqlite3.connect(":memory:")
        try:
            con.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'trigram')")
            return True
        finally:
            con.close()
    except sqlite3.Error:
        return False


def _phrase(s: str) -> str:
    """Return `s` as an FTS5 string literal (the only quoting FTS5 has: double the quotes)."""
    return '"' + s.replace('"', '""') + '"'


# ASCII letters and digits are token characters for unicode61, and every other ASCII
# character is a separator: only words bounded by those are sure to be whole tokens.
_ASCII_SEP = r"[\x00-\x2f\x3a-\x40\x5b-\x60\x7b-\x7f]"
_INNER_WORD = re.compile(rf"(?<={_ASCII_SEP})[a-z0-9]+(?={_ASCII_SEP})")
_LAST_WORD = re.compile(rf"(?<={_ASCII_SEP})[a-z0-9]+\Z")


def word_prefilter(folded: str) -> str | None:
    """Return an FTS5 unicode61 query that every row containing `folded` matches, or None.

    A word with a separator on both sides inside the needle is a whole token of any
    matching text; the last word, separated on its left only, is a token prefix. The
    first word may be the tail of a longer token, so it is never used.

    >>> word_prefilter("say near now")
    '"near" AND "now"*'
    >>> word_prefilter("zanzibar") is None
    True
    """
    words = [_phrase(w) for w in _INNER_WORD.findall(folded)]
    last = _LAST_WORD.search(folded)
    if last:
        words.append(_phrase(last.group()) + "*")
    return " AND ".join(words) or None


def _fts_match(kind: str, folded: str) -> str | None:
    if kind == "trigram":
        # Fewer than 3 characters have no trigram: those queries scan (the time filters
        # still use their index).
        return _phrase(folded) if len(folded) >= 3 else None
    return word_prefilter(folded)


def _contains(text: bytes | None, folded_needle: str) -> bool:
    # The text as its bytes: one that is not UTF-8 (another tool's) is named when read.
    return text is not None and folded_needle in fold(text.decode(errors="replace"))


def _connect(path: str, timeout: float) -> sqlite3.Connection:
    # Autocommit mode: transactions are explicit (BEGIN IMMEDIATE for writes), so two
    # processes never deadlock upgrading a read lock to a write lock.
    con = sqlite3.connect(path, timeout=timeout, isolation_level=None, check_same_thread=False)
    try:
        con.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
        sqlite_wal(con, timeout)  # another process may be setting the same new file up
        con.execute("PRAGMA synchronous = NORMAL")  # durable at checkpoints; WAL keeps it safe
        con.create_function("tn_contains", 2, _contains, deterministic=True)
    except BaseException:  # not a database, a read-only file: nothing left open
        con.close()
        raise
    return con


def _setup(con: sqlite3.Connection, fts: str) -> str:
    """Create the schema if needed; return the FTS kind the database actually uses."""
    con.execute("BEGIN IMMEDIATE")
    try:
        for stmt in filter(str.strip, _SCHEMA.split(";")):
            con.execute(stmt)
        row = con.execute(
            "SELECT sql FROM sqlite_master WHERE type = 'table' AND name = 'messages_fts'"
        ).fetchone()
        if row is None:
            con.execute(_FTS[fts])
            kind = fts
        else:  # an existing database keeps the index it was created with
            kind = "trigram" if "trigram" in row[0] else "unicode61"
        con.execute("COMMIT")
        return kind
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _to_entry(desc: str, row: tuple):
    try:  # the text columns come as their bytes: one not UTF-8 is named, not a crash
        eid, cid, text, ts, direction = (v.decode() if type(v) is bytes else v for v in row)
    except UnicodeDecodeError:
        name = row[0].decode(errors="replace") if type(row[0]) is bytes else row[0]
        raise StoreCorruptError(f"{desc}: entry {name!r:.120} is not UTF-8 text") from None
    return FrozenMap(
        {
            "id": eid,
            "conversation_id": cid,
            "text": text,
            "timestamp": from_micros(ts),
            "direction": direction,
        }
    )


def _where(q: Mapping, kind: str) -> tuple[list[str], list]:
    """Return the SQL conditions and parameters of a validated query."""
    conds, params = [], []
    if q["conversation_id"] is not None:
        conds.append("conversation_id = ?")
        params.append(q["conversation_id"])
    if q["since"] is not None:
        conds.append("ts >= ?")
        params.append(micros(q["since"]))
    if q["until"] is not None:
        conds.append("ts <= ?")
        params.append(micros(q["until"]))
    needle = q["contains"]
    if needle is not None:
        match = _fts_match(kind, needle)
        if match is not None:
            conds.append("seq IN (SELECT rowid FROM messages_fts WHERE messages_fts MATCH ?)")
            params.append(match)
        # The final word, whatever the index said (the text as its bytes: see _contains).
        conds.append("tn_contains(CAST(text AS BLOB), ?)")
        params.append(needle)
    return conds, params


def _open_error(what: str, e: sqlite3.DatabaseError) -> Exception:
    """Return the clear error for a message log file (`what`) that cannot be opened."""
    if not isinstance(e, sqlite3.OperationalError):  # not a database, malformed
        return StoreCorruptError(f"{what} is corrupt: {e}")
    if read_only(e):
        return StoreReadOnlyError(f"{what} is read-only ({e}): make it writable, or use --log")
    return StoreUnavailableError(
        f"{what} cannot be opened: {e} (is its directory writable? or pick another with --log)"
    )


def sqlite_log(path: str | Path, *, fts: str = "auto", timeout: float = 10.0) -> dict:
    """Return a message log in the SQLite file `path`, safe across threads and processes.

    `fts` picks the text index for a new file: "trigram" (exact substring index),
    "unicode61" (word index used as a prefilter, for SQLite older than 3.34) or
    "auto" (trigram when available). Searching is literal and case-insensitive either way.
    Extra keys: "record_many" (one transaction), "close", "fts" (the index in use).
    """
    if fts not in ("auto", "trigram", "unicode61"):
        raise ValueError(f"fts must be 'auto', 'trigram' or 'unicode61', got {fts!r}")
    if fts == "auto":
        fts = "trigram" if trigram_supported() else "unicode61"
    path = str(path)
    desc = f"message log sqlite_log({path!r})"
    try:
        con = _connect(path, timeout)
        kind = _setup(con, fts)
    except sqlite3.DatabaseError as e:  # read-only, not a database: a clear error
        raise _open_error(desc, e) from None
    st = _SqliteLog(con, kind, desc)

    def record_many(entries: Iterable[Mapping]) -> None:
        _record_many(st, entries)

    def record(e: Mapping) -> None:
        _record_many(st, (e,))

    def query(
        *,
        contains: str | None = None,
        since: datetime | None = None,
        until: datetime | None = None,
        limit: int | None = None,
        conversation_id: str | None = None,
    ) -> tuple:
        return _query(st, check_query(contains, since, until, limit, conversation_id))

    def clear(*, before: datetime | None = None, conversation_id: str | None = None) -> int:
        return _clear(st, before, conversation_id)

    def close() -> None:
        with st.lock:
            con.close()

    return {
        "record": record,
        "record_many": record_many,
        "query": query,
        "clear": clear,
        "close": close,
        "fts": kind,
        "desc": f"sqlite_log({Path(path).name!r})",
    }


class _SqliteLog:
    """What one SQLite log holds: its connection (used under a lock: sqlite3 objects
    must not be shared concurrently) and its text index."""

    __slots__ = ("con", "kind", "lock", "desc")

    def __init__(self, con: sqlite3.Connection, kind: str, desc: str):
        self.con, self.kind, self.lock, self.desc = con, kind, threading.Lock(), desc


def _record_many(st: _SqliteLog, entries: Iterable[Mapping]) -> None:
    checked = [check_entry(e) for e in entries]  # all or nothing: validate first
    if not checked:
        return
    con = st.con
    with st.lock, sqlite_errors(st.desc):
        con.execute("BEGIN IMMEDIATE")
        try:
            for e in checked:
                cur = con.execute(
                    f"INSERT OR IGNORE INTO messages ({_COLUMNS}) VALUES (?, ?, ?, ?, ?)",
                    (e["id"], e["conversation_id"], e["text"], micros(e["timestamp"]),
                     e["direction"]),
                )  # fmt: skip
                if cur.rowcount == 1:  # an id already recorded is left as it was
                    con.execute(
                        "INSERT INTO messages_fts (rowid, folded) VALUES (?, ?)",
                        (cur.lastrowid, fold(e["text"])),
                    )
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise


def _query(st: _SqliteLog, q: Mapping) -> tuple:
    if q["limit"] == 0:
        return ()
    conds, params = _where(q, st.kind)
    where = f"WHERE {' AND '.join(conds)}" if conds else ""
    # Newest `limit` first in the inner query, then back to oldest first.
    sql = (
        f"SELECT {_AS_BYTES} FROM (SELECT seq, {_COLUMNS} FROM messages {where} "
        "ORDER BY ts DESC, seq DESC LIMIT ?) ORDER BY ts, seq"
    )
    with st.lock, sqlite_errors(st.desc):
        rows = st.con.execute(sql, (*params, -1 if q["limit"] is None else q["limit"]))
        rows = rows.fetchall()
    return tuple(_to_entry(st.desc, r) for r in rows)


def _clear(st: _SqliteLog, before: datetime | None, conversation_id: str | None) -> int:
    conds, params = [], []
    if before is not None:
        conds, params = ["ts <= ?"], [micros(cutoff(before))]
    if conversation_id is not None:
        conds.append("conversation_id = ?")
        params.append(conversation_id)
    where = " WHERE " + " AND ".join(conds) if conds else ""
    con = st.con
    with st.lock, sqlite_errors(st.desc):
        con.execute("BEGIN IMMEDIATE")
        try:
            con.execute(
                f"DELETE FROM messages_fts WHERE rowid IN (SELECT seq FROM messages{where})",
                params,
            )
            removed = con.execute(f"DELETE FROM messages{where}", params).rowcount
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    return removed

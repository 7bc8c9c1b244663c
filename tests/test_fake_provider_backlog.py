"""The fake provider's listen backlog is fit for concurrency tests: 64 clients connecting
at once are all queued at once (with the default backlog of 5 the rest wait for SYN
retries, 1-10 s, and a test of concurrency measures the fake)."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

from toolnexus.testing import FakeProvider


def test_64_connections_queue_at_once_before_any_is_accepted():
    fp = FakeProvider([])  # not serving yet: nothing is accepted, all wait in the backlog
    port, conns = urlsplit(fp.url).port, []
    try:
        for _ in range(64):
            s = socket.socket()
            s.settimeout(0.5)  # the handshake completes at once while the backlog has room
            s.connect(("127.0.0.1", port))
            conns.append(s)
        assert len(conns) == 64
    finally:
        for s in conns:
            s.close()
        fp._server.server_close()

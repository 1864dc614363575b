"""A TCP forwarder that can cut its clients off from the server, and let them back.

It stands between a client and a port on 127.0.0.1 and passes bytes through
untouched, TLS included, so the client still talks to the real server.

``cut`` is a network partition as a client sees one: nothing is refused or
closed. The connections open at that moment go silent, new connections are
accepted and go silent too, and whatever is sent on them vanishes; a client
finds out only through its own timeouts. ``heal`` resets the connections the
cut stranded, as a peer that has forgotten them does, and forwards new ones
again.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
from dataclasses import dataclass, field
from types import TracebackType

CHUNK = 65536


def _reset(sock: socket.socket) -> None:
    """Close with an RST, waking a thread blocked reading it."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
    sock.close()


@dataclass(eq=False)
class _Link:
    """One client connection and, unless it was opened during a cut, its server side."""

    client: socket.socket
    server: socket.socket | None
    stranded: bool = False
    _closed: bool = field(default=False, repr=False)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        for sock in (self.client, self.server):
            if sock is not None:
                _reset(sock)


class TcpProxy:
    """Forwards ``127.0.0.1:port`` to ``127.0.0.1:upstream_port`` until it is cut."""

    def __init__(self, upstream_port: int) -> None:
        self._upstream = upstream_port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._cut = False
        self._links: set[_Link] = set()

    def __enter__(self) -> TcpProxy:
        threading.Thread(target=self._accept, name="proxy-accept", daemon=True).start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self._listener.close()
        with self._lock:
            links, self._links = self._links, set()
        for link in links:
            link.close()

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            for link in self._links:
                link.stranded = True

    def heal(self) -> None:
        with self._lock:
            self._cut = False
            stranded = {link for link in self._links if link.stranded}
            self._links -= stranded
        for link in stranded:
            link.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was closed
            with self._lock:
                if self._cut:
                    self._links.add(_Link(client, None, stranded=True))
                    continue
            try:
                server = socket.create_connection(("127.0.0.1", self._upstream))
            except OSError:
                _reset(client)
                continue
            link = _Link(client, server)
            with self._lock:
                link.stranded = self._cut
                self._links.add(link)
            for src, dst in ((client, server), (server, client)):
                threading.Thread(target=self._pump, args=(link, src, dst), daemon=True).start()

    def _pump(self, link: _Link, src: socket.socket, dst: socket.socket) -> None:
        """Copy one direction; a stranded link swallows what arrives and waits for the heal."""
        while True:
            try:
                data = src.recv(CHUNK)
            except OSError:
                break
            if not data:
                break
            if link.stranded:
                continue
            try:
                dst.sendall(data)
            except OSError:
                break
        with self._lock:
            if link.stranded:
                return  # the heal resets it: nothing crosses a cut, not even an end
            self._links.discard(link)
        link.close()

import json
import os
import socket
import sys
import tempfile
import threading
import time

import pytest

PYTHON_DIR = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
if PYTHON_DIR not in sys.path:
    sys.path.insert(0, PYTHON_DIR)

import brim  # noqa: E402,F401  (imported first, as a job would)
from brim import _env, _state, _tracking  # noqa: E402

import schema_check  # noqa: E402
from limits import scaled  # noqa: E402


def pytest_configure(config):
    config.addinivalue_line(
        "markers",
        "any_torch: what the test proves does not depend on PyTorch's release (no torch, stand-ins, the "
        "README's example jobs); scripts/test.mjs leaves it out of the run on the oldest PyTorch",
    )


class Connection:
    def __init__(self, sock):
        self.sock = sock
        self.messages = []
        self.raw_lines = []
        self.closed = False

    def send(self, msg):
        self.sock.sendall((json.dumps(msg) + "\n").encode())


class FakeBrim:
    """A brim channel server: a real Unix socket, one thread per connection, newline-delimited
    JSON. on_message(conn, msg) may answer through conn.send()."""

    def __init__(self, on_message=None):
        self.dir = tempfile.mkdtemp(prefix="brim-test-")
        self.path = os.path.join(self.dir, "ch.sock")
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(self.path)
        self.sock.listen(16)
        self.connections = []
        self.on_message = on_message
        self.acks = True
        self.lock = threading.RLock()  # predicates of wait_for() may call messages()
        self.changed = threading.Condition(self.lock)
        self._stop = False
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self):
        while not self._stop:
            try:
                s, _ = self.sock.accept()
            except OSError:
                return
            conn = Connection(s)
            with self.lock:
                self.connections.append(conn)
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        buf = b""
        while True:
            try:
                chunk = conn.sock.recv(65536)
            except OSError:
                chunk = b""
            if not chunk:
                with self.changed:
                    conn.closed = True
                    self.changed.notify_all()
                return
            buf += chunk
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                msg = json.loads(line.decode())
                with self.changed:
                    conn.raw_lines.append(line)
                    conn.messages.append(msg)
                    self.changed.notify_all()
                if self.on_message is not None:
                    self.on_message(conn, msg)
                if msg.get("ack") is True and self.acks:  # as brim does, once the event is handled: the SDK waits for it
                    conn.send({"v": 1, "type": "ack", "kind": msg.get("kind")})

    def messages(self, type_=None):
        with self.lock:
            out = [m for c in self.connections for m in c.messages]
        return [m for m in out if type_ is None or m["type"] == type_]

    def wait_for(self, predicate, timeout=10.0):
        deadline = time.monotonic() + scaled(timeout)
        with self.changed:
            while not predicate():
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise AssertionError("timed out waiting; messages so far: %r" % self._all_unlocked())
                self.changed.wait(remaining)

    def _all_unlocked(self):
        return [m for c in self.connections for m in c.messages]

    def close(self):
        self._stop = True
        try:
            self.sock.close()
        except OSError:
            pass
        for c in self.connections:
            try:
                c.sock.shutdown(socket.SHUT_RDWR)  # wakes the reader thread; the peer sees EOF
            except OSError:
                pass
            try:
                c.sock.close()
            except OSError:
                pass
        try:
            os.unlink(self.path)
            os.rmdir(self.dir)
        except OSError:
            pass


@pytest.fixture(autouse=True)
def clean_brim(monkeypatch):
    """Every test starts with no BRIM_* variable and fresh SDK state."""
    for key in list(os.environ):
        if key.startswith("BRIM_"):
            monkeypatch.delenv(key)
    _state.state.reset()
    _tracking.reset()
    _env._warned.clear()
    _env._int_cache.clear()
    _env._knob_cache = (None, {})
    yield
    _tracking.reset()
    _state.state.reset()


@pytest.fixture
def server(monkeypatch):
    srv = FakeBrim()
    monkeypatch.setenv("BRIM_CHANNEL", srv.path)
    yield srv
    srv.close()


@pytest.fixture(scope="session")
def channel_schema():
    return schema_check.load("channel.v1.json")


@pytest.fixture(scope="session")
def profile_schema():
    return schema_check.load("model-profile.v1.json")


def flush_channel(srv, n_messages, timeout=10.0):
    """Wait until the server has received n_messages in total (sending the steps the SDK batches)."""
    _tracking.flush(force=True)
    srv.wait_for(lambda: len(srv._all_unlocked()) >= n_messages, timeout)


@pytest.fixture
def srv():
    """A fake brim listening on its own socket, for the tests that run a job under it."""
    s = FakeBrim()
    yield s
    s.close()

"""The channel to brim: newline-delimited JSON over a Unix domain socket (docs/schemas/channel.v1.json).

One connection per process. The first line on every connection is a "hello". A process that was
forked after connecting (a DataLoader worker) drops the inherited connection and opens its own.
Any failure (no server, refused, path too long, broken pipe, a stuck server) prints one warning on
stderr and turns the channel into a no-op for the rest of the process: the job never dies of it.
"""

import json
import math
import os
import platform
import select
import socket
import sys
import threading
import time
from typing import Any, Dict, Iterable, List, Optional, Tuple, cast

from . import _env

PROTOCOL_VERSION = 1
CONNECT_TIMEOUT_S = 2.0
SEND_TIMEOUT_S = 10.0
MAX_INBOUND_LINE = 1 << 20

# Frameworks named in the hello when the job has imported them (never imported by the SDK).
_FRAMEWORK_MODULES = ("torch", "lightning", "pytorch_lightning", "transformers", "jax", "jaxlib", "tensorflow")


def _json_safe(obj: Any) -> Any:
    """Copy of obj that json can write: non-finite floats become "nan"/"inf"/"-inf", tensors and
    numpy scalars become numbers, tuples become lists."""
    if obj is None or isinstance(obj, (bool, int, str)):
        return obj
    if isinstance(obj, float):
        if math.isfinite(obj):
            return obj
        return "nan" if obj != obj else ("inf" if obj > 0 else "-inf")
    if isinstance(obj, dict):
        return {str(k): _json_safe(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_json_safe(v) for v in obj]
    item = getattr(obj, "item", None)
    if callable(item):
        try:
            return _json_safe(item())
        except Exception:
            pass
    tolist = getattr(obj, "tolist", None)
    if callable(tolist):
        try:
            return _json_safe(tolist())
        except Exception:
            pass
    return str(obj)


def encode(msg: Dict[str, Any]) -> bytes:
    """One message as one line of UTF-8 JSON ending in a newline."""
    try:  # the common case: plain values only (walking every value first costs more than the dump)
        text = json.dumps(msg, separators=(",", ":"), allow_nan=False)
    except (TypeError, ValueError):
        text = json.dumps(_json_safe(msg), separators=(",", ":"), allow_nan=False)
    return (text + "\n").encode("utf-8")


def _role() -> str:
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            if torch.utils.data.get_worker_info() is not None:
                return "loader_worker"
        except Exception:
            pass
    return "main"


def framework_versions() -> Dict[str, str]:
    """Versions of the frameworks this process has imported (name -> version string)."""
    versions: Dict[str, str] = {}
    for name in _FRAMEWORK_MODULES:
        mod = sys.modules.get(name)
        if mod is None:
            continue
        v = getattr(mod, "__version__", None)
        versions[name] = str(v) if v is not None else "unknown"
    torch = sys.modules.get("torch")
    if torch is not None:
        try:
            cuda = getattr(getattr(torch, "version", None), "cuda", None)
            if cuda:
                versions["cuda"] = str(cuda)
            cudnn = _cudnn_version(torch)
            if cudnn:
                versions["cudnn"] = str(cudnn)
        except Exception:
            pass
    return versions


def _cudnn_version(torch: Any) -> Optional[int]:
    """cuDNN's runtime version as torch.backends.cudnn.version() gives it, without initialising CUDA:
    that call checks the device's capability, which creates the CUDA context, runs the job's
    lazy-init hooks (brim's own memory cap among them) and may pick a device the job does not use."""
    cudnn = getattr(torch.backends, "cudnn", None)
    if cudnn is None or not cudnn.is_available():
        return None
    if torch.cuda.is_initialized():
        return cudnn.version()
    runtime = getattr(getattr(torch._C, "_cudnn", None), "getRuntimeVersion", None)
    if runtime is None:
        return None
    major, minor, patch = runtime()
    return major * 10000 + minor * 100 + patch if major >= 9 else major * 1000 + minor * 100 + patch


def primary_framework(versions: Dict[str, str]) -> str:
    for name in ("torch", "jax", "tensorflow"):
        if name in versions:
            return name
    return "none"


def hello_message(sdk_version: str) -> Dict[str, Any]:
    versions = framework_versions()
    return {
        "v": PROTOCOL_VERSION,
        "type": "hello",
        "t": time.time(),
        "pid": os.getpid(),
        "ppid": os.getppid(),
        "run_id": _env.run_id(),
        "rank": _env.rank(),
        "local_rank": _env.local_rank(),
        "group_rank": _env.group_rank(),
        "launch_id": _env.launch_id(),
        "world_size": _env.launcher_int("WORLD_SIZE"),
        "role": _role(),
        "python": platform.python_version(),
        "sdk": sdk_version,
        "framework": primary_framework(versions),
        "versions": versions,
        "argv": [str(a) for a in sys.argv],
        "host": socket.gethostname(),
        "token": _env.channel_token(),
    }


class Channel:
    """Client end of the channel. Thread-safe; fork-aware; never raises from send() or poll()."""

    def __init__(self, path: str, sdk_version: str) -> None:
        self.path = path
        self.sdk_version = sdk_version
        self._lock = threading.Lock()
        self._owner: Optional[int] = None
        self._reentered: List[Tuple[bytes, int]] = []
        self._sock: Optional[socket.socket] = None
        self._pid: Optional[int] = None
        self._dead = False
        self._inbuf = b""
        self._pending: List[Dict[str, Any]] = []
        self.sent = 0

    # -- state ------------------------------------------------------------------------------
    @property
    def connected(self) -> bool:
        return self._sock is not None and self._pid == os.getpid()

    @property
    def dead(self) -> bool:
        return self._dead

    def after_fork_in_child(self) -> None:
        """Forget the parent's connection (without shutting it down: it is the parent's)."""
        self._lock = threading.Lock()
        self._owner = None
        self._reentered = []
        sock, self._sock = self._sock, None
        self._pid = None
        self._inbuf = b""
        self._pending = []
        self.sent = 0
        if sock is not None:
            # close(2) on the child's copy of the descriptor; unlike shutdown() it leaves the
            # parent's connection intact.
            try:
                sock.close()
            except Exception:
                pass

    def _fail(self, why: str) -> None:
        self._dead = True
        sock, self._sock = self._sock, None
        if sock is not None:
            try:
                sock.close()
            except Exception:
                pass
        _env.warn_once("channel", "brim channel %s: %s; the job goes on without reporting to brim" % (self.path, why))

    def _connect(self) -> None:
        path = self.path
        if path.startswith("@"):  # Linux abstract namespace
            path = "\0" + path[1:]
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(CONNECT_TIMEOUT_S)
            sock.connect(path)
            sock.setblocking(False)
        except Exception:
            sock.close()
            raise
        self._sock = sock
        self._pid = os.getpid()
        self._sendall(encode(hello_message(self.sdk_version)))

    def _sendall(self, data: bytes) -> None:
        sock = cast(socket.socket, self._sock)  # connected: the callers check (None raises, as before)
        view = memoryview(data)
        deadline = time.monotonic() + SEND_TIMEOUT_S
        flags = getattr(socket, "MSG_NOSIGNAL", 0)
        while view:
            try:
                n = sock.send(view, flags)
                view = view[n:]
            except (BlockingIOError, InterruptedError):
                remaining = deadline - time.monotonic()
                if remaining <= 0:
                    raise TimeoutError("the server did not read for %.0f s" % SEND_TIMEOUT_S)
                select.select([], [sock], [], remaining)

    # -- API --------------------------------------------------------------------------------
    def send(self, msg: Dict[str, Any]) -> bool:
        """Send one message; True when it was written to the socket."""
        if self._dead:
            return False
        try:
            data = encode(msg)
        except Exception as e:  # a value json cannot write: drop this message, keep the channel
            _env.warn_once("encode", "a message could not be encoded and was dropped (%s)" % e)
            return False
        return self._write(data, 1)

    def send_many(self, msgs: Iterable[Dict[str, Any]]) -> bool:
        """Send several messages in one write; True when they were written to the socket."""
        if self._dead:
            return False
        parts: List[bytes] = []
        for msg in msgs:
            try:
                parts.append(encode(msg))
            except Exception as e:
                _env.warn_once("encode", "a message could not be encoded and was dropped (%s)" % e)
        if not parts:
            return True
        return self._write(b"".join(parts), len(parts))

    def _write(self, data: bytes, count: int) -> bool:
        me = threading.get_ident()
        if self._owner == me:
            # a send from inside this thread's own send (connecting reads the framework's versions,
            # which can run the job's hooks and brim's): the outer send writes it once it is done
            self._reentered.append((data, count))
            return True
        with self._lock:
            if self._dead:
                return False
            self._owner = me
            try:
                if self._pid != os.getpid():
                    if self._sock is not None:  # forked without the at-fork hook having run
                        self.after_fork_in_child()
                        self._owner = me
                    self._connect()
                self._sendall(data)
                self.sent += count
                while self._reentered:
                    more, n = self._reentered.pop(0)
                    self._sendall(more)
                    self.sent += n
                return True
            except Exception as e:
                self._fail("%s: %s" % (type(e).__name__, e) if str(e) else type(e).__name__)
                return False
            finally:
                self._owner = None

    def poll(self) -> List[Dict[str, Any]]:
        """Server-to-client messages that have arrived, without waiting. Never connects."""
        if self._dead or not self.connected or self._owner == threading.get_ident():
            return []
        with self._lock:
            self._receive()
            out, self._pending = self._pending, []
        return out

    def wait_for(self, kind: str, timeout_s: float) -> bool:
        """Wait (at most timeout_s) for a server message of this type, keeping the others for poll().
        True when it came. Used once per process, never in a step: brim answers an event sent with
        "ack" after it has handled it, so that what the job writes next reaches brim after it."""
        if self._dead or not self.connected or self._owner == threading.get_ident():
            return False
        deadline = time.monotonic() + timeout_s
        with self._lock:
            while True:
                self._receive()
                for i, msg in enumerate(self._pending):
                    if msg.get("type") == kind:
                        del self._pending[i]
                        return True
                remaining = deadline - time.monotonic()
                if self._dead or self._sock is None or remaining <= 0:
                    return False
                try:
                    select.select([self._sock], [], [], remaining)
                except Exception:
                    return False

    def _receive(self) -> None:
        """Reads what the server sent so far into self._pending (the lock held)."""
        sock = cast(socket.socket, self._sock)  # connected (a close since then raises below, as before)
        try:
            while True:
                try:
                    chunk = sock.recv(65536)
                except (BlockingIOError, InterruptedError):
                    break
                if not chunk:
                    self._fail("the server closed the connection")
                    break
                self._inbuf += chunk
                if len(self._inbuf) > MAX_INBOUND_LINE and b"\n" not in self._inbuf:
                    self._inbuf = b""
                    _env.warn_once("inbound", "dropped an over-long line from the server")
        except Exception as e:
            self._fail("%s: %s" % (type(e).__name__, e))
        while b"\n" in self._inbuf:
            line, self._inbuf = self._inbuf.split(b"\n", 1)
            line = line.strip()
            if not line:
                continue
            try:
                msg = json.loads(line.decode("utf-8"))
            except ValueError:
                _env.warn_once("inbound-json", "ignored a line from the server that is not JSON")
                continue
            if isinstance(msg, dict) and msg.get("v") == PROTOCOL_VERSION and isinstance(msg.get("type"), str):
                self._pending.append(msg)
            else:
                _env.warn_once("inbound-version", "ignored a message from the server of an unknown version/type")

    def close(self) -> None:
        with self._lock:
            sock, self._sock = self._sock, None
            if sock is not None and self._pid == os.getpid():
                try:
                    sock.close()
                except Exception:
                    pass

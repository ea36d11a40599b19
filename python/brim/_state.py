"""The process's state under brim: its channel, the steps counted, why it should stop, and the
messages brim sent back (stop, shrink). Standard library only."""

import os
import time
from typing import Any, Dict, List, Optional, Set

from . import _env
from ._channel import PROTOCOL_VERSION, Channel

SDK_VERSION = "0.1.0"


class State:
    """Everything the SDK keeps per process (one instance, `state`)."""

    def __init__(self) -> None:
        self.channel: Optional[Channel] = None  # created on first use when BRIM_CHANNEL is set
        self.channel_path: Optional[str] = None
        self.reset()

    def reset(self) -> None:
        channel: Optional[Channel] = getattr(self, "channel", None)
        if channel is not None:
            channel.close()
        self.channel = None
        self.channel_path = None
        self.steps = 0  # steps counted in this process (SDK and attach together, each once)
        self.sdk_steps = 0  # of which reported through the SDK (brim.track, report_step, callbacks)
        self.stop_reason: Optional[str] = None  # "budget" | "server" (a stop request from brim)
        self.budget_event_sent = False
        self.shrink_requests = 0
        self.knobs_reported: Set[str] = set()
        self.polled_at = 0.0


state = State()


def _after_fork_in_child() -> None:
    if state.channel is not None:
        state.channel.after_fork_in_child()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def channel() -> Optional[Channel]:
    """The process's channel, or None when not under brim. Re-reads BRIM_CHANNEL (cheap)."""
    path = _env.channel_path()
    if path is None:
        return None
    if state.channel is None or state.channel_path != path:
        if state.channel is not None:
            state.channel.close()
        state.channel = Channel(path, SDK_VERSION)
        state.channel_path = path
    return state.channel


def connected() -> bool:
    """True when this process has opened its channel already."""
    return state.channel is not None and state.channel.connected


def active() -> bool:
    """True when the job runs under brim (BRIM_CHANNEL is set)."""
    return _env.channel_path() is not None


def send(msg: Dict[str, Any]) -> bool:
    """Send one raw message (a dict with "type"; "v", "t" and "pid" are filled in unless given).
    False when not under brim or the channel is down. Never raises for channel problems."""
    ch = channel()
    if ch is None:
        return False
    full: Dict[str, Any] = {"v": PROTOCOL_VERSION, "type": msg.get("type"), "t": time.time(), "pid": os.getpid()}
    full.update(msg)
    ok = ch.send(full)
    if ok:
        poll(ch)
    return ok


POLL_EVERY_S = 0.02  # a stop or shrink request waits at most this long; a step polls once at most


def send_many(msgs: List[Dict[str, Any]]) -> bool:
    """Send several messages in one write (steps are sent in batches: a write wakes brim's
    process, which costs more than the step's own bookkeeping)."""
    ch = channel()
    if ch is None:
        return False
    now, pid = time.time(), os.getpid()
    full = []
    for msg in msgs:
        m: Dict[str, Any] = {"v": PROTOCOL_VERSION, "type": msg.get("type"), "t": now, "pid": pid}
        m.update(msg)
        full.append(m)
    ok = ch.send_many(full)
    if ok:
        poll(ch)
    return ok


def poll(ch: Optional[Channel] = None, force: bool = False) -> None:
    """Read what brim sent (stop, shrink) without waiting (at most every POLL_EVERY_S unless forced)."""
    now = time.monotonic()
    if not force and now - state.polled_at < POLL_EVERY_S:
        return
    ch = ch or (state.channel if _env.channel_path() else None)
    if ch is None:
        return
    state.polled_at = now
    for msg in ch.poll():
        kind = msg.get("type")
        if kind == "stop":
            if state.stop_reason is None:
                state.stop_reason = "server"
        elif kind == "shrink":
            state.shrink_requests += 1
        # unknown request types are ignored: the server may be newer than this SDK


def take_shrink_requests() -> int:
    """How many shrink requests arrived since the last call (used by brim.torch.TrainStep)."""
    poll(force=True)
    n, state.shrink_requests = state.shrink_requests, 0
    return n


def event(kind: str, message: Optional[str] = None, step: Optional[int] = None, **details: Any) -> bool:
    """Report an event (e.g. "oom_recovered") with free-form details. No-op when not under brim."""
    if not active():
        return False
    return send({"type": "event", "kind": str(kind), "step": step, "message": message, "details": details})


ACK_TIMEOUT_S = 5.0


def event_acknowledged(kind: str, message: Optional[str] = None, **details: Any) -> bool:
    """Report an event and wait (at most ACK_TIMEOUT_S, once: never in a step) until brim has handled
    it: what the job writes after it (a progress bar on stderr, which brim reads on another pipe)
    then reaches brim after the event. True when brim answered."""
    if not active():
        return False
    msg = {"v": PROTOCOL_VERSION, "type": "event", "t": time.time(), "pid": os.getpid(), "kind": str(kind), "step": None, "message": message}
    msg.update(details=details, ack=True)
    ch = channel()
    if ch is None or not ch.send(msg):
        return False
    return ch.wait_for("ack", ACK_TIMEOUT_S)


def note_knob(name: str, value: Any, default: Any, source: str) -> None:
    """Tell brim once per knob which value the job read."""
    if name not in state.knobs_reported and active():
        state.knobs_reported.add(name)
        event("knob_read", name=name, value=value, default=default, source=source)


def close() -> None:
    ch = state.channel
    if ch is not None:
        ch.close()

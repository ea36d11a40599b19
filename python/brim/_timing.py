"""Step timing that never blocks the host (no device synchronize in the job's hot path).

On CPU a data wait is the host time spent fetching the batch. On a CUDA device it is the time the
device had no work queued while the loop fetched: an event recorded in the stream when the fetch
begins completes when the work queued before it is done; a second event recorded when the fetch
ends completes right after (or at once, when the device was already idle). The time between the
two is the device's idle time caused by the fetch. Events are only queried (`query()`, which does
not wait), so a step's numbers are known a little later; `PendingSteps` holds the finished steps
until their events have completed and hands them out in order.
"""

import sys
import time
from collections import deque
from typing import Any, Callable, Deque, Dict, List, Optional, Tuple

EventFactory = Callable[[], Any]


def _cuda_event_factory() -> Optional[EventFactory]:
    """torch.cuda.Event(enable_timing=True), once the job itself has initialised CUDA."""
    torch = sys.modules.get("torch")
    if torch is None:
        return None
    try:
        if not torch.cuda.is_initialized():
            return None
    except Exception:
        return None
    event_cls = torch.cuda.Event
    return lambda: event_cls(enable_timing=True)


class Wait:
    """One data wait: the host seconds of the fetch, and on a GPU the two events around it."""

    __slots__ = ("host_s", "_begin", "_end", "_clock", "_value")

    def __init__(self, host_s: float, begin: Any = None, end: Any = None, clock: "Optional[DeviceClock]" = None):
        self.host_s = max(0.0, host_s)
        self._begin = begin
        self._end = end
        self._clock = clock
        self._value: Optional[float] = None if end is not None else self.host_s

    def ready(self) -> bool:
        """True when the value is known (never waits)."""
        if self._value is not None:
            return True
        try:
            done = bool(self._end.query())
        except Exception:
            self._give_up()
            return True
        if done:
            self._resolve()
        return done

    def value(self, block: bool = False) -> Optional[float]:
        """Seconds the device was idle during the fetch (host seconds on CPU). With block=True it
        waits for the end event (only for the last steps, at exit or at the step budget)."""
        if self._value is None:
            if block:
                try:
                    self._end.synchronize()
                except Exception:
                    self._give_up()
                    return self._value
                self._resolve()
            elif not self.ready():
                return None
        return self._value

    def _resolve(self) -> None:
        try:
            idle = float(self._begin.elapsed_time(self._end)) / 1000.0
        except Exception:
            self._give_up()
            return
        self._value = min(max(0.0, idle), self.host_s)
        self._release()

    def _give_up(self) -> None:
        # the events are unusable (device reset, another device's stream): the host time is an
        # upper bound of the device's idle time, and the honest fallback
        self._value = self.host_s
        self._release()

    def _release(self) -> None:
        if self._clock is not None and self._begin is not None:
            self._clock._recycle(self._begin, self._end)
        self._begin = self._end = self._clock = None


class DeviceClock:
    """Times data fetches without blocking: `token = clock.fetch_begin()` before asking for the
    batch, `wait = clock.fetch_end(token)` after it arrived.

    event_factory: makes events with record(), query(), elapsed_time(other) in milliseconds and
    synchronize() (torch.cuda.Event's interface); default: CUDA events once the job has
    initialised CUDA, else host time only."""

    def __init__(self, event_factory: Optional[EventFactory] = None):
        self._factory = event_factory
        self._pool: List[Any] = []

    def _events(self) -> Optional[EventFactory]:
        if self._factory is None:
            self._factory = _cuda_event_factory()
        return self._factory

    def _event(self, factory: EventFactory) -> Any:
        ev = self._pool.pop() if self._pool else factory()
        ev.record()
        return ev

    def _recycle(self, *events: Any) -> None:
        if len(self._pool) < 256:
            self._pool.extend(events)

    def fetch_begin(self) -> Tuple[float, Any]:
        factory = self._events()
        ev = None
        if factory is not None:
            try:
                ev = self._event(factory)
            except Exception:
                ev = None
        return time.perf_counter(), ev

    def fetch_end(self, token: Tuple[float, Any]) -> Wait:
        t0, begin = token
        host = time.perf_counter() - t0
        if begin is None or self._factory is None:
            return Wait(host)
        try:
            end = self._event(self._factory)
        except Exception:
            return Wait(host)
        return Wait(host, begin, end, self)


class PendingSteps:
    """Finished steps waiting for their data wait to be known, handed out in order.

    push(fields, wait, interval_s): fields of one step message; wait_s becomes the device idle time
    and compute_s the rest of the step's interval (so wait_s + compute_s is the step's wall time
    and samples / (wait_s + compute_s) is the rate the job ran at)."""

    def __init__(self) -> None:
        self._queue: Deque[Tuple[Dict[str, Any], Any, Optional[float], Any]] = deque()

    def __len__(self) -> int:
        return len(self._queue)

    def push(self, fields: Dict[str, Any], wait: Any, interval_s: Optional[float], loss: Any = None) -> None:
        """loss: the step's lazy reads (brim._loss.Read or StepReads) that fill fields["loss"] and "extra"."""
        self._queue.append((fields, wait, interval_s, loss))

    def clear(self) -> None:
        self._queue.clear()

    def ready(self, block: bool = False) -> List[Dict[str, Any]]:
        """The steps whose numbers are known, oldest first (all of them with block=True)."""
        out = []
        while self._queue:
            fields, wait, interval, loss = self._queue[0]
            if not block and ((wait is not None and not wait.ready()) or (loss is not None and not loss.ready())):
                break
            self._queue.popleft()
            if loss is not None:
                loss.fill(fields)
            if wait is not None:
                w = wait.value(block=True)
                fields["wait_s"] = w
                if interval is not None and w is not None:
                    fields["compute_s"] = max(0.0, interval - w)
            elif interval is not None and fields.get("compute_s") is None:
                fields["compute_s"] = interval
            out.append(fields)
        return out


class WaitSum:
    """The data waits of several fetches inside one step (accumulation: several batches per
    optimizer step), with Wait's interface."""

    __slots__ = ("_waits", "host_s")

    def __init__(self, waits: List[Wait]):
        self._waits = waits
        self.host_s = sum(w.host_s for w in waits)

    def ready(self) -> bool:
        return all(w.ready() for w in self._waits)

    def value(self, block: bool = False) -> Optional[float]:
        total = 0.0
        for w in self._waits:
            v = w.value(block=block)
            if v is None:
                return None
            total += v
        return total

"""Time limits of the tests, scaled for the machine as test/helpers/time.ts scales the TypeScript
tests' (BRIM_TEST_TIME_SCALE, or 1 + the one-minute load per core, at most 4): a limit only catches a
hang, never judges speed, so on a busy machine it grows instead of failing a test that would pass."""

import os


def time_scale() -> float:
    raw = os.environ.get("BRIM_TEST_TIME_SCALE", "")
    if raw != "":
        try:
            given = float(raw)
        except ValueError:
            given = 0.0
        if not given >= 1:
            raise ValueError("BRIM_TEST_TIME_SCALE must be a number >= 1, got %r" % raw)
        return given
    return min(4.0, 1.0 + max(0.0, os.getloadavg()[0]) / max(1, os.cpu_count() or 1))


def scaled(seconds: float) -> float:
    """A limit in seconds, scaled for this machine now."""
    return seconds * time_scale()

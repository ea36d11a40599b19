"""The channel against a real Unix socket server: framing, schema, server requests, failures."""

import math
import os
import socket
import threading
import time

import brim
import schema_check
from conftest import FakeBrim, flush_channel
from limits import scaled


def test_round_trip_messages_match_schema(server, channel_schema, monkeypatch):
    monkeypatch.setenv("BRIM_KNOBS", '{"batch_size": 4}')
    monkeypatch.setenv("BRIM_RUN_ID", "run-42")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("WORLD_SIZE", "2")
    assert brim.active()
    assert brim.knob("batch_size", 64) == 4
    batches = [[0.0] * 4, [1.0] * 4, [2.0] * 4]
    seen = []
    for i, batch in enumerate(brim.track(batches)):
        time.sleep(0.01)
        seen.append(batch)
        brim.log(loss=1.5 - i, micro_batch=4, accumulation=1, lr=0.1)
    assert seen == batches
    brim.event("custom", message="hello there", answer=42)
    brim.send({"type": "profile", "profile": {"schema": "brim.model-profile"}, "path": None})
    flush_channel(server, 1 + 1 + 3 + 1 + 1)

    assert len(server.connections) == 1
    msgs = server.connections[0].messages
    for m in msgs:
        schema_check.check(m, channel_schema)
        schema_check.check(m, {"$ref": "#/$defs/client_message", "$defs": channel_schema["$defs"]})
    hello = msgs[0]
    assert hello["type"] == "hello" and hello["v"] == 1
    assert hello["pid"] == os.getpid() and hello["ppid"] == os.getppid()
    assert hello["run_id"] == "run-42" and hello["rank"] == 1 and hello["world_size"] == 2
    assert hello["local_rank"] is None
    assert hello["sdk"] == brim.__version__ and hello["role"] == "main"
    steps = [m for m in msgs if m["type"] == "step"]
    assert [s["step"] for s in steps] == [0, 1, 2]
    assert [s["loss"] for s in steps] == [1.5, 0.5, -0.5]
    assert all(s["samples"] == 4 and s["micro_batch"] == 4 and s["accumulation"] == 1 for s in steps)
    assert all(s["compute_s"] >= 0.009 and s["wait_s"] >= 0 for s in steps)
    assert all(s["extra"] == {"lr": 0.1} for s in steps)
    assert all(s["mem"]["device"] == "cpu" and s["mem"]["rss"] > 0 for s in steps)
    knob_events = [m for m in msgs if m["type"] == "event" and m["kind"] == "knob_read"]
    assert knob_events[0]["details"] == {"name": "batch_size", "value": 4, "default": 64, "source": "knobs"}
    custom = [m for m in msgs if m["type"] == "event" and m["kind"] == "custom"][0]
    assert custom["message"] == "hello there" and custom["details"] == {"answer": 42}
    # framing: one JSON object per line, no embedded newlines, nothing but JSON
    assert all(b"\n" not in line for line in server.connections[0].raw_lines)


def test_schema_rejects_malformed_messages(channel_schema):
    good = {"v": 1, "type": "step", "t": 1.0, "pid": 3, "step": 0, "samples": 8, "wait_s": 0.1,
            "compute_s": 0.2, "warmup": False, "micro_batch": None, "accumulation": None,
            "loss": "nan", "mem": {"device": "cpu"}}
    schema_check.check(good, channel_schema)
    bad = [
        dict(good, v=2),
        dict(good, loss="NaN"),
        dict(good, step=-1),
        dict(good, samples=1.5),
        dict(good, warmup=0),
        dict(good, unknown_field=1),
        {k: v for k, v in good.items() if k != "wait_s"},
        dict(good, mem={"device": "cpu", "allocated": "1"}),
        {"v": 1, "type": "nonsense"},
        {"v": 1, "type": "shrink", "factor": "x"},
    ]
    for m in bad:
        assert schema_check.errors(m, channel_schema), m
    schema_check.check({"v": 1, "type": "shrink", "reason": "cap"}, channel_schema)
    schema_check.check({"v": 1, "type": "stop"}, channel_schema)


def test_nonfinite_loss_is_sent_as_string(server, channel_schema):
    for _ in brim.track(range(2)):
        brim.log(loss=math.nan)
    flush_channel(server, 3)
    steps = server.messages("step")
    assert [s["loss"] for s in steps] == ["nan", "nan"]
    for s in steps:
        schema_check.check(s, channel_schema)


def test_server_stop_request_ends_the_loop(server):
    sent = threading.Event()

    def on_message(conn, msg):
        if msg["type"] == "event" and msg["kind"] == "ask_stop":
            conn.send({"v": 1, "type": "stop", "reason": "trial pruned"})
            sent.set()

    server.on_message = on_message
    tracker = brim.track(range(100))
    got = []
    for i in tracker:
        got.append(i)
        if i == 1:
            brim.event("ask_stop")
            assert sent.wait(5)
            time.sleep(0.05)  # the request is on its way through the socket
    # step 1 finished; the stop request was read at the step boundary
    assert got == [0, 1]
    assert tracker.stopped_by_server and not tracker.stopped_by_budget
    assert brim.should_stop() and brim.stop_reason() == "server"
    server.wait_for(lambda: len(server.messages("step")) == 2)


def test_an_acknowledged_event_waits_for_brim_and_keeps_what_came_before(server):
    from brim import _state

    def on_message(conn, msg):
        if msg["type"] == "event" and msg["kind"] == "attach_on":
            conn.send({"v": 1, "type": "stop", "reason": "before the ack"})

    server.on_message = on_message
    assert _state.event_acknowledged("attach_on", message="m", framework="torch") is True
    (sent,) = server.messages("event")
    assert sent["ack"] is True and sent["details"] == {"framework": "torch"}
    # the stop that came before the ack is read at the next poll, not lost in the wait
    _state.poll(force=True)
    assert brim.stop_reason() == "server"


def test_an_acknowledged_event_goes_on_without_an_answer(server, monkeypatch):
    from brim import _state

    server.acks = False
    monkeypatch.setattr(_state, "ACK_TIMEOUT_S", 0.2)
    started = time.monotonic()
    assert _state.event_acknowledged("attach_on") is False
    assert time.monotonic() - started < scaled(5)
    brim.event("after")
    server.wait_for(lambda: [m["kind"] for m in server.messages("event")] == ["attach_on", "after"])


def test_unknown_server_messages_are_ignored(server):
    def on_message(conn, msg):
        if msg["type"] == "hello":
            conn.sock.sendall(b'{"v":1,"type":"future-thing"}\nnot json\n{"v":9,"type":"stop"}\n')

    server.on_message = on_message
    got = [i for i in brim.track(range(5)) if not time.sleep(0.01)]
    assert got == [0, 1, 2, 3, 4]
    assert brim.stop_reason() is None


def test_no_server_warns_once_and_runs_on(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("BRIM_CHANNEL", str(tmp_path / "nobody-listens.sock"))
    t0 = time.monotonic()
    got = list(brim.track(range(50)))
    brim.event("x")
    assert got == list(range(50))
    assert time.monotonic() - t0 < scaled(2)  # a hang detector: the limit grows with the machine's load
    err = capsys.readouterr().err
    assert err.count("brim: warning:") == 1 and "nobody-listens.sock" in err
    assert brim.send({"type": "event", "kind": "y"}) is False


def test_server_going_away_mid_run(monkeypatch, capsys):
    srv = FakeBrim()
    monkeypatch.setenv("BRIM_CHANNEL", srv.path)
    try:
        for i in brim.track(range(40)):
            if i == 3:
                flush_channel(srv, 1 + 3)
                srv.close()
                time.sleep(0.05)
        err = capsys.readouterr().err
        assert err.count("brim: warning:") == 1
        assert brim.steps() == 40
    finally:
        srv.close()


def test_server_that_never_reads_does_not_hang_the_job(monkeypatch, capsys, tmp_path):
    """A server that accepts but never reads: the socket buffer fills, the send times out once,
    the job goes on."""
    from brim import _channel

    monkeypatch.setattr(_channel, "SEND_TIMEOUT_S", 0.3)
    path = str(tmp_path / "deaf.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.bind(path)
    sock.listen(1)  # connections queue in the backlog; nobody ever reads
    monkeypatch.setenv("BRIM_CHANNEL", path)
    try:
        big = "x" * 60000
        t0 = time.monotonic()
        for i in range(200):
            brim.event("spam", payload=big)
        assert time.monotonic() - t0 < scaled(5)  # a hang detector, scaled
        assert capsys.readouterr().err.count("brim: warning:") == 1
    finally:
        sock.close()


def test_forked_child_opens_its_own_connection(server, channel_schema):
    brim.event("parent_before")
    flush_channel(server, 2)
    pid = os.fork()
    if pid == 0:  # child: must not write into the parent's connection
        code = 0
        try:
            brim.event("child")
        except BaseException:
            code = 1
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.WEXITSTATUS(status) == 0
    brim.event("parent_after")
    server.wait_for(lambda: len(server._all_unlocked()) >= 5)
    by_pid = {}
    for conn in server.connections:
        assert conn.messages[0]["type"] == "hello"
        pids = {m["pid"] for m in conn.messages}
        assert len(pids) == 1
        by_pid[pids.pop()] = [m.get("kind") for m in conn.messages[1:]]
        for m in conn.messages:
            schema_check.check(m, channel_schema)
    assert by_pid == {os.getpid(): ["parent_before", "parent_after"], pid: ["child"]}


def test_a_send_from_inside_connecting_is_written_after_not_deadlocked(server, monkeypatch):
    # On a GPU the hello's framework versions once initialised CUDA, whose lazy-init hook (brim's
    # memory cap) sent an event from inside the first send: the job hung on the channel's own lock.
    from brim import _channel

    real = _channel.framework_versions

    def versions_that_send():
        brim.event("inner", message="sent while connecting")
        return real()

    monkeypatch.setattr(_channel, "framework_versions", versions_that_send)
    done = threading.Event()
    threading.Thread(target=lambda: (brim.event("outer", message="first"), done.set()), daemon=True).start()
    assert done.wait(10), "the first send never returned: the channel deadlocked on itself"
    flush_channel(server, 3)
    kinds = [m.get("kind", m["type"]) for m in server.connections[0].messages]
    assert kinds == ["hello", "outer", "inner"]


def test_hello_reads_cudnn_without_initialising_cuda():
    torch = __import__("pytest").importorskip("torch")
    from brim import _channel

    before = torch.cuda.is_initialized()
    _channel.framework_versions()
    assert torch.cuda.is_initialized() == before

"""The example jobs in examples/: parameter counts against docs/model-spec.md, and a few CPU steps
of each job run plainly and under a minimal fake brim (a channel server on a Unix socket).

Every job runs with small overrides (--set) so that the whole file stays within about a minute and
a half on two slow CPU cores; all job processes are started together by one fixture."""

import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import pytest
from limits import scaled

# the README's example jobs, as a user runs them on the main PyTorch: the SDK code they reach
# (attach, knobs, out-of-memory recovery) is tested on the oldest PyTorch by the other files
pytestmark = pytest.mark.any_torch

yaml = pytest.importorskip("yaml")
pytest.importorskip("torch")

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
BUDGET = 3

# name -> (example folder, extra arguments that keep the run small)
JOBS = {
    "nbeats": ("nbeats", ["--set", "data_loader.batch_size=4", "--set", "data.n_series=2",
                          "--set", "data.length=300"]),
    "lstm": ("lstm-transformer", ["--set", "model.kind=lstm", "--set", "data_loader.batch_size=2",
                                  "--set", "data.n_series=2", "--set", "data.length=400"]),
    "transformer": ("lstm-transformer", ["--set", "model.kind=transformer", "--set", "data_loader.batch_size=2",
                                         "--set", "data.n_series=2", "--set", "data.length=400"]),
    "embedder": ("embedder", [
        "--set", "data.size=64",
        "--set", "stages=[{name: short, steps: 1, seq_len: 8, n_positives: 1, n_negatives: 1, "
                 "data_loader: {batch_size: 2}, training: {trainer: {accumulate_grad_batches: 2}}}, "
                 "{name: long, steps: 1, seq_len: 16, n_positives: 1, n_negatives: 2, "
                 "data_loader: {batch_size: 2}, training: {trainer: {accumulate_grad_batches: 2}}}]"]),
    "cnn-lstm": ("cnn-lstm", ["--set", "data.n_files=24", "--set", "data_loader.batch_size=4"]),
    "ppo": ("ppo", ["--set", "env.num_envs=4", "--set", "ppo.rollout_steps=4", "--set", "ppo.epochs=2",
                    "--set", "data_loader.batch_size=4"]),
}

# knobs given to each job under the fake brim: they must win over the config
KNOBS = {
    "nbeats": {"batch_size": 2, "precision": "bf16-mixed"},
    "lstm": {"batch_size": 3},
    "transformer": {"batch_size": 3, "accumulation": 2},
    "embedder": {"batch_size": 1, "accumulation": 1, "stage": "long"},
    "cnn-lstm": {"batch_size": 2, "num_workers": 1, "persistent_workers": True, "gpu_augment": True},
    "ppo": {"batch_size": 8},
}


class FakeBrim:
    """A minimal channel server: accepts any number of connections and records every line."""

    def __init__(self, path):
        self.path = path
        self.messages = []
        self.lock = threading.Lock()
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.bind(path)
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.closed = False
        self.thread = threading.Thread(target=self._accept, daemon=True)
        self.thread.start()

    def _accept(self):
        while not self.closed:
            try:
                conn, _ = self.sock.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            threading.Thread(target=self._read, args=(conn,), daemon=True).start()

    def _read(self, conn):
        buf = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                buf += chunk
                while b"\n" in buf:
                    line, buf = buf.split(b"\n", 1)
                    if line.strip():
                        msg = json.loads(line)
                        with self.lock:
                            self.messages.append(msg)
                        if msg.get("ack") is True:  # as brim does: the SDK waits for it
                            conn.sendall(b'{"v":1,"type":"ack","kind":"%s"}\n' % msg["kind"].encode())

    def close(self):
        self.closed = True
        self.sock.close()


def command(name, extra=()):
    folder, args = JOBS[name]
    return [sys.executable, str(EXAMPLES / folder / "train.py"), "--config",
            str(EXAMPLES / folder / "config.yaml"), *args, *extra]


def clean_env(tmp):
    env = {k: v for k, v in os.environ.items() if not k.startswith("BRIM_")}
    env["PYTHONPATH"] = ""                   # the job must find the SDK by itself (fresh clone)
    env["OMP_NUM_THREADS"] = "1"             # several jobs share the cores
    env["TMPDIR"] = tmp
    return env


def cache_args(name, tmp):
    return ["--set", "data.cache_dir=%s" % os.path.join(tmp, "cnn-lstm-data")] if name == "cnn-lstm" else []


@pytest.fixture(scope="module")
def runs():
    """Start every job plainly and under the fake brim, two at a time; collect their results."""
    # an AF_UNIX path must be short (108 bytes): keep the sockets directly in a short temp dir
    tmp = tempfile.mkdtemp(prefix="brimx-", dir="/tmp" if os.path.isdir("/tmp") else None)
    servers, plan = {}, []
    for name in JOBS:
        plan.append((name, "plain", command(name, ["--steps", "2"] + cache_args(name, tmp)), clean_env(tmp)))
        sock = os.path.join(tmp, "%s.sock" % name)
        servers[name] = FakeBrim(sock)
        env = clean_env(tmp)
        env.update(BRIM_CHANNEL=sock, BRIM_STEP_BUDGET=str(BUDGET), BRIM_KNOBS=json.dumps(KNOBS[name]))
        if name == "nbeats":
            env["BRIM_FAULT_OOM_AT_STEP"] = "1"  # an (injected) out-of-memory error inside step 1
        plan.append((name, "brim", command(name, cache_args(name, tmp)), env))
    # the two cnn-lstm runs may generate their shared data cache at once: the job's atomic rename
    # keeps that safe
    results, running, queue = {}, [], list(plan)
    width = 2
    while queue or running:
        while queue and len(running) < width:
            name, mode, cmd, env = queue.pop(0)
            proc = subprocess.Popen(cmd, cwd=str(REPO), env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            running.append((name, mode, proc, time.monotonic()))
        time.sleep(0.05)
        for item in list(running):
            name, mode, proc, t0 = item
            if proc.poll() is not None or time.monotonic() - t0 > scaled(120):
                if proc.poll() is None:
                    proc.kill()
                out = proc.communicate()[0].decode("utf-8", "replace")
                results[(name, mode)] = {"rc": proc.returncode, "out": out, "wall_s": time.monotonic() - t0}
                running.remove(item)
    time.sleep(0.2)  # let the server threads read what is left in the sockets
    for name, server in servers.items():
        server.close()
        with server.lock:
            results[(name, "brim")]["messages"] = list(server.messages)
    yield results
    shutil.rmtree(tmp, ignore_errors=True)


def summary(out):
    """Fields of the job's final '[name] done k=v ...' line."""
    lines = [l for l in out.splitlines() if re.match(r"^\[[^\]]+\] done ", l)]
    assert lines, "no final summary line in:\n" + out
    return dict(kv.split("=", 1) for kv in lines[-1].split()[2:])


@pytest.mark.parametrize("name", list(JOBS))
def test_runs_plainly(runs, name):
    r = runs[(name, "plain")]
    assert r["rc"] == 0, r["out"]
    s = summary(r["out"])
    assert int(s["steps"]) == 2
    assert float(s["samples_per_s"]) > 0
    assert s["final_loss"] not in ("nan", "inf")


@pytest.mark.parametrize("name", list(JOBS))
def test_runs_under_brim(runs, name):
    r = runs[(name, "brim")]
    assert r["rc"] == 0, r["out"]
    s = summary(r["out"])
    assert int(s["steps"]) == BUDGET, "the job must stop at brim's step budget"
    msgs = r["messages"]
    assert msgs and msgs[0]["type"] == "hello", msgs[:1]
    assert all(m.get("v") == 1 for m in msgs)
    main = msgs[0]["pid"]
    steps = [m for m in msgs if m["type"] == "step" and m["pid"] == main]
    assert [m["step"] for m in steps] == list(range(BUDGET))
    knobs = KNOBS[name]
    for m in steps:
        assert m["samples"] == knobs["batch_size"]
        assert m["wait_s"] is not None and m["compute_s"] is not None
        assert isinstance(m["loss"], float)
        if name != "nbeats":
            assert m["micro_batch"] == knobs["batch_size"]
            assert m["accumulation"] == knobs.get("accumulation", 1)
    events = {m["kind"] for m in msgs if m["type"] == "event"}
    assert "budget_reached" in events
    read = {m["details"]["name"]: m["details"]["value"] for m in msgs
            if m["type"] == "event" and m["kind"] == "knob_read"}
    for k, v in knobs.items():
        assert read.get(k) == v, (k, read)


def test_oom_recovery_in_an_example(runs):
    """nbeats under brim gets an injected out-of-memory error at step 1: the step is retried as two
    micro-batches of 1 with twice the accumulation, and the job goes on to its budget."""
    r = runs[("nbeats", "brim")]
    assert r["rc"] == 0, r["out"]
    msgs = r["messages"]
    assert any(m["type"] == "event" and m["kind"] == "oom_recovered" for m in msgs), msgs
    steps = [m for m in msgs if m["type"] == "step" and m["pid"] == msgs[0]["pid"]]
    assert (steps[0]["micro_batch"], steps[0]["accumulation"]) == (2, 1)
    assert [(m["micro_batch"], m["accumulation"]) for m in steps[1:]] == [(1, 2), (1, 2)]


# ------------------------------------------------------------------------- parameter counts
def lin(a, b, bias=True):
    return a * b + (b if bias else 0)


def rnn_params(gates, inp, hidden, layers, bidirectional):
    dirs = 2 if bidirectional else 1
    total = 0
    for layer in range(layers):
        i = inp if layer == 0 else hidden * dirs
        total += dirs * (gates * hidden * (i + hidden) + 2 * gates * hidden)
    return total


def expected(spec):
    """(total, trainable) parameters of a spec, written from docs/model-spec.md independently of
    the example code."""
    f = spec["family"]
    if f == "nbeats":
        L, H, F, u = spec["lookback"], spec["horizon"], spec.get("features", 1), spec["units"]
        total = 0
        for s in spec["stacks"]:
            block = lin(L * F, u) + (spec.get("layers_per_block", 4) - 1) * lin(u, u)
            if s["type"] == "generic":
                block += lin(u, 2 * s["theta"]) + lin(s["theta"], L * F, False) + lin(s["theta"], H * F, False)
            elif s["type"] == "trend":
                block += lin(u, 2 * (s["degree"] + 1) * F)
            else:
                block += lin(u, 4 * s["harmonics"] * F)
            total += block * (1 if spec.get("share_weights_in_stack") else s["blocks"])
        return total, total
    if f in ("lstm", "gru"):
        dirs = 2 if spec.get("bidirectional") else 1
        total = rnn_params(4 if f == "lstm" else 3, spec["input"], spec["hidden"], spec.get("layers", 1),
                           spec.get("bidirectional", False)) + lin(spec["hidden"] * dirs, spec.get("output", 1))
        return total, total
    if f == "cnn1d-lstm":
        total, prev = 0, spec["input"]
        for c in spec["conv"]:
            total += prev * c["out"] * c["kernel"] + c["out"] + (2 * c["out"] if spec.get("batchnorm") else 0)
            prev = c["out"]
        lstm = spec["lstm"]
        dirs = 2 if lstm.get("bidirectional") else 1
        total += rnn_params(4, prev, lstm["hidden"], lstm.get("layers", 1), lstm.get("bidirectional", False))
        total += lin(lstm["hidden"] * dirs, spec["output"])
        return total, total
    if f == "transformer-encoder":
        d = spec["d_model"]
        frozen = (spec["vocab"] * d if "vocab" in spec else lin(spec["input"], d)) + spec["max_positions"] * d
        trained = 0
        lora, moe = spec.get("lora") or {}, spec.get("moe") or {}
        for layer in range(spec["layers"]):
            frozen += 4 * lin(d, d) + 2 * 2 * d
            shapes = {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d)}
            if layer in moe.get("layers", []):
                trained += d * moe["experts"] + moe["experts"] * (lin(d, moe["ffn"]) + lin(moe["ffn"], d))
            else:
                frozen += lin(d, spec["ffn"]) + lin(spec["ffn"], d)
                shapes.update(ffn_in=(d, spec["ffn"]), ffn_out=(spec["ffn"], d))
            for t in lora.get("targets", []):
                if t in shapes:
                    trained += lora["rank"] * sum(shapes[t])
        frozen += 2 * d if spec.get("final_norm", True) else 0
        trained += lin(d, spec["output"]) if spec.get("output", 0) else 0
        if not lora:
            return frozen + trained, frozen + trained
        return frozen + trained, trained
    if f == "actor-critic":
        total = 0
        for sizes in ([spec["observation"], *spec["policy"], spec["actions"]],
                      [spec["observation"], *spec["value"], 1]):
            total += sum(lin(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        total += spec["actions"] if spec.get("continuous", True) else 0
        return total, total
    raise AssertionError(f)


PARAM_CASES = [
    ("nbeats", "nbeats/model.yaml", []),
    ("lstm-transformer", "lstm-transformer/lstm.yaml", ["--set", "model.kind=lstm"]),
    ("lstm-transformer", "lstm-transformer/transformer.yaml", ["--set", "model.kind=transformer"]),
    ("embedder", "embedder/model.yaml", []),
    ("cnn-lstm", "cnn-lstm/model.yaml", []),
    ("ppo", "ppo/model.yaml", []),
]


def _load_job(folder):
    import importlib.util

    spec = importlib.util.spec_from_file_location("example_" + folder.replace("-", "_"),
                                                  EXAMPLES / folder / "train.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("folder,spec_file,extra", PARAM_CASES, ids=[c[1] for c in PARAM_CASES])
def test_print_params_matches_the_spec(folder, spec_file, extra, capsys, monkeypatch):
    for k in [k for k in os.environ if k.startswith("BRIM_")]:
        monkeypatch.delenv(k)
    job = _load_job(folder)
    job.main(["--config", str(EXAMPLES / folder / "config.yaml"), "--print-params", *extra])
    out = capsys.readouterr().out.strip().splitlines()[-1]
    m = re.fullmatch(r"params_total=(\d+) params_trainable=(\d+)", out)
    assert m, out
    with open(EXAMPLES / spec_file) as f:
        spec = yaml.safe_load(f)
    assert (int(m.group(1)), int(m.group(2))) == expected(spec)


def test_configs_start_naive():
    """The configs are the 'before': small batches, fp32, no workers, no pinning."""
    for folder in ("nbeats", "lstm-transformer", "embedder", "cnn-lstm", "ppo"):
        with open(EXAMPLES / folder / "config.yaml") as f:
            cfg = yaml.safe_load(f)
        dl = cfg["data_loader"]
        assert dl["num_workers"] == 0 and dl["pin_memory"] is False and dl["batch_size"] <= 64
        assert cfg["training"]["precision"] == "fp32"
        assert "accumulate_grad_batches" in cfg["training"]["trainer"]

"""Samples of steps no DataLoader feeds, counted from the model's input (PPO over rollout slices,
accumulation, a closure optimizer), environment steps of a vector environment, and the events that
tell brim the attach counts (attach_on, optimizer_built)."""

import os
import tempfile
import textwrap

import pytest

torch = pytest.importorskip("torch")

import schema_check  # noqa: E402
from test_attach import PRELUDE, run, steps_of  # noqa: E402


def events_of(srv, kind):
    return [m for m in srv.messages("event") if m["kind"] == kind]


ROLLOUT = PRELUDE + """
policy = torch.nn.Sequential(torch.nn.Linear(4, 16), torch.nn.Tanh(), torch.nn.Linear(16, 2))
opt = torch.optim.Adam(policy.parameters(), lr=1e-3)
n_envs, n_steps, minibatch = 4, 16, 16
for update in range(2):
    obs = []
    with torch.no_grad():                      # the rollout: n_envs observations per call
        for _ in range(n_steps):
            o = torch.randn(n_envs, 4)
            policy(o)
            obs.append(o)
    flat = torch.cat(obs)                      # 64 transitions
    for start in range(0, len(flat), minibatch):
        loss = policy(flat[start:start + minibatch]).pow(2).mean()
        opt.zero_grad(); loss.backward(); opt.step()
print("ok")
"""


def test_rollout_minibatches_count_their_rows(srv, channel_schema):
    out = run(ROLLOUT, srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert len(steps) == 8
    assert all(s["samples"] == 16 and s["micro_batch"] == 16 and s["accumulation"] == 1 for s in steps)
    told = events_of(srv, "samples_source")
    assert len(told) == 1 and told[0]["details"] == {"source": "model_input", "samples": 16}
    assert len(events_of(srv, "optimizer_built")) == 1
    # PyTorch before 2.0 has no hook for a parameter's registration: no attach_on there (optimizer_built
    # is what stops brim counting printed progress on it)
    hook = hasattr(torch.nn.modules.module, "register_module_parameter_registration_hook")
    assert len(events_of(srv, "attach_on")) == (1 if hook else 0)
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_accumulation_adds_each_backward_and_a_closure_counts_once(srv):
    out = run(PRELUDE + """
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(3):                              # two micro-batches of 8 per optimizer step
    opt.zero_grad(); batch(8).backward(); batch(8).backward(); opt.step()
lbfgs = torch.optim.LBFGS(model.parameters(), max_iter=5)
x = torch.randn(32, 4)
def closure():
    lbfgs.zero_grad()
    loss = model(x).pow(2).mean()
    loss.backward()
    return loss
for _ in range(2):
    lbfgs.step(closure)                         # several forward/backward on the same 32 rows
print("ok")
""", srv)
    assert out.returncode == 0, out.stderr
    steps = steps_of(srv)
    assert [(s["samples"], s["accumulation"]) for s in steps] == [(16, 2)] * 3 + [(32, 1)] * 2


def test_a_dataloader_batch_takes_over_and_no_source_is_told(srv):
    out = run(PRELUDE + """
from torch.utils.data import DataLoader, TensorDataset
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(40, 4)), batch_size=10)
for (x,) in loader:
    opt.zero_grad(); model(torch.cat([x, x])).pow(2).mean().backward(); opt.step()
from brim._model_input import model_input
print("hook", model_input.handle is None)
""", srv)
    assert out.returncode == 0, out.stderr
    assert "hook True" in out.stdout
    assert [s["samples"] for s in steps_of(srv)] == [10] * 4
    assert events_of(srv, "samples_source") == []
    # the model's input is read beside the loader's count in the loader-fed steps after the first
    assert [(s.get("extra") or {}).get("model_samples") for s in steps_of(srv)] == [None, 20, 20, 20]


def test_a_model_batch_drawn_from_the_loaders_is_said_beside_it(srv, channel_schema):
    # a library that draws its model batch from the loader's (windows sampled from series): the loader
    # says its series, the model is fed the same 24 windows whatever the loader's batch
    out = run(PRELUDE + """
from torch.utils.data import DataLoader, TensorDataset
opt = torch.optim.SGD(model.parameters(), lr=0.1)
loader = DataLoader(TensorDataset(torch.randn(48, 4)), batch_size=6)
pad = torch.nn.ConstantPad1d((0, 1), 0.0)      # nothing to train: called on the series, not the model
for (series,) in loader:
    series = pad(series)[:, :4]
    windows = series[torch.randint(0, len(series), (24,))]
    opt.zero_grad(); model(windows).pow(2).mean().backward(); opt.step()
from brim._model_input import model_input
print("hook", model_input.handle is None, model_input.live)
""", srv)
    assert out.returncode == 0, out.stderr
    assert "hook True False" in out.stdout
    steps = steps_of(srv)
    assert [s["samples"] for s in steps] == [6] * 8
    assert [(s.get("extra") or {}).get("model_samples") for s in steps] == [None, 24, 24, 24] + [None] * 4
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_sequence_first_input_counts_the_batch_dimension(srv):
    out = run(PRELUDE + """
lstm = torch.nn.LSTM(4, 8)
opt = torch.optim.SGD(lstm.parameters(), lr=0.1)
for _ in range(2):
    h = (torch.zeros(1, 5, 8), torch.zeros(1, 5, 8))
    out, _ = lstm(torch.randn(12, 5, 4), h)     # (seq, batch, features) and its state
    opt.zero_grad(); out.pow(2).mean().backward(); opt.step()
print("ok")
""", srv)
    assert out.returncode == 0, out.stderr
    assert [s["samples"] for s in steps_of(srv)] == [5, 5]


def test_vector_environment_steps_go_out_with_each_step(srv):
    # a stand-in with the shape of gymnasium's SyncVectorEnv (gymnasium is not in the CI venv)
    root = tempfile.mkdtemp(prefix="brim-vec-")
    pkg = os.path.join(root, "gymnasium", "vector")
    os.makedirs(pkg)
    open(os.path.join(root, "gymnasium", "__init__.py"), "w").close()
    open(os.path.join(pkg, "__init__.py"), "w").close()
    with open(os.path.join(pkg, "sync_vector_env.py"), "w") as f:
        f.write(textwrap.dedent("""
            class SyncVectorEnv:
                def __init__(self, n):
                    self.num_envs = n
                def step(self, actions):
                    return actions
        """))
    out = run(PRELUDE + """
from gymnasium.vector.sync_vector_env import SyncVectorEnv
envs = SyncVectorEnv(3)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    for _ in range(5):
        envs.step([0, 0, 0])
    opt.zero_grad(); batch(6).backward(); opt.step()
print("ok")
""", srv, pythonpath=[root])
    assert out.returncode == 0, out.stderr
    assert [s.get("extra") for s in steps_of(srv)] == [{"env_steps": 15}, {"env_steps": 30}]


def test_a_hook_a_compiled_graph_was_traced_with_stays_on_doing_nothing():
    # removing a global module hook makes torch.compile trace its graphs again: once one was traced
    # with it, off() leaves it on and reading nothing
    from brim._model_input import ModelInput, token_input

    if not hasattr(torch.nn.modules.module, "register_module_forward_pre_hook"):
        pytest.skip("this torch has no global module hooks")
    for traced in (False, True):
        mi = ModelInput()
        mi.install(torch)
        try:
            torch.nn.Linear(4, 1)(torch.randn(3, 4))
            assert mi.take() == (True, 3)
            mi.traced = traced
            mi.off()
            assert (mi.handle is not None) == traced and not mi.live
            torch.nn.Linear(4, 1)(torch.randn(5, 4))
            assert mi.take() == (False, None)
        finally:
            if mi.handle is not None:
                mi.handle.remove()
            token_input.off()

"""The attach's model facts (issue 37) in real child processes: the learning rate the first optimizer
step uses and the batch-statistic layers of the module tree it steps, sent once as a model_facts event."""

import pytest

pytest.importorskip("torch")

import schema_check  # noqa: E402
from test_attach import run  # noqa: E402


def facts_of(srv):
    return [m for m in srv.messages("event") if m["kind"] == "model_facts"]


def test_reads_lr_and_batchnorm_of_the_stepped_model_once(srv, channel_schema):
    out = run("""
import torch
torch.manual_seed(0)
torch.set_num_threads(1)
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.ReLU(),
                            torch.nn.Sequential(torch.nn.Linear(8, 8), torch.nn.BatchNorm1d(8)),
                            torch.nn.InstanceNorm1d(8), torch.nn.Linear(8, 1))
other = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.BatchNorm2d(4))  # not stepped: not counted
opt = torch.optim.SGD([{"params": model[:3].parameters()}, {"params": model[3:].parameters(), "lr": 0.01}], lr=0.1)
sched = torch.optim.lr_scheduler.StepLR(opt, step_size=1, gamma=0.5)
for _ in range(3):
    opt.zero_grad()
    model(torch.randn(16, 4)).pow(2).mean().backward()
    opt.step()
    sched.step()
""", srv)
    assert out.returncode == 0, out.stderr
    facts = facts_of(srv)
    assert len(facts) == 1
    assert facts[0]["details"] == {"lr": [0.1, 0.01], "batch_stat_layers": {"BatchNorm1d": 2}, "models": ["Sequential"],
                                   "clip_grad_norm_calls": 0}
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_a_model_in_eval_mode_has_no_batch_statistics(srv):
    out = run("""
import torch
model = torch.nn.Sequential(torch.nn.Linear(4, 8), torch.nn.BatchNorm1d(8), torch.nn.Linear(8, 1)).eval()
opt = torch.optim.Adam(model.parameters(), lr=torch.tensor(0.003))
model(torch.randn(16, 4)).pow(2).mean().backward()
opt.step()
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert facts["details"]["batch_stat_layers"] == {}
    assert facts["details"]["lr"] == [pytest.approx(0.003)]


def test_counts_clipping_by_norm_before_the_first_step(srv):
    out = run("""
import torch
from torch.nn.utils import clip_grad_norm_
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
for _ in range(2):
    for _ in range(4):  # accumulation 4, clipped per micro-batch (the mistake the evidence names)
        (model(torch.randn(8, 4)).pow(2).mean() / 4).backward()
        clip_grad_norm_(model.parameters(), 1.0)
    opt.step()
    opt.zero_grad()
torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert facts["details"]["clip_grad_norm_calls"] == 4

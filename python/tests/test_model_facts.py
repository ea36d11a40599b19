"""The attach's model facts (issue 37) in real child processes: the learning rate the first optimizer
step uses and the batch-statistic layers of the module tree it steps, sent once as a model_facts event."""

import importlib.util
import json
import os

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


TOKEN_MODEL = """
import torch
torch.manual_seed(0)
torch.set_num_threads(1)


class LM(torch.nn.Module):
    # a causal LM as Hugging Face's are called: model(input_ids=..., attention_mask=..., labels=...)
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(32, 8)
        self.head = torch.nn.Linear(8, 32)

    def forward(self, input_ids=None, attention_mask=None, labels=None, num_items_in_batch=None, **kwargs):
        logits = self.head(self.emb(input_ids))
        reduction = "mean" if num_items_in_batch is None else "sum"
        loss = torch.nn.functional.cross_entropy(logits.flatten(0, 1), labels.flatten(), reduction=reduction)
        return loss if num_items_in_batch is None else loss / num_items_in_batch


def padded(lengths, width=6):
    ids = torch.randint(0, 32, (len(lengths), width))
    mask = torch.zeros(len(lengths), width, dtype=torch.long)
    for row, n in enumerate(lengths):
        mask[row, :n] = 1
    return {"input_ids": ids, "attention_mask": mask, "labels": ids.masked_fill(mask == 0, -100)}


model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.1)
"""


def test_a_padded_batch_called_by_keywords_is_a_loss_over_varying_tokens(srv, channel_schema):
    out = run(TOKEN_MODEL + """
with torch.no_grad():
    model(**padded([1, 1]))  # evaluation: not looked at
for lengths in ([6, 3], [2, 2]):  # accumulation 2
    (model(**padded(lengths)) / 2).backward()
opt.step()
(model(**padded([5, 5]))).backward()  # after the first step: not read
opt.step()
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert facts["details"]["token_loss"] == {"source": "labels", "micro_batches": 2, "tokens": [9, 4], "row_tokens": [2, 6],
                                              "row_length": 6, "varying": True, "num_items_in_batch": False}
    assert "loss over 2-6 tokens a row (labels)" in facts["message"]
    for m in srv.messages():
        schema_check.check(m, channel_schema)


def test_num_items_in_batch_and_a_mapping_batch_are_seen(srv):
    out = run(TOKEN_MODEL + """
class Wrapper(torch.nn.Module):  # model(batch): one mapping, the labels read from it
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, batch):
        return self.inner(**batch)


wrapped = Wrapper(model)
batches = [padded([6, 4]), padded([3, 3])]
total = sum(int((b["labels"] != -100).sum()) for b in batches)
for b in batches:
    wrapped(dict(b, num_items_in_batch=torch.tensor(total))).backward()
opt.step()
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert facts["details"]["token_loss"]["tokens"] == [10, 6]
    assert facts["details"]["token_loss"]["num_items_in_batch"] is True


def test_the_attention_mask_alone_and_full_rows(srv):
    out = run(TOKEN_MODEL + """
class Masked(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(6, 1)

    def forward(self, x, attention_mask=None):
        return self.lin(x * attention_mask).mean()


m = Masked()
o = torch.optim.SGD(m.parameters(), lr=0.1)
m(torch.randn(3, 6), attention_mask=torch.ones(3, 6)).backward()
o.step()
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert facts["details"]["token_loss"] == {"source": "attention_mask", "micro_batches": 1, "tokens": [18], "row_tokens": [6, 6],
                                              "row_length": 6, "varying": False, "num_items_in_batch": False}


def test_a_model_called_with_tensors_has_no_token_loss(srv):
    out = run("""
import torch
model = torch.nn.Linear(4, 1)
opt = torch.optim.SGD(model.parameters(), lr=0.1)
model(torch.randn(8, 4)).pow(2).mean().backward()
opt.step()
""", srv)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    assert "token_loss" not in facts["details"]


@pytest.mark.parametrize("loss_kwargs", [True, False])
def test_the_hugging_face_trainer_passes_num_items_in_batch_to_a_model_that_takes_it(srv, loss_kwargs):
    if importlib.util.find_spec("transformers") is None:  # found, not imported: the job imports it
        pytest.skip("transformers is not installed")
    job = os.path.join(os.path.dirname(__file__), "..", "..", "test", "jobs", "hf_padded_lm.py")
    argv = [job, "--max-steps", "2", "--batch-size", "2", "--accumulation", "2", "--log-losses"]
    argv += [] if loss_kwargs else ["--no-loss-kwargs"]
    out = run("import runpy, sys\nsys.argv = %r\nrunpy.run_path(sys.argv[0], run_name='__main__')\n" % argv, srv, timeout=120)
    assert out.returncode == 0, out.stderr
    [facts] = facts_of(srv)
    tokens = facts["details"]["token_loss"]
    assert tokens["source"] == "labels" and tokens["micro_batches"] == 2 and tokens["varying"] is True
    assert tokens["num_items_in_batch"] is loss_kwargs
    if not loss_kwargs:
        # the Trainer's own logged loss with accumulation (this run stands for test_loss.py's too): the
        # Trainer divides each micro-batch's loss by the accumulation, and brim's sum is the loss it logs
        logged = [json.loads(line[5:]) for line in out.stdout.splitlines() if line.startswith("LOSS ")]
        steps = [m for m in srv.messages("step")]
        assert len(steps) == 2 and len(logged) == 2
        assert [s["loss"] for s in steps] == pytest.approx(logged, rel=1e-5)

"""profile(): exact saved bytes and parameter counts, computed by hand, and the schema.

What autograd saves for Linear(I, H) -> ReLU -> Linear(H, O) with loss mse_loss(out, y), input x
(no grad), batch B, checked on torch 1.13 and the same in 2.x (F.linear on 2-D input is addmm):

  fp32:
    Linear1 = addmm(b1, x, W1.t()): saves x (mat1, needed for W1's gradient) -> the input batch,
        not counted (inputs are in input_bytes); W1.t() is not saved (x needs no gradient).
    ReLU: saves its result h (B*H fp32).
    Linear2 = addmm(b2, h, W2.t()): saves h (the same storage: counted once) and W2.t() (a view
        of a parameter: not counted).
    mse_loss: saves out (B*O fp32) and y (the input batch: not counted).
    => per sample 4*(H + O) bytes, fixed 0.

  bf16-mixed (CPU autocast, bf16):
    Linear1 runs in bf16: saves x cast to bf16 (a new B*I*2 storage, counted) ; ReLU saves h in
    bf16 (B*H*2); Linear2 saves h (same) and W2 cast to bf16 (H*O*2, independent of the batch:
    fixed); autocast runs mse_loss in fp32: saves out cast to fp32 (B*O*4) and y (input).
    => per sample 2*I + 2*H + 4*O bytes, fixed 2*H*O bytes.

Parameters: I*H + H + H*O + O. Forward FLOPs per sample (multiply-add = 2): 2*I*H + 2*H*O.
"""

import json

import pytest

torch = pytest.importorskip("torch")

import brim  # noqa: E402
import brim.torch as bt  # noqa: E402
import schema_check  # noqa: E402

I, H, O = 12, 20, 3


def mlp(seed=0):
    torch.manual_seed(seed)
    return torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.ReLU(), torch.nn.Linear(H, O))


def mse(model, batch):
    x, y = batch
    return torch.nn.functional.mse_loss(model(x), y)


def sample(b=8):
    g = torch.Generator().manual_seed(3)
    return torch.randn(b, I, generator=g), torch.randn(b, O, generator=g)


def test_mlp_profile_exact(tmp_path, profile_schema):
    path = tmp_path / "sub" / "profile.json"
    prof = bt.profile(mlp(), sample(8), mse, path=str(path), name="mlp")
    schema_check.check(prof, profile_schema)
    assert json.loads(path.read_text()) == prof

    assert prof["schema"] == "brim.model-profile" and prof["version"] == 1 and prof["name"] == "mlp"
    n_params = I * H + H + H * O + O
    assert prof["params"]["total"] == n_params == 323
    assert prof["params"]["trainable"] == n_params
    assert prof["params"]["by_dtype"] == {"float32": n_params}
    assert prof["params"]["buffer_bytes"] == 0
    assert [(t["name"], t["shape"], t["dtype"], t["trainable"]) for t in prof["params"]["tensors"]] == [
        ("0.weight", [H, I], "float32", True), ("0.bias", [H], "float32", True),
        ("2.weight", [O, H], "float32", True), ("2.bias", [O], "float32", True)]

    ps = prof["per_sample"]
    assert ps["input_bytes"] == 4 * (I + O)
    assert ps["saved_bytes"]["fp32"] == 4 * (H + O) == 92
    assert prof["fixed"]["saved_bytes"]["fp32"] == 0
    assert ps["saved_bytes"]["bf16-mixed"] == 2 * I + 2 * H + 4 * O == 76
    assert prof["fixed"]["saved_bytes"]["bf16-mixed"] == 2 * H * O == 120
    assert ps["largest_saved_bytes"] == 4 * H
    assert ps["forward_flops"] == 2 * I * H + 2 * H * O
    assert prof["measured"]["batches"] == [4, 8] and prof["measured"]["device"] == "cpu"
    # all numbers are exact integers in the JSON
    assert isinstance(ps["saved_bytes"]["fp32"], int) and isinstance(ps["forward_flops"], int)


def test_profile_from_a_single_sample_and_other_batch_sizes():
    x, y = sample(1)
    prof = bt.profile(mlp(), (x, y), mse, precisions=("fp32",))
    assert prof["measured"]["batches"] == [1, 2]
    assert prof["per_sample"]["saved_bytes"] == {"fp32": 4 * (H + O)}
    prof = bt.profile(mlp(), sample(8), mse, batches=(3, 7), precisions=("fp32",))
    assert prof["measured"]["batches"] == [3, 7] and prof["per_sample"]["saved_bytes"]["fp32"] == 92


def test_frozen_params_dtypes_buffers_and_restored_state(profile_schema):
    torch.manual_seed(0)
    model = torch.nn.Sequential(torch.nn.Linear(I, H), torch.nn.BatchNorm1d(H), torch.nn.ReLU(),
                                torch.nn.Dropout(0.5), torch.nn.Linear(H, O))
    for p in model[0].parameters():
        p.requires_grad_(False)
    model.eval()
    running = model[1].running_mean.clone()
    torch.manual_seed(123)
    expected_next = torch.rand(3)
    torch.manual_seed(123)
    prof = bt.profile(model, sample(8), mse)
    assert torch.equal(torch.rand(3), expected_next)  # the caller's RNG stream is untouched
    assert torch.equal(model[1].running_mean, running) and model[1].num_batches_tracked.item() == 0
    assert not model.training
    schema_check.check(prof, profile_schema)
    params = prof["params"]
    assert params["total"] == I * H + H + 2 * H + H * O + O
    assert params["trainable"] == 2 * H + H * O + O
    assert params["buffer_bytes"] == 4 * H + 4 * H + 8  # running mean, var, num_batches_tracked
    # measured in training mode: BatchNorm and Dropout keep more per sample than the bare MLP
    assert prof["per_sample"]["saved_bytes"]["fp32"] > 4 * (H + O)


def test_flops_of_conv_lstm_and_attention():
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv1d(4, 8, kernel_size=3, padding=1)
            self.lstm = torch.nn.LSTM(8, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.attn = torch.nn.MultiheadAttention(32, 4, batch_first=True)
            self.head = torch.nn.Linear(32, 2)

        def forward(self, x):
            h = self.conv(x).transpose(1, 2)  # (B, L, 8)
            h, _ = self.lstm(h)  # (B, L, 32)
            h, _ = self.attn(h, h, h, need_weights=False)
            return self.head(h[:, -1])

    L = 10
    x, y = torch.randn(4, 4, L), torch.randn(4, 2)
    prof = bt.profile(Net(), (x, y), mse, precisions=("fp32",))
    conv = 2 * 4 * 3 * 8 * L
    lstm = L * (2 * (2 * 4 * 16 * (8 + 16)) + 2 * (2 * 4 * 16 * (32 + 16)))
    e = 32
    attn = 2 * L * e * e * 4 + 2 * 2 * L * L * e
    head = 2 * 32 * 2
    assert prof["per_sample"]["forward_flops"] == conv + lstm + attn + head
    assert prof["per_sample"]["input_bytes"] == 4 * (4 * L + 2)


def test_recurrent_calls_are_recorded_per_sample(profile_schema):
    """Each LSTM/GRU call of the fp32 forward, per sample: brim plan replaces the CPU kernels' bytes
    inside it with cuDNN's layout (src/plan/cudnn.ts)."""
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lstm = torch.nn.LSTM(6, 16, num_layers=2, batch_first=True, bidirectional=True)
            self.gru = torch.nn.GRU(32, 8, batch_first=True)
            self.head = torch.nn.Linear(8, 1)

        def forward(self, x):
            h, _ = self.lstm(x)
            h, _ = self.gru(h)
            return self.head(h[:, -1])

    L = 12
    prof = bt.profile(Net(), (torch.randn(8, L, 6), torch.randn(8, 1)), mse, precisions=("fp32",))
    schema_check.check(prof, profile_schema)
    rec = prof["per_sample"]["recurrent"]
    assert [(c["mode"], c["tokens"], c["layers"], c["bidirectional"], c["hidden_size"]) for c in rec["calls"]] == [
        ("LSTM", L, 2, True, 16), ("GRU", L, 1, False, 8)]
    inside = sum(c["saved_bytes"] for c in rec["calls"])
    assert 0 < inside <= prof["per_sample"]["saved_bytes"]["fp32"]
    assert 0 < rec["largest_saved_outside_bytes"] <= prof["per_sample"]["largest_saved_bytes"]


def test_no_recurrent_record_without_recurrent_layers():
    prof = bt.profile(mlp(), sample(), mse, precisions=("fp32",))
    assert "recurrent" not in prof["per_sample"]


def test_dict_batches_and_default_loss(profile_schema):
    class Dicty(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = torch.nn.Embedding(50, 8)
            self.out = torch.nn.Linear(8, 1)

        def forward(self, ids, mask):
            return self.out(self.emb(ids) * mask.unsqueeze(-1))

    batch = {"ids": torch.randint(0, 50, (6, 5)), "mask": torch.ones(6, 5)}
    prof = bt.profile(Dicty(), batch, precisions=("fp32",))
    schema_check.check(prof, profile_schema)
    assert prof["per_sample"]["input_bytes"] == 5 * 8 + 5 * 4
    assert prof["per_sample"]["forward_flops"] == 2 * 8 * 1 * 5
    assert prof["per_sample"]["saved_bytes"]["fp32"] > 0


def test_profile_is_sent_over_the_channel(server, channel_schema, profile_schema, tmp_path):
    path = tmp_path / "p.json"
    prof = bt.profile(mlp(), sample(4), mse, path=str(path))
    server.wait_for(lambda: len(server.messages("profile")) == 1)
    msg = server.messages("profile")[0]
    schema_check.check(msg, channel_schema)
    schema_check.check(msg["profile"], profile_schema)
    assert msg["profile"] == json.loads(json.dumps(prof)) and msg["path"] == str(path)


def test_schema_subset_validator_catches_profile_errors(profile_schema):
    prof = bt.profile(mlp(), sample(4), mse, precisions=("fp32",))
    schema_check.check(prof, profile_schema)
    broken = json.loads(json.dumps(prof))
    del broken["per_sample"]["saved_bytes"]["fp32"]
    assert schema_check.errors(broken, profile_schema)
    broken = json.loads(json.dumps(prof))
    broken["params"]["total"] = -1
    assert schema_check.errors(broken, profile_schema)
    broken = json.loads(json.dumps(prof))
    broken["schema"] = "other"
    assert schema_check.errors(broken, profile_schema)
    assert brim is not None

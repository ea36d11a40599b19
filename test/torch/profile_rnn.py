"""Profiles LSTM and GRU models on CPU with brim.torch.profile and prints the results as JSON.

    python3 test/torch/profile_rnn.py plain|onednn-fails|broken

onednn-fails: the recurrent kernels raise oneDNN's error whenever oneDNN (mkldnn) is enabled, as
PyTorch 2.11 does on some CPUs ("could not create a primitive descriptor for the LSTM forward
propagation primitive"); the profile must fall back and say so. broken: every forward fails; the
profile must raise an error that says why and what to do.
"""
import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import torch  # noqa: E402
from torch import _VF, nn  # noqa: E402

import brim.torch as bt  # noqa: E402


class Net(nn.Module):
    def __init__(self, kind):
        super().__init__()
        cls = nn.LSTM if kind == "lstm" else nn.GRU
        self.rnn = cls(6, 32, num_layers=2, batch_first=True)
        self.head = nn.Linear(32, 1)

    def forward(self, x):
        out, _ = self.rnn(x)
        return self.head(out[:, -1])


def loss(model, batch):
    x, y = batch
    return nn.functional.mse_loss(model(x), y)


def main():
    mode = sys.argv[1]
    if mode == "onednn-fails":
        for name in ("lstm", "gru"):
            real = getattr(_VF, name)

            def fake(*args, _real=real, _name=name, **kwargs):
                if torch._C._get_mkldnn_enabled():
                    raise RuntimeError("could not create a primitive descriptor for the %s forward propagation primitive" % _name.upper())
                return _real(*args, **kwargs)

            setattr(_VF, name, fake)
    torch.manual_seed(0)
    batch = (torch.randn(8, 20, 6), torch.randn(8, 1))
    out = {}
    for kind in ("lstm", "gru"):
        fn = loss
        if mode == "broken":
            def fn(model, b):
                raise RuntimeError("shape mismatch in the user's loss")
        try:
            p = bt.profile(Net(kind), batch, fn, precisions=("fp32", "bf16-mixed"))
            out[kind] = {"ok": True, "saved": p["per_sample"]["saved_bytes"], "notes": p["measured"].get("notes", [])}
        except Exception as error:  # noqa: BLE001 - the test reads the error
            out[kind] = {"ok": False, "type": type(error).__name__, "message": str(error)}
    print(json.dumps(out))


if __name__ == "__main__":
    main()

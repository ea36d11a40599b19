"""A small training job instrumented with brim, run as a child process by test_child_process.py.

argv: n_batches num_workers. Prints one line "done steps=<n> budget=<bool> split=<k>" at the end."""

import os
import sys
import time

import torch

import brim
import brim.torch as bt


class Data(torch.utils.data.Dataset):
    def __init__(self, n):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, 6, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


def worker_init(worker_id):
    brim.event("worker_started", worker=worker_id)


def main():
    n_batches, num_workers = int(sys.argv[1]), int(sys.argv[2])
    torch.manual_seed(0)
    brim.event("job_start")  # connect before the loader forks its workers
    batch_size = brim.knob("batch_size", 4)
    bt.apply_cap()
    loader = torch.utils.data.DataLoader(
        Data(n_batches * batch_size), batch_size=batch_size, shuffle=False,
        worker_init_fn=worker_init if num_workers else None,
        **bt.loader_kwargs(num_workers=num_workers, persistent_workers=bool(num_workers)))
    model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 1))
    opt = torch.optim.SGD(model.parameters(), lr=0.05)

    def loss_fn(m, batch):
        x, y = batch
        return torch.nn.functional.mse_loss(m(x), y)

    step = bt.TrainStep(model, opt, loss_fn, precision=brim.knob("precision", "fp32"))
    pause_at = int(os.environ.get("TEST_PAUSE_AT_STEP", "-1"))
    with brim.track(loader) as tracker:
        for i, batch in enumerate(tracker):
            if i == pause_at:
                time.sleep(0.5)  # let a request from the test's server arrive
            step(batch)
    print("done steps=%d budget=%s split=%d" % (tracker.steps, tracker.stopped_by_budget, step.split))


if __name__ == "__main__":
    main()

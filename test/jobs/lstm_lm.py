"""A sequence-first LSTM language model: the loader's batches are (seq_len, batch) token tensors
(nn.LSTM's default layout), the target flattened to seq_len * batch tokens."""

import argparse
import time

import torch
from torch.utils.data import DataLoader, Dataset

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=16)
p.add_argument("--bptt", type=int, default=35)
p.add_argument("--max-steps", type=int, default=60)
p.add_argument("--log-every", type=int, default=5)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB = 500


class Chunks(Dataset):
    def __init__(self, n):
        self.tokens = torch.randint(0, VOCAB, (n, args.bptt + 1))

    def __len__(self):
        return len(self.tokens)

    def __getitem__(self, i):
        return self.tokens[i]


def seq_first(rows):
    block = torch.stack(rows).t().contiguous()  # (bptt + 1, batch)
    return block[:-1], block[1:].reshape(-1)


class LM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = torch.nn.Embedding(VOCAB, 64)
        self.rnn = torch.nn.LSTM(64, 128)
        self.out = torch.nn.Linear(128, VOCAB)

    def forward(self, x):
        h, _ = self.rnn(self.emb(x))
        return self.out(h).view(-1, VOCAB)


loader = DataLoader(Chunks(args.batch_size * 20), batch_size=args.batch_size, shuffle=True, collate_fn=seq_first,
                    drop_last=True)
model = LM()
opt = torch.optim.SGD(model.parameters(), lr=0.5)
step = 0
seen = 0
t_log = time.perf_counter()
while step < args.max_steps:
    for data, target in loader:
        loss = torch.nn.functional.cross_entropy(model(data), target)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        opt.step()
        step += 1
        seen += data.shape[1]  # sequences in the batch (dim 1: sequence-first)
        if step % args.log_every == 0:
            now = time.perf_counter()
            rate = seen / (now - t_log)
            print("step %d | loss %.3f | %.1f samples/s (sequences of %d tokens)" % (step, loss.item(), rate, args.bptt),
                  flush=True)
            seen, t_log = 0, now
        if step >= args.max_steps:
            break

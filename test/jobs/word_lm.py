"""A word-level LSTM language model with no DataLoader: one long stream of generated token ids is cut
into `--batch_size` columns, and each step takes the next `--bptt` rows of that (rows, columns) tensor
(sequence-first, nn.LSTM's default layout); the hidden state is carried from step to step, detached."""

import argparse
import math

import torch

p = argparse.ArgumentParser()
p.add_argument("--batch_size", type=int, default=20)
p.add_argument("--bptt", type=int, default=35)
p.add_argument("--emsize", type=int, default=200)
p.add_argument("--nhid", type=int, default=200)
p.add_argument("--epochs", type=int, default=40)
p.add_argument("--lr", type=float, default=20.0)
args = p.parse_args()

torch.manual_seed(0)
torch.set_num_threads(1)
VOCAB = 2000

# a stream with some structure: each token is drawn near the one before it
stream = torch.cumsum(torch.randint(-3, 4, (60_000,)), 0).remainder(VOCAB)


def columns(tokens, n):
    rows = tokens.numel() // n
    return tokens[: rows * n].view(n, rows).t().contiguous()  # (rows, n)


class WordLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(VOCAB, args.emsize)
        self.lstm = torch.nn.LSTM(args.emsize, args.nhid, num_layers=2)
        self.head = torch.nn.Linear(args.nhid, VOCAB)

    def forward(self, x, state):
        h, state = self.lstm(self.embed(x), state)
        return self.head(h).view(-1, VOCAB), state


data = columns(stream, args.batch_size)
model = WordLM()
for epoch in range(1, args.epochs + 1):
    state = None
    total = 0.0
    for i, start in enumerate(range(0, data.size(0) - 1, args.bptt)):
        n = min(args.bptt, data.size(0) - 1 - start)
        x, y = data[start:start + n], data[start + 1:start + 1 + n].reshape(-1)
        if state is not None:
            state = tuple(s.detach() for s in state)
        model.zero_grad()
        out, state = model(x, state)
        loss = torch.nn.functional.cross_entropy(out, y)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 0.25)
        with torch.no_grad():
            for param in model.parameters():
                param.add_(param.grad, alpha=-args.lr)
        total += loss.item()
    print("epoch %d | %d batches | ppl %.1f" % (epoch, i + 1, math.exp(min(total / (i + 1), 20))), flush=True)

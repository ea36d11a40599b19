"""A loop with no DataLoader and no optimizer, shaped like pytorch/examples' regression: its batch
size is a default argument written in the code (`get_batch(batch_size=32)`), and nothing reports a
sample count; it prints the batch it really draws once."""

import torch

torch.manual_seed(0)
torch.set_num_threads(1)
W_target = torch.randn(4, 1)


def get_batch(batch_size=32):
    x = torch.randn(batch_size, 4)
    return x, x @ W_target + 0.1 * torch.randn(batch_size, 1)


fc = torch.nn.Linear(4, 1)
for step in range(1, 10 ** 9):
    batch_x, batch_y = get_batch()
    if step == 1:
        print("drew batch %d" % batch_x.shape[0], flush=True)
    fc.zero_grad()
    loss = torch.nn.functional.smooth_l1_loss(fc(batch_x), batch_y)
    loss.backward()
    for param in fc.parameters():
        param.data.add_(-0.01 * param.grad)

"""A job whose batch size is only a literal in its code, handed to a framework-style call rather than
to a DataLoader (`model.fit(x, y, batch_size=batch_size)`, as Keras-like wrappers take it): no flag, no
config. The fit slices its tensors itself and counts nothing as samples."""

import torch

torch.manual_seed(0)
torch.set_num_threads(1)


class Model(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.net = torch.nn.Sequential(torch.nn.Linear(16, 64), torch.nn.ReLU(), torch.nn.Linear(64, 1))
        self.opt = torch.optim.SGD(self.parameters(), lr=0.01)

    def fit(self, x, y, batch_size, epochs):
        for epoch in range(epochs):
            order = torch.randperm(len(x))
            for i in range(0, len(x) - batch_size + 1, batch_size):
                idx = order[i:i + batch_size]
                loss = torch.nn.functional.mse_loss(self.net(x[idx]), y[idx])
                self.opt.zero_grad()
                loss.backward()
                self.opt.step()


x = torch.randn(8192, 16)
y = x[:, :1] * 3.0
batch_size = 32
Model().fit(x, y, batch_size=batch_size, epochs=10_000)

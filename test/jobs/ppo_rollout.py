"""A PPO-shaped job with no DataLoader: `--n-envs` environments stepped together (a batched
pole-balancing toy in torch, in this process) for `--n-steps` each per rollout, under no_grad; then
`--epochs` passes over the rollout's n_envs × n_steps transitions in shuffled minibatches of
`--batch-size` rows, one optimizer step each. Its samples per step are the minibatch's rows, which
only the model's input shows. Prints its own rate of rows trained per second."""

import argparse
import time

import torch

p = argparse.ArgumentParser()
p.add_argument("--n-envs", type=int, default=4)
p.add_argument("--n-steps", type=int, default=32)
p.add_argument("--batch-size", type=int, default=32)
p.add_argument("--epochs", type=int, default=2)
p.add_argument("--updates", type=int, default=50)
args = p.parse_args()
torch.manual_seed(0)
torch.set_num_threads(1)


class Poles:
    """n poles on carts, stepped together: state (x, x', θ, θ'), action 0/1 pushes left/right."""

    def __init__(self, n: int) -> None:
        self.state = torch.zeros(n, 4).uniform_(-0.05, 0.05)

    def step(self, action: torch.Tensor) -> torch.Tensor:
        x, v, th, w = self.state.unbind(1)
        force = action.float() * 20 - 10
        acc = (force + 0.05 * w * w * th.sin() - 9.8 * th.sin()) / 1.1
        self.state = torch.stack([x + 0.02 * v, v + 0.02 * acc, th + 0.02 * w, w + 0.02 * (9.8 * th.sin() - acc * th.cos())], 1)
        done = (th.abs() > 0.21) | (x.abs() > 2.4)
        self.state[done] = torch.zeros(int(done.sum()), 4).uniform_(-0.05, 0.05)
        return (~done).float()


policy = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 2))
value = torch.nn.Sequential(torch.nn.Linear(4, 64), torch.nn.Tanh(), torch.nn.Linear(64, 1))
opt = torch.optim.Adam(list(policy.parameters()) + list(value.parameters()), lr=3e-4)
envs = Poles(args.n_envs)
rows = 0
t0 = time.perf_counter()
for update in range(args.updates):
    obs, acts, logps, rews = [], [], [], []
    with torch.no_grad():
        for _ in range(args.n_steps):
            o = envs.state.clone()
            dist = torch.distributions.Categorical(logits=policy(o))
            a = dist.sample()
            obs.append(o), acts.append(a), logps.append(dist.log_prob(a)), rews.append(envs.step(a))
    b_obs, b_act, b_logp, b_ret = torch.cat(obs), torch.cat(acts), torch.cat(logps), torch.cat(rews)
    for _ in range(args.epochs):
        for idx in torch.randperm(len(b_obs)).split(args.batch_size):
            dist = torch.distributions.Categorical(logits=policy(b_obs[idx]))
            ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
            adv = b_ret[idx] - value(b_obs[idx]).squeeze(1).detach()
            loss = -torch.min(ratio * adv, ratio.clamp(0.8, 1.2) * adv).mean() + (value(b_obs[idx]).squeeze(1) - b_ret[idx]).pow(2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            rows += len(idx)
    print("update %d rows/s %.1f" % (update + 1, rows / (time.perf_counter() - t0)), flush=True)

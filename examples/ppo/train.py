#!/usr/bin/env python3
"""PPO with large separate actor and critic MLPs over a vectorised environment written in torch.

    python examples/ppo/train.py --config examples/ppo/config.yaml [--steps N] [--print-params]

The architecture is read from model.yaml (the spec `brim plan` reads). The environment is a batch
of point masses in `actions` dimensions pushed by the policy's forces towards random goals, simulated
in torch on the training device. Each rollout fills a buffer (num_envs x rollout_steps transitions,
advantages by GAE); a step is one minibatch update, `epochs` passes over the shuffled buffer per
rollout. The rollout counts as the data wait of the update that follows it.
"""
import math
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
import common  # noqa: E402

brim = common.import_brim()
import brim.torch as bt  # noqa: E402
import torch  # noqa: E402
from torch import nn  # noqa: E402
from torch.utils.data import DataLoader, TensorDataset  # noqa: E402

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "tanh": nn.Tanh, "silu": nn.SiLU}


# ---------------------------------------------------------------- model (docs/model-spec.md `actor-critic`)
def mlp(sizes, act):
    layers = []
    for a, b in zip(sizes[:-1], sizes[1:]):
        layers += [nn.Linear(a, b), act()]
    return nn.Sequential(*layers[:-1])            # no activation after the output layer


class ActorCritic(nn.Module):
    def __init__(self, spec):
        super().__init__()
        act = ACTIVATIONS[spec.get("activation", "tanh")]
        self.continuous = bool(spec.get("continuous", True))
        self.policy = mlp([spec["observation"], *spec["policy"], spec["actions"]], act)
        self.value = mlp([spec["observation"], *spec["value"], 1], act)
        if self.continuous:
            self.log_std = nn.Parameter(torch.full((spec["actions"],), -0.5))

    def dist(self, obs):
        out = self.policy(obs).float()
        if self.continuous:
            return torch.distributions.Normal(out, self.log_std.exp())
        return torch.distributions.Categorical(logits=out)

    def log_prob(self, d, act):
        lp = d.log_prob(act)
        return lp.sum(-1) if self.continuous else lp


# ---------------------------------------------------------------- environment
class PointMasses:
    """num_envs point masses in `dim` dimensions; observation (obs_dim): position, velocity, goal,
    goal - position, and a fixed random nonlinear sensor projection of them. Reward: minus the
    distance to the goal minus a small force penalty. Episodes end after `horizon` steps and
    restart by themselves (auto-reset)."""

    def __init__(self, num_envs, dim, obs_dim, horizon, device, seed):
        self.n, self.dim, self.horizon, self.dev = num_envs, dim, horizon, device
        self.g = torch.Generator(device="cpu").manual_seed(seed)
        extra = obs_dim - 4 * dim
        if extra < 0:
            raise ValueError(f"observation must be at least 4 x actions ({4 * dim})")
        self.proj = (torch.randn(3 * dim, extra, generator=self.g) / math.sqrt(3 * dim)).to(device)
        self.pos = torch.zeros(num_envs, dim, device=device)
        self.vel = torch.zeros_like(self.pos)
        self.goal = torch.zeros_like(self.pos)
        self.t = torch.zeros(num_envs, dtype=torch.long, device=device)
        self.reset(torch.ones(num_envs, dtype=torch.bool, device=device))

    def _rand(self, *shape):
        return torch.randn(*shape, generator=self.g).to(self.dev)

    def reset(self, mask):
        k = int(mask.sum())
        if k:
            self.pos[mask] = self._rand(k, self.dim)
            self.vel[mask] = 0.0
            self.goal[mask] = self._rand(k, self.dim)
            self.t[mask] = 0

    def obs(self):
        base = torch.cat([self.pos, self.vel, self.goal], dim=-1)
        return torch.cat([base, self.goal - self.pos, torch.tanh(base @ self.proj)], dim=-1)

    def step(self, action):
        force = action.clamp(-1, 1)
        self.vel = 0.9 * self.vel + 0.1 * force
        self.pos = self.pos + 0.1 * self.vel
        self.t += 1
        reward = -(self.goal - self.pos).norm(dim=-1) - 0.01 * (force ** 2).sum(-1)
        done = self.t >= self.horizon
        self.reset(done)
        return self.obs(), reward, done


# ---------------------------------------------------------------- job
def main(argv=None):
    args = common.parse_args(__doc__.splitlines()[0], argv)
    cfg = common.load_config(args.config, args.set)
    spec = common.load_spec(cfg)
    common.seed_all(int(common.get(cfg, "seed", 0)))
    model = ActorCritic(spec)
    if args.print_params:
        common.print_params(model)
        return

    batch_size = brim.knob("batch_size", default=int(cfg["data_loader"]["batch_size"]))   # minibatch
    accumulation = brim.knob("accumulation",
                             default=int(common.get(cfg, "training.trainer.accumulate_grad_batches", 1)))
    precision = brim.knob("precision", default=str(common.get(cfg, "training.precision", "fp32")))
    bt.apply_cap()
    bt.configure()
    dev = common.device(cfg)
    model.to(dev)

    env_cfg, ppo = cfg["env"], cfg["ppo"]
    env = PointMasses(int(env_cfg["num_envs"]), spec["actions"], spec["observation"], int(env_cfg["horizon"]),
                      dev, int(env_cfg["seed"]))
    gamma, lam, clip = float(ppo["gamma"]), float(ppo["gae_lambda"]), float(ppo["clip"])
    vf_coef, ent_coef = float(ppo["value_coef"]), float(ppo["entropy_coef"])
    reward_scale = float(ppo.get("reward_scale", 1.0))
    dl = cfg["data_loader"]
    stats = {"episode_reward": float("nan")}

    @torch.no_grad()
    def rollout():
        """num_envs x rollout_steps transitions with GAE advantages, normalised over the whole
        buffer (not per minibatch, so that a minibatch split by brim keeps the same maths)."""
        model.eval()
        T = int(ppo["rollout_steps"])
        obs_b, act_b, logp_b, val_b, rew_b, done_b = [], [], [], [], [], []
        obs = env.obs()
        for _ in range(T):
            d = model.dist(obs)
            act = d.sample()
            obs_b.append(obs)
            act_b.append(act)
            logp_b.append(model.log_prob(d, act))
            val_b.append(model.value(obs).squeeze(-1).float())
            obs, rew, done = env.step(act)
            rew_b.append(rew * reward_scale)
            done_b.append(done.float())
        last_val = model.value(obs).squeeze(-1).float()
        adv = torch.zeros(T, env.n, device=dev)
        gae = torch.zeros(env.n, device=dev)
        for t in reversed(range(T)):
            nxt = last_val if t == T - 1 else val_b[t + 1]
            nonterminal = 1.0 - done_b[t]
            delta = rew_b[t] + gamma * nxt * nonterminal - val_b[t]
            gae = delta + gamma * lam * nonterminal * gae
            adv[t] = gae
        ret = adv + torch.stack(val_b)
        adv = (adv - adv.mean()) / (adv.std() + 1e-8)
        stats["episode_reward"] = float(torch.stack(rew_b).mean()) / reward_scale * int(env_cfg["horizon"])
        model.train()
        flat = [torch.stack(x).flatten(0, 1).cpu() for x in (obs_b, act_b, logp_b)]
        flat += [adv.flatten().cpu(), ret.flatten().cpu()]
        return TensorDataset(*flat)

    def updates(iteration):
        """One rollout, then `epochs` shuffled passes over its buffer in minibatches."""
        buffer = rollout()
        kw = bt.loader_kwargs(num_workers=int(dl.get("num_workers", 0)),
                              pin_memory=bool(dl.get("pin_memory", False)),
                              persistent_workers=bool(dl.get("persistent_workers", False)),
                              prefetch_factor=dl.get("prefetch_factor"))
        loader = DataLoader(buffer, batch_size=batch_size, shuffle=True, drop_last=True,
                            generator=torch.Generator().manual_seed(int(env_cfg["seed"]) + iteration), **kw)
        for _ in range(int(ppo["epochs"])):
            yield from loader

    def loss_fn(model, batch):
        obs, act, logp_old, adv, ret = batch  # already on the device: TrainStep moves batches
        d = model.dist(obs)
        ratio = torch.exp(model.log_prob(d, act) - logp_old)
        policy_loss = -torch.min(ratio * adv, ratio.clamp(1 - clip, 1 + clip) * adv).mean()
        value_loss = (model.value(obs).squeeze(-1).float() - ret).pow(2).mean()
        entropy = d.entropy().sum(-1).mean() if model.continuous else d.entropy().mean()
        return policy_loss + vf_coef * value_loss - ent_coef * entropy

    optimizer = torch.optim.Adam(model.parameters(), lr=float(common.get(cfg, "training.lr", 3e-4)))
    step = bt.TrainStep(model, optimizer, loss_fn, precision=precision, accumulation=accumulation, device=dev)
    limit = common.step_limit(args, cfg, brim)
    summary = common.Summary("ppo")
    with brim.track(common.epochs(updates)) as tracker:      # one reported step per batch; stops at brim's budget
        for batch in tracker:
            loss = step(batch)      # TrainStep notes loss, micro-batch and accumulation in the step report
            summary.step(batch[0].shape[0], loss)
            if limit is not None and summary.steps >= limit:
                break
    summary.print(episode_reward=f"{stats['episode_reward']:.3f}", batch_size=batch_size,
                  accumulation=accumulation, precision=precision, device=dev.type)


if __name__ == "__main__":
    main()

"""A JAX + optax loop (no PyTorch): a small MLP on generated data, jit-compiled, printing its
progress and rate every few steps the way such scripts do."""

import argparse
import time

import jax
import jax.numpy as jnp
import optax

p = argparse.ArgumentParser()
p.add_argument("--batch-size", type=int, default=256)
p.add_argument("--max-steps", type=int, default=100)
p.add_argument("--hidden", type=int, default=512)
p.add_argument("--log-every", type=int, default=5)
args = p.parse_args()

key = jax.random.PRNGKey(0)
k1, k2, k3 = jax.random.split(key, 3)
params = {"w1": jax.random.normal(k1, (32, args.hidden)) * 0.1, "w2": jax.random.normal(k2, (args.hidden, 4)) * 0.1}
xs = jax.random.normal(k3, (8192, 32))
ys = jnp.argmax(xs[:, :4], axis=1)
opt = optax.adam(1e-3)
state = opt.init(params)


def loss_fn(params, x, y):
    logits = jax.nn.relu(x @ params["w1"]) @ params["w2"]
    return optax.softmax_cross_entropy_with_integer_labels(logits, y).mean()


@jax.jit
def train_step(params, state, x, y):
    loss, grads = jax.value_and_grad(loss_fn)(params, x, y)
    updates, state = opt.update(grads, state, params)
    return optax.apply_updates(params, updates), state, loss


t = time.perf_counter()
for step in range(1, args.max_steps + 1):
    i = (step * args.batch_size) % (len(xs) - args.batch_size)
    params, state, loss = train_step(params, state, xs[i:i + args.batch_size], ys[i:i + args.batch_size])
    if step % args.log_every == 0:
        loss.block_until_ready()
        now = time.perf_counter()
        print("step %d/%d loss %.4f %.1f it/s" % (step, args.max_steps, float(loss), args.log_every / (now - t)), flush=True)
        t = now

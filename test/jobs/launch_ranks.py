"""A minimal torchrun stand-in (Debian's torch 1.13 torchrun fails on Python 3.11): starts N copies
of a script with the environment torchrun gives its ranks (RANK, LOCAL_RANK, WORLD_SIZE,
MASTER_ADDR, MASTER_PORT) and exits with the first non-zero status, else 0.

    python launch_ranks.py --nproc-per-node 2 script.py [args...]
"""

import os
import socket
import subprocess
import sys

args = sys.argv[1:]
n = 2
if args[:1] == ["--nproc-per-node"]:
    n, args = int(args[1]), args[2:]
with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
procs = []
for rank in range(n):
    env = dict(os.environ, RANK=str(rank), LOCAL_RANK=str(rank), WORLD_SIZE=str(n), LOCAL_WORLD_SIZE=str(n),
               MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    procs.append(subprocess.Popen([sys.executable] + args, env=env))
codes = [p.wait() for p in procs]
sys.exit(next((c for c in codes if c != 0), 0))

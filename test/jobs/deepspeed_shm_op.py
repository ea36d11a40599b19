"""Builds (the first time) and loads DeepSpeed's shared-memory communication op, as a DeepSpeed
engine on the CPU accelerator does at its start (deepspeed.comm.torch.build_shm_op): g++ and ninja
compile it into the torch extensions cache (~/.cache/torch_extensions, or TORCH_EXTENSIONS_DIR),
~30 s on a 2-core host; later loads take the cached build. .ci/venv runs it once so that no timed test
pays for the compile; test/multi/deepspeed.e2e.test.ts runs it in its set-up. Prints where the op
is, or why DeepSpeed does not use it here (then there is nothing to build)."""

import deepspeed
from deepspeed.accelerator import get_accelerator

builder = get_accelerator().create_op_builder("ShareMemCommBuilder")
if builder is None or not deepspeed.ops.__compatible_ops__.get(builder.NAME, False):
    print("deepspeed shm op: not used by the %s accelerator here" % get_accelerator().device_name())
else:
    op = builder.load(verbose=False)
    print("deepspeed shm op: %s" % getattr(op, "__file__", builder.NAME))

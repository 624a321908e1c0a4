#!/usr/bin/env python3
"""A small training loop with a planted leak, for the GPU check (tools/gpu/check.sh).

Every step runs inside torch.cuda.nvtx.range("step N"); when this rank leaks, each step also keeps
one tensor of --leak-mb MiB, allocated inside nvtx.range("leak:cache"), in a list that is never
freed. After each step the program writes one JSON line with its own view of memory
(torch.cuda.memory_allocated / memory_reserved) and the step time, which check.sh compares with
what the collector recorded through the agent.

Under torchrun every rank uses GPU 0 when only one GPU is visible (the check runs 4 ranks on one
H200); no process group is created, the ranks only share the job.
"""

import argparse
import json
import os
import statistics
import sys
import time


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=50, help="training steps (default 50)")
    p.add_argument("--leak-mb", type=float, default=8.0, help="MiB leaked per step (default 8)")
    p.add_argument("--leak-rank", type=int, default=None,
                   help="only this RANK leaks (default: every rank leaks)")
    p.add_argument("--hidden", type=int, default=2048, help="width of the MLP (default 2048)")
    p.add_argument("--batch", type=int, default=256, help="batch size (default 256)")
    p.add_argument("--out", required=True,
                   help="per-step JSON lines; '{rank}' in the path is replaced by RANK")
    args = p.parse_args(argv)
    if args.steps < 1:
        p.error("--steps must be >= 1")
    if args.leak_mb < 0:
        p.error("--leak-mb must be >= 0")
    return args


def main(argv=None):
    args = parse_args(argv)
    import torch  # imported after argument parsing so that --help works without torch

    rank = int(os.environ.get("RANK", "0"))
    local_rank = int(os.environ.get("LOCAL_RANK", "0"))
    if not torch.cuda.is_available():
        print(json.dumps({"rank": rank, "error": "torch.cuda is not available"}))
        return 3
    ordinal = local_rank if torch.cuda.device_count() > local_rank else 0
    dev = torch.device("cuda", ordinal)
    torch.cuda.set_device(dev)
    nvtx = torch.cuda.nvtx
    h = args.hidden
    model = torch.nn.Sequential(
        torch.nn.Linear(h, h), torch.nn.ReLU(), torch.nn.Linear(h, h)).to(dev)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    leak_here = args.leak_rank is None or args.leak_rank == rank
    leak_bytes = int(args.leak_mb * (1 << 20))
    leaked = []
    times = []
    path = args.out.replace("{rank}", str(rank))
    with open(path, "w") as out:
        for step in range(args.steps):
            torch.cuda.synchronize(dev)
            t0 = time.perf_counter()
            with nvtx.range("step %d" % step):
                with nvtx.range("fwd"):
                    x = torch.randn(args.batch, h, device=dev)
                    loss = model(x).square().mean()
                with nvtx.range("bwd"):
                    loss.backward()
                with nvtx.range("optimizer"):
                    opt.step()
                    opt.zero_grad(set_to_none=True)
                if leak_here and leak_bytes > 0:
                    with nvtx.range("leak:cache"):
                        leaked.append(torch.ones(leak_bytes, dtype=torch.uint8, device=dev))
                del x, loss
                torch.cuda.synchronize(dev)
            dt = time.perf_counter() - t0
            times.append(dt)
            out.write(json.dumps({
                "rank": rank,
                "step": step,
                "allocated": torch.cuda.memory_allocated(dev),
                "reserved": torch.cuda.memory_reserved(dev),
                "step_s": dt,
                "t_ns": time.time_ns(),
            }) + "\n")
    print(json.dumps({
        "rank": rank,
        "done": True,
        "steps": args.steps,
        "leaks": leak_here,
        "leaked_bytes": leak_bytes * len(leaked),
        "median_step_s": statistics.median(times),
        "alloc_conf": os.environ.get("PYTORCH_CUDA_ALLOC_CONF", ""),
        "agent": os.environ.get("CUDA_INJECTION64_PATH", ""),
    }))
    return 0


if __name__ == "__main__":
    sys.exit(main())

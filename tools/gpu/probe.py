#!/usr/bin/env python3
"""Environment probe for the GPU check: versions, the libcupti files the process has loaded
(before and after CUDA initialisation), cuptiGetVersion, whether the agent was injected, one
tensor, one tagged 64 MiB allocation inside "step 0", and (with --oom) one impossible
allocation inside nvtx.range("probe:oom") so the agent's OOM event can be checked.
Prints one JSON object on stdout.
"""

import argparse
import ctypes
import json
import os
import sys


def loaded(fragment):
    """Paths of mapped files whose name contains `fragment` (from /proc/self/maps)."""
    paths = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                parts = line.split()
                if len(parts) >= 6 and fragment in os.path.basename(parts[5]):
                    if parts[5] not in paths:
                        paths.append(parts[5])
    except OSError:
        pass
    return paths


def cupti_version(path):
    try:
        lib = ctypes.CDLL(path)
        v = ctypes.c_uint32(0)
        rc = lib.cuptiGetVersion(ctypes.byref(v))
        return {"rc": rc, "version": v.value}
    except OSError as e:
        return {"error": str(e)}


def driver_version():
    try:
        lib = ctypes.CDLL("libcuda.so.1")
        v = ctypes.c_int(0)
        rc = lib.cuDriverGetVersion(ctypes.byref(v))
        return {"rc": rc, "version": v.value}
    except OSError as e:
        return {"error": str(e)}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--oom", action="store_true", help="also try one impossible allocation")
    p.add_argument("--no-cuda", action="store_true",
                   help="stop after importing torch (for rehearsals without a GPU)")
    return p.parse_args(argv)


def main(argv=None):
    args = parse_args(argv)
    info = {
        "python": sys.version.split()[0],
        "env": {k: os.environ.get(k, "") for k in (
            "CUDA_INJECTION64_PATH", "NVTX_INJECTION64_PATH", "PYTORCH_CUDA_ALLOC_CONF",
            "MEMTRACE_COLLECTOR", "MEMTRACE_JOB_ID")},
    }
    try:
        import torch
    except Exception as e:  # report, do not crash: the probe's output is the result
        info["torch_error"] = repr(e)
        print(json.dumps(info))
        return 0
    info["torch"] = torch.__version__
    info["torch_cuda"] = torch.version.cuda
    info["cupti_after_import"] = loaded("libcupti")
    info["cuda_available"] = bool(torch.cuda.is_available())
    if args.no_cuda or not info["cuda_available"]:
        print(json.dumps(info))
        return 0
    x = torch.zeros(1, device="cuda")
    torch.cuda.synchronize()
    props = torch.cuda.get_device_properties(0)
    info["device"] = props.name
    info["device_total_bytes"] = props.total_memory
    info["driver"] = driver_version()
    nvtx = torch.cuda.nvtx
    with nvtx.range("step 0"):
        with nvtx.range("probe:tensor"):
            y = torch.ones(64 << 20, dtype=torch.uint8, device="cuda")
        torch.cuda.synchronize()
    info["allocated"] = torch.cuda.memory_allocated()
    info["reserved"] = torch.cuda.memory_reserved()
    if args.oom:
        with nvtx.range("step 1"):
            try:
                with nvtx.range("probe:oom"):
                    torch.empty(1 << 46, dtype=torch.uint8, device="cuda")  # 64 TiB
                info["oom_raised"] = False
            except RuntimeError as e:  # torch.cuda.OutOfMemoryError is a RuntimeError
                info["oom_raised"] = True
                info["oom_message"] = str(e).splitlines()[0][:200]
    info["cupti_after_init"] = loaded("libcupti")
    info["cupti_versions"] = {p: cupti_version(p) for p in info["cupti_after_init"]}
    info["agent_loaded"] = loaded("libmemtrace_agent")
    info["nvtx_libs"] = loaded("nvtx") + loaded("nvToolsExt")
    del x, y
    print(json.dumps(info))
    return 0


if __name__ == "__main__":
    sys.exit(main())

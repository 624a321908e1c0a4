"""memtrace helpers for training scripts (pure Python, no third-party dependencies).

The agent needs no code change: it attaches through CUDA_INJECTION64_PATH. These helpers only
make the recorded memory easier to read, by emitting NVTX ranges that the agent turns into
markers:

    import memtrace
    for n, batch in enumerate(loader):
        with memtrace.step(n):                  # sets the step number ("step <n>")
            with memtrace.tag("fsdp:layers.12"):  # allocations inside are tagged
                ...
            with memtrace.phase("actor_update"):  # an RL phase: own peak and floor
                ...

Without torch (or without CUDA) every helper is a no-op context manager.
"""

import contextlib

__all__ = ["step", "tag", "phase", "nvtx_available"]


def _nvtx():
    """torch.cuda.nvtx when torch with CUDA is importable, else None."""
    try:
        import torch  # noqa: PLC0415 (optional dependency, imported lazily)
    except Exception:  # torch missing or broken: helpers become no-ops
        return None
    try:
        if not torch.cuda.is_available():
            return None
        return torch.cuda.nvtx
    except Exception:
        return None


def nvtx_available():
    """Whether the helpers emit real NVTX ranges in this process."""
    return _nvtx() is not None


@contextlib.contextmanager
def _range(name):
    nvtx = _nvtx()
    if nvtx is None:
        yield
        return
    nvtx.range_push(name)
    try:
        yield
    finally:
        nvtx.range_pop()


def step(n):
    """Marks a training step: an NVTX range "step <n>" (the agent's default step pattern)."""
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError("memtrace.step: step must be a non-negative int, got %r" % (n,))
    return _range("step %d" % n)


def tag(name):
    """Tags the allocations made inside with `name` (the innermost open range wins)."""
    if not isinstance(name, str) or not name:
        raise ValueError("memtrace.tag: name must be a non-empty str, got %r" % (name,))
    return _range(name)


def phase(name):
    """Marks an RL phase ("rollout", "actor_update", ...) as an NVTX range "phase:<name>"."""
    if not isinstance(name, str) or not name:
        raise ValueError("memtrace.phase: name must be a non-empty str, got %r" % (name,))
    return _range("phase:" + name)

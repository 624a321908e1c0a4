"""Ray job submission with memtrace: the runtime_env that makes every worker record.

    from ray.job_submission import JobSubmissionClient
    import memtrace.ray

    client = JobSubmissionClient("http://head:8265")
    client.submit_job(entrypoint="python main.py",
                      runtime_env=memtrace.ray.runtime_env("head:7431"))

The dict is the same one `memtrace ray-env --collector head:7431` prints as JSON. For a
runtime_env with other keys (pip, working_dir), add its "env_vars" to yours. Pure Python, no Ray
import: it only builds the dict.

Inside the workers the agent takes the job id from MEMTRACE_JOB_ID when `job` is given, else
from TORCHELASTIC_RUN_ID when a torchrun runs the worker, else from RAY_JOB_ID (shared by all
workers of the job); ranks from RANK / WORLD_SIZE / LOCAL_RANK
when the framework sets them (verl does), else the collector names each worker by host + device
+ pid (`memtrace ranks` shows it in identified_by).
"""

import os
import re
import shutil
import warnings

from memtrace import _agent_env

__all__ = ["runtime_env", "find_agent_library", "agent_reads"]

_AGENT_LIBRARY = "libmemtrace_agent.so"
_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_AGENT_NAMES = frozenset(v[0] for v in _agent_env.AGENT_VARIABLES)


def _candidates(memtrace_binary):
    # The same places `memtrace run` looks (tools/launch/launch_paths.cc): beside the binary,
    # ../lib, ../lib/memtrace, and a Bazel output tree (bazel-bin/query/cli/memtrace).
    d = os.path.dirname(memtrace_binary)
    return [
        os.path.join(d, _AGENT_LIBRARY),
        os.path.join(d, "..", "lib", _AGENT_LIBRARY),
        os.path.join(d, "..", "lib", "memtrace", _AGENT_LIBRARY),
        os.path.join(d, "..", "..", "agent", _AGENT_LIBRARY),
    ]


def _given_library(source, path, stacklevel):
    """A library path given by `source`: its path on the Ray nodes, kept as given (a symlink
    there may point elsewhere than here), but absolute (the workers start in their own
    directories); as `memtrace ray-env`, only a warning when this machine lacks it."""
    if not isinstance(path, str) or not os.path.isabs(path):
        raise ValueError("memtrace.ray.runtime_env: %s %r: give an absolute path (the workers "
                         "start in their own directories)" % (source, path))
    if not os.path.isfile(path):
        warnings.warn("memtrace: %s is not on this machine: it must exist at that path on "
                      "every Ray node" % (path,), stacklevel=stacklevel)
    return path


def find_agent_library(agent_lib=None, environ=None):
    """The agent library's absolute path: `agent_lib`, else $MEMTRACE_AGENT_LIB, else found next
    to the `memtrace` binary on PATH. FileNotFoundError names what was tried."""
    environ = os.environ if environ is None else environ
    if agent_lib:
        return _given_library("agent_lib", agent_lib, 4)
    if environ.get("MEMTRACE_AGENT_LIB"):
        return _given_library("MEMTRACE_AGENT_LIB", environ["MEMTRACE_AGENT_LIB"], 4)
    binary = shutil.which("memtrace", path=environ.get("PATH"))
    tried = _candidates(os.path.realpath(binary)) if binary else []
    for candidate in tried:
        if os.path.isfile(candidate):
            return os.path.realpath(candidate)
    raise FileNotFoundError(
        "memtrace: cannot find the agent library: MEMTRACE_AGENT_LIB is not set and %s; pass "
        "agent_lib= with its path on the Ray nodes"
        % ("none of %s exists" % ", ".join(tried) if tried else "no memtrace binary is on PATH"))


def _check_str(what, value):
    if not isinstance(value, str) or not value:
        raise ValueError("memtrace.ray.runtime_env: %s must be a non-empty str, got %r"
                         % (what, value))


def runtime_env(collector, job=None, agent_lib=None, nvtx_lib=None, extra=None, environ=None):
    """The Ray runtime_env {"env_vars": {...}} for tracing a job's workers.

    collector: host:port of the collector as the workers reach it.
    job: job id for every worker (default: each worker's own, usually its RAY_JOB_ID).
    agent_lib: path of libmemtrace_agent.so on the nodes (default: find_agent_library()).
    nvtx_lib: NVTX_INJECTION64_PATH (default: $MEMTRACE_NVTX_LIB, else the agent library).
    extra: more variables for the workers, {name: value}; they come last.
    environ: where defaults and the forwarded agent settings (MEMTRACE_BATCH_EVENTS, ...) are
      read from (default os.environ).

    Raises ValueError for invalid arguments (a library path given that is not absolute
    included), FileNotFoundError when no agent library is given and none is found; warns when
    a library given is not on this machine.
    """
    environ = os.environ if environ is None else environ
    _check_str("collector", collector)
    if job is not None:
        _check_str("job", job)
    if extra is None:
        extra = {}
    if not isinstance(extra, dict):
        raise ValueError("memtrace.ray.runtime_env: extra must be a dict, got %r" % (extra,))
    for name, value in extra.items():
        if not isinstance(name, str) or not _NAME.match(name):
            raise ValueError("memtrace.ray.runtime_env: %r is not a variable name" % (name,))
        # Set by their own arguments, which win: refused rather than silently dropped (the job
        # id only when job= is given; alone, extra carries it).
        owner = {"MEMTRACE_COLLECTOR": "collector",
                 _agent_env.CUDA_INJECTION_VAR: "agent_lib",
                 _agent_env.NVTX_INJECTION_VAR: "nvtx_lib"}.get(name)
        if name == "MEMTRACE_JOB_ID" and job is not None:
            owner = "job"
        if owner is not None:
            raise ValueError("memtrace.ray.runtime_env: %s is set by the %s argument; use that"
                             % (name, owner))
        if name in _agent_env.NOT_FOR_EVERY_WORKER:
            raise ValueError("memtrace.ray.runtime_env: %s: %s"
                             % (name, _agent_env.NOT_FOR_EVERY_WORKER[name]))
        if not isinstance(value, str):
            raise ValueError("memtrace.ray.runtime_env: the value of %s must be a str, got %r"
                             % (name, value))

    agent = find_agent_library(agent_lib, environ)
    if nvtx_lib is not None:
        nvtx = _given_library("nvtx_lib", nvtx_lib, 3)
    elif environ.get("MEMTRACE_NVTX_LIB"):
        nvtx = _given_library("MEMTRACE_NVTX_LIB", environ["MEMTRACE_NVTX_LIB"], 3)
    else:
        nvtx = agent

    env_vars = {
        _agent_env.CUDA_INJECTION_VAR: agent,
        _agent_env.NVTX_INJECTION_VAR: nvtx,
        "MEMTRACE_COLLECTOR": collector,
    }
    if job is not None:
        env_vars["MEMTRACE_JOB_ID"] = job
    for name in _agent_env.FORWARDED_SETTINGS:
        if environ.get(name):
            env_vars[name] = environ[name]
    for name, value in extra.items():
        env_vars.setdefault(name, value)
        if name in _agent_env.FORWARDED_SETTINGS:
            env_vars[name] = value
    if "MEMTRACE_TOKEN" in env_vars:
        warnings.warn("memtrace: MEMTRACE_TOKEN goes into the job's runtime_env, which Ray keeps "
                      "and shows with the job: prefer MEMTRACE_TOKEN_FILE naming a file on every "
                      "node", stacklevel=2)
    return {"env_vars": env_vars}


def agent_reads(name):
    """Whether the agent's own list of environment variables has `name`."""
    return name in _AGENT_NAMES

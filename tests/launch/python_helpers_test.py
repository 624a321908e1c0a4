"""memtrace's Python helpers: step/tag/phase never fail a training script, and emit balanced NVTX
ranges when torch has CUDA; bad arguments raise ValueError.

Run by //tests/launch:python_helpers_test with PYTHONPATH=tools/python. Debian's python3-torch
(if installed) is CPU-only, so the real torch path is the no-op one; a stand-in torch module with
a recording torch.cuda.nvtx checks the CUDA path.
"""

import importlib
import os
import sys
import tempfile
import types
import unittest


def fresh_memtrace():
    for name in list(sys.modules):
        if name == "memtrace" or name.startswith("memtrace."):
            del sys.modules[name]
    return importlib.import_module("memtrace")


class RecordingNvtx:
    def __init__(self):
        self.calls = []

    def range_push(self, msg):
        self.calls.append(("push", msg))

    def range_pop(self):
        self.calls.append(("pop",))


def install_fake_torch(cuda):
    nvtx = RecordingNvtx()
    torch = types.ModuleType("torch")
    torch.cuda = types.SimpleNamespace(is_available=lambda: cuda, nvtx=nvtx)
    sys.modules["torch"] = torch
    return nvtx


class NoCudaTest(unittest.TestCase):
    def tearDown(self):
        sys.modules.pop("torch", None)

    def test_helpers_are_no_ops_with_the_installed_torch_or_none(self):
        sys.modules.pop("torch", None)
        memtrace = fresh_memtrace()
        self.assertFalse(memtrace.nvtx_available())  # CPU-only torch, or no torch at all
        with memtrace.step(0):
            with memtrace.tag("fsdp:layers.12"):
                with memtrace.phase("rollout"):
                    x = 1 + 1
        self.assertEqual(x, 2)

    def test_torch_without_cuda_is_a_no_op(self):
        nvtx = install_fake_torch(cuda=False)
        memtrace = fresh_memtrace()
        with memtrace.step(3), memtrace.tag("t"):
            pass
        self.assertEqual(nvtx.calls, [])

    def test_broken_torch_import_is_a_no_op(self):
        broken = types.ModuleType("torch")  # no .cuda attribute at all
        sys.modules["torch"] = broken
        memtrace = fresh_memtrace()
        self.assertFalse(memtrace.nvtx_available())
        with memtrace.phase("actor_update"):
            pass

    def test_exceptions_pass_through_unchanged(self):
        memtrace = fresh_memtrace()
        with self.assertRaises(KeyError):
            with memtrace.step(1):
                raise KeyError("x")


class CudaTest(unittest.TestCase):
    def tearDown(self):
        sys.modules.pop("torch", None)

    def test_ranges_are_named_and_balanced_even_on_exceptions(self):
        nvtx = install_fake_torch(cuda=True)
        memtrace = fresh_memtrace()
        self.assertTrue(memtrace.nvtx_available())
        with memtrace.step(12):
            with memtrace.tag("fsdp:layers.12"):
                pass
            try:
                with memtrace.phase("rollout"):
                    raise RuntimeError("boom")
            except RuntimeError:
                pass
        self.assertEqual(nvtx.calls, [
            ("push", "step 12"),
            ("push", "fsdp:layers.12"), ("pop",),
            ("push", "phase:rollout"), ("pop",),
            ("pop",),
        ])


class InvalidArgumentsTest(unittest.TestCase):
    def test_step_needs_a_non_negative_int(self):
        memtrace = fresh_memtrace()
        for bad in (-1, 1.5, "3", None, True):
            with self.assertRaises(ValueError, msg=repr(bad)):
                memtrace.step(bad)

    def test_tag_and_phase_need_a_non_empty_str(self):
        memtrace = fresh_memtrace()
        for fn in (memtrace.tag, memtrace.phase):
            for bad in ("", None, 3, b"x"):
                with self.assertRaises(ValueError, msg=repr(bad)):
                    fn(bad)


class RayRuntimeEnvTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.mkdtemp(dir=os.environ.get("TEST_TMPDIR"))
        self.agent = os.path.join(self.dir, "libmemtrace_agent.so")
        open(self.agent, "w").close()
        self.ray = importlib.import_module("memtrace.ray")

    def test_carries_injection_collector_and_job(self):
        env = self.ray.runtime_env("head:7431", job="j", agent_lib=self.agent, environ={})
        self.assertEqual(env, {"env_vars": {
            "CUDA_INJECTION64_PATH": os.path.abspath(self.agent),
            "NVTX_INJECTION64_PATH": os.path.abspath(self.agent),
            "MEMTRACE_COLLECTOR": "head:7431",
            "MEMTRACE_JOB_ID": "j",
        }})
        # Without job=, a job id among the extra variables reaches the workers.
        env = self.ray.runtime_env("head:7431", agent_lib=self.agent, environ={},
                                   extra={"MEMTRACE_JOB_ID": "from-extra"})
        self.assertEqual(env["env_vars"]["MEMTRACE_JOB_ID"], "from-extra")

    def test_finds_the_agent_from_memtrace_agent_lib(self):
        env = self.ray.runtime_env("h:1", environ={"MEMTRACE_AGENT_LIB": self.agent})
        self.assertEqual(env["env_vars"]["CUDA_INJECTION64_PATH"], os.path.abspath(self.agent))

    def test_a_given_library_is_kept_as_given_and_only_warned_about_when_not_here(self):
        # The path is the one on the Ray nodes: a symlink is not resolved here, and a path this
        # machine lacks is a warning, as with `memtrace ray-env --agent_lib`.
        link = os.path.join(self.dir, "current.so")
        os.symlink(self.agent, link)
        env = self.ray.runtime_env("h:1", agent_lib=link, environ={})
        self.assertEqual(env["env_vars"]["CUDA_INJECTION64_PATH"], link)
        with self.assertWarns(UserWarning) as w:
            env = self.ray.runtime_env("h:1", agent_lib="/opt/memtrace/lib/libmemtrace_agent.so",
                                       environ={})
        self.assertIn("every Ray node", str(w.warning))
        self.assertEqual(env["env_vars"]["CUDA_INJECTION64_PATH"],
                         "/opt/memtrace/lib/libmemtrace_agent.so")

    def test_a_library_path_given_must_be_absolute(self):
        # As `memtrace ray-env`: the workers start in their own directories.
        for kwargs, environ in (({"agent_lib": "lib/libmemtrace_agent.so"}, {}),
                                ({}, {"MEMTRACE_AGENT_LIB": "libmemtrace_agent.so"}),
                                ({"agent_lib": self.agent, "nvtx_lib": "nvtx.so"}, {}),
                                ({"agent_lib": self.agent}, {"MEMTRACE_NVTX_LIB": "x/nvtx.so"})):
            with self.assertRaisesRegex(ValueError, "give an absolute path", msg=repr(kwargs)):
                self.ray.runtime_env("h:1", environ=environ, **kwargs)

    def test_memtrace_nvtx_lib_is_taken_as_given(self):
        with self.assertWarns(UserWarning):
            env = self.ray.runtime_env("h:1", agent_lib=self.agent,
                                       environ={"MEMTRACE_NVTX_LIB": "/opt/m/nvtx.so"})
        self.assertEqual(env["env_vars"]["NVTX_INJECTION64_PATH"], "/opt/m/nvtx.so")

    def test_finds_the_agent_beside_memtrace_on_path(self):
        bindir = os.path.join(self.dir, "bin")
        os.mkdir(bindir)
        binary = os.path.join(bindir, "memtrace")
        with open(binary, "w") as f:
            f.write("#!/bin/sh\n")
        os.chmod(binary, 0o755)
        os.rename(self.agent, os.path.join(bindir, "libmemtrace_agent.so"))
        env = self.ray.runtime_env("h:1", environ={"PATH": bindir})
        self.assertEqual(env["env_vars"]["CUDA_INJECTION64_PATH"],
                         os.path.realpath(os.path.join(bindir, "libmemtrace_agent.so")))

    def test_forwards_agent_settings_but_not_per_worker_variables(self):
        environ = {"MEMTRACE_BATCH_EVENTS": "10", "RANK": "2", "RAY_JOB_ID": "01",
                   "MEMTRACE_DEVICE": "3"}
        env = self.ray.runtime_env("h:1", agent_lib=self.agent, environ=environ,
                                   extra={"PYTORCH_CUDA_ALLOC_CONF": "expandable_segments:True"})
        v = env["env_vars"]
        self.assertEqual(v["MEMTRACE_BATCH_EVENTS"], "10")
        self.assertEqual(v["PYTORCH_CUDA_ALLOC_CONF"], "expandable_segments:True")
        for name in ("RANK", "RAY_JOB_ID", "MEMTRACE_DEVICE", "MEMTRACE_JOB_ID"):
            self.assertNotIn(name, v)

    def test_a_token_in_the_runtime_env_is_warned_about(self):
        import warnings
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            env = self.ray.runtime_env("h:1", agent_lib=self.agent,
                                       environ={"MEMTRACE_TOKEN": "secret"})
        self.assertEqual(env["env_vars"]["MEMTRACE_TOKEN"], "secret")
        self.assertTrue(any("MEMTRACE_TOKEN_FILE" in str(w.message) for w in caught),
                        [str(w.message) for w in caught])

    def test_invalid_arguments_raise_value_error(self):
        for kwargs in ({"collector": ""}, {"collector": None}, {"collector": "h:1", "job": ""},
                       {"collector": "h:1", "extra": ["A=1"]},
                       {"collector": "h:1", "extra": {"1A": "x"}},
                       {"collector": "h:1", "extra": {"A": 1}},
                       # set by its own argument: would have been dropped silently
                       {"collector": "h:1", "extra": {"MEMTRACE_COLLECTOR": "x:1"}},
                       {"collector": "h:1", "job": "a", "extra": {"MEMTRACE_JOB_ID": "b"}},
                       # the same rank for every worker: one identity, one stream kept
                       {"collector": "h:1", "extra": {"RANK": "0"}},
                       {"collector": "h:1", "extra": {"SLURM_PROCID": "0"}},
                       # a launcher's job id (every job under one), one process's settings
                       {"collector": "h:1", "extra": {"RAY_JOB_ID": "1"}},
                       {"collector": "h:1", "extra": {"MEMTRACE_ATTEMPT": "2"}},
                       {"collector": "h:1", "extra": {"MEMTRACE_DEVICE": "1"}}):
            with self.assertRaises(ValueError, msg=repr(kwargs)):
                self.ray.runtime_env(agent_lib=self.agent, environ={}, **kwargs)

    def test_missing_agent_is_file_not_found_with_a_hint(self):
        with self.assertRaises(FileNotFoundError) as e:
            self.ray.runtime_env("h:1", environ={"PATH": self.dir})
        self.assertIn("agent_lib", str(e.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)

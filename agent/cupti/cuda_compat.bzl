"""target_compatible_with for CUDA-only targets of the agent.

@local_cuda's stub sets CUDA_COMPAT = ["@platforms//:incompatible"], but the @platforms that
Bazel 4.2.3 bundles has no :incompatible target, so analysis fails where CUDA is absent. This
uses the same mechanism with a constraint of our own that no platform declares: a target that
requires it is incompatible, and `bazel build //...` skips it.
"""

load("@local_cuda//:cuda_config.bzl", "CUDA_FOUND")

AGENT_CUDA_COMPAT = [] if CUDA_FOUND else ["//agent/cupti:cuda_toolkit_present"]

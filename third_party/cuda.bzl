"""CUDA/CUPTI detection: @local_cuda//:cupti where CUDA exists, an empty stub elsewhere.

CUDA_PATH selects the toolkit (default /usr/local/cuda). Where it is absent, an empty stub is written and
`CUDA_COMPAT` (load it from @local_cuda//:cuda_config.bzl) is a constraint no platform has, so
CUDA-only targets that set `target_compatible_with = CUDA_COMPAT` are skipped by `bazel test //...`
and the rest of the tree still builds.
"""

def _local_cuda_impl(rctx):
    cuda = rctx.os.environ.get("CUDA_PATH", "/usr/local/cuda")
    have = rctx.path(cuda + "/include/cupti.h").exists and (
        rctx.path(cuda + "/lib64/libcupti.so").exists
    )
    rctx.file("WORKSPACE", "")
    common = 'package(default_visibility = ["//visibility:public"])\n'
    if not have:
        rctx.file("BUILD.bazel", common + """
# CUDA not found at %s: CUDA-only targets are incompatible (CUDA_COMPAT in cuda_config.bzl).
cc_library(name = "cupti")
cc_library(name = "cuda_headers")

# A constraint no platform declares: a target that requires it is skipped by //... . (The
# @platforms bundled with Bazel 4.2.3 has no :incompatible target.)
constraint_setting(name = "cuda_toolkit")
constraint_value(name = "cuda_toolkit_present", constraint_setting = ":cuda_toolkit")
""" % cuda)
        rctx.file("cuda_config.bzl", "CUDA_FOUND = False\nCUDA_COMPAT = [\"@local_cuda//:cuda_toolkit_present\"]\n")
        return
    rctx.symlink(cuda + "/include", "include")
    rctx.symlink(cuda + "/lib64", "lib64")
    lib = str(rctx.path(cuda + "/lib64").realpath)
    rctx.file("BUILD.bazel", common + """
cc_library(
    name = "cuda_headers",
    hdrs = glob([
        "include/cupti*.h",
        "include/cuda*.h",
        "include/generated_*.h",
        "include/nvtx3/**",
        "include/crt/**",
        "include/*.h",
    ]),
    includes = ["include"],
)

cc_library(
    name = "cupti",
    deps = [":cuda_headers"],
    linkopts = ["-L%s", "-Wl,-rpath,%s", "-lcupti", "-ldl"],
)
""" % (lib, lib))
    rctx.file("cuda_config.bzl", "CUDA_FOUND = True\nCUDA_COMPAT = []\n")

local_cuda = repository_rule(
    implementation = _local_cuda_impl,
    local = True,
    environ = ["CUDA_PATH"],
)

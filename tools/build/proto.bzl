"""memtrace_proto: compile .proto files with the system protoc and grpc_cpp_plugin.

Bazel 4's native proto rules would download protobuf; Debian's protoc is used instead. Generated
headers are included as "proto/<path relative to proto/>.pb.h", e.g. "proto/memtrace/v1/events.pb.h".
"""

def memtrace_proto(name, srcs, deps = [], grpc = False, visibility = None):
    """One cc_library holding the generated C++ for `srcs` (and gRPC stubs when grpc = True).

    srcs are .proto files under //proto; import paths are relative to //proto.
    """
    outs = []
    for src in srcs:
        base = src[:-len(".proto")]
        outs += [base + ".pb.h", base + ".pb.cc"]
        if grpc:
            outs += [base + ".grpc.pb.h", base + ".grpc.pb.cc"]
    proto_deps = [d + "_srcs" for d in deps]
    native.filegroup(name = name + "_srcs", srcs = srcs + proto_deps, visibility = visibility)
    grpc_args = " --grpc_out=$(GENDIR)/proto --plugin=protoc-gen-grpc=$$(which grpc_cpp_plugin)" if grpc else ""
    native.genrule(
        name = name + "_gen",
        srcs = srcs + proto_deps,
        outs = outs,
        cmd = "protoc -Iproto --cpp_out=$(GENDIR)/proto" + grpc_args + " " +
              " ".join(["$(location %s)" % s for s in srcs]),
    )
    native.cc_library(
        name = name,
        srcs = [o for o in outs if o.endswith(".cc")],
        hdrs = [o for o in outs if o.endswith(".h")],
        # Generated code includes its imports relative to //proto; code of ours uses "proto/...".
        includes = ["."],
        deps = deps + ["@system//:grpc" if grpc else "@system//:protobuf"],
        visibility = visibility,
    )

"""collector_proto: the collector's private storage records, compiled with the system protoc.

These messages are the store's on-disk values, not part of the wire contract, so they live beside
the code that owns them. Imports of the public contract resolve against //proto
("memtrace/v1/events.proto"); the generated header is included by its path in this repository,
e.g. "collector/store/records.pb.h".
"""

def collector_proto(name, src, deps = [], proto_deps = []):
    """One cc_library with the generated C++ of `src` (a .proto in the calling package).

    deps: cc_library targets of imported public protos, e.g. "//proto:query_proto".
    proto_deps: their "_srcs" filegroups, e.g. "//proto:query_proto_srcs".
    """
    base = src[:-len(".proto")]
    outs = [base + ".pb.h", base + ".pb.cc"]
    native.genrule(
        name = name + "_gen",
        srcs = [src] + proto_deps,
        outs = outs,
        cmd = "protoc -Iproto -I. --cpp_out=$(GENDIR) $(location %s)" % src,
    )
    native.cc_library(
        name = name,
        srcs = [base + ".pb.cc"],
        hdrs = [base + ".pb.h"],
        deps = deps + ["@system//:protobuf"],
    )

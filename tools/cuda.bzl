"""cuda_library: CUDA sources compiled by nvcc into a cc_library, only under --config=cuda.

Each .cu file becomes one object file through a genrule that runs /usr/local/cuda/bin/nvcc
(position-independent, for sm_80 and sm_90 plus compute_90 PTX that newer GPUs JIT-compile).
The genrules are tagged manual, so `bazel build //...` without --config=cuda never runs nvcc,
and the cc_library is empty in a CPU-only build: nothing there needs CUDA installed.
"""

load("@rules_cc//cc:defs.bzl", "cc_library")

NVCC = "/usr/local/cuda/bin/nvcc"

NVCC_FLAGS = [
    "-std=c++17",
    "-O3",
    "--expt-relaxed-constexpr",
    "-diag-suppress=186",  # "pointless comparison of unsigned integer with zero" in templates
    "-Xcompiler",
    "-fPIC",
    "-gencode arch=compute_80,code=sm_80",
    "-gencode arch=compute_90,code=sm_90",
    "-gencode arch=compute_90,code=compute_90",
    "-I.",
]

def _link_only_impl(ctx):
    return [CcInfo(linking_context = ctx.attr.library[CcInfo].linking_context)]

# The objects and link flags of a cc_library without its compilation context. A cc_library that
# depends on @cuda passes "-isystem external/cuda/include" (and the CUDA headers as inputs) to the
# compile of every library and test above it, so under --config=cuda every C++ file of the
# project would compile again with a command line that differs only there. Through this rule only
# the link steps differ, and the CPU-only build's compiled objects are reused.
_link_only = rule(
    implementation = _link_only_impl,
    attrs = {"library": attr.label(providers = [CcInfo])},
)

def cuda_library(name, cu_srcs, cu_hdrs = [], srcs = [], hdrs = [], deps = [], visibility = None, **kwargs):
    """A library of `srcs` (C++) plus the objects nvcc makes of `cu_srcs`.

    cu_hdrs are the headers the .cu files include (they must be listed: the genrules see only
    their inputs). In a build without --config=cuda the library is empty.

    `name` links the library but passes no headers or include paths on to what depends on it
    (nothing outside the CUDA code includes its headers); `name + "_compiled"` is the cc_library
    itself, for the few targets (a CUDA test) that include its headers.
    """
    objects = []
    for cu in cu_srcs:
        stem = cu[:-len(".cu")].replace("/", "_")
        out = "_nvcc/%s/%s.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem),
            srcs = [cu] + cu_hdrs,
            outs = [out],
            # nvcc names its temporary files after its process id, which is the same in every
            # sandbox (each runs in a PID namespace of its own) while /tmp is shared: two nvcc
            # runs at once deleted each other's files ("ptxas fatal: Input file
            # '/tmp/tmpxft_00000002_..._elementwise.compute_80.ptx' could not be opened"). Each
            # run gets a temporary directory of its own.
            cmd = ("tmp=$$(mktemp -d) && TMPDIR=$$tmp %s %s -c $(location %s) -o $@; " +
                   "status=$$?; rm -rf $$tmp; exit $$status") % (NVCC, " ".join(NVCC_FLAGS), cu),
            tags = ["manual"],
            message = "nvcc %s" % cu,
        )
        objects.append(out)
    cc_library(
        name = name + "_compiled",
        srcs = select({
            "//tools:cuda_enabled": objects + srcs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = select({
            "//tools:cuda_enabled": deps + ["@cuda"],
            "//conditions:default": [],
        }),
        visibility = visibility,
        **kwargs
    )
    _link_only(
        name = name,
        library = ":%s_compiled" % name,
        visibility = visibility,
    )

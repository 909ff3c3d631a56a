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

def cuda_library(name, cu_srcs, cu_hdrs = [], srcs = [], hdrs = [], deps = [], **kwargs):
    """A cc_library of `srcs` (C++) plus the objects nvcc makes of `cu_srcs`.

    cu_hdrs are the headers the .cu files include (they must be listed: the genrules see only
    their inputs). In a build without --config=cuda the library is empty.
    """
    objects = []
    for cu in cu_srcs:
        stem = cu[:-len(".cu")].replace("/", "_")
        out = "_nvcc/%s/%s.o" % (name, stem)
        native.genrule(
            name = "%s_%s_nvcc" % (name, stem),
            srcs = [cu] + cu_hdrs,
            outs = [out],
            cmd = "%s %s -c $(location %s) -o $@" % (NVCC, " ".join(NVCC_FLAGS), cu),
            tags = ["manual"],
            message = "nvcc %s" % cu,
        )
        objects.append(out)
    cc_library(
        name = name,
        srcs = select({
            "//tools:cuda_enabled": objects + srcs,
            "//conditions:default": [],
        }),
        hdrs = hdrs,
        deps = select({
            "//tools:cuda_enabled": deps + ["@cuda"],
            "//conditions:default": [],
        }),
        **kwargs
    )

"""mpi_test: a GoogleTest binary run under mpirun, once per rank count."""

load("//tools:copts.bzl", "TESSERA_COPTS")

def mpi_test(name, srcs, deps, ranks = [2, 4], size = "small", timeout = "moderate", tags = [],
             variants = {}):
    """Builds `name`_bin and one test per entry of `ranks`: `name`_np2, `name`_np4, ...

    `variants` maps a suffix to environment variables: each adds `name`_`suffix`_np2, the same
    binary on 2 ranks with those variables set (mpirun's local ranks inherit them).

    The tests carry the tag "mpi", so `bazel test --test_tag_filters=mpi //...` selects them
    (and `-mpi` leaves them out), and "no-sandbox": mpirun starts daemons and shared-memory
    segments that Bazel's sandbox does not allow.
    """
    native.cc_binary(
        name = name + "_bin",
        testonly = True,
        srcs = srcs,
        copts = TESSERA_COPTS,
        deps = deps + ["//tests/dist:mpi_test_main"],
    )
    for n in ranks:
        native.sh_test(
            name = "%s_np%d" % (name, n),
            size = size,
            timeout = timeout,
            srcs = ["//tools:mpi_run.sh"],
            args = [str(n), "$(location :%s_bin)" % name],
            data = [":%s_bin" % name],
            tags = ["mpi", "no-sandbox"] + tags,
        )
    for suffix, env in variants.items():
        native.sh_test(
            name = "%s_%s_np2" % (name, suffix),
            size = size,
            timeout = timeout,
            srcs = ["//tools:mpi_run.sh"],
            args = ["2", "$(location :%s_bin)" % name],
            data = [":%s_bin" % name],
            env = env,
            tags = ["mpi", "no-sandbox"] + tags,
        )

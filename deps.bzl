"""tessera_deps(): the external repositories tessera builds with, for tessera's own WORKSPACE and
for a user's workspace that builds against @tessera//:tessera.

A user's WORKSPACE:

    local_repository(name = "tessera", path = "/path/to/tessera")
    load("@tessera//:deps.bzl", "tessera_deps")
    tessera_deps()

Everything is local (Bazel 4.2.3 offline): tessera's stand-ins for rules_cc and
remote_coverage_tools, Debian's rules_java, and the Debian packages tools/setup.sh installs
(Eigen, Open MPI; CUDA under /usr/local/cuda for --config=cuda).
"""

def _third_party_folder_impl(rctx):
    # third_party/<folder> of the tessera repository, linked entry by entry into this
    # repository (the label resolves wherever tessera itself was checked out).
    third_party = rctx.path(Label("//third_party:BUILD")).dirname
    for entry in third_party.get_child(rctx.attr.folder).readdir():
        rctx.symlink(entry, entry.basename)

_third_party_folder = repository_rule(
    implementation = _third_party_folder_impl,
    attrs = {"folder": attr.string(mandatory = True)},
    local = True,
)

def tessera_deps():
    """Declares the repositories tessera needs, skipping any the workspace already has."""
    existing = native.existing_rules()
    if "rules_cc" not in existing:
        # Bazel 4's native cc rules, re-exported under the name rules_cc (Debian's
        # bazel-rules-cc is written for a newer Bazel).
        _third_party_folder(name = "rules_cc", folder = "rules_cc")
    if "rules_java" not in existing:
        # Debian's bazel-rules-java works with Bazel 4 as it is.
        native.local_repository(name = "rules_java", path = "/usr/share/bazel/rules/java")
    if "remote_coverage_tools" not in existing:
        # cc_test needs two of its labels to exist even when coverage is never collected.
        _third_party_folder(name = "remote_coverage_tools", folder = "remote_coverage_tools")
    if "eigen" not in existing:
        native.new_local_repository(
            name = "eigen",
            build_file = str(Label("//third_party:eigen.BUILD")),
            path = "/usr/include/eigen3",
        )
    if "mpi" not in existing:
        native.new_local_repository(
            name = "mpi",
            build_file = str(Label("//third_party:mpi.BUILD")),
            path = "/usr/lib/x86_64-linux-gnu/openmpi",
        )
    if "cuda" not in existing:
        native.new_local_repository(
            name = "cuda",
            build_file = str(Label("//third_party:cuda.BUILD")),
            path = "/usr/local/cuda",
        )

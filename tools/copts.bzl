"""Compiler options shared by every tessera target."""

# OpenMP for the CPU kernels' threads; everything else comes from .bazelrc.
TESSERA_COPTS = ["-fopenmp"]

TESSERA_LINKOPTS = ["-fopenmp"]

"""Compiled (numba) kernels. Importing this package first selects the vector width
(:mod:`crfsdca.kernels.vector_width`), before any kernel is compiled."""

from crfsdca.kernels import vector_width

vector_width.enable()

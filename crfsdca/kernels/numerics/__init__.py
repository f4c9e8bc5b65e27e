"""Numerics under every kernel: vectorizable ``log`` and ``exp`` (``fastmath`` on LLVM
``intrinsics``), row sums in explicit vector code (``rowops``), log-space helpers
(``logspace``), entropy and KL from a segment table (``segments``), the vector width and the
cycle counter, and glibc's ``rand()`` (``crand``). Nothing here knows a structure or a solver."""

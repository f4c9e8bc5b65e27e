"""Structure kernels: inference on chains (``chain``, ``chain_batch``, ``chain_oracle``,
``chain_pairwise``), trees and forests (``tree``, ``tree_scaled``) and junction trees
(``junction``, ``junction_batch``, ``junction_scaled``, ``order2``), and each structure's
implementation of the primitives the solver kernels call (``crfsdca.kernels.primitives``):
``*_blocks`` for SDCA and SAG-NUS, ``*_eg`` for OEG."""

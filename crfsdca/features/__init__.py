"""From corpora to packed sequences: attribute templates and encoders, feature dicts, the
feature map (the flat weight layout) and the per-sequence attribute layout of the kernels."""

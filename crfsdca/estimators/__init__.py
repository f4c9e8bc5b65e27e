"""The user's models: :class:`~crfsdca.estimators.model.SequenceCRF` on packed data and the
scikit-learn estimator :class:`~crfsdca.estimators.crf.CRF`, with CRFsuite export and tagging."""

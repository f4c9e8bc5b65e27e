"""The ``crfsdca`` command line: one module per command, :mod:`crfsdca.cli.main` is the group."""

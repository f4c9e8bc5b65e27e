"""``python -m crfsdca.cli.main``: the same as the ``crfsdca`` command."""

from crfsdca.cli.main import main

main()

"""``python -m isorag_pyg.cli``: the ``isorag`` command."""
import sys

from isorag_pyg.cli import main

sys.exit(main())

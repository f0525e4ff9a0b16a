"""``python -m graph`` runs the ``loopgraph`` command."""

import sys

from graph.cli import main

sys.exit(main())

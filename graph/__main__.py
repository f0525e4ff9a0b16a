"""``python -m langgraph_loop`` runs the ``langgraph-loop`` command."""

import sys

from langgraph_loop.cli import main

sys.exit(main())

"""``python -m langgraph_loop`` runs the ``langgraph-loop`` command."""

import sys

from langgraph_loop.app.cli import main

sys.exit(main())

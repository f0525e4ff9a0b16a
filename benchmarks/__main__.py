"""``python -m benchmarks``: run the overhead benchmark (see :mod:`benchmarks.overhead`)."""

from benchmarks.overhead import main

raise SystemExit(main())

"""``python -m codexrt``: the ``codexrt`` command."""

from codexrt_cli._main import main

raise SystemExit(main())

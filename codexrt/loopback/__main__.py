"""``python -m codexrt.loopback --port-file F [--log F]``: the loopback model as a process."""

from codexrt.loopback._model import main

raise SystemExit(main())

from codexrt_cli._main import main

raise SystemExit(main())

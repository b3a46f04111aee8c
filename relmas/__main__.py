from relmas.cli import main

raise SystemExit(main())

from cqengine.cli import main

raise SystemExit(main())

from __future__ import annotations

from build2cmake.cli import main

raise SystemExit(main())

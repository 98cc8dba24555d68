"""The build that runs inside a toolchain: one Hub variant of a project the build2cmake outside
has already generated, compiled by variant_builds there, its log and build/<variant>/ written
into the project (mounted at its own path).

It neither generates nor takes the project's lock: a one-variant `build` outside holds that lock
from its generate to its last write (so a concurrent `clean` cannot delete the build folder
meanwhile), and waits for this run. Its output is `build --variants`' lines, which the outside
reads (variant_builds.build_in_toolchain).

    python -P -m build2cmake.builds.inside BUILD_TOML --variant SPEC --ops-id ID -j N
        [--index-url URL] [--extra-index-url URL]... [--find-links PATH]...
        [--index-strategy unsafe-best-match] [--sources-origin TEXT]
        [-D NAME=VALUE]... [--force] [--allow-toolkit-mismatch]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path

from build2cmake.builds import variant_builds
from build2cmake.builds.variant_env import PackageSources
from build2cmake.config import load_project
from build2cmake.config.hub_variants import parse_variant
from build2cmake.generate.render import extension_name
from build2cmake.ground.errors import Build2CMakeError, printable


def main(argv: Sequence[str] | None = None) -> int:
    """Build the variant; 0 when built, 1 when it failed (its line says why), 2 on bad input."""
    parser = argparse.ArgumentParser(prog="build2cmake.builds.inside")
    parser.add_argument("build_toml", type=Path)
    parser.add_argument("--variant", required=True)
    parser.add_argument("--ops-id", required=True)
    parser.add_argument("-j", "--jobs", type=int, required=True)
    parser.add_argument("--index-url")
    parser.add_argument("--extra-index-url", action="append", default=[])
    parser.add_argument("--find-links", action="append", default=[])
    # The sources came from the user's pip settings outside (variant_env.configured_sources).
    parser.add_argument("--index-strategy", choices=["unsafe-best-match"])
    parser.add_argument("--sources-origin", default="")
    parser.add_argument("-D", dest="defines", action="append", default=[])
    parser.add_argument("--force", action="store_true")
    parser.add_argument("--allow-toolkit-mismatch", action="store_true")
    args = parser.parse_args(argv)
    try:
        variant = parse_variant(args.variant)
        project = load_project(args.build_toml)
        extension_for = {variant.backend: extension_name(project, variant.backend, args.ops_id)}
        results = variant_builds.build_variants(
            project,
            args.build_toml.parent,
            [variant],
            extension_for=extension_for,
            sources=PackageSources(
                index_url=args.index_url,
                extra_index_urls=tuple(args.extra_index_url),
                find_links=tuple(args.find_links),
                origin=args.sources_origin,
                best_match=args.index_strategy == "unsafe-best-match",
            ),
            jobs=args.jobs,
            defines=args.defines,
            force=args.force,
            allow_toolkit_mismatch=args.allow_toolkit_mismatch,
        )
    except Build2CMakeError as error:
        print(f"build2cmake: error: {printable(str(error))}", file=sys.stderr)
        return 2
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())

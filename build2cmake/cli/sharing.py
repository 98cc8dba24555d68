"""The commands that publish: upload (and its options), kernel-builder's build-and-upload
(build, then upload only when every variant built) and fill-card."""

from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from build2cmake import api
from build2cmake.cli.build import run_build
from build2cmake.cli.output import err, out
from build2cmake.cli.project import project_argument
from build2cmake.share import publish

if TYPE_CHECKING:
    Commands = argparse._SubParsersAction[argparse.ArgumentParser]


def add_upload(commands: Commands) -> None:
    upl = commands.add_parser(
        "upload",
        help="publish build/ to the Hugging Face Hub (refuses a stale build)",
        description="Check that every build/<variant>/ matches build.toml and is newer than its "
        "sources (and that kernels.lock, if any, matches its kernel-depends), then publish with "
        "huggingface_hub, as kernel-builder upload does: build/ and "
        "benchmarks/benchmark*.py to branch v<version> of the repo-id (files of an uploaded "
        "variant that the build no longer makes are deleted), build/CARD.md (the card) to "
        "main as README.md. The token is huggingface_hub's (HF_TOKEN, or `hf auth login`); "
        "HF_ENDPOINT picks another Hub.",
    )
    upl.set_defaults(runner="upload")
    project_argument(upl)
    add_upload_options(upl)


def add_upload_options(upl: argparse.ArgumentParser) -> None:
    upl.add_argument("--repo-id", help="default: [general.hub].repo-id")
    upl.add_argument("--branch", help="default: [general.hub].branch, else v<version>")
    # build-and-upload has build's --ops-id already (the same option, the same meaning).
    if not any("--ops-id" in a.option_strings for a in upl._actions):
        upl.add_argument("--ops-id", metavar="ID", help="the ops id the variants were built with")
    upl.add_argument("--private", action="store_true", help="create the repository private")
    upl.add_argument(
        "--create-pr",
        action="store_true",
        help="open a pull request per branch instead of committing (the repository and branch "
        "must exist)",
    )
    upl.add_argument(
        "--repo-type",
        default="kernel",
        metavar="kernel",
        help="kind of Hub repository: kernel, the only kind the Hub keeps kernels in since "
        "2026-09-13 (model is refused)",
    )
    upl.add_argument(
        "--output-json", type=Path, metavar="PATH", help="write a JSON summary of the upload"
    )
    upl.add_argument(
        "--dry-run",
        action="store_true",
        help="check build/ and list every operation, one a line; contact nothing",
    )
    upl.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars while uploading (kernel-builder's option)",
    )


def run_upload(args: argparse.Namespace) -> int:
    plan = api.plan_upload(
        api.build_toml_of(args.build_toml),
        repo_id=args.repo_id,
        branch=args.branch,
        ops_id=args.ops_id,
        private=args.private,
        create_pr=args.create_pr,
        repo_type=args.repo_type,
    )
    for note in (*plan.notes, *([plan.lock_note] if plan.lock_note is not None else [])):
        err(f"note: {note}")
    if plan.dirty:
        err(
            f"warning: {', '.join(plan.dirty)} built from a checkout with uncommitted changes: "
            "the recorded commit does not fully identify their sources"
        )
    if args.dry_run:
        out(*publish.dry_run_lines(plan.request, plan.operations))
        out("dry run: nothing uploaded")
        return 0
    if args.quiet:
        _no_progress_bars()
    outcome = publish.upload(plan.request, plan.project_dir, plan.variants)
    if outcome.status == "no_changes":
        out("no changes to upload")
    for branch, url in outcome.pull_requests:
        out(f"pull request against {branch}: {url}")
    if outcome.url is not None:
        out(f"uploaded: {outcome.url}")
    if args.output_json is not None:
        api.write_upload_summary(args.output_json, outcome)
    return 0


def _no_progress_bars() -> None:
    with contextlib.suppress(ImportError):
        from huggingface_hub.utils.tqdm import disable_progress_bars

        disable_progress_bars()


def run_build_and_upload(args: argparse.Namespace) -> int:
    """kernel-builder's build-and-upload: `build` (every Hub variant unless --variant(s) or
    --backend says otherwise), then `upload` of build/, only when every variant built."""
    if not args.variants and args.backend is None:
        args.all = True
    status = run_build(args)
    if status != 0:
        err("build2cmake: not uploading: not every variant built")
        return status
    return run_upload(args)


def run_fill_card(args: argparse.Namespace) -> int:
    content = api.fill_card(api.build_toml_of(args.build_toml))
    if args.output is None and sys.stdout.isatty():
        # The card is the project's text: on a terminal, escaped line by line.
        out(*content.splitlines())
    elif args.output is None:
        sys.stdout.write(content)
    else:
        api.write_filled_card(args.output, content)
        err(f"wrote {args.output}")
    return 0

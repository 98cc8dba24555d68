"""The command line: parse arguments, call build2cmake.api, print (escaped), exit 0, 2 or 3.

Each command is two small pieces beside each other: `add_<command>` adds its subparser (and
sets `runner`, the command's name in COMMANDS), `run_<command>` calls the library and prints;
they live by concern (project.py: a project's files and this machine; build.py: build/<variant>/;
sharing.py: publishing). parser.py's COMMANDS lists them once, in the help's order, and the
parser and RUNNERS are made from it. kernel-builder's command names (kernel_builder.py) are
parsers of their own that fill in the same arguments and name the same runners; completions.py
writes shell completion scripts from the parser. output.py escapes every line printed.
"""

from __future__ import annotations

import os
from collections.abc import Sequence

from build2cmake.cli.output import err
from build2cmake.cli.parser import RUNNERS, argument_parser
from build2cmake.ground import interrupts
from build2cmake.ground.errors import Build2CMakeError, BuildConfigErrors, printable


def main(argv: Sequence[str] | None = None) -> int:
    """Run the CLI; returns the exit code (0 success, 2 something the user must fix, 3 a bug of
    build2cmake's, 128 + N after signal N: SIGINT, SIGTERM, SIGHUP). Run as the program (no
    `argv`), it stops every process it started when one of those signals comes."""
    if argv is None:
        interrupts.install()
    try:
        args = argument_parser().parse_args(argv)
        return RUNNERS[args.runner](args)
    except interrupts.Interrupted as interrupted:
        err(interrupted.message())
        return interrupted.exit_code
    except BuildConfigErrors as errors:
        # Every problem of a build.toml, one error line each.
        for error in errors.errors:
            err(f"build2cmake: error: {error}")
        return 2
    except Build2CMakeError as error:
        err(f"build2cmake: error: {error}")
        return 2
    except OSError as error:
        # The library turns the OSErrors it expects into Build2CMakeError; this is the net for
        # the rest (an unreadable file, a name too long), which are the user's to fix too.
        where = f"{error.filename}: " if error.filename is not None else ""
        err(f"build2cmake: error: {printable(where + str(error.strerror or error))}")
        return 2
    except Exception as error:  # the net under our own bugs
        # A bug of ours, whatever the input: one line, not a traceback the input could shape.
        if os.environ.get("BUILD2CMAKE_TRACEBACK"):
            raise
        err(f"build2cmake: internal error: {type(error).__name__}: {printable(str(error))}")
        err(
            "build2cmake: this is a bug in build2cmake, not in your project; please report it "
            "with the command you ran (BUILD2CMAKE_TRACEBACK=1 shows the traceback)"
        )
        return 3

"""contactflow: multi-contact control, compliance and estimation pipelines on dora-rs (SEIKO, LAC, PRIME).

Sub-commands are registered by the modules that own them: each module in ``_SUBCOMMANDS`` exposes
``add_parser(subparsers)`` which adds its parser and sets ``func`` (called with the parsed args and
returning an exit status).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import sys

from contactflow.errors import ContactflowError

# optional third-party package -> the pip extra that installs it
OPTIONAL_EXTRAS = {"crocoddyl": "prime", "rerun": "viewer", "mcap": "export", "matplotlib": "plot", "cyclonedds": "hardware",
                   "torch": "train", "onnx": "train", "stable_baselines3": "train", "gymnasium": "train"}


def extra_install_hint(package: str) -> str | None:
    """How to install the optional top-level ``package`` (the extra :data:`OPTIONAL_EXTRAS` names), None if it is
    not one."""
    extra = OPTIONAL_EXTRAS.get(package)
    if extra is None:
        return None
    first = "pip install torch==2.13.0 (its CPU build; docs/lac_policy.md), then " if extra == "train" else ""
    return f"{first}uv pip install -e '.[{extra}]' in a checkout (or pip install 'contactflow[{extra}]')"


def missing_extra_message(exc: ModuleNotFoundError) -> str | None:
    """A one-line hint when ``exc`` is an optional dependency, else None."""
    top = (exc.name or "").split(".")[0]
    hint = extra_install_hint(top)
    return None if hint is None else f"this needs the optional package {top!r}: {hint}"

# module path -> imported lazily so that a missing optional dependency only breaks its command.
_SUBCOMMANDS = [
    "contactflow.cli.recording",
    "contactflow.lac.cli",
    "contactflow.prime.cli",
    "contactflow.hardware.cli",
    "contactflow.graphs",
    "contactflow.cli.config",
    "contactflow.cli.run",
    "contactflow.faults.cli",
    "contactflow.native.cli",
]


def build_parser() -> argparse.ArgumentParser:
    from contactflow.paths import OnceArgumentParser

    parser = OnceArgumentParser(prog="contactflow", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    from contactflow.paths import ROBOT_PATH_HELP, RobotPathAction

    parser.add_argument("--robot-path", action=RobotPathAction, metavar="DIR", default=None, help=ROBOT_PATH_HELP)
    sub = parser.add_subparsers(dest="command", required=True)
    for mod in _SUBCOMMANDS:
        try:
            m = importlib.import_module(mod)
        except ModuleNotFoundError as exc:
            if exc.name and mod.startswith(exc.name):
                continue  # module not shipped yet
            raise
        m.add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    if not args.verbose:  # third-party INFO (matplotlib's "Using categorical units...") is noise at our INFO level
        for name in ("matplotlib", "PIL"):
            logging.getLogger(name).setLevel(logging.WARNING)
    try:
        return int(args.func(args) or 0)
    except ContactflowError as exc:
        print(f"contactflow: error: {exc}", file=sys.stderr)
        return 2
    except ModuleNotFoundError as exc:
        hint = missing_extra_message(exc)
        if hint is None:
            raise
        print(f"contactflow: error: {hint}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # output piped into `head` & co.: not an error
        sys.stderr.close()
        return 0


if __name__ == "__main__":
    sys.exit(main())

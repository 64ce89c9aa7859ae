"""Where contactflow finds its files, installed or in a source checkout (one place for every such rule).

The distribution ships three folders of the repository as parts of the package (``setup.py``):
``contactflow/`` itself, ``nodes/`` as :mod:`contactflow.nodes` (the dora node adapters, also installed
as the ``contactflow-<node>`` executables) and ``robots/`` as ``contactflow/robots`` (robot descriptions,
scenarios, configurations: package data). An editable install (``pip install -e .``) maps the same
names onto the checkout, so the rules below hold in both cases:

* :func:`shipped_robots_dir`: the robot data that came with the package.
* :func:`data_root`: the folder holding that ``robots/`` folder (the checkout's root, or the installed
  package's folder), against which a relative path ``robots/<robot>/...`` is looked up
  (:func:`resolve_data_path`), so the paths written in the shipped graphs and the README
  (``robots/talos/scenarios/smoke_2s.yaml``) work from any folder.
* :func:`source_checkout`: the repository root when running from a checkout (benchmarks, git
  revision), ``None`` in a non-editable install.
* :func:`default_recordings_dir`: ``$CONTACTFLOW_RECORDINGS``, else ``<checkout>/recordings`` in a
  checkout, else ``./recordings`` (the current directory: for ``dora run``, the dataflow's folder).
* :func:`node_script` / :func:`node_kind`: the installed executable of a node kind and back.
* :func:`robot_search_path`: the folders searched for a robot given by name: ``$CONTACTFLOW_ROBOT_PATH``
  (``--robot-path DIR`` prepends to it: :class:`RobotPathAction`), then :func:`shipped_robots_dir`.
* :func:`sha256_of_files`: the SHA-256 of files' contents, read in chunks (model wheels, recorded rounds).
* :func:`replaced_atomically` / :func:`write_text_atomic`: a file written through a temporary one beside it
  and put in place in one step (summaries, manifests, dataset shards, checkpoints, tables).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import os
from collections.abc import Iterable, Iterator
from pathlib import Path

__all__ = ["NODE_SCRIPT_PREFIX", "OnceArgumentParser", "OneFileAction", "ROBOT_PATH_ENV", "ROBOT_PATH_HELP", "RobotPathAction", "SCENARIO_ENV", "add_robot_path", "data_path_candidates", "data_root", "default_recordings_dir", "node_kind", "node_script", "scenario_from_env", "scenario_origin", "scenario_source",
           "package_dir", "replaced_atomically", "resolve_data_path", "robot_search_path", "scripts_env", "sha256_of_files", "shipped_robots_dir", "source_checkout", "write_text_atomic"]

#: Environment variable: folders (``os.pathsep``-separated) searched for a robot given by name, before
#: the shipped robots (:func:`contactflow.robot.robot_search_path`); ``--robot-path DIR`` prepends to it.
ROBOT_PATH_ENV = "CONTACTFLOW_ROBOT_PATH"
#: Help text of the ``--robot-path`` flag (the nodes' ``base_parser``, the ``contactflow`` command, the catalogue).
ROBOT_PATH_HELP = ("a folder of robot descriptions (<DIR>/<name>/robot.yaml) searched before the shipped robots; "
                   f"repeatable; adds to ${ROBOT_PATH_ENV}")

#: Prefix of the nodes' console scripts: node kind ``seiko_controller`` -> ``contactflow-seiko-controller``.
NODE_SCRIPT_PREFIX = "contactflow-"


def package_dir() -> Path:
    """The folder of the imported ``contactflow`` package."""
    return Path(__file__).resolve().parent


def source_checkout() -> Path | None:
    """The repository root if ``contactflow`` is imported from a source checkout (editable install or
    ``PYTHONPATH``), else ``None`` (a non-editable install: the package lives in site-packages)."""
    root = package_dir().parent
    return root if (root / "pyproject.toml").is_file() and (root / "nodes").is_dir() else None


def shipped_robots_dir() -> Path:
    """The robot descriptions shipped with the package: ``<site-packages>/contactflow/robots`` in an
    install, ``<checkout>/robots`` in a checkout."""
    installed = package_dir() / "robots"
    if installed.is_dir():
        return installed
    return package_dir().parent / "robots"


def data_root() -> Path:
    """The folder holding :func:`shipped_robots_dir` (relative ``robots/...`` paths are resolved there)."""
    return shipped_robots_dir().parent


def data_path_candidates(path: str | Path) -> list[Path]:
    """Where a data file given as ``path`` is looked for, in order (see :func:`resolve_data_path`):
    as given (absolute, or from the current directory), then from :func:`data_root`, then, for a
    relative path through a ``robots`` folder, its part from ``robots/`` on under :func:`data_root`."""
    p = Path(path).expanduser()
    if p.is_absolute():
        return [p]
    out = [Path.cwd() / p, data_root() / p]
    if "robots" in p.parts:
        out.append(data_root().joinpath(*p.parts[p.parts.index("robots"):]))
    return list(dict.fromkeys(out))


def resolve_data_path(path: str | Path) -> Path:
    """A data file (scenario, configuration, policy spec) as a node or command was given it.

    Absolute paths and relative paths that exist from the current directory are returned unchanged.
    Otherwise the path is looked up from :func:`data_root` (the checkout's root or the installed
    package), and a relative path through a ``robots`` folder (``robots/talos/scenarios/x.yaml``,
    ``../robots/g1/lac.yaml``) by its part from ``robots/`` on: the shipped robot data. So the
    shipped graphs and the README's commands name the shipped scenarios and configurations the same
    way in a checkout and in an install, from any folder. A path found nowhere is returned
    unchanged (the caller's error then names it as given; :func:`data_path_candidates` lists where
    it was looked for).
    """
    p = Path(path)
    if p.is_absolute() or p.exists():
        return p
    for cand in data_path_candidates(p)[1:]:
        if cand.exists():
            return cand
    return p


#: The environment variable that replaces the scenario a graph's scenario player reads (operator, teleop,
#: wrench_injector): ``CONTACTFLOW_SCENARIO=robots/talos/scenarios/smoke_2s.yaml dora run ...``.
SCENARIO_ENV = "CONTACTFLOW_SCENARIO"


def scenario_from_env(value: str | None = None) -> Path | None:
    """``$CONTACTFLOW_SCENARIO`` as a data file (:func:`resolve_data_path`), None when the variable is unset or empty.

    Args:
        value: the variable's value where it is not this process's (``contactflow check`` reading a graph's
            ``env:``); None reads ``os.environ``.

    Raises:
        ConfigError: the file is found nowhere: one line naming the variable and its value (a file of a close name
            suggested).
    """
    value = os.environ.get(SCENARIO_ENV) if value is None else value
    if not value:
        return None
    path = resolve_data_path(value)
    if not path.is_file():
        from contactflow.config import near_file_names
        from contactflow.errors import ConfigError

        where = [c.parent for c in data_path_candidates(value)]  # the folders resolve_data_path looked in
        raise ConfigError(f"${SCENARIO_ENV}={value}: file not found{near_file_names(Path(value), where)}")
    return path


def scenario_source(node: str, arg: str | None, default: str | Path, *, recorded: str | None = None,
                    robot: str | None = None) -> tuple[Path, str]:
    """The scenario file a scenario player (the operator, teleop and wrench_injector nodes) plays, and where its
    name came from, in this order: ``$CONTACTFLOW_SCENARIO``; else, with ``recorded`` (``--scenario-from-recording``),
    the scenario that node ``node`` of the recorded run played (``$CONTACTFLOW_RECORDING`` names the run when set, as
    for the replay node); else ``arg`` (``--scenario``); else ``default``. A relative path that does not exist from
    the working directory is taken from the data root (:func:`resolve_data_path`).

    Args:
        node: the recorded node whose scenario ``recorded`` replays (``operator``, ``teleop``).
        arg: the node's ``--scenario``, or None.
        default: the node's own default file.
        recorded: a run directory, name or ``latest``, or None.
        robot: with ``recorded``, only runs of this robot.

    Returns:
        ``(path, origin)``: ``origin`` is ``$CONTACTFLOW_SCENARIO``, ``recording RUN``, ``--scenario`` or ``default``
        (for the node's log line).

    Raises:
        ConfigError: ``$CONTACTFLOW_SCENARIO`` names a file found nowhere (:func:`scenario_from_env`).
        RecordingError: ``recorded`` names no run of ``robot``, or its node played no scenario file (a live source).
    """
    from_env = scenario_from_env()
    if from_env is not None:
        return from_env, f"${SCENARIO_ENV}"
    if recorded:
        from contactflow.recording.store import recorded_scenario

        run = os.environ.get("CONTACTFLOW_RECORDING") or recorded
        return resolve_data_path(recorded_scenario(run, node, robot=robot)), f"recording {run}"
    if arg:
        return resolve_data_path(arg), "--scenario"
    return resolve_data_path(default), "default"


@contextlib.contextmanager
def scenario_origin(origin: str) -> Iterator[None]:
    """Around the load of a scenario :func:`scenario_source` gave: a ``ConfigError`` of a file the node's ``--scenario``
    did not name (``$CONTACTFLOW_SCENARIO``'s, a recorded run's) says where it came from, ``(the scenario of
    $CONTACTFLOW_SCENARIO)``: the graph names another file."""
    from contactflow.errors import ConfigError

    try:
        yield
    except ConfigError as exc:
        if origin in ("--scenario", "default"):
            raise
        raise ConfigError(f"{exc} (the scenario of {origin})") from None


def default_recordings_dir(*, node: bool = False) -> Path:
    """Where runs are written and looked up: ``$CONTACTFLOW_RECORDINGS``, else ``<checkout>/recordings``
    when running from a source checkout, else ``recordings`` in the current directory (``dora run``
    starts the nodes in the dataflow's folder, so an installed pipeline records beside its YAML).

    Args:
        node: called from a dataflow node, which dora starts in the dataflow's folder: a relative
            ``$CONTACTFLOW_RECORDINGS`` would name a folder under it, not the one beside the shell that
            set it, so it is refused (the commands that start dora, :func:`scripts_env`, pass it on
            made absolute).

    Raises:
        ConfigError: ``node`` and a relative ``$CONTACTFLOW_RECORDINGS``.
    """
    env = os.environ.get("CONTACTFLOW_RECORDINGS")
    if env:
        if node and not Path(env).is_absolute():
            from contactflow.errors import ConfigError

            raise ConfigError(f"$CONTACTFLOW_RECORDINGS={env!r}: a node needs an absolute path (dora starts it in "
                              f"the dataflow's folder, {Path.cwd()}, not where dora was started): give e.g. "
                              f"CONTACTFLOW_RECORDINGS=$PWD/{env}")
        return Path(env)
    root = source_checkout()
    return root / "recordings" if root is not None else Path.cwd() / "recordings"


def node_script(kind: str) -> str:
    """The installed executable of a node kind (``mujoco_driver`` -> ``contactflow-mujoco-driver``)."""
    return NODE_SCRIPT_PREFIX + kind.replace("_", "-")


def node_kind(path: str) -> str:
    """The node kind a dataflow ``path:`` names: ``contactflow-seiko-controller`` (installed executable)
    or ``../nodes/seiko_controller.py`` (a script) -> ``seiko_controller``; any other path: its stem."""
    name = Path(str(path)).name
    if name.startswith(NODE_SCRIPT_PREFIX) and not name.endswith(".py"):
        return name[len(NODE_SCRIPT_PREFIX):].replace("-", "_")
    return Path(name).stem


def scripts_env(env: dict | None = None) -> dict:
    """``env`` (default: this process's environment) with the running interpreter's ``bin`` folder
    first on ``PATH``: where pip put ``dora`` and the ``contactflow-<node>`` executables, so a
    ``dora run`` started from here finds the nodes even when the venv is not activated.

    Also ``UV_NO_SYNC=1`` unless set: dora 1.1 resolves an executable ``path:`` with ``uv run which
    <name>`` whenever ``uv`` is on ``PATH``, and ``uv run`` inside a uv project (this repository has a
    ``pyproject.toml``) first locks and syncs that project's environment (writes ``uv.lock``,
    installs packages, needs the network the first time). With ``UV_NO_SYNC`` it is a plain lookup in
    the active environment.

    And a relative ``$CONTACTFLOW_RECORDINGS`` made absolute from this process's working directory
    (the nodes run in the dataflow's folder and refuse a relative one: :func:`default_recordings_dir`)."""
    import sys

    env = dict(os.environ if env is None else env)
    env.setdefault("UV_NO_SYNC", "1")
    if env.get("CONTACTFLOW_RECORDINGS") and not Path(env["CONTACTFLOW_RECORDINGS"]).is_absolute():
        env["CONTACTFLOW_RECORDINGS"] = str(Path(env["CONTACTFLOW_RECORDINGS"]).resolve())
    scripts = str(Path(sys.executable).parent)
    if env.get("PATH", "").split(os.pathsep)[:1] != [scripts]:
        env["PATH"] = os.pathsep.join([scripts, env.get("PATH", "")])
    return env


def robot_search_path() -> list[Path]:
    """Folders searched, in order, for a robot given by name (``<folder>/<name>/robot.yaml``, or a
    variant file ``<folder>/*/<name>.yaml``): those of ``$CONTACTFLOW_ROBOT_PATH`` (and
    ``--robot-path``), then the shipped robots (:func:`shipped_robots_dir`)."""
    dirs = [Path(d).expanduser() for d in os.environ.get(ROBOT_PATH_ENV, "").split(os.pathsep) if d]
    return list(dict.fromkeys(dirs + [shipped_robots_dir()]))


def add_robot_path(*dirs: str | Path) -> None:
    """Put ``dirs`` first on the robot search path (``--robot-path``), for this process and the
    processes it starts (it prepends them, made absolute, to ``$CONTACTFLOW_ROBOT_PATH``)."""
    old = [d for d in os.environ.get(ROBOT_PATH_ENV, "").split(os.pathsep) if d]
    os.environ[ROBOT_PATH_ENV] = os.pathsep.join([str(Path(d).expanduser().resolve()) for d in dirs] + old)


@contextlib.contextmanager
def robot_path_scope(*dirs: str | Path):
    """The robot search path with ``dirs`` first (:func:`add_robot_path`; none: as it is) for the duration of the
    block, and ``$CONTACTFLOW_ROBOT_PATH`` as it was before the block afterwards, whatever the block added to it
    (a node's ``--robot-path`` parsed inside it, :func:`contactflow.nodes._runtime.check_node_args`)."""
    old = os.environ.get(ROBOT_PATH_ENV)
    if dirs:
        add_robot_path(*dirs)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop(ROBOT_PATH_ENV, None)
        else:
            os.environ[ROBOT_PATH_ENV] = old


class RobotPathAction(argparse.Action):
    """argparse action of the ``--robot-path DIR`` flag (nodes' :func:`base_parser`, the ``contactflow``
    command): each use puts ``DIR`` first on the robot search path (:func:`add_robot_path`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        add_robot_path(values)
        setattr(namespace, self.dest, [*(getattr(namespace, self.dest, None) or []), values])


class OneFileAction(argparse.Action):
    """argparse action of a ``--config FILE`` option that takes one file (the commands' and every node's,
    ``nodes/_runtime.base_parser``): a second use is refused (argparse would keep the last one silently, and a
    user layering two files would run the defaults under the first file's keys without a word)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if getattr(namespace, self.dest, None) is not None:
            parser.error(f"{option_string} given twice ({getattr(namespace, self.dest)}, {values}): it takes one file; "
                         "put the keys of both in one (a file needs only the keys it changes over the shipped one)")
        setattr(namespace, self.dest, values)


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store`` action that refuses a second use of its option in one command line
    (:class:`OnceArgumentParser`)."""

    def __call__(self, parser, namespace, values, option_string=None):
        given = getattr(parser, "_given_once", None)
        if given is not None and option_string is not None:
            if self.dest in given:
                several = self.nargs not in (None, "?")
                parser.error(f"argument {option_string}: given twice ({given[self.dest]}, {values}): "
                             + (f"give all its values after one {option_string}" if several else "it takes one value"))
            given[self.dest] = values
        super().__call__(parser, namespace, values, option_string)


class OnceArgumentParser(argparse.ArgumentParser):
    """argparse's parser whose single-value options (the default ``store`` action) refuse a second use: argparse
    keeps the last one silently, so ``--lag 2 ... --lag 3`` in a graph's ``args:`` ran with 3 without a word. The
    commands' parser (``contactflow ...``, its subcommands inherit the class) and every node's
    (``nodes/_runtime.NodeArgumentParser``)."""

    #: a subcommand's parser (made by :meth:`add_subparsers`): it refuses an argument it does not know itself, with
    #: its own usage and a close option suggested (argparse leaves them to the top-level parser, whose usage and
    #: options are not the subcommand's)
    _subcommand = False

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.register("action", None, _StoreOnce)
        self.register("action", "store", _StoreOnce)

    def add_subparsers(self, **kwargs):
        kwargs.setdefault("parser_class", _OnceSubcommandParser)
        return super().add_subparsers(**kwargs)

    def parse_known_args(self, args=None, namespace=None):
        self._given_once: dict[str, object] = {}
        ns, extras = super().parse_known_args(args, namespace)
        if self._subcommand and extras:
            self.error(f"unrecognized arguments: {' '.join(extras)}")
        return ns, extras

    def suggested(self, message: str) -> str:
        """argparse's error ``message``, with a close option of this parser suggested for an unrecognized one
        (argparse suggests nothing for a misspelled option); where abbreviations are refused (``allow_abbrev``
        false), the one option an unrecognized flag abbreviates is named instead."""
        if message.startswith("unrecognized arguments:"):
            from contactflow.config import did_you_mean

            flags = [a.split("=")[0] for a in message.split(":", 1)[1].split() if a.startswith("--")]
            options = [o for a in self._actions for o in a.option_strings if o.startswith("--")]
            whole = {f: m[0] for f in flags if not self.allow_abbrev and len(m := [o for o in options if o.startswith(f)]) == 1}
            if whole:
                message += " (" + ", ".join(f"{f} abbreviates {o}" for f, o in whole.items()) + ": give it in full)"
            message += did_you_mean([f for f in flags if f not in whole], options)
        return message

    def error(self, message):
        super().error(self.suggested(message))


class _OnceSubcommandParser(OnceArgumentParser):
    _subcommand = True


def sha256_of_files(paths: Iterable[str | Path], chunk_bytes: int = 1 << 22) -> str:
    """The SHA-256 (hex) of the concatenated contents of ``paths``, in the order given, read ``chunk_bytes`` at a
    time (a file of any size in bounded memory). One path: that file's usual SHA-256.

    Raises:
        OSError: a file cannot be read."""
    h = hashlib.sha256()
    for path in paths:
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(chunk_bytes), b""):
                h.update(chunk)
    return h.hexdigest()


@contextlib.contextmanager
def replaced_atomically(path: str | Path, tmp_suffix: str = ".tmp") -> Iterator[Path]:
    """Write ``path`` through a temporary file beside it.

    Yields the temporary path (``path``'s name + ``tmp_suffix``, same folder); on a clean exit of the
    ``with`` block it replaces ``path`` in one step (:func:`os.replace`, atomic within one file system),
    so a reader, or a run stopped while writing, finds the old file or the new one, never a partial
    one. On an error the temporary file is removed and the error propagates.

    Args:
        path: the file written.
        tmp_suffix: appended to the name for the temporary file; a writer that adds its own extension
            needs the name to end with it (``numpy.savez``: ``".tmp.npz"``).

    Raises:
        FileNotFoundError: the block wrote no temporary file. OSError: the replacement failed (the
            temporary file is removed). Whatever the block raised, unchanged.
    """
    path = Path(path)
    tmp = path.with_name(path.name + tmp_suffix)
    try:
        yield tmp
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink(missing_ok=True)
        raise


def write_text_atomic(path: str | Path, text: str) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through :func:`replaced_atomically`; returns ``path``.

    Raises:
        OSError: the folder is missing or not writable."""
    with replaced_atomically(path) as tmp:
        tmp.write_text(text, encoding="utf-8")
    return Path(path)

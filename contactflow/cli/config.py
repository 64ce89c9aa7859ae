"""``contactflow config show [NODE]``: a node's configuration defaults as commented YAML.

Every node that reads a configuration file (``--config FILE``) is listed in :data:`NODE_CONFIGS`
with the file section(s) it reads and the config dataclass of each. ``config show NODE`` prints the
dataclass defaults, every key (nested sections included) under its documentation, which comes from
the ``Attributes:`` section of the dataclass docstrings (:func:`contactflow.config.field_docs`).
The output is a valid configuration file: save it, edit a value, pass it with ``--config``.
``tests/test_config_show.py`` checks that every node's output loads back to the defaults and that
:data:`NODE_CONFIGS` names every ``load_node_config`` call of ``nodes/``. ``contactflow check`` loads
each node's file with the same registry (:func:`check_node_config_files`).
"""

from __future__ import annotations

import dataclasses
import importlib
import textwrap
from typing import Any, Mapping

from contactflow.errors import ConfigError, ContactflowError

__all__ = ["NODE_CONFIGS", "NodeSection", "config_sections", "node_sections", "render_node_config", "check_node_config_files",
           "add_parser"]


@dataclasses.dataclass(frozen=True)
class NodeSection:
    """One configuration section a node reads.

    Attributes:
        section: the top-level key of the file (``None``: the file is the flat mapping itself).
        config: ``"module:Class"`` of the config dataclass, or ``"module:function"`` of a function
            ``(robot) -> class`` when the class depends on the robot (``--robot``).
        note: where the node reads it from (printed above the section).
        required: the node refuses its ``--config`` file when the section is missing (else the
            defaults are used).
        own_flag: a flag that names a file for this section alone; when given, the node reads the
            (then required) section from that file instead of ``--config``.
        loader: how the node reads the file: ``"node"`` (``load_node_config``, which also refuses
            unknown sections), ``"teleop"`` (``load_teleop_config``) or ``"expert"``
            (``load_expert_config``: a flat file or a ``lac_expert`` section).
    """

    section: str | None
    config: str
    note: str = ""
    required: bool = True
    own_flag: str | None = None
    loader: str = "node"


_FILTER = NodeSection("input_filter", "contactflow.operator.input_filter:InputFilterConfig")
_RETARGETING = NodeSection("seiko_retargeting", "contactflow.seiko.retargeting:RetargetingConfig")
_CONTROLLER = NodeSection("seiko_controller", "contactflow.seiko.controller:ControllerConfig")

#: node (file name in ``nodes/``) -> the sections of its ``--config`` file, in print order.
NODE_CONFIGS: dict[str, tuple[NodeSection, ...]] = {
    "input_filter": (_FILTER,),
    "seiko_retargeting": (_RETARGETING,),
    "seiko_controller": (_CONTROLLER, dataclasses.replace(
        _RETARGETING, note="optional: read for the Retargeting's reset state (or from --retargeting-config)",
        required=False, own_flag="--retargeting-config")),
    "seiko_stack": tuple(dataclasses.replace(s, note="optional", required=False)
                         for s in (_FILTER, _RETARGETING, _CONTROLLER)),
    "wrench_filter": (dataclasses.replace(_CONTROLLER, note="optional", required=False),),
    "mujoco_driver": (NodeSection("mujoco_driver", "contactflow.sim.driver:sim_config_class",
                                  "SimConfig for position-controlled robots (Talos), PDSimConfig for PD robots "
                                  "(G1): pass --robot"),),
    "teleop": (NodeSection("teleop", "contactflow.lac.teleop:TeleopConfig",
                           "the node's default file: robots/<robot>/teleop.yaml when it exists", loader="teleop"),),
    "wrench_injector": (NodeSection("teleop", "contactflow.lac.teleop:TeleopConfig",
                                    "the teleop limits, which validate the scenario's stiffness", loader="teleop"),),
    "lac_expert": (NodeSection("lac_expert", "contactflow.lac.expert:ExpertConfig",
                               "or the same keys as a flat file; the node's default file: robots/g1/lac_expert.yaml",
                               loader="expert"),),
    "prime_estimator": (NodeSection(None, "contactflow.prime.fie:PrimeConfig",
                                    "a flat file, no section (e.g. robots/go2/prime_estimator.yaml)"),),
}


def config_sections() -> list[str]:
    """The sections a node's ``--config`` file may hold (one file may configure a whole graph), sorted."""
    return sorted({s.section for sections in NODE_CONFIGS.values() for s in sections if s.section})


def _known() -> str:
    return ", ".join(sorted(NODE_CONFIGS))


def node_sections(node: str, robot: str = "talos") -> list[tuple[NodeSection, type]]:
    """The sections of ``node``'s configuration file with their config dataclass.

    Raises:
        ConfigError: ``node`` has no configuration file (the known nodes are listed), or
            ``robot`` cannot be loaded (robot-dependent configs only).
    """
    if node not in NODE_CONFIGS:
        from contactflow.config import did_you_mean

        raise ConfigError(f"unknown node {node!r}{did_you_mean([node], NODE_CONFIGS)}; nodes with a configuration: "
                          f"{_known()}")
    out = []
    for s in NODE_CONFIGS[node]:
        module, name = s.config.split(":")
        obj = getattr(importlib.import_module(module), name)
        if not dataclasses.is_dataclass(obj):  # a (robot) -> class function
            from contactflow.robot import load_robot

            obj = obj(load_robot(robot))
        out.append((s, obj))
    return out


def render_node_config(node: str, robot: str = "talos", width: int = 100) -> str:
    """The defaults of ``node``'s configuration as a commented YAML file (see the module docstring).

    Raises:
        ConfigError: as :func:`node_sections`.
    """
    from contactflow.config import commented_yaml

    lines = [f"# contactflow config show {node}" + (f" --robot {robot}" if robot != "talos" else ""),
             f"# defaults of the node '{node}'; pass an edited copy with --config FILE (unknown keys are refused)"]
    for s, cls in node_sections(node, robot):
        doc = (cls.__doc__ or "").strip().split("\n\n")[0].replace("\n", " ")
        doc = " ".join(doc.split())
        lines += ["", *("# " + ln for ln in textwrap.wrap(f"{cls.__module__}.{cls.__name__}: {doc}", width - 2))]
        if s.note:
            lines.append(f"# {s.note}")
        if s.section is None:
            lines += ["", commented_yaml(cls(), 0, width)]
        else:
            lines += [f"{s.section}:", commented_yaml(cls(), 2, width)]
    return "\n".join(lines) + "\n"


def _load_section(s: NodeSection, cls: type, path: str, required: bool, robot: str, node: str) -> Any:
    """Load one section of the file ``path`` the way the node ``node`` does (``s.loader``)."""
    if s.loader == "teleop":
        from contactflow.lac.teleop import load_teleop_config
        from contactflow.robot import load_robot

        return load_teleop_config(load_robot(robot), path)
    if s.loader == "expert":
        from contactflow.lac.expert import load_expert_config

        return load_expert_config(path)
    from contactflow.nodes._runtime import load_node_config

    if s.section is None:
        return load_node_config(cls, path)
    return load_node_config(cls, path, s.section, required=required, node=node)


def check_node_config_files(node: str, files: Mapping[str, str | None], robot: str = "talos") -> list[tuple[str, str]]:
    """Load the configuration files given to ``node`` as the node does at start, and collect the errors.

    Used by ``contactflow check``, so that a misspelled key or a missing section is reported before
    the graph runs, with the loader's own message (file, section, key, ``did you mean``).

    Args:
        node: node kind (a key of :data:`NODE_CONFIGS`; other kinds have no file: nothing checked).
        files: flag -> file path as the node would open it (``--config``, ``--retargeting-config``;
            a missing or None value: the flag is not given). Resolve relative paths first (the nodes
            run in the dataflow's folder).
        robot: the node's ``--robot`` (robot-dependent classes, the teleop loader).

    Returns:
        ``(flag, message)`` for each file that fails to load (at most one per flag); nothing when the
        node's config class needs an optional package that is not installed.
    """
    if node not in NODE_CONFIGS or not any(files.values()):
        return []
    problems: dict[str, str] = {}
    try:
        sections = node_sections(node, robot)
    except ContactflowError as exc:
        return [("--config", str(exc))]
    except ModuleNotFoundError:  # an optional extra (prime: crocoddyl) is missing: the node says so at start
        return []
    for s, cls in sections:
        own = files.get(s.own_flag) if s.own_flag else None
        flag, required = (s.own_flag, True) if own else ("--config", s.required)
        path = files.get(flag)
        if not path or flag in problems:
            continue
        try:
            _load_section(s, cls, path, required, robot, node)
        except ContactflowError as exc:
            problems[flag] = str(exc)
    return list(problems.items())


def _show(args: Any) -> int:
    if args.list or not args.node:
        rows = [("node", "sections of its --config file (contactflow config show NODE)")]
        rows += [(node, ", ".join((s.section or "(flat file)") + ("" if s.required else " (optional)") for s in sections))
                 for node, sections in NODE_CONFIGS.items()]
        width = max(len(n) for n, _ in rows) + 2
        for node, sections in rows:
            print(f"{node:{width}s}{sections}")
        return 0
    print(render_node_config(args.node, args.robot), end="")
    return 0


def add_parser(sub) -> None:
    p = sub.add_parser("config", help="node configuration files: show a node's documented defaults")
    csub = p.add_subparsers(dest="config_command", required=True)
    show = csub.add_parser(
        "show", help="print a node's configuration defaults as commented YAML (a valid --config file)",
        description="Print the node's configuration defaults, every key under its documentation, as YAML that "
                    "loads back to the defaults. Without NODE (or with --list): the nodes that have a configuration.")
    show.add_argument("node", nargs="?", help="node name (file name in nodes/)")
    show.add_argument("--list", action="store_true", help="list the nodes that have a configuration and their sections")
    show.add_argument("--robot", default="talos", help="robot whose config class is shown, for robot-dependent "
                                                       "configs (mujoco_driver)")
    show.set_defaults(func=_show)

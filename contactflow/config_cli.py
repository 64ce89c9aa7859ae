"""``contactflow config show [NODE]``: a node's configuration defaults as commented YAML.

Every node that reads a configuration file (``--config FILE``) is listed in :data:`NODE_CONFIGS`
with the file section(s) it reads and the config dataclass of each. ``config show NODE`` prints the
dataclass defaults, every key (nested sections included) under its documentation, which comes from
the ``Attributes:`` section of the dataclass docstrings (:func:`contactflow.config.field_docs`).
The output is a valid configuration file: save it, edit a value, pass it with ``--config``.
``tests/test_config_show.py`` checks that every node's output loads back to the defaults and that
:data:`NODE_CONFIGS` names every ``load_node_config`` call of ``nodes/``.
"""

from __future__ import annotations

import dataclasses
import importlib
import textwrap
from typing import Any

from contactflow.errors import ConfigError

__all__ = ["NODE_CONFIGS", "NodeSection", "node_sections", "render_node_config", "add_parser"]


@dataclasses.dataclass(frozen=True)
class NodeSection:
    """One configuration section a node reads.

    Attributes:
        section: the top-level key of the file (``None``: the file is the flat mapping itself).
        config: ``"module:Class"`` of the config dataclass, or ``"module:function"`` of a function
            ``(robot) -> class`` when the class depends on the robot (``--robot``).
        note: where the node reads it from (printed above the section).
    """

    section: str | None
    config: str
    note: str = ""


_FILTER = NodeSection("input_filter", "contactflow.operator.input_filter:InputFilterConfig")
_RETARGETING = NodeSection("seiko_retargeting", "contactflow.seiko.retargeting:RetargetingConfig")
_CONTROLLER = NodeSection("seiko_controller", "contactflow.seiko.controller:ControllerConfig")

#: node (file name in ``nodes/``) -> the sections of its ``--config`` file, in print order.
NODE_CONFIGS: dict[str, tuple[NodeSection, ...]] = {
    "input_filter": (_FILTER,),
    "seiko_retargeting": (_RETARGETING,),
    "seiko_controller": (_CONTROLLER, dataclasses.replace(
        _RETARGETING, note="optional: read for the Retargeting's reset state (or from --retargeting-config)")),
    "seiko_stack": tuple(dataclasses.replace(s, note="optional") for s in (_FILTER, _RETARGETING, _CONTROLLER)),
    "wrench_filter": (dataclasses.replace(_CONTROLLER, note="optional"),),
    "mujoco_driver": (NodeSection("mujoco_driver", "contactflow.sim.driver:sim_config_class",
                                  "SimConfig for position-controlled robots (Talos), PDSimConfig for PD robots "
                                  "(G1): pass --robot"),),
    "teleop": (NodeSection("teleop", "contactflow.lac.teleop:TeleopConfig",
                           "the node's default file: robots/<robot>/teleop.yaml when it exists"),),
    "wrench_injector": (NodeSection("teleop", "contactflow.lac.teleop:TeleopConfig",
                                    "the teleop limits, which validate the scenario's stiffness"),),
    "lac_expert": (NodeSection("lac_expert", "contactflow.lac.expert:ExpertConfig",
                               "or the same keys as a flat file; the node's default file: robots/g1/lac_expert.yaml"),),
    "prime_estimator": (NodeSection(None, "contactflow.prime.fie:PrimeConfig",
                                    "a flat file, no section (e.g. robots/go2/prime_estimator.yaml)"),),
}


def _known() -> str:
    return ", ".join(sorted(NODE_CONFIGS))


def node_sections(node: str, robot: str = "talos") -> list[tuple[NodeSection, type]]:
    """The sections of ``node``'s configuration file with their config dataclass.

    Raises:
        ConfigError: ``node`` has no configuration file (the known nodes are listed), or
            ``robot`` cannot be loaded (robot-dependent configs only).
    """
    if node not in NODE_CONFIGS:
        raise ConfigError(f"unknown node {node!r}; nodes with a configuration: {_known()}")
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


def _show(args: Any) -> int:
    if args.list or not args.node:
        for node, sections in NODE_CONFIGS.items():
            print(f"{node:18s} {', '.join(s.section or '(flat file)' for s in sections)}")
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

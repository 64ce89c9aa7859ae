"""Packaging of contactflow: the metadata is in pyproject.toml; this file only lays out the packages.

The repository keeps the dora node adapters in ``nodes/`` and the robot data in ``robots/`` (the
project's layout: library, nodes, graphs and robots side by side); the distribution installs them
inside the package, as ``contactflow.nodes`` (importable; the ``contactflow-<node>`` executables run
them) and ``contactflow/robots`` (package data: every folder under ``robots/`` is listed as a data
package, its ``.yaml`` files as its data). Package lists computed here keep every sub-package of
``contactflow/`` and every robot folder in the wheel without listing them by hand.
"""

from setuptools import find_namespace_packages, find_packages, setup

ROBOT_PACKAGES = ["contactflow.robots"] + [f"contactflow.robots.{p}" for p in find_namespace_packages(where="robots")]

setup(
    packages=find_packages(include=["contactflow", "contactflow.*"]) + ["contactflow.nodes"] + ROBOT_PACKAGES,
    package_dir={"contactflow.nodes": "nodes", "contactflow.robots": "robots"},
    package_data={**{p: ["*.yaml", "*.yml"] for p in ROBOT_PACKAGES}, "contactflow.native": ["*.cpp"]},
)

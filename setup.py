"""Packaging of contactflow: the metadata is in pyproject.toml; this file only lays out the packages.

The repository keeps the dora node adapters in ``nodes/`` and the robot data in ``robots/`` (the
project's layout: library, nodes, graphs and robots side by side); the distribution installs them
inside the package, as ``contactflow.nodes`` (importable; the ``contactflow-<node>`` executables run
them) and ``contactflow/robots`` (package data). A package list computed here keeps every
sub-package of ``contactflow/`` in the wheel without listing it by hand.
"""

from setuptools import find_packages, setup

setup(
    packages=find_packages(include=["contactflow", "contactflow.*"]) + ["contactflow.nodes", "contactflow.robots"],
    package_dir={"contactflow.nodes": "nodes", "contactflow.robots": "robots"},
    package_data={"contactflow.robots": ["**/*.yaml", "**/*.yml"]},
)

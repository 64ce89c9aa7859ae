#!/usr/bin/env bash
# The test command of the README: unit tests, finite-difference checks, QP residual checks and a
# short real `dora run` of the SEIKO graph. Run inside the project's virtual environment.
set -euo pipefail
cd "$(dirname "$0")/.."
export MUJOCO_GL="${MUJOCO_GL:-disable}"
python -m pytest -q "$@"

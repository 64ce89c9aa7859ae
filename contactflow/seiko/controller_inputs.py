"""Input checks of the SEIKO Controller's :meth:`~contactflow.seiko.controller.SeikoController.step`
and :meth:`~contactflow.seiko.controller.SeikoController.reset`: shapes, effector names and finiteness,
one buffer for all the step inputs (:class:`StepInputsMixin`, part of
:class:`~contactflow.seiko.controller.SeikoController`, whose ``__init__`` builds the buffer).

Raises :class:`contactflow.errors.ContractError` naming the input, the effector and what was expected.
"""

from __future__ import annotations

import math
from typing import Mapping

import numpy as np

from contactflow.errors import ContractError

__all__ = ["StepInputsMixin"]


class StepInputsMixin:
    """Shape, name and finiteness checks of the Controller's inputs."""

    def _vec(self, name: str, value, shape: tuple[int, ...]) -> np.ndarray:
        a = np.asarray(value, dtype=float)
        if a.shape != shape:
            raise ContractError(f"SeikoController: {name} must have shape {shape}, got {a.shape}")
        if not math.isfinite(float(a.sum())):  # finite sum <=> all entries finite
            raise ContractError(f"SeikoController: {name} has non-finite entries")
        return a

    def _wrench(self, what: str, mapping: Mapping[str, np.ndarray] | None, name: str, required: bool) -> np.ndarray | None:
        dim = self.robot.contacts[name].dim
        if mapping is None or name not in mapping:
            if required:
                raise ContractError(f"SeikoController: {what} has no entry for enabled effector {name!r}")
            return None
        return self._vec(f"{what}[{name!r}]", mapping[name], (dim,))

    def _check_names(self, what: str, mapping: Mapping | None) -> None:
        if mapping is None:
            return
        unknown = set(mapping) - set(self.names)
        if unknown:
            raise ContractError(f"SeikoController: {what} has unknown effector(s) {sorted(unknown)}; expected some of {self.names}")

    _VEC_NAMES = ("q_d", "v_d", "theta_ahead", "tau_read")

    def _load_step_inputs(self, vecs: tuple, maps: tuple, want: tuple[bool, ...]) -> None:
        """Copy the inputs of :meth:`step` into the one input buffer (a shape check per entry),
        then check the finiteness of all of them at once (the offending entry is looked up only
        on failure). ``vecs``: (q_d, v_d, theta_ahead, tau_read), None = not given; ``maps``:
        (lam_read, lam_d, lam_d_dot, lam_tilde) effector -> array, or None; lam_d and lam_d_dot
        are read (and checked) only for the effectors ``want`` enables (the others are unused).
        Fills ``self._has``.

        Raises:
            ContractError: a wrong shape, an unknown effector or a non-finite entry.
        """
        for j, value in enumerate(vecs):
            if value is None:
                continue
            buf = self._in_vecs[j]
            a = value if type(value) is np.ndarray else np.asarray(value, dtype=float)
            if a.shape != buf.shape:
                raise ContractError(f"SeikoController: {self._VEC_NAMES[j]} must have shape {buf.shape}, got {a.shape}")
            buf[:] = a
        has = self._has
        has[:] = False
        self._in_w[2] = 0.0  # lam_d_dot: a missing entry means zero
        for j, mapping in enumerate(maps):
            if not mapping:
                continue
            views, has_j = self._in_views[j], has[j]
            if not self._index.keys() >= mapping.keys():
                self._check_names(self._in_names[j], mapping)
            skip = j in (1, 2)
            for name, value in mapping.items():
                i, view, shape = views[name]
                if skip and not want[i]:
                    continue
                a = value if type(value) is np.ndarray else np.asarray(value, dtype=float)
                if a.shape != shape:
                    raise ContractError(f"SeikoController: {self._in_names[j]}[{name!r}] must have shape {shape}, got {a.shape}")
                view[:] = a
                has_j[i] = True
        rows = self._in_w
        # a finite sum: all entries finite (the per-entry check only when it is not)
        if not math.isfinite(float(np.add.reduce(self._in))) and not np.isfinite(self._in).all():
            bad = [self._VEC_NAMES[j] for j, v in enumerate(vecs) if v is not None and not np.isfinite(self._in_vecs[j]).all()]
            bad += [f"{self._in_names[j]}[{self.names[i]!r}]" for j, i in zip(*np.nonzero(has))
                    if not np.isfinite(rows[j, i]).all()]
            self._in[:] = 0.0  # no stale non-finite value stays in the buffer
            raise ContractError(f"SeikoController: non-finite entries in {', '.join(bad)}")

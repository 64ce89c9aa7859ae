"""Obtain holosoma's G1 locomotion policies (Amazon FAR, Apache-2.0) at install or test time.

The ``holosoma-inference`` wheel on PyPI ships ``holosoma_inference/models/loco/g1_29dof/
{ppo,fastsac}_g1_29dof.onnx``. Third-party weights are never committed to this repository:
:func:`fetch_holosoma` downloads the wheel with ``pip download --no-deps`` (or uses an installed
``holosoma_inference`` package), checks its SHA-256, and extracts the one model into the cache
directory (``$CONTACTFLOW_CACHE``, else ``~/.cache/contactflow``).
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from contactflow.errors import ModelError
from contactflow.paths import replaced_atomically, sha256_of_files

log = logging.getLogger("contactflow.policy.holosoma")

__all__ = ["HOLOSOMA_MODELS", "ModelFetchError", "cache_dir", "fetch_holosoma"]

HOLOSOMA_VERSION = "0.1.3"
_WHEEL = f"holosoma_inference-{HOLOSOMA_VERSION}-py3-none-any.whl"
_WHEEL_SHA256 = "3c11fd4595bc82921d4c44f77357667828761548c1ce74782ea77937b2ab0ef7"
# model name -> (path inside the wheel, SHA-256 of the .onnx file)
HOLOSOMA_MODELS: dict[str, tuple[str, str]] = {
    "ppo_g1_29dof": ("holosoma_inference/models/loco/g1_29dof/ppo_g1_29dof.onnx",
                     "c9d310f479c2da1e86f468de24f64e102a2a275c14eed0fa341473612d942294"),
    "fastsac_g1_29dof": ("holosoma_inference/models/loco/g1_29dof/fastsac_g1_29dof.onnx",
                         "8346fd90778439395922a8c7256f24125ae84b8dea949128bac9e23c02bc7717"),
}


class ModelFetchError(ModelError):
    """A third-party model could not be obtained (no network, no pip, checksum mismatch)."""


def cache_dir() -> Path:
    """The download cache: ``$CONTACTFLOW_CACHE`` or ``~/.cache/contactflow`` (read at call time)."""
    return Path(os.environ.get("CONTACTFLOW_CACHE") or Path.home() / ".cache" / "contactflow")


def _installed_model(inner: str) -> Path | None:
    try:
        import importlib.util

        spec = importlib.util.find_spec("holosoma_inference")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    p = Path(list(spec.submodule_search_locations)[0]).parent / inner
    return p if p.is_file() else None


def _download_wheel(wheels: Path, timeout_s: float) -> Path:
    wheel = wheels / _WHEEL
    if wheel.is_file() and sha256_of_files([wheel]) == _WHEEL_SHA256:
        return wheel
    wheels.mkdir(parents=True, exist_ok=True)
    cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--disable-pip-version-check",
           f"holosoma-inference=={HOLOSOMA_VERSION}", "-d", str(wheels)]
    try:
        res = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout_s, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise ModelFetchError(f"could not run {' '.join(cmd[2:])}: {exc}") from None
    if res.returncode != 0 or not wheel.is_file():
        tail = (res.stderr or res.stdout).strip().splitlines()
        raise ModelFetchError(
            f"pip download of holosoma-inference=={HOLOSOMA_VERSION} failed "
            f"({tail[-1] if tail else f'exit {res.returncode}'}); needs network access to PyPI and pip in this environment"
        )
    digest = sha256_of_files([wheel])
    if digest != _WHEEL_SHA256:
        raise ModelFetchError(f"{wheel}: SHA-256 {digest} differs from the pinned {_WHEEL_SHA256}")
    return wheel


def fetch_holosoma(name: str = "ppo_g1_29dof", *, cache: str | Path | None = None, timeout_s: float = 300.0) -> Path:
    """Path of a holosoma G1 locomotion ONNX model, downloading it on first use.

    Args:
        name: ``ppo_g1_29dof`` or ``fastsac_g1_29dof`` (holosoma-inference 0.1.3).
        cache: cache directory (default :func:`cache_dir`); the model lands in
            ``<cache>/holosoma-inference-0.1.3/<name>.onnx``, the wheel in ``<cache>/wheels``.
        timeout_s: limit for the ``pip download`` [s].

    Returns:
        Path of the ``.onnx`` file (SHA-256 checked).

    Raises:
        ConfigError: unknown model name.
        ModelFetchError: the wheel cannot be downloaded (no network or no pip) or a checksum differs.
    """
    from contactflow.errors import ConfigError

    if name not in HOLOSOMA_MODELS:
        raise ConfigError(f"unknown holosoma model {name!r}; expected one of {', '.join(HOLOSOMA_MODELS)}")
    inner, sha = HOLOSOMA_MODELS[name]
    root = Path(cache) if cache is not None else cache_dir()
    out = root / f"holosoma-inference-{HOLOSOMA_VERSION}" / f"{name}.onnx"
    if out.is_file() and sha256_of_files([out]) == sha:
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    installed = _installed_model(inner)
    # one temporary file per process, put in place in one step: concurrent test processes never see a partial file
    with replaced_atomically(out, f".tmp{os.getpid()}") as tmp:
        if installed is not None and sha256_of_files([installed]) == sha:
            shutil.copyfile(installed, tmp)
        else:
            log.info("downloading holosoma-inference %s from PyPI into %s (first use; Apache-2.0)", HOLOSOMA_VERSION,
                     root / "wheels")
            wheel = _download_wheel(root / "wheels", timeout_s)
            with zipfile.ZipFile(wheel) as z, z.open(inner) as src, open(tmp, "wb") as dst:
                shutil.copyfileobj(src, dst)
        digest = sha256_of_files([tmp])
        if digest != sha:
            raise ModelFetchError(f"{name}: extracted model SHA-256 {digest} differs from the pinned {sha}")
    log.info("holosoma model %s: %s", name, out)
    return out

"""Compiled kernels of contactflow, built on first use and loaded with :mod:`ctypes`.

One kernel today: ``seiko_qp11`` (``seiko_qp11.cpp``), the per-step arithmetic of the SEIKO stages
against the pinocchio C++ library of the ``pin`` wheel: the Controller's QP (11) (equilibrium terms
(5), command-rate map (7), the rows and costs of (11b)-(11i), the integration) and the Retargeting's
kinematics (centroidal map, equilibrium terms, effector Jacobians and poses). The Python of
:mod:`contactflow.seiko.controller_qp` computes the same thing and stays the reference
(``tests/test_seiko_native.py`` compares both on whole runs); the kernel exists because the
Controller is a 500 Hz stage and its Python assembly is ~45 small numpy / pinocchio calls
(issue 12, docs/benchmarks.md).

Building: ``g++`` (``$CXX`` when set) compiles the source once per source, compiler, flags and
pinocchio version into ``$CONTACTFLOW_NATIVE_CACHE`` (default ``~/.cache/contactflow/native``),
~20-40 s on 2 cores; later imports load the cached library. The Eigen headers come from the
``cmeel-eigen`` wheel (a dependency), pinocchio's headers and libraries from the ``pin`` wheel
(``cmeel.prefix``). Concurrent first uses (the nodes of a graph starting together) build once:
a lock file serialises them, the library is written under a temporary name and renamed.

``contactflow native build`` builds (or finds) the library and prints its path; ``contactflow
native status`` says whether it loads, and why not (building it first when it is not cached).
"""

from __future__ import annotations

import ctypes
import fcntl
import hashlib
import importlib.metadata
import logging
import os
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from contactflow.errors import ContactflowError

__all__ = ["KERNELS", "NativeBuildError", "NATIVE_CACHE_ENV", "NATIVE_FLAGS_ENV", "cache_dir", "load", "library_path", "status"]

_log = logging.getLogger(__name__)

#: Values of the SEIKO stages' ``kernel`` setting (``ControllerConfig.kernel``, ``RetargetingConfig.kernel``):
#: ``"native"`` the compiled kernel (an error if it cannot be built), ``"python"`` the reference numpy /
#: pinocchio code, ``"auto"`` the compiled one when it builds, else Python with one warning.
KERNELS = ("auto", "native", "python")

#: Environment variable: the folder of the built libraries (default ``~/.cache/contactflow/native``).
NATIVE_CACHE_ENV = "CONTACTFLOW_NATIVE_CACHE"

#: Environment variable: extra compiler flags (part of the cache key), e.g. ``-O3``; target flags (``-m...``)
#: are refused (they change Eigen's alignment against the pin wheel's library), and so are fast-math and
#: fused multiply-add flags (the kernel must round as the Python code does).
NATIVE_FLAGS_ENV = "CONTACTFLOW_NATIVE_CXXFLAGS"

_SOURCES = {"seiko_qp11": "seiko_qp11.cpp"}
# The pinocchio wheel's public compile definitions (its CMake targets' INTERFACE_COMPILE_DEFINITIONS).
_DEFINES = [
    "PINOCCHIO_ENABLE_TEMPLATE_INSTANTIATION",
    "BOOST_MPL_LIMIT_LIST_SIZE=30",
    "BOOST_MPL_LIMIT_VECTOR_SIZE=30",
    "BOOST_MPL_CFG_NO_PREPROCESSED_HEADERS",
    "BOOST_FUSION_INVOKE_MAX_ARITY=12",
    "NDEBUG",
]
# No -march / -mavx: Eigen's alignment must stay that of the wheel's libpinocchio (SSE2, 16 bytes; the
# source static_asserts it), whose instantiations the kernel calls on its own objects. -z defs: an
# unresolved symbol (another C++ ABI) fails the build, not the load. -ffp-contract=off: no fused multiply-add
# (g++ fuses by default where the target has one, e.g. aarch64): the kernel's filters round as numpy's separate
# operations do, bit for bit (tests/test_seiko_native.py); fast-math flags are refused for the same reason.
_FLAGS = ["-O2", "-std=c++17", "-ffp-contract=off", "-fPIC", "-shared", "-fvisibility=hidden", "-w", "-Wl,-z,defs"]
# compiler flags refused in $CXX and $CONTACTFLOW_NATIVE_CXXFLAGS: target flags (Eigen's alignment) and the
# flags that change floating-point results
_TARGET_FLAGS = ("-m",)
_FP_FLAGS = ("-ffast-math", "-Ofast", "-funsafe-math-optimizations", "-ffp-contract=fast", "-ffp-contract=on",
             "-fassociative-math", "-freciprocal-math")
_LIBS = ["pinocchio_default", "boost_serialization"]
# distributions whose headers or libraries the build uses: their versions are part of the cache key
_DISTRIBUTIONS = ("pin", "libpinocchio", "cmeel-eigen", "cmeel-boost", "eigenpy")

_loaded: dict[str, tuple[ctypes.CDLL, Path]] = {}  # name -> (library, its file)
_failed: dict[str, str] = {}


class NativeBuildError(ContactflowError):
    """A compiled kernel could not be built or loaded (no compiler, missing headers, a compile
    error, an unwritable cache); the message says which and what to do."""


def cache_dir() -> Path:
    """The folder of the built libraries: ``$CONTACTFLOW_NATIVE_CACHE`` or ``~/.cache/contactflow/native``."""
    env = os.environ.get(NATIVE_CACHE_ENV)
    return Path(env).expanduser() if env else Path.home() / ".cache" / "contactflow" / "native"


def _cmeel_prefixes() -> list[Path]:
    """The ``cmeel.prefix`` folders: first the one of the imported pinocchio (its headers and
    libraries must be those of the module loaded in this process), then the others on the path."""
    seen: list[Path] = []
    import pinocchio

    for parent in Path(pinocchio.__file__).resolve().parents:
        if parent.name == "cmeel.prefix":
            seen.append(parent)
            break
    for p in [sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"], *sys.path]:
        cand = Path(p) / "cmeel.prefix"
        if cand.is_dir() and cand.resolve() not in [q.resolve() for q in seen]:
            seen.append(cand)
    return seen


def _find(relative: str, what: str, hint: str) -> Path:
    prefixes = _cmeel_prefixes()
    for prefix in prefixes:
        if (prefix / relative).exists():
            return prefix
    raise NativeBuildError(f"native kernel: {what} not found (looked for cmeel.prefix/{relative} in "
                           f"{[str(p) for p in prefixes] or 'no cmeel.prefix folder'}); {hint}")


def _versions() -> dict[str, str | None]:
    out = {}
    for dist in _DISTRIBUTIONS:
        try:
            out[dist] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            out[dist] = None
    return out


def _build_inputs(name: str) -> tuple[Path, list[str], str]:
    """The source, the compiler command (without output path) and the cache key of kernel ``name``."""
    src = Path(__file__).resolve().parent / _SOURCES[name]
    cxx_env = os.environ.get("CXX", "").strip()
    cxx = shlex.split(cxx_env) if cxx_env else [c for c in (shutil.which("g++") or shutil.which("c++"),) if c]
    if not cxx:
        raise NativeBuildError("native kernel: no C++ compiler (g++, c++ or $CXX) on PATH; install one "
                               "(Debian/Ubuntu: apt install g++) or run the Python kernel (kernel: python)")
    pin_prefix = _find("include/pinocchio/multibody.hpp", "pinocchio's C++ headers", "reinstall the `pin` wheel")
    eigen_prefix = _find("include/eigen3/Eigen/Core", "Eigen's headers", "pip install 'cmeel-eigen<3.5'")
    extra = shlex.split(os.environ.get(NATIVE_FLAGS_ENV, ""))
    for where, words in ((f"${NATIVE_FLAGS_ENV}", extra), ("$CXX", cxx[1:])):
        bad = [f for f in words if f.startswith(_TARGET_FLAGS)]
        if bad:
            raise NativeBuildError(f"native kernel: {where} has {bad}: target flags change Eigen's alignment "
                                   "against the pin wheel's library; leave them out")
        bad = [f for f in words if f in _FP_FLAGS]
        if bad:
            raise NativeBuildError(f"native kernel: {where} has {bad}: the kernel must round as the Python code does "
                                   "(no fast-math, no fused multiply-add); leave them out")
    cmd = [*cxx, *_FLAGS, *extra, *(f"-D{d}" for d in _DEFINES), f"-I{eigen_prefix / 'include' / 'eigen3'}",
           f"-I{pin_prefix / 'include'}", str(src), f"-L{pin_prefix / 'lib'}", f"-Wl,-rpath,{pin_prefix / 'lib'}",
           *(f"-l{lib}" for lib in _LIBS)]
    try:
        version = subprocess.run([*cxx, "--version"], capture_output=True, text=True, timeout=30).stdout.splitlines()[:1]
    except (OSError, subprocess.SubprocessError) as exc:
        raise NativeBuildError(f"native kernel: the compiler {cxx_env or cxx[0]} does not run: {exc}") from exc
    h = hashlib.sha256()
    h.update(src.read_bytes())
    h.update(repr((cmd, version, _versions(), sys.version)).encode())
    return src, cmd, h.hexdigest()[:16]


def library_path(name: str = "seiko_qp11") -> Path:
    """Where the library of kernel ``name`` is (or will be) cached for this source, compiler, flags
    and the versions of pinocchio, Eigen and boost.

    Raises:
        NativeBuildError: no compiler, or pinocchio's / Eigen's headers missing.
    """
    _, _, key = _build_inputs(name)
    return cache_dir() / f"{name}-{key}.so"


def _build(name: str, rebuild: bool = False) -> Path:
    """The cached library of kernel ``name``, compiled first if absent (or ``rebuild``)."""
    src, cmd, key = _build_inputs(name)
    out = cache_dir() / f"{name}-{key}.so"
    if out.is_file() and not rebuild:
        return out
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        with open(out.parent / f".{name}.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # a second process waits for the first one's build
            if out.is_file() and not rebuild:
                return out
            fd, tmp = tempfile.mkstemp(prefix=f".{name}-", suffix=".so", dir=out.parent)
            os.close(fd)
            _log.info("building the native kernel %s (once, ~30 s): %s", name, out)
            try:
                proc = subprocess.run([*cmd, "-o", tmp], capture_output=True, text=True, timeout=600)
                if proc.returncode != 0:
                    tail = "\n".join((proc.stderr or proc.stdout).strip().splitlines()[-15:]) or "(no output)"
                    raise NativeBuildError(f"native kernel {name}: {src.name} did not compile with {cmd[0]} "
                                           f"(exit {proc.returncode}):\n{tail}")
                os.chmod(tmp, 0o755)  # loadable by the other users of a shared cache
                os.replace(tmp, out)
            except (OSError, subprocess.SubprocessError) as exc:
                raise NativeBuildError(f"native kernel {name}: the compiler did not run: {exc}") from exc
            finally:
                if os.path.exists(tmp):
                    os.unlink(tmp)
    except OSError as exc:  # the cache folder, its lock or the rename
        raise NativeBuildError(f"native kernel {name}: the cache {out.parent} is not usable: {exc} "
                               f"(${NATIVE_CACHE_ENV} chooses another folder)") from exc
    return out


def load(name: str = "seiko_qp11") -> ctypes.CDLL:
    """The loaded library of kernel ``name``, built first if it is not in the cache (and built again
    once if the cached file does not load).

    Raises:
        NativeBuildError: it cannot be built or loaded (the reason is in the message; a failure is
            remembered for the process, so a later call raises at once).
    """
    if name in _loaded:
        return _loaded[name][0]
    if name in _failed:
        raise NativeBuildError(_failed[name])
    try:
        path = _build(name)
        try:
            lib = ctypes.CDLL(str(path))
        except OSError:
            path = _build(name, rebuild=True)  # a damaged or foreign file in the cache
            try:
                lib = ctypes.CDLL(str(path))
            except OSError as exc:
                raise NativeBuildError(f"native kernel {name}: {path} does not load: {exc}") from exc
    except NativeBuildError as exc:
        _failed[name] = str(exc)
        raise
    _declare(lib)
    _loaded[name] = (lib, path)
    return lib


def status(name: str = "seiko_qp11") -> tuple[bool, str]:
    """``(True, path)`` when kernel ``name`` loads (building it first if it is not in the cache,
    ~30 s), else ``(False, reason)``."""
    try:
        load(name)
        return True, str(_loaded[name][1])
    except NativeBuildError as exc:
        return False, str(exc)


def _declare(lib: ctypes.CDLL) -> None:
    vp, i64p, dp, cp = ctypes.c_void_p, ctypes.POINTER(ctypes.c_int64), ctypes.c_void_p, ctypes.c_char_p
    lib.cf_kernel_new.argtypes = [cp, ctypes.c_int64, cp, ctypes.c_int]
    lib.cf_kernel_new.restype = vp
    lib.cf_kernel_free.argtypes = [vp]
    lib.cf_kernel_free.restype = None
    lib.cf_kernel_sizes.argtypes = [vp, i64p]
    lib.cf_kernel_sizes.restype = ctypes.c_int
    lib.cf_layout_new.argtypes = [vp, dp, dp, dp, cp, ctypes.c_int]
    lib.cf_layout_new.restype = vp
    lib.cf_layout_io_size.argtypes = [vp]
    lib.cf_layout_io_size.restype = ctypes.c_int
    lib.cf_layout_free.argtypes = [vp]
    lib.cf_layout_free.restype = None
    lib.cf_kinematics_new.argtypes = [vp, dp, dp, cp, ctypes.c_int]
    lib.cf_kinematics_new.restype = vp
    lib.cf_kinematics_free.argtypes = [vp]
    lib.cf_kinematics_free.restype = None
    lib.cf_feedback_new.argtypes = [dp, dp, dp, cp, ctypes.c_int]
    lib.cf_feedback_new.restype = vp
    lib.cf_feedback_free.argtypes = [vp]
    lib.cf_feedback_free.restype = None
    for fn in (lib.cf_prepare, lib.cf_assemble, lib.cf_integrate, lib.cf_kinematics, lib.cf_filter13, lib.cf_torque12):
        fn.argtypes = [vp, cp, ctypes.c_int]
        fn.restype = ctypes.c_int

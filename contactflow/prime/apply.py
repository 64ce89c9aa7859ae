"""``contactflow prime apply``: a PRIME estimate's identified inertial parameters as a robot variant.

PRIME (Kang, Ren, Pang, Xiong, RSS 2026, §III-B) identifies the inertial parameters of some bodies
of the robot (``prime.yaml`` ``identified_bodies``, by joint name; ``root_joint`` = the floating
base). :func:`apply_estimate` writes them as a robot file every node loads::

    <out>/robot.yaml
        base: <the run's robot>          # everything else comes from the base robot
        name: <out folder name>
        body_inertias:                   # contactflow.robot: replaces the reduced model's bodies
          root_joint: {mass_kg: .., com_m: [..], inertia_kgm2: [xx, xy, yy, xz, yz, zz]}
        prime_provenance: {...}          # source run, recording, stream, PRIME settings, date

Units SI; the centre of mass is in the body (joint) frame, the rotational inertia about the
centre of mass in the body frame's axes (PRIME's ``prime_estimator.parameters`` stream, which is
what is read here; ``report.json`` gives the provenance). Both the pinocchio model
(:func:`contactflow.robot.load_robot`) and the MuJoCo model
(:func:`contactflow.sim.mujoco_model.build_mujoco_spec`) are built with the corrected bodies.

A body the recording did not excite is identified no better than the prior holds it (quiet
standing resolves the base mass, not its inertia): the file carries what PRIME returned.
"""

from __future__ import annotations

import datetime as _dt
import json
import shutil
from pathlib import Path

import numpy as np
import yaml

from contactflow.errors import ConfigError
from contactflow.recording.store import RecordingError, git_revision, read_recording

__all__ = ["identified_bodies", "apply_estimate", "PARAMETERS_STREAM"]

PARAMETERS_STREAM = "prime_estimator.parameters"
_REPO = Path(__file__).resolve().parents[2]


def identified_bodies(run_dir: str | Path) -> tuple[str, dict[str, dict], dict]:
    """The identified bodies of a ``contactflow prime estimate`` output.

    Args:
        run_dir: the estimate's output directory (recording with ``prime_estimator.parameters``
            and ``report.json``).

    Returns:
        (robot name of the run, {joint: {mass_kg, com_m (3,), inertia_kgm2 (6,) xx xy yy xz yz zz}},
        report.json contents ({} when absent)).

    Raises:
        ConfigError: not a PRIME output, an estimate run without identification (``--no-identify``)
            or a parameters message without bodies (the message names the run and what is missing).
    """
    run = Path(run_dir)
    try:
        rec = read_recording(run)
    except RecordingError as exc:
        raise ConfigError(f"{run}: not a PRIME estimate output ({exc})") from None
    report_path = run / "report.json"
    report = json.loads(report_path.read_text()) if report_path.is_file() else {}
    if report and not report.get("identified", True):
        raise ConfigError(f"{run}: the PRIME run has no identified parameters (it ran with --no-identify); "
                          "run contactflow prime estimate without --no-identify")
    if PARAMETERS_STREAM not in rec.stream_names:
        raise ConfigError(f"{run}: no {PARAMETERS_STREAM} stream: not a contactflow prime estimate output "
                          f"(streams: {sorted(rec.stream_names)})")
    s = rec.stream(PARAMETERS_STREAM)
    names = [f for f, _ in s.layout]
    bodies = [f[len("mass."):] for f in names if f.startswith("mass.")]
    if not bodies:
        raise ConfigError(f"{run}: {PARAMETERS_STREAM} holds no identified bodies (fields {names})")
    out = {}
    for b in bodies:
        for f in (f"com.{b}", f"inertia.{b}"):
            if f not in names:
                raise ConfigError(f"{run}: {PARAMETERS_STREAM} lacks field {f!r}")
        vals = {k: np.asarray(s.field(f"{k}.{b}"), dtype=float)[-1] for k in ("mass", "com", "inertia")}
        if not all(np.all(np.isfinite(v)) for v in vals.values()):
            raise ConfigError(f"{run}: {PARAMETERS_STREAM}: non-finite parameters for body {b!r}")
        out[b] = {"mass_kg": float(vals["mass"].reshape(-1)[0]), "com_m": [float(x) for x in vals["com"]],
                  "inertia_kgm2": [float(x) for x in vals["inertia"]]}
    robot = rec.manifest.get("robot") or report.get("robot")
    if not robot:
        raise ConfigError(f"{run}: the manifest names no robot")
    return str(robot), out, report


def apply_estimate(run_dir: str | Path, out_dir: str | Path, *, robot: str | None = None, name: str | None = None,
                   force: bool = False) -> Path:
    """Write ``<out_dir>/robot.yaml``: the run's robot with the identified bodies (module docstring).

    Args:
        run_dir: a ``contactflow prime estimate`` output.
        out_dir: the robot folder to create (its name is the variant's name unless ``name``).
        robot: the base robot (name, folder or file; default: the run's). Refused if it is not the
            run's robot: another name, or nominal body parameters different from the run's.
        name: the variant's robot name (default: the folder's name).
        force: replace an existing ``out_dir``.

    Returns:
        The robot file written.

    Raises:
        ConfigError: no identified parameters, ``out_dir`` exists (without ``force``), a base
            robot that differs from the run's, or a corrected body the loader refuses (the
            written file is loaded once before this returns; nothing is left on failure).
    """
    from contactflow.robot import body_inertia, load_robot

    run = Path(run_dir).resolve()
    run_robot, bodies, report = identified_bodies(run)
    base_arg = robot or run_robot
    base = load_robot(base_arg)
    if base.name != run_robot:
        raise ConfigError(f"--robot {base_arg}: robot {base.name!r} differs from the PRIME run's robot {run_robot!r}")
    for b, nom in (report.get("bodies_nominal") or {}).items():
        if not base.model.existJointName(b):
            raise ConfigError(f"--robot {base_arg}: robot {base.name!r} has no joint {b!r} (identified in {run})")
        m = float(base.model.inertias[base.model.getJointId(b)].mass)
        if abs(m - float(nom["mass_kg"])) > 1e-6 * max(1.0, m):
            raise ConfigError(f"--robot {base_arg}: body {b!r} weighs {m:.6g} kg in robot {base.file_label()}, "
                              f"{float(nom['mass_kg']):.6g} kg in the PRIME run's model: not the run's base robot")
    for b, entry in bodies.items():
        if b not in [base.model.names[i] for i in range(1, base.model.njoints)]:
            raise ConfigError(f"{run}: identified body {b!r} is not a joint of robot {base.name!r}")
        body_inertia(entry, f"{run}: {PARAMETERS_STREAM} body {b}")  # physical, as the loader will check

    out = Path(out_dir)
    if out.exists() and not force:
        raise ConfigError(f"{out}: exists (pass --force to replace it)")
    if out.exists() and not _written_here(out):
        raise ConfigError(f"{out}: exists and is not a robot folder written by contactflow prime apply "
                          "(only robot.yaml with prime_provenance); --force replaces only such folders")
    cfg = report.get("config") or {}
    nominal = report.get("bodies_nominal") or {}
    provenance = {
        "source_run": str(run),
        "source_recording": report.get("source_recording"),
        "stream": report.get("stream"),
        "decimation": report.get("decimation"),
        "prime_settings": {k: cfg[k] for k in sorted(cfg)},
        "cost": report.get("cost"),
        "iterations": report.get("iterations"),
        "converged": report.get("converged"),
        "steps": report.get("steps"),
        "nominal_mass_kg": {b: nominal[b]["mass_kg"] for b in nominal},
        "written_utc": _dt.datetime.now(_dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "git_revision": git_revision(_REPO),
    }
    # the base by name when the run's robot is a name (found on the search path at load time)
    base_ref = base_arg if robot is None or Path(base_arg).name == str(base_arg) else str(base.file.resolve())
    doc = {"base": base_ref, "name": name or out.resolve().name, "body_inertias": bodies,
           "prime_provenance": provenance}
    masses = ", ".join(f"{b} {nominal.get(b, {}).get('mass_kg', float('nan')):.4f} -> {e['mass_kg']:.4f} kg"
                       for b, e in bodies.items())
    header = (f"# Robot {doc['name']!r}: {base.name} with the inertial parameters PRIME identified\n"
              f"# ({masses}) from {run}\n"
              "# written by `contactflow prime apply` (contactflow/prime/apply.py); body_inertias: see\n"
              "# contactflow.robot.load_robot (SI units, COM in the body frame, inertia about the COM).\n")
    tmp = out.parent / f".{out.name}.tmp"
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        f = tmp / "robot.yaml"
        f.write_text(header + yaml.safe_dump(doc, sort_keys=False, default_flow_style=None, width=110))
        load_robot(f)  # the loader accepts it (and resolves the base) before it is put in place
    except Exception:
        shutil.rmtree(tmp)
        raise
    if out.exists():
        shutil.rmtree(out)
    tmp.rename(out)
    return out / "robot.yaml"


def _written_here(out: Path) -> bool:
    """``out`` is a folder holding only a ``robot.yaml`` with ``prime_provenance`` (safe to replace)."""
    if not out.is_dir() or sorted(p.name for p in out.iterdir()) != ["robot.yaml"]:
        return False
    try:
        doc = yaml.safe_load((out / "robot.yaml").read_text())
    except (OSError, yaml.YAMLError):
        return False
    return isinstance(doc, dict) and "prime_provenance" in doc

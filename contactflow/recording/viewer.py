"""Rerun visualisation of a contactflow run: robot, contact wrenches, effector targets, tracking plots.

:class:`RerunLogger` turns the messages of a run (the ``sensors``, ``desired`` and
``controller_state`` contracts of :mod:`contactflow.contracts.messages`, as dicts of named arrays) into rerun
entities on the timeline ``t`` (simulation/robot time [s], plus the sequence timeline ``tick``):

==========================================  ==================================================
entity                                      content
==========================================  ==================================================
``world/robot/<link>``                      link pose in world (pinocchio FK of the measured
                                            ``q``), a ``Transform3D`` per logged tick
``world/robot/<link>/visual_<i>``           static: the URDF visual (mesh ``Asset3D`` with its
                                            origin and scale, or a box/cylinder/sphere)
``world/wrench/<eff>/measured|desired``     contact force arrow in world, at the centre of
                                            pressure of the sole (``force_scale_m_per_n``)
``world/effectors/measured|desired``        effector positions (points, labelled)
``plots/fz/<foot>/measured|desired|filtered``  normal force of each sole [N] (``filtered`` =
                                            the Controller's ``lam_tilde``)
``plots/effector_error/<eff>``              ``|p_measured - p_desired|`` [m] at the same tick
``plots/solve_time``                        Controller step time [s]
==========================================  ==================================================

The robot's visuals are read from its URDF (meshes of example-robot-data); formats rerun cannot
open (anything but STL, OBJ, glTF/GLB) or missing files fall back to a small box and the link's
axes, and :attr:`RerunLogger.fallbacks` lists them. :func:`log_recording` converts a recorded run
(``recordings/<run>/``) into an ``.rrd`` file. This module never imports dora.
"""

from __future__ import annotations

import collections
import dataclasses
import logging
import os
import sys
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Callable, Mapping

import numpy as np
import pinocchio as pin
import rerun as rr

from contactflow.errors import ConfigError, ContactflowError, ContractError, ModelError

__all__ = [
    "RerunLogger", "Visual", "urdf_visuals", "open_recording", "log_recording", "display_available",
    "ROBOT_ROOT", "WRENCH_ROOT", "EFFECTOR_ROOT", "PLOTS_ROOT", "MESH_SUFFIXES",
]

log = logging.getLogger("contactflow.recording.viewer")

ROBOT_ROOT = "world/robot"
WRENCH_ROOT = "world/wrench"
EFFECTOR_ROOT = "world/effectors"
PLOTS_ROOT = "plots"
#: Mesh formats rerun's ``Asset3D`` opens.
MESH_SUFFIXES = (".stl", ".obj", ".glb", ".gltf")

_GREY = (170, 170, 180, 255)
_MEASURED = (230, 60, 50)
_DESIRED = (40, 180, 80)
_FALLBACK_HALF_SIZE_M = 0.02


@dataclasses.dataclass(frozen=True)
class Visual:
    """One ``<visual>`` of a URDF link.

    Attributes:
        link: link name.
        kind: ``"mesh"``, ``"box"``, ``"cylinder"`` or ``"sphere"``.
        placement: pose of the visual in the link frame.
        mesh_path: resolved mesh file (``kind == "mesh"``), or None when it cannot be found.
        scale: (3,) mesh scale (may be negative: mirrored meshes).
        size: box (3,) full size [m]; cylinder (radius, length) [m]; sphere (radius,) [m].
    """

    link: str
    kind: str
    placement: pin.SE3
    mesh_path: Path | None = None
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    size: tuple[float, ...] = ()


def _floats(text: str | None, n: int, default: float) -> tuple[float, ...]:
    if not text:
        return (default,) * n
    vals = tuple(float(x) for x in text.split())
    if len(vals) == 1 and n > 1:
        vals = vals * n
    if len(vals) != n:
        raise ModelError(f"expected {n} numbers, got {text!r}")
    return vals


def _resolve_mesh(filename: str, urdf_path: Path) -> Path | None:
    if filename.startswith("package://"):
        pkg, _, rest = filename[len("package://"):].partition("/")
        if pkg == "example-robot-data":
            from contactflow.robot import resolve_package_path

            try:
                return resolve_package_path(pkg, rest)
            except ModelError:
                return None
        for parent in urdf_path.parents:  # a ROS package beside or above the URDF
            cand = parent / pkg / rest
            if cand.exists():
                return cand
        return None
    p = Path(filename[len("file://"):] if filename.startswith("file://") else filename)
    p = p if p.is_absolute() else urdf_path.parent / p
    return p if p.exists() else None


def urdf_visuals(urdf_path: str | Path) -> list[Visual]:
    """The ``<visual>`` elements of a URDF, with mesh files resolved.

    Args:
        urdf_path: the URDF file.

    Returns:
        One :class:`Visual` per visual element, in file order (links without visuals give none).

    Raises:
        ModelError: the URDF cannot be read or a visual is malformed.
    """
    urdf_path = Path(urdf_path)
    try:
        root = ET.parse(urdf_path).getroot()
    except (OSError, ET.ParseError) as exc:
        raise ModelError(f"{urdf_path}: cannot read the URDF: {exc}") from None
    out = []
    for link in root.findall("link"):
        name = link.get("name", "")
        for vis in link.findall("visual"):
            geom = vis.find("geometry")
            if geom is None or len(geom) == 0:
                continue
            g = geom[0]
            origin = vis.find("origin")
            try:
                xyz = _floats(origin.get("xyz") if origin is not None else None, 3, 0.0)
                rpy = _floats(origin.get("rpy") if origin is not None else None, 3, 0.0)
                placement = pin.SE3(pin.rpy.rpyToMatrix(*rpy), np.array(xyz))
                if g.tag == "mesh":
                    out.append(Visual(name, "mesh", placement, _resolve_mesh(g.get("filename", ""), urdf_path),
                                      _floats(g.get("scale"), 3, 1.0)))
                elif g.tag == "box":
                    out.append(Visual(name, "box", placement, size=_floats(g.get("size"), 3, 0.0)))
                elif g.tag == "cylinder":
                    out.append(Visual(name, "cylinder", placement,
                                      size=(float(g.get("radius", 0)), float(g.get("length", 0)))))
                elif g.tag == "sphere":
                    out.append(Visual(name, "sphere", placement, size=(float(g.get("radius", 0)),)))
            except (ValueError, ModelError) as exc:
                raise ModelError(f"{urdf_path}: link {name!r}: malformed <visual>: {exc}") from None
    return out


def display_available() -> bool:
    """True when a GUI viewer could open a window (``DISPLAY``/``WAYLAND_DISPLAY`` on Linux)."""
    if sys.platform.startswith("linux"):
        return bool(os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"))
    return True


def _blueprint():
    import rerun.blueprint as rrb

    return rrb.Blueprint(
        rrb.Horizontal(
            rrb.Spatial3DView(origin="world", name="robot"),
            rrb.Vertical(
                rrb.TimeSeriesView(origin=f"{PLOTS_ROOT}/fz", name="sole normal force [N]"),
                rrb.TimeSeriesView(origin=f"{PLOTS_ROOT}/effector_error", name="effector error [m]"),
            ),
            column_shares=[3, 2],
        ),
        collapse_panels=True,
    )


def open_recording(rrd_path: str | Path | None = None, *, spawn: bool = False, connect_url: str | None = None,
                   application_id: str = "contactflow", recording_id: str | None = None) -> rr.RecordingStream:
    """Create a rerun recording stream and its sink.

    Args:
        rrd_path: write to this ``.rrd`` file (parent directories are created).
        spawn: spawn a local viewer (needs the ``rerun`` executable and a display).
        connect_url: stream to a running viewer (``rerun+http://host:9876/proxy``).
        application_id: rerun application id.
        recording_id: rerun recording id (default: a fresh one).

    Returns:
        The recording stream (not the global one), with the default layout sent.

    Raises:
        ConfigError: no sink, or more than one, was asked for.
        ContactflowError: the viewer could not be spawned or the file not created.
    """
    if (rrd_path is not None) + bool(spawn) + (connect_url is not None) != 1:
        raise ConfigError("open_recording: give exactly one of rrd_path, spawn=True, connect_url")
    rec = rr.RecordingStream(application_id, recording_id=recording_id, send_properties=False)
    rec.set_log_time_enabled(False)
    rec.set_log_tick_enabled(False)
    try:
        if rrd_path is not None:
            rrd_path = Path(rrd_path)
            rrd_path.parent.mkdir(parents=True, exist_ok=True)
            rec.save(rrd_path, default_blueprint=_blueprint())
        elif spawn:
            rec.spawn(default_blueprint=_blueprint())
        else:
            rec.connect_grpc(connect_url, default_blueprint=_blueprint())
    except (OSError, RuntimeError) as exc:
        raise ContactflowError(f"rerun sink could not be opened: {exc}") from exc
    return rec


class _Columns:
    """Rows of one entity buffered for :meth:`rerun.RecordingStream.send_columns` (one call per flush
    instead of one ``log`` per row: about 10x less CPU for the robot's link transforms).

    Kinds and row payloads: ``transform`` (a: (3,) translation, b: (4,) quaternion xyzw),
    ``arrow`` (a: (3,) origin, b: (3,) vector), ``points`` (a: (k, 3) positions), ``scalar`` (a: float).
    """

    __slots__ = ("kind", "t", "seq", "a", "b")

    def __init__(self, kind: str):
        self.kind = kind
        self.t: list[float] = []
        self.seq: list[int | None] = []
        self.a: list = []
        self.b: list = []

    def send(self, rec: rr.RecordingStream, path: str) -> None:
        idx = [rr.TimeColumn("t", duration=np.asarray(self.t))]
        if all(s is not None for s in self.seq):
            idx.append(rr.TimeColumn("tick", sequence=np.asarray(self.seq, dtype=np.int64)))
        if self.kind == "transform":
            cols = rr.Transform3D.columns(translation=np.asarray(self.a), quaternion=np.asarray(self.b))
        elif self.kind == "arrow":
            cols = rr.Arrows3D.columns(origins=np.asarray(self.a), vectors=np.asarray(self.b))
        elif self.kind == "points":
            cols = rr.Points3D.columns(positions=np.concatenate(self.a)).partition([len(x) for x in self.a])
        else:
            cols = rr.Scalars.columns(scalars=np.asarray(self.a, dtype=np.float64))
        rec.send_columns(path, indexes=idx, columns=cols)
        self.t, self.seq, self.a, self.b = [], [], [], []


class RerunLogger:
    """Logs the state of a contactflow run to rerun (entities: see the module docstring).

    The robot is drawn from its URDF visuals placed by the forward kinematics of the measured
    configuration ``q`` (pinocchio, ``robot.model``: free-flyer, locked joints at 0 rad). A plane
    contact's wrench ``[f; tau]`` in the sole LOCAL frame is drawn as the world force
    ``R_WS f`` at the centre of pressure ``p_WS + R_WS [-tau_y/f_z, tau_x/f_z, 0]`` (at the sole
    origin while ``f_z < 1 N``); a measured point force (``force.<eff>``, world) at the effector.
    The desired wrench of a plane contact uses the desired sole pose ``pose_d.<eff>``; the desired
    force of a point contact is in its world-fixed surface frame ``R_c``, which is not on the
    ports, so it is drawn only for the effectors given in ``surface_rotations``.

    Args:
        robot: a :class:`contactflow.robot.Robot`.
        recording: the rerun recording stream (:func:`open_recording`); its sink is set by the caller.
        force_scale_m_per_n: arrow length per newton [m/N] (default 1 mm/N).
        meshes: draw the URDF meshes; False draws every link as a small box with its axes.
        surface_rotations: point effector -> (3, 3) world-fixed surface frame ``R_c`` of its
            desired force.
        flush_period_s: rows are buffered and sent in columns at least this often [s] (wall
            clock) and whenever ``max_buffered_rows`` are waiting; :meth:`close` sends the rest.
        max_buffered_rows: see ``flush_period_s``.

    Raises:
        ModelError: the URDF cannot be read.
        ConfigError: a non-positive force scale or flush setting.
    """

    def __init__(self, robot, recording: rr.RecordingStream, *, force_scale_m_per_n: float = 1e-3,
                 meshes: bool = True, surface_rotations: Mapping[str, np.ndarray] | None = None,
                 flush_period_s: float = 0.5, max_buffered_rows: int = 20000):
        if not (np.isfinite(force_scale_m_per_n) and force_scale_m_per_n > 0):
            raise ConfigError(f"force_scale_m_per_n must be > 0, got {force_scale_m_per_n}")
        if not (flush_period_s > 0 and max_buffered_rows >= 1):
            raise ConfigError(f"flush_period_s must be > 0 and max_buffered_rows >= 1, got {flush_period_s}, {max_buffered_rows}")
        self.flush_period_s = float(flush_period_s)
        self.max_buffered_rows = int(max_buffered_rows)
        self._buf: dict[str, _Columns] = {}
        self._rows = 0
        self._last_flush = time.monotonic()
        self.robot = robot
        self.rec = recording
        self.force_scale_m_per_n = float(force_scale_m_per_n)
        self.surface_rotations = {k: np.asarray(v, float).reshape(3, 3) for k, v in (surface_rotations or {}).items()}
        self.model = robot.model
        self.data = self.model.createData()
        self.planes = [c for c, s in robot.contacts.items() if s.type == "plane"]
        self.points = [c for c, s in robot.contacts.items() if s.type == "point"]
        #: (link, reason) of every visual drawn as a fallback box.
        self.fallbacks: list[tuple[str, str]] = []
        #: link name -> pinocchio frame id, for the links drawn.
        self.links: dict[str, int] = {}
        self._p_meas: collections.OrderedDict[int, dict[str, np.ndarray]] = collections.OrderedDict()
        self._p_des: collections.OrderedDict[int, dict[str, np.ndarray]] = collections.OrderedDict()
        self._log_model(urdf_visuals(robot.urdf_path), meshes)

    # ------------------------------------------------------------------ static content

    def _log_model(self, visuals: list[Visual], meshes: bool) -> None:
        count: dict[str, int] = collections.defaultdict(int)
        for v in visuals:
            if not self.model.existFrame(v.link):
                self.fallbacks.append((v.link, "no pinocchio frame of that name: not drawn"))
                continue
            self.links.setdefault(v.link, self.model.getFrameId(v.link))
            i = count[v.link]
            count[v.link] += 1
            path = f"{ROBOT_ROOT}/{v.link}/visual_{i}"
            q_xyzw = pin.Quaternion(v.placement.rotation).coeffs()
            scale = v.scale if v.kind == "mesh" else None
            self.rec.log(path, rr.Transform3D(translation=v.placement.translation, quaternion=rr.Quaternion(xyzw=q_xyzw),
                                              scale=scale), static=True)
            reason = None
            if v.kind == "mesh":
                if not meshes:
                    reason = "meshes disabled"
                elif v.mesh_path is None:
                    reason = "mesh file not found"
                elif v.mesh_path.suffix.lower() not in MESH_SUFFIXES:
                    reason = f"mesh format {v.mesh_path.suffix} not supported by rerun"
                else:
                    self.rec.log(path, rr.Asset3D(path=v.mesh_path, albedo_factor=_GREY), static=True)
            elif v.kind == "box":
                self.rec.log(path, rr.Boxes3D(half_sizes=[np.asarray(v.size) / 2], colors=[_GREY]), static=True)
            elif v.kind == "cylinder":
                self.rec.log(path, rr.Cylinders3D(radii=[v.size[0]], lengths=[v.size[1]], colors=[_GREY]), static=True)
            elif v.kind == "sphere":
                self.rec.log(path, rr.Ellipsoids3D(half_sizes=[[v.size[0]] * 3], colors=[_GREY]), static=True)
            if reason is not None:
                self.fallbacks.append((v.link, reason))
                self.rec.log(path, rr.Boxes3D(half_sizes=[[_FALLBACK_HALF_SIZE_M] * 3], colors=[_GREY]), static=True)
                self.rec.log(f"{ROBOT_ROOT}/{v.link}", rr.TransformAxes3D(0.1), static=True)
        for c, spec in self.robot.contacts.items():  # links that carry a contact but have no visual
            link = self.model.frames[spec.frame_id].name
            self.links.setdefault(link, spec.frame_id)
        if self.fallbacks:
            reasons = sorted({r for _, r in self.fallbacks})
            log.warning("%d robot visual(s) drawn as boxes/axes instead of meshes (%s)", len(self.fallbacks), "; ".join(reasons))
        self.rec.log("world/ground", rr.Boxes3D(centers=[[0, 0, -0.005]], half_sizes=[[1.0, 1.0, 0.005]],
                                                 colors=[(90, 90, 90, 80)]), static=True)
        series = (("measured", _MEASURED), ("desired", _DESIRED), ("filtered", (60, 110, 230)))
        for c in self.planes:
            for kind, color in series:
                self.rec.log(f"{PLOTS_ROOT}/fz/{c}/{kind}", rr.SeriesLines(colors=[color], names=[f"{c} {kind}"]), static=True)
        names = list(self.robot.contacts)
        for c in names:
            self.rec.log(f"{PLOTS_ROOT}/effector_error/{c}", rr.SeriesLines(names=[c]), static=True)
            for kind, color in (("measured", _MEASURED), ("desired", _DESIRED)):
                self.rec.log(f"{WRENCH_ROOT}/{c}/{kind}", rr.Arrows3D.from_fields(colors=[color], radii=[0.008]), static=True)
        for kind, color in (("measured", _MEASURED), ("desired", _DESIRED)):
            self.rec.log(f"{EFFECTOR_ROOT}/{kind}", rr.Points3D.from_fields(labels=names, colors=[color], radii=[0.015]),
                         static=True)

    # ------------------------------------------------------------------ buffered rows

    def _row(self, path: str, kind: str, t: float, seq: int | None, a, b=None) -> None:
        buf = self._buf.get(path)
        if buf is None:
            buf = self._buf[path] = _Columns(kind)
        buf.t.append(float(t))
        buf.seq.append(None if seq is None else int(seq))
        buf.a.append(a)
        if b is not None:
            buf.b.append(b)
        self._rows += 1

    def _maybe_flush(self) -> None:
        if self._rows >= self.max_buffered_rows or time.monotonic() - self._last_flush >= self.flush_period_s:
            self.flush()

    def flush(self) -> None:
        """Send the buffered rows to the sink (done every ``flush_period_s`` and on :meth:`close`)."""
        for path, buf in self._buf.items():
            if buf.t:
                buf.send(self.rec, path)
        self._rows = 0
        self._last_flush = time.monotonic()

    def close(self) -> None:
        """Send the buffered rows, flush and close the sink (the ``.rrd`` file is complete afterwards)."""
        self.flush()
        self.rec.flush()
        self.rec.disconnect()

    # ------------------------------------------------------------------ messages

    def _field(self, msg: Mapping[str, np.ndarray], name: str, size: int, port: str, required: bool = False):
        v = msg.get(name)
        if v is None:
            if required:
                raise ContractError(f"{port}: missing field {name!r}")
            return None
        v = np.asarray(v, dtype=np.float64).reshape(-1)
        if v.size != size:
            raise ContractError(f"{port}: field {name!r} has {v.size} values, expected {size}")
        if not np.all(np.isfinite(v)):
            raise ContractError(f"{port}: non-finite value(s) in field {name!r}")
        return v

    def _arrow(self, path: str, t: float, seq: int | None, p_W: np.ndarray, R_WS: np.ndarray, wrench: np.ndarray) -> None:
        f, tau = wrench[:3], wrench[3:6]
        cop = np.zeros(3)
        if f[2] > 1.0:
            cop[:2] = np.clip([-tau[1] / f[2], tau[0] / f[2]], -0.2, 0.2)
        self._row(path, "arrow", t, seq, p_W + R_WS @ cop, R_WS @ f * self.force_scale_m_per_n)

    def _pair(self, t: float, seq: int | None, mine: collections.OrderedDict, other: collections.OrderedDict,
              p: dict[str, np.ndarray], mine_is_measured: bool) -> None:
        key = -1 if seq is None else int(seq)
        if key in other:
            q = other.pop(key)
            meas, des = (p, q) if mine_is_measured else (q, p)
            for c in self.robot.contacts:
                if c in meas and c in des:
                    self._row(f"{PLOTS_ROOT}/effector_error/{c}", "scalar", t, seq, float(np.linalg.norm(meas[c] - des[c])))
        else:
            mine[key] = p
            while len(mine) > 64:
                mine.popitem(last=False)

    def log_sensors(self, sensors: Mapping[str, np.ndarray], t: float, seq: int | None = None) -> None:
        """Log a ``sensors`` message: the robot pose, measured wrenches, effector positions, fz.

        Args:
            sensors: field name -> values (``q`` (nq,) is required; ``wrench.<plane eff>`` (6,)
                [f; tau] in the sole LOCAL frame [N, N m] and ``force.<point eff>`` (3,) world [N]
                are drawn when present).
            t: time [s].
            seq: tick index (pairs the effector error with the ``desired`` message of the same tick).

        Raises:
            ContractError: ``q`` missing, or a field of the wrong size or non-finite.
        """
        q = self._field(sensors, "q", self.model.nq, "sensors", required=True)
        fields = {}
        for c, spec in self.robot.contacts.items():  # validate everything before logging anything
            if spec.type == "plane":
                fields[c] = self._field(sensors, f"wrench.{c}", 6, "sensors")
            else:
                f = self._field(sensors, f"force.{c}", 3, "sensors")
                fields[c] = None if f is None else np.r_[f, 0.0, 0.0, 0.0]
        pin.framesForwardKinematics(self.model, self.data, q)
        for link, fid in self.links.items():
            M = self.data.oMf[fid]
            self._row(f"{ROBOT_ROOT}/{link}", "transform", t, seq, M.translation.copy(), pin.Quaternion(M.rotation).coeffs().copy())
        p = {}
        for c, spec in self.robot.contacts.items():
            M = self.data.oMf[spec.frame_id]
            p[c] = M.translation.copy()
            w = fields[c]
            if w is None:
                continue
            R = M.rotation if spec.type == "plane" else np.eye(3)
            self._arrow(f"{WRENCH_ROOT}/{c}/measured", t, seq, M.translation, R, w)
            if spec.type == "plane":
                self._row(f"{PLOTS_ROOT}/fz/{c}/measured", "scalar", t, seq, float(w[2]))
        self._row(f"{EFFECTOR_ROOT}/measured", "points", t, seq, np.array([p[c] for c in self.robot.contacts]))
        self._pair(t, seq, self._p_meas, self._p_des, p, True)
        self._maybe_flush()

    def log_desired(self, desired: Mapping[str, np.ndarray], t: float, seq: int | None = None) -> None:
        """Log a ``desired`` message: desired effector positions, desired wrenches, desired fz.

        Args:
            desired: field name -> values (``pose_d.<eff>`` (7,) world [p; quat xyzw] [m],
                ``lam_d.<eff>`` (6,) [N, N m], sole LOCAL / surface frame); absent fields are skipped.
            t: time [s].
            seq: tick index.

        Raises:
            ContractError: a field of the wrong size or non-finite.
        """
        poses = {c: self._field(desired, f"pose_d.{c}", 7, "desired") for c in self.robot.contacts}
        lams = {c: self._field(desired, f"lam_d.{c}", 6, "desired") for c in self.robot.contacts}
        for c, spec in self.robot.contacts.items():
            pose, lam = poses[c], lams[c]
            if lam is None:
                continue
            if spec.type == "plane":
                self._row(f"{PLOTS_ROOT}/fz/{c}/desired", "scalar", t, seq, float(lam[2]))
                if pose is not None:
                    R = pin.Quaternion(np.array(pose[3:7])).normalized().toRotationMatrix()
                    self._arrow(f"{WRENCH_ROOT}/{c}/desired", t, seq, pose[:3], R, lam)
            elif c in self.surface_rotations and pose is not None:
                self._arrow(f"{WRENCH_ROOT}/{c}/desired", t, seq, pose[:3], self.surface_rotations[c], np.r_[lam[:3], 0, 0, 0])
        p = {c: pose[:3].copy() for c, pose in poses.items() if pose is not None}
        if p:
            if len(p) == len(self.robot.contacts):
                self._row(f"{EFFECTOR_ROOT}/desired", "points", t, seq, np.array([p[c] for c in self.robot.contacts]))
            self._pair(t, seq, self._p_des, self._p_meas, p, False)
        self._maybe_flush()

    def log_controller_state(self, state: Mapping[str, np.ndarray], t: float, seq: int | None = None) -> None:
        """Log a ``controller_state`` message: filtered measured fz (``lam_tilde``) [N] and step time [s].

        Raises:
            ContractError: a field of the wrong size or non-finite.
        """
        lams = {c: self._field(state, f"lam_tilde.{c}", 6, "controller_state") for c in self.planes}
        st = self._field(state, "solve_time", 1, "controller_state")
        for c, lam in lams.items():
            if lam is not None:
                self._row(f"{PLOTS_ROOT}/fz/{c}/filtered", "scalar", t, seq, float(lam[2]))
        if st is not None:
            self._row(f"{PLOTS_ROOT}/solve_time", "scalar", t, seq, float(st[0]))
        self._maybe_flush()


# ---------------------------------------------------------------------- offline conversion

def _find_stream(rec, contract: str, preferred: str) -> str | None:
    streams = rec.manifest.get("streams", {})
    if preferred in streams:
        return preferred
    hits = sorted(n for n, e in streams.items() if e.get("contract") == contract)
    return hits[0] if hits else None


def log_recording(run_dir: str | Path, rrd_path: str | Path, *, every: int = 10, robot=None, meshes: bool = True,
                  force_scale_m_per_n: float = 1e-3, progress: Callable[[int, int], None] | None = None,
                  allow_truncated: bool = False, warn: Callable[[str], None] = lambda line: None) -> Path:
    """Convert a recorded run into an ``.rrd`` file (open it with ``rerun FILE.rrd``).

    The ticks of the ``sensors`` stream (``mujoco_driver.sensors``, else the stream whose contract
    is ``sensors``) are logged every ``every`` ticks, with the ``desired`` and ``controller_state``
    messages of the same ticks when the run recorded them.

    Args:
        run_dir: the run directory (``recordings/<run>/``).
        rrd_path: the ``.rrd`` file to write.
        every: log one tick in ``every`` (>= 1).
        robot: the robot (default: ``load_robot`` of the manifest's ``robot``, else ``talos``).
        meshes: draw the URDF meshes (see :class:`RerunLogger`).
        force_scale_m_per_n: arrow length per newton [m/N].
        progress: called as ``progress(done, total)`` every few hundred ticks.
        allow_truncated: view the salvaged prefix of a damaged stream (``warn`` gets its line).
        warn: called with one line per damaged stream viewed.

    Returns:
        The ``.rrd`` path.

    Raises:
        RecordingError: the run is missing, holds no ``sensors`` stream, or a stream it views is damaged
            (truncated) and not ``allow_truncated``.
        ConfigError: ``every`` < 1.
        ContractError: a recorded message does not match the robot (e.g. ``q`` of the wrong size).
    """
    from contactflow.recording.store import RecordingError, read_recording, refuse_damaged

    if int(every) < 1:
        raise ConfigError(f"every must be >= 1, got {every}")
    rec = read_recording(run_dir)
    s_name = _find_stream(rec, "sensors", "mujoco_driver.sensors")
    if s_name is None:
        raise RecordingError(f"{rec.path}: no sensors stream to view; streams: {rec.stream_names}")
    if robot is None:
        from contactflow.robot import load_robot

        robot = load_robot(rec.manifest.get("robot") or "talos")
    others = {}
    for contract, preferred in (("desired", "seiko_retargeting.desired"), ("controller_state", "seiko_controller.state")):
        name = _find_stream(rec, contract, preferred)
        if name is not None:
            st = rec.stream(name)
            others[contract] = (st, {int(s): i for i, s in enumerate(st.seq)})
    sensors = rec.stream(s_name)
    for line in refuse_damaged([sensors, *(st for st, _ in others.values())], allow_truncated):
        warn(line)

    def fields(stream, i):
        row, out, j = stream.values[i], {}, 0
        for fname, size in stream.layout:
            out[fname] = row[j:j + size]
            j += size
        return out

    rrd_path = Path(rrd_path)
    rr_rec = open_recording(rrd_path, recording_id=rec.path.name)
    logger = RerunLogger(robot, rr_rec, force_scale_m_per_n=force_scale_m_per_n, meshes=meshes)
    try:
        last = None
        n = len(sensors)
        for i in range(n):
            seq = int(sensors.seq[i])
            if last is not None and seq - last < every and not sensors.finished[i]:
                continue
            last = seq
            t = float(sensors.t[i])
            logger.log_sensors(fields(sensors, i), t, seq)
            if "desired" in others and seq in others["desired"][1]:
                st, idx = others["desired"]
                logger.log_desired(fields(st, idx[seq]), float(st.t[idx[seq]]), seq)
            if "controller_state" in others and seq in others["controller_state"][1]:
                st, idx = others["controller_state"]
                logger.log_controller_state(fields(st, idx[seq]), float(st.t[idx[seq]]), seq)
            if progress is not None and i % 500 == 0:
                progress(i, n)
        if progress is not None:
            progress(n, n)
    finally:
        logger.close()
    return rrd_path

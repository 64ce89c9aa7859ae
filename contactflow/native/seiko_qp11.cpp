// contactflow native kernel: the per-step arithmetic of the SEIKO stages.
//
// SEIKO RA-L 2024 (Rouxel et al.) §IV-B/C, eqs. (1)-(2), (5), (7), (11b)-(11i); shared/reference/seiko.md
// §2.4, §6.2. The same computation, row for row, as contactflow/seiko/controller_qp.py
// (Qp11Mixin._prepare_qp11, _assemble_qp11, _integrate), contactflow/seiko/equilibrium.py
// (equilibrium_terms, pose_error_local), the Controller's filters (13) and (12)
// (contactflow/seiko/filters.py: ComplementaryWrenchFilterBank.update, TorqueLimitAdapter.update) and
// the kinematics at the start of SeikoRetargeting.step (contactflow/seiko/retargeting.py), which stay
// the reference: tests/test_seiko_native.py runs
// both on the same steps and compares them. The QP itself is solved in Python (daqp or
// quadprog, with the status and residual checks of contactflow.qp.BoxQP), in the buffers this
// kernel writes.
//
// Built on first use by contactflow/native/__init__.py (g++ against the pinocchio of the `pin`
// wheel and the Eigen headers of `cmeel-eigen`) and called through ctypes: plain C entry points,
// every array a row-major float64 buffer owned by Python (numpy), every error a message in `err`
// and a non-zero return, never an exception across the C boundary.

#include <pinocchio/multibody.hpp>
#include <pinocchio/algorithm/centroidal.hpp>
#include <pinocchio/algorithm/frames.hpp>
#include <pinocchio/algorithm/jacobian.hpp>
#include <pinocchio/algorithm/joint-configuration.hpp>
#include <pinocchio/algorithm/kinematics.hpp>
#include <pinocchio/algorithm/rnea.hpp>
#include <pinocchio/algorithm/rnea-derivatives.hpp>
#include <pinocchio/serialization.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

// The kernel calls libpinocchio_default's instantiations on objects it lays out itself: Eigen's
// alignment must be the wheel's (x86-64 SSE2: 16 bytes; no -march / -mavx flags).
static_assert(EIGEN_MAX_STATIC_ALIGN_BYTES == 16, "build without target flags: Eigen's alignment must match the pin wheel's");

#define CF_API extern "C" __attribute__((visibility("default")))

namespace {

using pinocchio::Data;
using pinocchio::Force;
using pinocchio::Model;
using pinocchio::SE3;
using RowMat = Eigen::Matrix<double, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
using MapMat = Eigen::Map<RowMat>;
using MapVec = Eigen::Map<Eigen::VectorXd>;
using Mat3 = Eigen::Matrix3d;
using Vec3 = Eigen::Vector3d;
using Mat3R = Eigen::Matrix<double, 3, 3, Eigen::RowMajor>;

void set_err(char* err, int errlen, const std::string& msg) {
  if (err && errlen > 0) {
    std::snprintf(err, static_cast<size_t>(errlen), "%s", msg.c_str());
  }
}

struct Kernel {
  Model model;
};

// A contact whose wrench enters the equilibrium: effector index (its rows in lam_rows / R_c
// rows), frame, plane?, parent joint, placement in the parent, first row in the stacked wrench.
struct ContactRef {
  int eff, frame, plane, parent, row;
  SE3 placement;
};

// Scratch of equilibrium_terms.
struct EqScratch {
  pinocchio::container::aligned_vector<Force> fext;
  std::vector<int> touched;
  Eigen::MatrixXd J6, J6b;
  void resize(const Model& model) {
    fext.assign(model.njoints, Force::Zero());
    J6 = Eigen::MatrixXd::Zero(6, model.nv);
    J6b = Eigen::MatrixXd::Zero(6, model.nv);
  }
};

// One contact layout (which effectors are enabled), as Qp11Workspace holds it in Python.
struct Layout {
  const Model* model;
  Data data;    // at q_flex after prepare (joint Jacobians, frame placements)
  Data data_d;  // at q_d during assemble
  int nq, nv, n, n_eff, m, nx, n_eq, n_wp;
  // enabled contacts, in robot-file order
  std::vector<ContactRef> contacts;
  // (11c) pose rows: effector index, frame, position rows?, rotation rows?, first row
  std::vector<int> pose_eff, pose_frame, pose_pos, pose_rot, pose_row;
  // constants
  Eigen::VectorXd w_pose, w_wrench, H_const_diag, K, K_inv, theta_min, theta_max, ineq_dt_K;
  double dt, w_e, w_d, s, L, gain_pose;
  // Python-owned buffers (row-major)
  double *H, *g, *A, *lo, *hi, *r, *M;
  double *offset, *lam_flex, *lam_flex_dot, *dmin, *dmax, *theta_cmd_dot, *effort, *R_c, *io;
  // io offsets
  int io_q_flex, io_q_d, io_tau_lim, io_targets, io_rise, io_x, io_tau_flex, io_bias, io_c_vec, io_q_out;
  // scratch
  RowMat T, H0, J_pose, WJ_pose, Jc;
  Eigen::MatrixXd dr_dq, J6;
  EqScratch eq;
  Eigen::VectorXd e_pose, t, offset_x0, tmp_n, tmp_nv, v_tan;

  explicit Layout(const Model& mdl) : model(&mdl), data(mdl), data_d(mdl) {}
};

// pose_error_local: D = current^-1 target; position R^T (p_t - p), rotation log3(R^T R_t).
inline void pose_error_local(const SE3& target, const SE3& current, double* pos, double* rot) {
  const SE3 D = current.actInv(target);
  if (pos) {
    pos[0] = D.translation()[0];
    pos[1] = D.translation()[1];
    pos[2] = D.translation()[2];
  }
  if (rot) {
    const Vec3 w = pinocchio::log3(D.rotation());
    rot[0] = w[0];
    rot[1] = w[1];
    rot[2] = w[2];
  }
}

inline Mat3 R_c_of(const Layout& L, int eff) {
  return Eigen::Map<const Mat3R>(L.R_c + 9 * eff);
}

inline Mat3 skew(const Vec3& v) {
  Mat3 S;
  S << 0.0, -v[2], v[1], v[2], 0.0, -v[0], -v[1], v[0], 0.0;
  return S;
}

// contactflow.seiko.equilibrium.equilibrium_terms (seiko.md §2.2-2.4): r = g(q) - J^T lam (nv),
// dr/dq (nv, nv) with every wrench frozen in its expression frame (planes LOCAL, points R_c), the
// stacked contact Jacobian J (m, nv); leaves data with the joint Jacobians at q and the placements
// of the contact frames and of `frames` (the Python updates them all: the same values).
void equilibrium_terms(const Model& model, Data& data, const Eigen::Ref<const Eigen::VectorXd>& q,
                       const std::vector<ContactRef>& contacts, const double* lam_rows, const double* R_c_rows,
                       const std::vector<int>& frames, EqScratch& S, double* r, Eigen::MatrixXd& dr_dq, RowMat& Jc) {
  bool points = false;
  for (const auto& c : contacts) points = points || !c.plane;
  if (points) {  // a point force is frozen in R_c: its LOCAL value needs the frame placement at q
    pinocchio::forwardKinematics(model, data, q);
    for (const auto& c : contacts) {
      if (!c.plane) pinocchio::updateFramePlacement(model, data, c.frame);
    }
  }
  S.touched.clear();
  for (const auto& c : contacts) {
    const double* lam = lam_rows + 6 * c.eff;
    Force f_local;
    if (c.plane) {
      f_local = Force(Vec3(lam[0], lam[1], lam[2]), Vec3(lam[3], lam[4], lam[5]));
    } else {
      const Vec3 lw = Eigen::Map<const Mat3R>(R_c_rows + 9 * c.eff) * Vec3(lam[0], lam[1], lam[2]);
      f_local = Force(data.oMf[c.frame].rotation().transpose() * lw, Vec3::Zero());
    }
    if (std::find(S.touched.begin(), S.touched.end(), c.parent) != S.touched.end()) {
      S.fext[c.parent] = S.fext[c.parent] + c.placement.act(f_local);
    } else {
      S.touched.push_back(c.parent);
      S.fext[c.parent] = c.placement.act(f_local);
    }
  }
  struct Reset {
    EqScratch& S;
    ~Reset() {
      for (int j : S.touched) S.fext[j].setZero();
    }
  } reset{S};
  // the derivatives' backward pass also leaves the static torque g(q) - sum J^T f in data.tau (the
  // Python reference calls computeStaticTorque for it: the same value to ~1e-13)
  dr_dq.setZero();
  pinocchio::computeStaticTorqueDerivatives(model, data, q, S.fext, dr_dq);
  MapVec(r, model.nv) = data.tau;
  for (const auto& c : contacts) pinocchio::updateFramePlacement(model, data, c.frame);
  for (int f : frames) pinocchio::updateFramePlacement(model, data, f);
  // stacked contact Jacobian J; point contacts add the rotation term of seiko.md §2.4
  for (const auto& c : contacts) {
    if (c.plane) {
      S.J6.setZero();
      pinocchio::getFrameJacobian(model, data, c.frame, pinocchio::LOCAL, S.J6);
      Jc.middleRows(c.row, 6) = S.J6;
    } else {
      const Mat3 Rc = Eigen::Map<const Mat3R>(R_c_rows + 9 * c.eff);
      const double* lam = lam_rows + 6 * c.eff;
      const Vec3 f_l = data.oMf[c.frame].rotation().transpose() * (Rc * Vec3(lam[0], lam[1], lam[2]));
      S.J6.setZero();
      pinocchio::getFrameJacobian(model, data, c.frame, pinocchio::LOCAL_WORLD_ALIGNED, S.J6);
      Jc.middleRows(c.row, 3) = Rc.transpose() * S.J6.topRows(3);
      S.J6b.setZero();
      pinocchio::getFrameJacobian(model, data, c.frame, pinocchio::LOCAL, S.J6b);
      dr_dq.noalias() -= S.J6b.topRows(3).transpose() * (skew(f_l) * S.J6b.bottomRows(3));
    }
  }
}

// Qp11Mixin._prepare_qp11.
void prepare(Layout& L) {
  const Model& model = *L.model;
  Data& data = L.data;
  const int nv = L.nv, n = L.n, m = L.m, nx = L.nx;
  const MapVec q(L.io + L.io_q_flex, L.nq);
  equilibrium_terms(model, data, q, L.contacts, L.lam_flex, L.R_c, L.pose_frame, L.eq, L.r, L.dr_dq, L.Jc);
  // T = [dr/dq + S K S^T | -J^T] (5)
  RowMat& T = L.T;
  T.leftCols(nv) = L.dr_dq;
  for (int j = 0; j < n; ++j) T(6 + j, 6 + j) += L.K[j];
  if (m) T.rightCols(m) = -L.Jc.transpose();
  // M = K^-1 T_J (7), into the Python buffer
  MapMat M(L.M, n, nx);
  M = L.K_inv.asDiagonal() * T.bottomRows(n);
  // H0 = (w_e + w_d dt^2) M^T M + constant diagonal + (11c) pose rows
  // (symmetric: the lower triangle as a rank-n update, mirrored)
  L.H0.setZero();
  L.H0.selfadjointView<Eigen::Lower>().rankUpdate(M.transpose(), L.w_e + L.w_d * L.dt * L.dt);
  L.H0.triangularView<Eigen::StrictlyUpper>() = L.H0.transpose();
  L.H0.diagonal() += L.H_const_diag;
  if (L.n_wp) {
    for (size_t k = 0; k < L.pose_eff.size(); ++k) {
      L.J6.setZero();
      pinocchio::getFrameJacobian(model, data, L.pose_frame[k], pinocchio::LOCAL, L.J6);
      const int r0 = L.pose_row[k];
      const bool pos = L.pose_pos[k], rot = L.pose_rot[k];
      const int src = pos ? 0 : 3;
      const int rows = 3 * (pos + rot);
      L.J_pose.middleRows(r0, rows) = L.J6.middleRows(src, rows);
    }
    L.WJ_pose = L.w_pose.asDiagonal() * L.J_pose;
    L.H0.topLeftCorner(nv, nv).noalias() += L.J_pose.transpose() * L.WJ_pose;
  }
  // rows: (11g) contacts J, (11f) base T_B, (11h) s dt M, (11i) s dt T_J - s dt K on the joint diagonal
  MapMat A(L.A, L.n_eq + 2 * n, nx);
  if (m) A.block(0, 0, m, nv) = L.Jc;
  A.middleRows(m, 6) = T.topRows(6);
  A.middleRows(L.n_eq, n) = (L.s * L.dt) * M;
  A.middleRows(L.n_eq + n, n) = (L.s * L.dt) * T.bottomRows(n);
  for (int j = 0; j < n; ++j) A(L.n_eq + n + j, 6 + j) -= L.ineq_dt_K[j];
}

// Qp11Mixin._solve_qp11 up to the solve.
void assemble(Layout& L) {
  const Model& model = *L.model;
  const int nv = L.nv, n = L.n, m = L.m, nx = L.nx;
  const double dt = L.dt;
  const double* q_d = L.io + L.io_q_d;
  const Eigen::Map<const Eigen::VectorXd> theta_d(q_d + 7, n);
  const Eigen::Map<const Eigen::VectorXd> q_flex(L.io + L.io_q_flex, L.nq);
  MapVec offset(L.offset, n), dmin(L.dmin, n), dmax(L.dmax, n);
  MapVec tau_flex(L.io + L.io_tau_flex, n), c_vec(L.io + L.io_c_vec, n);
  tau_flex = L.K.cwiseProduct(theta_d + offset - q_flex.tail(n));
  dmin = L.theta_min - theta_d;
  dmax = L.theta_max - theta_d;
  // t = r - S tau_flex (5); c = K^-1 t_J; offset + c: the offset after this step for x = 0
  L.t = MapVec(L.r, nv);
  L.t.tail(n) -= tau_flex;
  c_vec = L.K_inv.cwiseProduct(L.t.tail(n));
  L.offset_x0 = offset + c_vec;
  MapMat H(L.H, nx, nx);
  H = L.H0;
  const MapMat M(L.M, n, nx);
  MapVec g(L.g, nx);
  L.tmp_n = L.offset_x0 * (L.w_d * dt) + c_vec * (L.w_e / dt);
  g.noalias() = M.transpose() * L.tmp_n;
  if (m) g.tail(m) -= L.w_wrench.cwiseProduct(MapVec(L.effort, m));
  // (11c) pose rows towards FK(q_d), LOCAL errors; the release rise raises a position target
  const auto& oMf = L.data.oMf;
  if (L.n_wp) {
    pinocchio::forwardKinematics(model, L.data_d, Eigen::Map<const Eigen::VectorXd>(q_d, L.nq));
    for (size_t k = 0; k < L.pose_eff.size(); ++k) pinocchio::updateFramePlacement(model, L.data_d, L.pose_frame[k]);
    for (size_t k = 0; k < L.pose_eff.size(); ++k) {
      const int fid = L.pose_frame[k];
      const int r0 = L.pose_row[k];
      const bool pos = L.pose_pos[k], rot = L.pose_rot[k];
      double* e = L.e_pose.data() + r0;
      pose_error_local(L.data_d.oMf[fid], oMf[fid], pos ? e : nullptr, rot ? e + 3 * pos : nullptr);
      if (pos) {
        const double rise = L.io[L.io_rise + L.pose_eff[k]];
        if (rise != 0.0) {
          const Mat3& R = oMf[fid].rotation();
          e[0] += rise * R(2, 0);
          e[1] += rise * R(2, 1);
          e[2] += rise * R(2, 2);
        }
      }
    }
    L.tmp_nv.noalias() = L.WJ_pose.transpose() * L.e_pose;
    g.head(nv) -= L.tmp_nv * (L.gain_pose / dt);
  }
  // equalities: (11g) contacts at their frozen targets, (11f) base rows
  for (const ContactRef& c : L.contacts) {
    const int eff = c.eff, row = c.row;
    const double* tg = L.io + L.io_targets + 12 * eff;
    const SE3& cur = oMf[c.frame];
    if (c.plane) {
      const SE3 target(Eigen::Map<const Mat3R>(tg + 3), Vec3(tg[0], tg[1], tg[2]));
      pose_error_local(target, cur, L.lo + row, L.lo + row + 3);
    } else {
      const Vec3 d = Vec3(tg[0], tg[1], tg[2]) - cur.translation();
      Eigen::Map<Vec3>(L.lo + row) = R_c_of(L, eff).transpose() * d;
    }
  }
  for (int i = 0; i < m; ++i) L.lo[i] /= dt;
  for (int i = 0; i < 6; ++i) L.lo[m + i] = L.t[i] / -dt;
  for (int i = 0; i < L.n_eq; ++i) L.hi[i] = L.lo[i];
  // (11h) and the offset bound, one two-sided row per joint; (11i) two-sided; scaled by s
  const double s = L.s;
  const double* tau_lim = L.io + L.io_tau_lim;
  for (int j = 0; j < n; ++j) {
    const int rp = L.n_eq + j, rn = L.n_eq + n + j;
    L.lo[rp] = (std::max(dmin[j], -L.L) - L.offset_x0[j]) * s;
    L.hi[rp] = (std::min(dmax[j], L.L) - L.offset_x0[j]) * s;
    const double tt = tau_flex[j] + L.t[6 + j];
    L.lo[rn] = (tau_lim[j] + tt) * -s;
    L.hi[rn] = (tau_lim[j] - tt) * s;
  }
  double* bias = L.io + L.io_bias;
  bias[0] = L.t.head(6).norm();
  bias[1] = c_vec.norm();
}

// Qp11Mixin._integrate.
void integrate(Layout& L) {
  const int nv = L.nv, n = L.n, nx = L.nx;
  const double dt = L.dt;
  const Eigen::Map<const Eigen::VectorXd> x(L.io + L.io_x, nx);
  const MapMat M(L.M, n, nx);
  MapVec tcd(L.theta_cmd_dot, n);
  tcd.noalias() = M * x;
  tcd += MapVec(L.io + L.io_c_vec, n) / dt;
  const Eigen::Map<const Eigen::VectorXd> q_flex(L.io + L.io_q_flex, L.nq);
  MapVec q_out(L.io + L.io_q_out, L.nq);
  L.v_tan = dt * x.head(nv);
  pinocchio::integrate(*L.model, q_flex, L.v_tan, q_out);
  std::fill(L.lam_flex_dot, L.lam_flex_dot + 6 * L.n_eff, 0.0);
  for (const ContactRef& c : L.contacts) {
    const int dim = c.plane ? 6 : 3;
    const int base = 6 * c.eff;
    for (int i = 0; i < dim; ++i) {
      const double xi = x[nv + c.row + i];
      L.lam_flex_dot[base + i] = xi;
      L.lam_flex[base + i] += dt * xi;
    }
  }
  MapVec off(L.offset, n);
  off += dt * tcd;
  for (int j = 0; j < n; ++j) {
    double o = std::min(std::max(off[j], -L.L), L.L);
    o = std::min(std::max(o, L.dmin[j]), L.dmax[j]);
    off[j] = o;
  }
  const double* q_d = L.io + L.io_q_d;
  MapVec tau_flex(L.io + L.io_tau_flex, n);
  for (int j = 0; j < n; ++j) tau_flex[j] = L.K[j] * (q_d[7 + j] + off[j] - q_out[7 + j]);
}

// The kinematics and equilibrium terms of one Retargeting step (SeikoRetargeting.step, QP (9)):
// centroidal momentum map A_G (6, nv), equilibrium terms (r, dr/dq, J) of the enabled contacts, and
// the LOCAL_WORLD_ALIGNED Jacobian (6, nv) and world pose of every effector frame, at q.
struct Kinematics {
  const Model* model;
  Data data;
  int nq, nv, n_eff, m;
  std::vector<ContactRef> contacts;
  std::vector<int> frames;
  EqScratch eq;
  Eigen::MatrixXd dr_dq, J6;
  RowMat Jc;
  // Python-owned buffers: q (nq), lam rows (n_eff, 6), R_c rows (n_eff, 9); out: A_G (6, nv),
  // r (nv), dr_dq (nv, nv), J (m, nv), J_frames (n_frames, 6, nv), poses (n_frames, 12: p, R row-major)
  double *q, *lam_rows, *R_c, *A_G, *r, *dr_dq_out, *J, *J_frames, *poses;
  explicit Kinematics(const Model& mdl) : model(&mdl), data(mdl) {}
};

void kinematics(Kinematics& K) {
  const Model& model = *K.model;
  const int nv = K.nv;
  const MapVec q(K.q, K.nq);
  MapMat A_G(K.A_G, 6, nv);
  A_G = pinocchio::computeCentroidalMap(model, K.data, q);
  equilibrium_terms(model, K.data, q, K.contacts, K.lam_rows, K.R_c, K.frames, K.eq, K.r, K.dr_dq, K.Jc);
  MapMat dr_dq(K.dr_dq_out, nv, nv);
  dr_dq = K.dr_dq;
  if (K.m) {
    MapMat J(K.J, K.m, nv);
    J = K.Jc;
  }
  for (size_t i = 0; i < K.frames.size(); ++i) {
    K.J6.setZero();
    pinocchio::getFrameJacobian(model, K.data, K.frames[i], pinocchio::LOCAL_WORLD_ALIGNED, K.J6);
    MapMat Jf(K.J_frames + 6 * nv * i, 6, nv);
    Jf = K.J6;
    const SE3& M = K.data.oMf[K.frames[i]];
    double* pose = K.poses + 12 * i;
    Eigen::Map<Vec3> p(pose);
    Eigen::Map<Mat3R> R(pose + 3);
    p = M.translation();
    R = M.rotation();
  }
}

// The enabled contacts of a layout from the ints the Python passes: n_on effector indices, then n_on
// frame ids, then n_on plane flags, from ints[i] on (i advanced); checked against the model, n_eff
// and m (the stacked wrench's size).
std::vector<ContactRef> read_contacts(const Model& model, const int64_t* ints, int& i, int n_on, int n_eff, int m) {
  std::vector<ContactRef> contacts(n_on);
  for (auto& c : contacts) c.eff = static_cast<int>(ints[i++]);
  for (auto& c : contacts) c.frame = static_cast<int>(ints[i++]);
  for (auto& c : contacts) c.plane = static_cast<int>(ints[i++]);
  int row = 0;
  for (auto& c : contacts) {
    if (c.frame < 0 || c.frame >= static_cast<int>(model.nframes)) throw std::runtime_error("contact frame id out of range");
    if (c.eff < 0 || c.eff >= n_eff) throw std::runtime_error("contact effector index out of range");
    c.parent = static_cast<int>(model.frames[c.frame].parentJoint);
    c.placement = model.frames[c.frame].placement;
    c.row = row;
    row += c.plane ? 6 : 3;
  }
  if (row != m) throw std::runtime_error("contact dimensions do not add up to m");
  return contacts;
}

// The Controller's feedback filters, the same operations as contactflow/seiko/filters.py (the
// reference): the complementary filter (13) on every effector's row (ComplementaryWrenchFilterBank
// .update) and, for (12), the low-pass of tau_read (SeikoController.step) and TorqueLimitAdapter
// .update. Every array is the Controller's or the filters' own buffer (bools: numpy's 1-byte bool).
struct Feedback {
  int64_t n_eff = 0, n = 0;
  double alpha = 0.0, dt = 0.0;                                          // (13)
  double rho = 0.0, eps1 = 0.0, eps2 = 0.0, eps3 = 0.0, lower_nm = 0.0;  // (12)
  double tau_alpha = 0.0;                                                // low-pass of tau_read
  double* state = nullptr;  // (n_eff, 6) lam_tilde, written
  uint8_t* init = nullptr;  // (n_eff,) written
  const double *read = nullptr, *ldot = nullptr, *external = nullptr;    // (n_eff, 6) each
  const uint8_t *active = nullptr, *has_read = nullptr, *has_external = nullptr;  // (n_eff,) each
  const double* tau_urdf = nullptr;                                      // (n,)
  double *limit = nullptr, *ratio = nullptr, *abs_flex = nullptr;       // (n,) written
  const double* tau_in = nullptr;                                        // (n,) tau_read as given
  double* tau_lp = nullptr;                                              // (n,) its low-pass, written
  const double* tau_flex = nullptr;                                      // (n,)
  // flags: [0] use the external rows, [1] tau_read low-pass: 0 none, 1 seed, 2 update,
  // [2] allow_lowering, [3] (out) the adapter's `modified`
  int64_t* flags = nullptr;
};

// ComplementaryWrenchFilterBank.update: per row, the filtered value (active and initialised), the
// reading (no filter), the external value, or unchanged (no reading); all from the old state.
void filter13(Feedback& F) {
  const double a = F.alpha, b = 1.0 - F.alpha, dt = F.dt;
  const bool ext = F.flags[0] != 0;
  for (int64_t i = 0; i < F.n_eff; ++i) {
    const bool hr = F.has_read[i] != 0;
    const bool filt = hr && F.active[i] != 0;
    const bool use_filt = filt && F.init[i] != 0;
    const bool use_ext = ext && filt && F.has_external[i] != 0;
    for (int64_t j = 6 * i; j < 6 * i + 6; ++j) {
      double t = F.ldot[j] * dt;
      t += F.state[j];
      t *= a;
      t += F.read[j] * b;
      double v = F.state[j];
      if (hr) v = F.read[j];
      if (use_filt) v = t;
      if (use_ext) v = F.external[j];
      F.state[j] = v;
    }
    if (hr) F.init[i] = 1;
  }
}

// The low-pass of tau_read, then TorqueLimitAdapter.update (eq. (12) and its lowering extension).
void torque12(Feedback& F) {
  const int64_t n = F.n;
  const double* tr = F.tau_in;
  if (F.flags[1] == 1) {
    for (int64_t i = 0; i < n; ++i) F.tau_lp[i] = F.tau_in[i];
    tr = F.tau_lp;
  } else if (F.flags[1] == 2) {
    const double a = F.tau_alpha, b = 1.0 - F.tau_alpha;
    for (int64_t i = 0; i < n; ++i) {
      double v = F.tau_lp[i] * a;
      v += b * F.tau_in[i];
      F.tau_lp[i] = v;
    }
    tr = F.tau_lp;
  }
  bool over = false;
  for (int64_t i = 0; i < n; ++i) {
    F.ratio[i] = std::fabs(tr[i] / F.tau_urdf[i]);
    over = over || F.ratio[i] > F.rho;
  }
  const double rho_low = F.rho - F.eps3;
  if (!over) {  // only the raise rule can act
    bool below = false;
    for (int64_t i = 0; i < n; ++i) {
      if (F.limit[i] < F.tau_urdf[i]) {
        below = true;
        if (F.ratio[i] < rho_low) F.limit[i] += F.eps2;
      }
    }
    F.flags[3] = below ? 1 : 0;
    return;
  }
  F.flags[3] = 1;
  const bool lowering = F.lower_nm > 0.0 && F.flags[2] != 0;
  for (int64_t i = 0; i < n; ++i) {
    F.abs_flex[i] = std::fabs(F.tau_flex[i]);
    F.abs_flex[i] += F.eps1;
    const bool lower = F.ratio[i] > F.rho && F.abs_flex[i] < F.limit[i];
    const bool raise = !lower && F.ratio[i] < rho_low && F.limit[i] < F.tau_urdf[i];
    if (lowering && F.ratio[i] > F.rho && !lower) F.limit[i] = std::max(F.limit[i] - F.lower_nm, F.eps1);
    if (lower) F.limit[i] = F.abs_flex[i];
    if (raise) F.limit[i] += F.eps2;
  }
}

// Runs fn on the layout; 0, or 1 with the exception's message in err.
int guarded(void (*fn)(Layout&), void* L, const char* stage, char* err, int errlen) {
  try {
    fn(*static_cast<Layout*>(L));
    return 0;
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string(stage) + ": " + e.what());
    return 1;
  } catch (...) {
    set_err(err, errlen, std::string(stage) + ": unknown C++ exception");
    return 1;
  }
}

}  // namespace


CF_API void* cf_kernel_new(const char* model_text, int64_t len, char* err, int errlen) {
  try {
    std::unique_ptr<Kernel> k(new Kernel());
    k->model.loadFromString(std::string(model_text, static_cast<size_t>(len)));
    return k.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string("loading the pinocchio model: ") + e.what());
  } catch (...) {
    set_err(err, errlen, "loading the pinocchio model: unknown C++ exception");
  }
  return nullptr;
}

CF_API void cf_kernel_free(void* k) { delete static_cast<Kernel*>(k); }

CF_API int cf_kernel_sizes(void* k, int64_t* out) {
  const Model& m = static_cast<Kernel*>(k)->model;
  out[0] = m.nq;
  out[1] = m.nv;
  out[2] = m.njoints;
  out[3] = m.nframes;
  return 0;
}

// ints: nq, nv, n, n_eff, m, n_on, n_wp, n_pose, then on_eff, on_frame, on_plane (n_on each),
//       pose_eff, pose_frame, pose_pos, pose_rot, pose_row (n_pose each)
// dbls: dt, w_e, w_d, s, L, gain_pose
// ptrs: w_pose, w_wrench, H_const_diag, K, K_inv, theta_min, theta_max, ineq_dt_K (copied);
//       H, g, A, lo, hi, r, M, offset, lam_flex, lam_flex_dot, dmin, dmax, theta_cmd_dot, effort,
//       R_c, io (kept)
CF_API void* cf_layout_new(void* kp, const int64_t* ints, const double* dbls, const int64_t* ptrs, char* err, int errlen) {
  try {
    const Model& model = static_cast<Kernel*>(kp)->model;
    std::unique_ptr<Layout> L(new Layout(model));
    int i = 0;
    L->nq = static_cast<int>(ints[i++]);
    L->nv = static_cast<int>(ints[i++]);
    L->n = static_cast<int>(ints[i++]);
    L->n_eff = static_cast<int>(ints[i++]);
    L->m = static_cast<int>(ints[i++]);
    const int n_on = static_cast<int>(ints[i++]);
    L->n_wp = static_cast<int>(ints[i++]);
    const int n_pose = static_cast<int>(ints[i++]);
    if (L->nq != model.nq || L->nv != model.nv || L->n != model.nv - 6) {
      throw std::runtime_error("layout sizes do not match the model (nq, nv, n = nv - 6)");
    }
    L->nx = L->nv + L->m;
    L->n_eq = L->m + 6;
    auto take = [&](std::vector<int>& v, int count) {
      v.resize(count);
      for (int k = 0; k < count; ++k) v[k] = static_cast<int>(ints[i++]);
    };
    L->contacts = read_contacts(model, ints, i, n_on, L->n_eff, L->m);
    take(L->pose_eff, n_pose);
    take(L->pose_frame, n_pose);
    take(L->pose_pos, n_pose);
    take(L->pose_rot, n_pose);
    take(L->pose_row, n_pose);
    for (int k = 0; k < n_pose; ++k) {
      if (L->pose_frame[k] < 0 || L->pose_frame[k] >= static_cast<int>(model.nframes)) throw std::runtime_error("pose frame id out of range");
      if (L->pose_eff[k] < 0 || L->pose_eff[k] >= L->n_eff) throw std::runtime_error("pose effector index out of range");
      if (L->pose_row[k] < 0 || L->pose_row[k] + 3 * (L->pose_pos[k] + L->pose_rot[k]) > L->n_wp) {
        throw std::runtime_error("pose rows out of range");
      }
    }
    L->dt = dbls[0];
    L->w_e = dbls[1];
    L->w_d = dbls[2];
    L->s = dbls[3];
    L->L = dbls[4];
    L->gain_pose = dbls[5];
    const int nv = L->nv, n = L->n, m = L->m, nx = L->nx;
    auto vec = [&](int idx, int size) {
      return Eigen::VectorXd(Eigen::Map<const Eigen::VectorXd>(reinterpret_cast<const double*>(ptrs[idx]), size));
    };
    L->w_pose = vec(0, L->n_wp);
    L->w_wrench = vec(1, m);
    L->H_const_diag = vec(2, nx);
    L->K = vec(3, n);
    L->K_inv = vec(4, n);
    L->theta_min = vec(5, n);
    L->theta_max = vec(6, n);
    L->ineq_dt_K = vec(7, n);
    double** bufs[] = {&L->H, &L->g, &L->A, &L->lo, &L->hi, &L->r, &L->M, &L->offset, &L->lam_flex, &L->lam_flex_dot,
                       &L->dmin, &L->dmax, &L->theta_cmd_dot, &L->effort, &L->R_c, &L->io};
    for (int k = 0; k < 16; ++k) *bufs[k] = reinterpret_cast<double*>(ptrs[8 + k]);
    // io: q_flex | q_d | tau_lim | targets (n_eff x 12) | rise (n_eff) | x (nx) | tau_flex | bias (2) | c_vec | q_out
    int o = 0;
    L->io_q_flex = o; o += L->nq;
    L->io_q_d = o; o += L->nq;
    L->io_tau_lim = o; o += n;
    L->io_targets = o; o += 12 * L->n_eff;
    L->io_rise = o; o += L->n_eff;
    L->io_x = o; o += nx;
    L->io_tau_flex = o; o += n;
    L->io_bias = o; o += 2;
    L->io_c_vec = o; o += n;
    L->io_q_out = o;
    L->T = RowMat::Zero(nv, nx);
    L->H0 = RowMat::Zero(nx, nx);
    L->J_pose = RowMat::Zero(L->n_wp, nv);
    L->WJ_pose = RowMat::Zero(L->n_wp, nv);
    L->Jc = RowMat::Zero(m, nv);
    L->dr_dq = Eigen::MatrixXd::Zero(nv, nv);
    L->J6 = Eigen::MatrixXd::Zero(6, nv);
    L->eq.resize(model);
    L->e_pose = Eigen::VectorXd::Zero(L->n_wp);
    L->t = Eigen::VectorXd::Zero(nv);
    L->offset_x0 = Eigen::VectorXd::Zero(n);
    L->tmp_n = Eigen::VectorXd::Zero(n);
    L->tmp_nv = Eigen::VectorXd::Zero(nv);
    L->v_tan = Eigen::VectorXd::Zero(nv);
    return L.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string("building the QP (11) layout: ") + e.what());
  } catch (...) {
    set_err(err, errlen, "building the QP (11) layout: unknown C++ exception");
  }
  return nullptr;
}

CF_API int cf_layout_io_size(void* Lp) {
  const Layout& L = *static_cast<Layout*>(Lp);
  return L.io_q_out + L.nq;
}

CF_API void cf_layout_free(void* L) { delete static_cast<Layout*>(L); }

CF_API int cf_prepare(void* L, char* err, int errlen) { return guarded(prepare, L, "QP (11) prepare", err, errlen); }

CF_API int cf_assemble(void* L, char* err, int errlen) { return guarded(assemble, L, "QP (11) assembly", err, errlen); }

CF_API int cf_integrate(void* L, char* err, int errlen) { return guarded(integrate, L, "QP (11) integration", err, errlen); }

// ints: n_eff, m, n_on, n_frames, then on_eff, on_frame, on_plane (n_on each), frames (n_frames)
// ptrs: q, lam_rows, R_c, A_G, r, dr_dq, J, J_frames, poses (kept)
CF_API void* cf_kinematics_new(void* kp, const int64_t* ints, const int64_t* ptrs, char* err, int errlen) {
  try {
    const Model& model = static_cast<Kernel*>(kp)->model;
    std::unique_ptr<Kinematics> K(new Kinematics(model));
    K->nq = model.nq;
    K->nv = model.nv;
    int i = 0;
    K->n_eff = static_cast<int>(ints[i++]);
    K->m = static_cast<int>(ints[i++]);
    const int n_on = static_cast<int>(ints[i++]);
    const int n_frames = static_cast<int>(ints[i++]);
    K->contacts = read_contacts(model, ints, i, n_on, K->n_eff, K->m);
    for (int k = 0; k < n_frames; ++k) {
      const int fid = static_cast<int>(ints[i++]);
      if (fid < 0 || fid >= static_cast<int>(model.nframes)) throw std::runtime_error("frame id out of range");
      K->frames.push_back(fid);
    }
    double** bufs[] = {&K->q, &K->lam_rows, &K->R_c, &K->A_G, &K->r, &K->dr_dq_out, &K->J, &K->J_frames, &K->poses};
    for (int k = 0; k < 9; ++k) *bufs[k] = reinterpret_cast<double*>(ptrs[k]);
    K->eq.resize(model);
    K->dr_dq = Eigen::MatrixXd::Zero(K->nv, K->nv);
    K->J6 = Eigen::MatrixXd::Zero(6, K->nv);
    K->Jc = RowMat::Zero(K->m, K->nv);
    return K.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string("building the Retargeting kinematics: ") + e.what());
  } catch (...) {
    set_err(err, errlen, "building the Retargeting kinematics: unknown C++ exception");
  }
  return nullptr;
}

CF_API void cf_kinematics_free(void* K) { delete static_cast<Kinematics*>(K); }

CF_API int cf_kinematics(void* K, char* err, int errlen) {
  try {
    kinematics(*static_cast<Kinematics*>(K));
    return 0;
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string("Retargeting kinematics: ") + e.what());
    return 1;
  } catch (...) {
    set_err(err, errlen, "Retargeting kinematics: unknown C++ exception");
    return 1;
  }
}



// ints: n_eff, n; dbls: alpha, dt, rho, eps1, eps2, eps3, lower_nm, tau_alpha;
// ptrs: state, init, read, ldot, external, active, has_read, has_external, tau_urdf, limit, ratio,
// abs_flex, tau_in, tau_lp, tau_flex, flags (kept)
CF_API void* cf_feedback_new(const int64_t* ints, const double* dbls, const int64_t* ptrs, char* err, int errlen) {
  try {
    std::unique_ptr<Feedback> F(new Feedback());
    F->n_eff = ints[0];
    F->n = ints[1];
    if (F->n_eff < 0 || F->n < 0) throw std::runtime_error("negative sizes");
    double* d[] = {&F->alpha, &F->dt, &F->rho, &F->eps1, &F->eps2, &F->eps3, &F->lower_nm, &F->tau_alpha};
    for (int k = 0; k < 8; ++k) *d[k] = dbls[k];
    int k = 0;
    F->state = reinterpret_cast<double*>(ptrs[k++]);
    F->init = reinterpret_cast<uint8_t*>(ptrs[k++]);
    F->read = reinterpret_cast<const double*>(ptrs[k++]);
    F->ldot = reinterpret_cast<const double*>(ptrs[k++]);
    F->external = reinterpret_cast<const double*>(ptrs[k++]);
    F->active = reinterpret_cast<const uint8_t*>(ptrs[k++]);
    F->has_read = reinterpret_cast<const uint8_t*>(ptrs[k++]);
    F->has_external = reinterpret_cast<const uint8_t*>(ptrs[k++]);
    F->tau_urdf = reinterpret_cast<const double*>(ptrs[k++]);
    F->limit = reinterpret_cast<double*>(ptrs[k++]);
    F->ratio = reinterpret_cast<double*>(ptrs[k++]);
    F->abs_flex = reinterpret_cast<double*>(ptrs[k++]);
    F->tau_in = reinterpret_cast<const double*>(ptrs[k++]);
    F->tau_lp = reinterpret_cast<double*>(ptrs[k++]);
    F->tau_flex = reinterpret_cast<const double*>(ptrs[k++]);
    F->flags = reinterpret_cast<int64_t*>(ptrs[k++]);
    return F.release();
  } catch (const std::exception& e) {
    set_err(err, errlen, std::string("building the Controller's filters: ") + e.what());
  } catch (...) {
    set_err(err, errlen, "building the Controller's filters: unknown C++ exception");
  }
  return nullptr;
}

CF_API void cf_feedback_free(void* F) { delete static_cast<Feedback*>(F); }

CF_API int cf_filter13(void* F, char*, int) {
  filter13(*static_cast<Feedback*>(F));
  return 0;
}

CF_API int cf_torque12(void* F, char*, int) {
  torque12(*static_cast<Feedback*>(F));
  return 0;
}

"""Small ONNX policy models built at test or benchmark time (needs the ``onnx`` package: ``[test]``).

No third-party weights are involved: these models have the I/O of a spec (names, shapes,
optional ``dof_names``/``kp``/``kd`` metadata) and a known input -> output function, so a test can
check what the runner fed the model and what it did with the output.

* :func:`mlp_model` -- ``action = W_k tanh(... tanh(W_1 x + b_1) ...) + b_k`` on the flattened
  input, seeded random weights (no hidden layer: an affine map the test can recompute).
* :func:`counter_model` -- ``action = last_action + step`` read back from the input, and NaN once
  that exceeds ``step * nan_after``: a policy that outputs NaN after ``nan_after`` ticks.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Mapping, Sequence

import numpy as np

__all__ = ["counter_model", "mlp_model"]

_OPSET = 17
_IR_VERSION = 8  # loadable by onnxruntime >= 1.14


def _save(graph, path: Path, metadata: Mapping | None) -> Path:
    import onnx
    from onnx import helper

    m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", _OPSET)], producer_name="contactflow.policy.testing")
    m.ir_version = _IR_VERSION
    for k, v in (metadata or {}).items():
        p = m.metadata_props.add()
        p.key, p.value = str(k), v if isinstance(v, str) else json.dumps(v)
    onnx.checker.check_model(m)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    onnx.save(m, str(path))
    return path


def mlp_model(path: str | Path, *, input_name: str, input_shape: Sequence[int], output_name: str = "action",
              n_out: int, hidden: Sequence[int] = (), seed: int = 0, weight_scale: float = 0.1,
              metadata: Mapping | None = None) -> tuple[Path, list[tuple[np.ndarray, np.ndarray]]]:
    """Write an MLP policy with seeded random weights.

    Args:
        path: output ``.onnx`` file.
        input_name, input_shape: the input tensor (float32), e.g. ``"frames", (1, 64, 95)``.
        output_name, n_out: the output tensor, shape (1, n_out).
        hidden: hidden layer widths (tanh); empty = one affine layer.
        seed: weight seed. weight_scale: weights ~ N(0, weight_scale^2 / fan_in).
        metadata: ``metadata_props`` (lists/dicts stored as JSON).

    Returns:
        (path, layers) with layers the list of (W (out, in), b (out,)) float32 arrays.
    """
    from onnx import TensorProto, helper, numpy_helper

    rng = np.random.default_rng(seed)
    n_in = int(np.prod(input_shape))
    sizes = [n_in, *hidden, n_out]
    nodes, inits, layers = [], [], []
    inits.append(numpy_helper.from_array(np.array([1, n_in], dtype=np.int64), "flat_shape"))
    nodes.append(helper.make_node("Reshape", [input_name, "flat_shape"], ["h0"]))
    cur = "h0"
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        W = (rng.standard_normal((b, a)) * weight_scale / np.sqrt(a)).astype(np.float32)
        bias = (rng.standard_normal(b) * weight_scale).astype(np.float32)
        layers.append((W, bias))
        inits += [numpy_helper.from_array(W.T.copy(), f"W{i}"), numpy_helper.from_array(bias, f"b{i}")]
        last = i == len(sizes) - 2
        nodes.append(helper.make_node("Gemm", [cur, f"W{i}", f"b{i}"], [output_name if last else f"z{i}"]))
        if not last:
            nodes.append(helper.make_node("Tanh", [f"z{i}"], [f"h{i + 1}"]))
            cur = f"h{i + 1}"
    graph = helper.make_graph(
        nodes, "mlp_policy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, n_out])],
        initializer=inits,
    )
    return _save(graph, Path(path), metadata), layers


def counter_model(path: str | Path, *, input_name: str, input_shape: Sequence[int], last_action_flat: slice,
                  output_name: str = "action", step: float = 1e-3, nan_after: int | None = None,
                  metadata: Mapping | None = None) -> Path:
    """Write a policy whose action counts ticks through its own ``last_action`` feedback.

    ``action = last_action + step`` (every joint), where ``last_action`` is read at
    ``last_action_flat`` of the flattened input; once ``last_action + step > step (nan_after +
    0.5)`` the action is NaN. With the runner feeding back the accepted action, the outputs of
    ticks 0, 1, ..., nan_after - 1 are ``step, 2 step, ..., nan_after step`` and tick
    ``nan_after`` is the first NaN.

    Args:
        path: output ``.onnx`` file.
        input_name, input_shape: the input tensor.
        last_action_flat: where the newest ``last_action`` term sits in the flattened input.
        output_name: output name (shape (1, n) with n = the slice length).
        step: increment per tick. nan_after: first NaN tick (``None``: never).
        metadata: ``metadata_props``.

    Returns:
        The path.
    """
    from onnx import TensorProto, helper, numpy_helper

    n_in = int(np.prod(input_shape))
    n = last_action_flat.stop - last_action_flat.start
    inits = [
        numpy_helper.from_array(np.array([1, n_in], dtype=np.int64), "flat_shape"),
        numpy_helper.from_array(np.array([last_action_flat.start], dtype=np.int64), "starts"),
        numpy_helper.from_array(np.array([last_action_flat.stop], dtype=np.int64), "ends"),
        numpy_helper.from_array(np.array([1], dtype=np.int64), "axes"),
        numpy_helper.from_array(np.array([step], dtype=np.float32), "step"),
        numpy_helper.from_array(np.array([step * ((nan_after if nan_after is not None else 1e12) + 0.5)], dtype=np.float32), "limit"),
        numpy_helper.from_array(np.array([np.nan], dtype=np.float32), "nan"),
    ]
    nodes = [
        helper.make_node("Reshape", [input_name, "flat_shape"], ["flat"]),
        helper.make_node("Slice", ["flat", "starts", "ends", "axes"], ["prev"]),
        helper.make_node("Add", ["prev", "step"], ["next"]),
        helper.make_node("Greater", ["next", "limit"], ["over"]),
        helper.make_node("Where", ["over", "nan", "next"], [output_name]),
    ]
    graph = helper.make_graph(
        nodes, "counter_policy",
        [helper.make_tensor_value_info(input_name, TensorProto.FLOAT, list(input_shape))],
        [helper.make_tensor_value_info(output_name, TensorProto.FLOAT, [1, n])],
        initializer=inits,
    )
    return _save(graph, Path(path), metadata)

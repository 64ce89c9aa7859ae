"""A thin onnxruntime wrapper for a control policy: one input, one output, metadata.

The session runs on the CPU with a fixed number of intra-op threads (1 by default: a 50 Hz
policy of < 1 MB spends more time waking threads than computing, and the other nodes of the
graph share the cores).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np

from contactflow.errors import ModelError

__all__ = ["OnnxModel", "TensorInfo"]


class TensorInfo:
    """Name, shape and element type of one ONNX graph input or output.

    Attributes:
        name: tensor name.
        shape: tuple of ints, or ``None`` for a dynamic dimension.
        dtype: onnxruntime type string (``"tensor(float)"``...).
    """

    __slots__ = ("name", "shape", "dtype")

    def __init__(self, name: str, shape: tuple, dtype: str):
        self.name = name
        self.shape = tuple(d if isinstance(d, int) and d > 0 else None for d in shape)
        self.dtype = dtype

    def matches(self, shape: tuple[int, ...]) -> bool:
        """True if ``shape`` fits (same rank, equal fixed dimensions; dynamic ones take any size)."""
        return len(shape) == len(self.shape) and all(d is None or d == s for d, s in zip(self.shape, shape))

    def __repr__(self) -> str:
        dims = ", ".join("?" if d is None else str(d) for d in self.shape)
        return f"{self.name!r} ({dims})"


class OnnxModel:
    """An ONNX policy loaded in onnxruntime.

    Args:
        path: the ``.onnx`` file.
        intra_op_threads: onnxruntime intra-op threads (1 = no thread pool wake-ups).

    Attributes:
        path: the model file.
        inputs, outputs: list of :class:`TensorInfo`.
        metadata: the model's ``metadata_props``; values that are JSON are decoded (holosoma stores
            ``dof_names``, ``kp``, ``kd`` as JSON lists).

    Raises:
        ModelError: onnxruntime is missing, or the file is absent or not a valid ONNX model.
    """

    def __init__(self, path: str | Path, *, intra_op_threads: int = 1):
        try:
            import onnxruntime as ort
        except ModuleNotFoundError:
            raise ModelError("onnxruntime is not installed (pip install onnxruntime)") from None
        self.path = Path(path)
        if not self.path.is_file():
            raise ModelError(f"{self.path}: ONNX model file not found")
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = int(intra_op_threads)
        opts.inter_op_num_threads = 1
        opts.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(str(self.path), sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors: name the file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{self.path}: not a loadable ONNX model ({first})") from None
        self.inputs = [TensorInfo(i.name, tuple(i.shape), i.type) for i in self.session.get_inputs()]
        self.outputs = [TensorInfo(o.name, tuple(o.shape), o.type) for o in self.session.get_outputs()]
        self.metadata: dict[str, Any] = {}
        for key, value in self.session.get_modelmeta().custom_metadata_map.items():
            try:
                self.metadata[key] = json.loads(value)
            except (ValueError, TypeError):
                self.metadata[key] = value
        self._in = self.inputs[0].name if self.inputs else None
        self._out = [self.outputs[0].name] if self.outputs else []

    def bind(self, input_name: str, output_name: str) -> None:
        """Select the input fed and the output read by :meth:`run` (names checked by the caller)."""
        self._in = input_name
        self._out = [output_name]

    def run(self, x: np.ndarray) -> np.ndarray:
        """Run one inference.

        Args:
            x: the input tensor (float32, the bound input's shape).

        Returns:
            The bound output tensor (as returned by onnxruntime).

        Raises:
            ModelError: onnxruntime failed (its untyped error's first line, with the file name).
        """
        try:
            return self.session.run(self._out, {self._in: x})[0]
        except Exception as exc:  # noqa: BLE001 - onnxruntime raises its own untyped errors: name the file
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ModelError(f"{self.path.name}: inference failed ({first})") from exc

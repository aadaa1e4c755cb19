#!/usr/bin/env python3
"""Checks one model exported by rumus against onnxruntime, for tests/onnx_export.rs:

    check_model.py MODEL.onnx INPUT.bin INPUT_DTYPE OUTPUT.bin TOLERANCE [INPUT_DIMS OUTPUT_DIMS]

INPUT.bin and OUTPUT.bin hold rumus's input and output, little-endian, in the model's
declared shapes (OUTPUT is f32 or f64), or in INPUT_DIMS and OUTPUT_DIMS (comma-separated)
where given: a model with dynamic axes is run at sizes other than the traced ones. The model must pass `onnx.checker` (full check,
with shape inference), name every initializer once, and give rumus's output under
onnxruntime to within TOLERANCE (absolute, plus the same relative). Exits non-zero with a
message on the first failure.
"""

import sys

import numpy as np
import onnx
import onnxruntime as ort

model_path, input_path, input_dtype, output_path, tolerance = sys.argv[1:6]
tolerance = float(tolerance)
given_dims = [[int(d) for d in arg.split(",") if d] for arg in sys.argv[6:8]]

model = onnx.load(model_path)
onnx.checker.check_model(model, full_check=True)
names = [init.name for init in model.graph.initializer]
duplicates = sorted({n for n in names if names.count(n) > 1})
if duplicates:
    sys.exit(f"initializer names appear twice: {duplicates}")


def shape_of(value_info):
    return [d.dim_value for d in value_info.type.tensor_type.shape.dim]


(graph_input,) = model.graph.input
(graph_output,) = model.graph.output
input_dims, output_dims = given_dims or (shape_of(graph_input), shape_of(graph_output))
x = np.fromfile(input_path, dtype=np.dtype(input_dtype).newbyteorder("<")).reshape(input_dims)
output_type = onnx.helper.tensor_dtype_to_np_dtype(graph_output.type.tensor_type.elem_type)
expected = np.fromfile(output_path, dtype=np.dtype(output_type).newbyteorder("<")).reshape(
    output_dims)

options = ort.SessionOptions()
# Run the graph as written: fusions could hide a node that computes the wrong thing.
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
session = ort.InferenceSession(model_path, options, providers=["CPUExecutionProvider"])
(actual,) = session.run(None, {graph_input.name: x})
if actual.shape != expected.shape:
    sys.exit(f"onnxruntime gives shape {actual.shape}, rumus {expected.shape}")
error = np.abs(actual.astype(np.float64) - expected.astype(np.float64))
bound = tolerance * (1.0 + np.abs(expected.astype(np.float64)))
if not np.all(error <= bound):
    worst = int(np.argmax(error - bound))
    sys.exit(f"onnxruntime and rumus differ by {error.flat[worst]:.3g} at flat index {worst} "
             f"(onnxruntime {actual.flat[worst]}, rumus {expected.flat[worst]}); "
             f"ops: {sorted({n.op_type for n in model.graph.node})}")
print(f"ok: {len(model.graph.node)} nodes, max difference {error.max():.3g}")

//! `onnx_import`: an ONNX model file (`OnnxModel::from_bytes`), then the model run on inputs
//! of the shapes it declares (symbolic axes of size 2), in f32 and, if the model refuses
//! that, in i64 (token ids). What loads must run or refuse its inputs with an error: the
//! graph's shapes, attributes and weights all come from the file.

use rumus::onnx::OnnxModel;
use rumus::{DType, DynTensor};

/// Inputs past this many elements are not run (the fuzzer's time goes to the parser and to
/// the ops' checks, not to arithmetic).
const MAX_INPUT_ELEMENTS: usize = 1 << 16;

pub fn run(bytes: &[u8]) -> rumus::Result<()> {
    let model = OnnxModel::from_bytes(bytes, "fuzz.onnx")?;
    let shapes: Vec<Vec<usize>> = model
        .input_shapes()
        .iter()
        .map(|(_, dims)| dims.iter().map(|d| d.unwrap_or(2)).collect())
        .collect();
    let elements = shapes
        .iter()
        .map(|dims| dims.iter().try_fold(1usize, |n, &d| n.checked_mul(d)))
        .try_fold(0usize, |total, n| total.checked_add(n?));
    if elements.is_none_or(|n| n > MAX_INPUT_ELEMENTS) {
        return Err(super::framing("the model's inputs are too large to run"));
    }
    let inputs = |dtype: DType| -> rumus::Result<Vec<DynTensor>> {
        shapes
            .iter()
            .map(|dims| DynTensor::ones(dims, dtype))
            .collect()
    };
    let floats = inputs(DType::F32)?;
    let outputs = match model.run(&floats.iter().collect::<Vec<_>>()) {
        Ok(outputs) => outputs,
        Err(_) => {
            let ids = inputs(DType::I64)?;
            model.run(&ids.iter().collect::<Vec<_>>())?
        }
    };
    assert_eq!(
        outputs.len(),
        model.output_names().len(),
        "a run returns one tensor per declared output"
    );
    Ok(())
}

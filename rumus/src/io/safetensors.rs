//! Model files in the safetensors format, with PyTorch-style dotted names (`fc1.weight`), so
//! weights move between rumus and PyTorch by name. Loading checks every name and shape before
//! any parameter changes (see `Module::load_state_dict`).

use std::collections::HashMap;
use std::path::Path;

use super::atomic::write_atomic;
use super::safetensors_format::{self, Dtype, TensorToWrite, TensorView};
use crate::error::{Error, Result};
use crate::nn::{LoadOptions, LoadReport, Module, StateDict};
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

pub(super) fn io_error(path: &Path, e: impl std::fmt::Display) -> Error {
    Error::Io {
        path: path.display().to_string(),
        message: e.to_string(),
    }
}

pub(super) fn format_error(path: &Path, message: String) -> Error {
    Error::Format {
        path: path.display().to_string(),
        message,
    }
}

/// Little-endian bytes of a tensor's elements.
pub(super) fn bytes_of(t: &DynTensor) -> Result<(Dtype, Vec<u8>)> {
    Ok(match t.to_contiguous_buffer()? {
        CpuBuffer::F32(v) => (Dtype::F32, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        CpuBuffer::F64(v) => (Dtype::F64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        CpuBuffer::F16(v) => (Dtype::F16, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        CpuBuffer::BF16(v) => (
            Dtype::BF16,
            v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        ),
        CpuBuffer::I64(v) => (Dtype::I64, v.iter().flat_map(|x| x.to_le_bytes()).collect()),
        CpuBuffer::Bool(v) => (Dtype::Bool, v.iter().map(|&b| b as u8).collect()),
    })
}

/// A tensor ready to be written: its name, dtype, dims and little-endian bytes.
pub(super) struct Encoded {
    pub name: String,
    pub dtype: Dtype,
    pub dims: Vec<usize>,
    pub bytes: Vec<u8>,
}

impl Encoded {
    /// The tensor as the writer (and the checkpoint's checksum) sees it.
    pub fn to_write(&self) -> TensorToWrite<'_> {
        TensorToWrite {
            name: &self.name,
            dtype: &self.dtype,
            dims: &self.dims,
            data: &self.bytes,
        }
    }

    /// An error when a GPU tensor cannot be read back (a lost device).
    pub fn new(name: String, t: &DynTensor) -> Result<Self> {
        let (dtype, bytes) = bytes_of(t)?;
        Ok(Encoded {
            name,
            dtype,
            dims: t.dims().to_vec(),
            bytes,
        })
    }
}

/// The bytes of a safetensors file holding `tensors` and `metadata` (none when empty).
pub(super) fn serialize(tensors: &[Encoded], metadata: &HashMap<String, String>) -> Vec<u8> {
    let parts: Vec<TensorToWrite> = tensors.iter().map(Encoded::to_write).collect();
    safetensors_format::serialize(&parts, metadata)
}

/// Writes `state` to `path`, atomically (see [`write_atomic`]): a crash while writing leaves
/// the previous file intact.
pub fn write_state(state: &StateDict, path: impl AsRef<Path>) -> Result<()> {
    let path = path.as_ref();
    let encoded: Vec<Encoded> = state
        .iter()
        .map(|(name, t)| Encoded::new(name.clone(), t))
        .collect::<Result<_>>()?;
    write_atomic(path, &serialize(&encoded, &HashMap::new()))
}

/// The tensor behind `view`. `path` only names the file in errors. Never panics on hostile
/// input: the element count is computed with checked products and compared with the data.
pub(super) fn decode(path: &Path, view: &TensorView) -> Result<DynTensor> {
    let (name, data, dims) = (&view.name, view.data, &view.dims);
    let element_size = match &view.dtype {
        Dtype::Other(tag) => {
            return Err(format_error(
                path,
                format!(
                    "tensor `{name}` has dtype {tag}; rumus reads F32, F64, F16, BF16, I64 and BOOL"
                ),
            ));
        }
        known => known.element_size().expect("rumus's dtypes have sizes"),
    };
    let expected = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .and_then(|count| count.checked_mul(element_size));
    let Some(expected) = expected else {
        return Err(format_error(
            path,
            format!("tensor `{name}` has shape {dims:?}, whose size in bytes overflows"),
        ));
    };
    if data.len() != expected {
        return Err(format_error(
            path,
            format!(
                "tensor `{name}` holds {} bytes, but shape {dims:?} of {} needs {expected}",
                data.len(),
                view.dtype.tag()
            ),
        ));
    }
    let chunks = |size: usize| data.chunks_exact(size);
    let buffer = match view.dtype {
        Dtype::F32 => CpuBuffer::F32(
            chunks(4)
                .map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")))
                .collect(),
        ),
        Dtype::F64 => CpuBuffer::F64(
            chunks(8)
                .map(|c| f64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        Dtype::F16 => CpuBuffer::F16(
            chunks(2)
                .map(|c| half::f16::from_le_bytes(c.try_into().expect("2 bytes")))
                .collect(),
        ),
        Dtype::BF16 => CpuBuffer::BF16(
            chunks(2)
                .map(|c| half::bf16::from_le_bytes(c.try_into().expect("2 bytes")))
                .collect(),
        ),
        Dtype::I64 => CpuBuffer::I64(
            chunks(8)
                .map(|c| i64::from_le_bytes(c.try_into().expect("8 bytes")))
                .collect(),
        ),
        _ => CpuBuffer::Bool(data.iter().map(|&b| b != 0).collect()),
    };
    Ok(DynTensor::from_buffer(buffer, dims))
}

/// Reads every tensor of a safetensors file, in name order.
pub fn read_state(path: impl AsRef<Path>) -> Result<StateDict> {
    let path = path.as_ref();
    let bytes = std::fs::read(path).map_err(|e| io_error(path, e))?;
    let mut file = safetensors_format::parse(&bytes)
        .map_err(|e| format_error(path, format!("not a valid safetensors file: {e}")))?;
    file.tensors.sort_by(|a, b| a.name.cmp(&b.name));
    file.tensors
        .iter()
        .map(|view| Ok((view.name.clone(), decode(path, view)?)))
        .collect()
}

/// Saves every parameter and buffer of `module` under its dotted name.
pub fn save_safetensors(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    write_state(&module.state_dict()?, path)
}

/// Loads a file written by [`save_safetensors`] or by PyTorch (`safetensors.torch.save_file`
/// of a `state_dict()`) into `module`. Missing or unexpected names, and any shape that
/// differs, are errors; nothing is changed unless everything matches.
pub fn load_safetensors(module: &dyn Module, path: impl AsRef<Path>) -> Result<()> {
    load_safetensors_with(module, path, &LoadOptions::new()).map(|_| ())
}

/// [`load_safetensors`] with [`LoadOptions`]: non-strict (missing and unexpected keys come
/// back in the [`LoadReport`]), or one sub-module of a bigger model's file
/// (`LoadOptions::new().prefix("encoder")`).
pub fn load_safetensors_with(
    module: &dyn Module,
    path: impl AsRef<Path>,
    options: &LoadOptions,
) -> Result<LoadReport> {
    let path = path.as_ref();
    module
        .load_state_dict_with(&read_state(path)?, options)
        .map_err(|e| match e {
            Error::InvalidArgument { message, .. } => format_error(path, message),
            other => other,
        })
}

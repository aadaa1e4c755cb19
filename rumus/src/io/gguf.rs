//! GGUF model files (what llama.cpp and most quantized language models ship in): the file is
//! memory-mapped, its structure checked up front (`gguf_format`), and each tensor decoded on
//! request. Float tensors (`f32`, `f16`, `bf16`) come back in their own dtype; the block
//! quantizations `q4_0`, `q4_1` and `q8_0` come back dequantized to `f32`, as llama.cpp's
//! `dequantize_row_*` computes them.
//!
//! ```no_run
//! // no_run: it needs a GGUF file.
//! use rumus::io::GgufFile;
//!
//! # fn main() -> rumus::Result<()> {
//! let file = GgufFile::open("SmolLM2-135M-Instruct.Q4_1.gguf")?;
//! println!("{:?}", file.metadata("general.architecture"));
//! let embedding = file.tensor("token_embd.weight")?; // [49152, 576] f32
//! # Ok(())
//! # }
//! ```

use std::fs::File;
use std::path::{Path, PathBuf};

use half::{bf16, f16};
use memmap2::Mmap;

use super::gguf_dequantize::Encoding;
use super::gguf_format::{self, GgmlType, GgufTensorInfo, GgufValue, Parsed};
use super::safetensors::{format_error, io_error};
use crate::backend::cpu::block_quant::dequantize;
use crate::error::Result;
use crate::nn::block_quantized::{BlockFormat, BlockQuantized};
use crate::storage::CpuBuffer;
use crate::tensor::DynTensor;

/// The bytes of a GGUF file.
enum Backing {
    Mapped(Mmap),
    Owned(Vec<u8>),
}

impl Backing {
    fn bytes(&self) -> &[u8] {
        match self {
            Backing::Mapped(map) => map,
            Backing::Owned(bytes) => bytes,
        }
    }
}

/// An open GGUF file: its metadata and tensor infos, checked, and its tensors on request.
pub struct GgufFile {
    path: PathBuf,
    backing: Backing,
    parsed: Parsed,
}

impl std::fmt::Debug for GgufFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GgufFile")
            .field("path", &self.path)
            .field("version", &self.parsed.version)
            .field("metadata", &self.parsed.metadata.len())
            .field("tensors", &self.parsed.tensors.len())
            .finish()
    }
}

impl GgufFile {
    /// Maps `path` and checks its structure: the header, every metadata value, every tensor
    /// info (dims, type, alignment) and that every tensor lies inside the file.
    ///
    /// # Errors
    /// [`Error::Io`](crate::Error::Io) when the file cannot be read,
    /// [`Error::Format`](crate::Error::Format) naming what is wrong with it otherwise.
    pub fn open(path: impl AsRef<Path>) -> Result<GgufFile> {
        let path = path.as_ref();
        let file = File::open(path).map_err(|e| io_error(path, e))?;
        // SAFETY: the map is read-only and lives as long as `GgufFile`; a file changed under
        // it by another process may give other bytes (each read is still bounds-checked),
        // the same contract as safetensors' and llama.cpp's maps.
        let map = unsafe { Mmap::map(&file) }.map_err(|e| io_error(path, e))?;
        Self::from_backing(path.to_path_buf(), Backing::Mapped(map))
    }

    /// The GGUF file held in `bytes` (`name` only names it in errors).
    ///
    /// # Errors
    /// As [`GgufFile::open`].
    pub fn from_bytes(name: &str, bytes: Vec<u8>) -> Result<GgufFile> {
        Self::from_backing(PathBuf::from(name), Backing::Owned(bytes))
    }

    fn from_backing(path: PathBuf, backing: Backing) -> Result<GgufFile> {
        let parsed = gguf_format::parse(backing.bytes()).map_err(|m| format_error(&path, m))?;
        Ok(GgufFile {
            path,
            backing,
            parsed,
        })
    }

    /// The format version (2 or 3).
    pub fn version(&self) -> u32 {
        self.parsed.version
    }

    /// Every metadata pair, in the file's order.
    pub fn metadata_pairs(&self) -> &[(String, GgufValue)] {
        &self.parsed.metadata
    }

    /// The metadata value under `key` (`"llama.block_count"`), if the file has one.
    pub fn metadata(&self, key: &str) -> Option<&GgufValue> {
        self.parsed
            .metadata
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
    }

    /// Every tensor's info, in the file's order.
    pub fn tensor_infos(&self) -> &[GgufTensorInfo] {
        &self.parsed.tensors
    }

    /// The info of tensor `name`.
    pub fn tensor_info(&self, name: &str) -> Option<&GgufTensorInfo> {
        self.parsed.tensors.iter().find(|t| t.name == name)
    }

    /// The encoded bytes of tensor `name` (its blocks as stored).
    ///
    /// # Errors
    /// No such tensor, or a type rumus does not decode (whose size it cannot tell).
    pub fn raw(&self, name: &str) -> Result<&[u8]> {
        let info = self.find(name)?;
        let size = info.bytes.ok_or_else(|| self.unsupported(info))?;
        if size == 0 {
            return Ok(&[]);
        }
        let start = (self.parsed.data_start + info.offset) as usize;
        // (inside the file: checked when it was opened)
        Ok(&self.backing.bytes()[start..start + size as usize])
    }

    /// Tensor `name`, decoded: `f32`, `f16` and `bf16` tensors in their dtype, quantized ones
    /// (`q4_0`, `q4_1`, `q5_0`, `q5_1`, `q8_0` and the k-quants `q4_k`, `q5_k`, `q6_k`)
    /// dequantized to `f32`;
    /// dims as [`GgufTensorInfo::dims`] gives them.
    ///
    /// # Errors
    /// No such tensor, a type rumus does not decode (named), or no memory for the result.
    pub fn tensor(&self, name: &str) -> Result<DynTensor> {
        let info = self.find(name)?;
        let raw = self.raw(name)?;
        let numel: usize = info.dims.iter().product();
        let what = format!("GGUF tensor `{name}`");
        let buffer = match info.ggml_type {
            GgmlType::F32 => CpuBuffer::F32(decode(&what, raw, 4, |b| {
                f32::from_le_bytes(b.try_into().expect("4 bytes"))
            })?),
            GgmlType::F16 => CpuBuffer::F16(decode(&what, raw, 2, |b| {
                f16::from_le_bytes(b.try_into().expect("2 bytes"))
            })?),
            GgmlType::BF16 => CpuBuffer::BF16(decode(&what, raw, 2, |b| {
                bf16::from_le_bytes(b.try_into().expect("2 bytes"))
            })?),
            GgmlType::Q4_0 | GgmlType::Q4_1 | GgmlType::Q8_0 => {
                let mut out = crate::alloc::try_with_capacity("gguf", &what, numel)?;
                let format = block_format(info.ggml_type).expect("a block type");
                dequantize(format.blocks(), raw, &mut out);
                CpuBuffer::F32(out)
            }
            other => {
                let kind = Encoding::of(other).ok_or_else(|| self.unsupported(info))?;
                let mut out = crate::alloc::try_with_capacity("gguf", &what, numel)?;
                super::gguf_dequantize::dequantize(kind, raw, &mut out);
                CpuBuffer::F32(out)
            }
        };
        // (the element count matches the dims: the blocks were sized from them)
        Ok(DynTensor::from_buffer(buffer, &info.dims))
    }

    /// Matrix `name` (`[rows, cols]`) in 4- or 8-bit blocks, for products that read it
    /// without expanding it ([`BlockQuantized::product`]): `q4_0`, `q4_1` and `q8_0` as stored;
    /// `q4_K` rewritten as `q4_1` blocks (each sub-block of 32 is one, its scale and minimum
    /// rounded to f16: within 3 * 2^-11 of the sub-block's largest magnitude, at 1.11x the
    /// bytes); `q5_0`, `q5_1`, `q5_K` and `q6_K` requantized to `q8_0` (within 1/254 of each
    /// block of 32's largest magnitude, plus its scale's f16 rounding).
    ///
    /// # Errors
    /// No such tensor, one that is not a matrix, or one of another type (use
    /// [`GgufFile::tensor`]).
    pub fn quantized(&self, name: &str) -> Result<BlockQuantized> {
        let info = self.find(name)?;
        let [rows, cols] = info.dims[..] else {
            return Err(format_error(
                &self.path,
                format!("tensor `{name}` is {:?}, not a matrix", info.dims),
            ));
        };
        if let Some(format) = block_format(info.ggml_type) {
            return BlockQuantized::from_blocks(format, [rows, cols], self.raw(name)?);
        }
        match info.ggml_type {
            GgmlType::Q4K => {
                let raw = super::gguf_dequantize::q4k_as_q4_1(name, self.raw(name)?)?;
                BlockQuantized::from_blocks(BlockFormat::Q4_1, [rows, cols], raw)
            }
            GgmlType::Q5_0 | GgmlType::Q5_1 | GgmlType::Q5K | GgmlType::Q6K => {
                BlockQuantized::quantize(BlockFormat::Q8_0, &self.tensor(name)?)
            }
            other => Err(format_error(
                &self.path,
                format!(
                    "tensor `{name}` is {}, not one of the block types q4_0, q4_1, q5_0, q5_1 \
                     and q8_0 or the k-quants q4_k, q5_k and q6_k",
                    other.name()
                ),
            )),
        }
    }

    fn find(&self, name: &str) -> Result<&GgufTensorInfo> {
        self.tensor_info(name).ok_or_else(|| {
            format_error(
                &self.path,
                format!(
                    "no tensor `{name}` in the file (it has {} tensors; `tensor_infos()` lists \
                     them)",
                    self.parsed.tensors.len()
                ),
            )
        })
    }

    fn unsupported(&self, info: &GgufTensorInfo) -> crate::Error {
        format_error(
            &self.path,
            format!(
                "tensor `{}` is {}; rumus decodes f32, f16, bf16, q4_0, q4_1, q5_0, q5_1, \
                 q8_0, q4_k, q5_k and q6_k",
                info.name,
                info.ggml_type.name()
            ),
        )
    }
}

/// Fixed-width elements decoded one by one.
fn decode<T>(what: &str, raw: &[u8], width: usize, from: impl Fn(&[u8]) -> T) -> Result<Vec<T>> {
    let mut out = crate::alloc::try_with_capacity("gguf", what, raw.len() / width)?;
    out.extend(raw.chunks_exact(width).map(from));
    Ok(out)
}

/// The block format of a GGML type, if it is one.
fn block_format(kind: GgmlType) -> Option<BlockFormat> {
    match kind {
        GgmlType::Q4_0 => Some(BlockFormat::Q4_0),
        GgmlType::Q4_1 => Some(BlockFormat::Q4_1),
        GgmlType::Q8_0 => Some(BlockFormat::Q8_0),
        _ => None,
    }
}

//! The GGUF container (llama.cpp's model files, versions 2 and 3) parsed from bytes: the
//! header, the metadata (typed key-value pairs, arrays included), the tensor infos and the
//! aligned data section. Every count and length is checked against the bytes that remain
//! before anything is allocated for it, so a hostile file is an error, never an allocation
//! it cannot back or a read past its end.

use std::collections::HashSet;

/// `GGUF`, little-endian.
const MAGIC: &[u8; 4] = b"GGUF";

/// Where tensor data starts when the file does not say (`general.alignment`).
const DEFAULT_ALIGNMENT: u64 = 32;

/// Dims a tensor may have (ggml's `GGML_MAX_DIMS`).
const MAX_DIMS: u32 = 4;

/// How deep arrays of arrays may nest.
const MAX_NESTING: usize = 8;

/// A metadata value.
#[derive(Debug, Clone, PartialEq)]
pub enum GgufValue {
    /// `UINT8`.
    U8(u8),
    /// `INT8`.
    I8(i8),
    /// `UINT16`.
    U16(u16),
    /// `INT16`.
    I16(i16),
    /// `UINT32`.
    U32(u32),
    /// `INT32`.
    I32(i32),
    /// `UINT64`.
    U64(u64),
    /// `INT64`.
    I64(i64),
    /// `FLOAT32`.
    F32(f32),
    /// `FLOAT64`.
    F64(f64),
    /// `BOOL`.
    Bool(bool),
    /// `STRING` (UTF-8; invalid sequences replaced).
    String(String),
    /// `ARRAY` of values of one type.
    Array(Vec<GgufValue>),
}

impl GgufValue {
    /// The value as an unsigned integer, for any integer type that holds a non-negative one.
    pub fn as_u64(&self) -> Option<u64> {
        match *self {
            GgufValue::U8(v) => Some(v.into()),
            GgufValue::U16(v) => Some(v.into()),
            GgufValue::U32(v) => Some(v.into()),
            GgufValue::U64(v) => Some(v),
            GgufValue::I8(v) => u64::try_from(v).ok(),
            GgufValue::I16(v) => u64::try_from(v).ok(),
            GgufValue::I32(v) => u64::try_from(v).ok(),
            GgufValue::I64(v) => u64::try_from(v).ok(),
            _ => None,
        }
    }

    /// The value as a signed integer, for any integer type that holds it.
    pub fn as_i64(&self) -> Option<i64> {
        match *self {
            GgufValue::I8(v) => Some(v.into()),
            GgufValue::I16(v) => Some(v.into()),
            GgufValue::I32(v) => Some(v.into()),
            GgufValue::I64(v) => Some(v),
            _ => self.as_u64().and_then(|v| i64::try_from(v).ok()),
        }
    }

    /// The value as a float, for `FLOAT32` and `FLOAT64`.
    pub fn as_f64(&self) -> Option<f64> {
        match *self {
            GgufValue::F32(v) => Some(v.into()),
            GgufValue::F64(v) => Some(v),
            _ => None,
        }
    }

    /// The string of a `STRING` value.
    pub fn as_str(&self) -> Option<&str> {
        match self {
            GgufValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements of an `ARRAY` value.
    pub fn as_array(&self) -> Option<&[GgufValue]> {
        match self {
            GgufValue::Array(values) => Some(values),
            _ => None,
        }
    }
}

/// A tensor's element encoding (ggml's `ggml_type`), as far as rumus decodes it; others are
/// kept by number and refused when read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GgmlType {
    /// 32-bit floats.
    F32,
    /// IEEE halves.
    F16,
    /// bfloat16.
    BF16,
    /// Blocks of 32: an f16 scale and 32 signed 4-bit values offset by 8.
    Q4_0,
    /// Blocks of 32: an f16 scale and an f16 minimum, 32 unsigned 4-bit values.
    Q4_1,
    /// Blocks of 32: an f16 scale and 32 signed bytes.
    Q8_0,
    /// Blocks of 32: an f16 scale and 32 signed 5-bit values offset by 16.
    Q5_0,
    /// Blocks of 32: an f16 scale and an f16 minimum, 32 unsigned 5-bit values.
    Q5_1,
    /// Super-blocks of 256: f16 scale and minimum, eight 6-bit sub-block scales and
    /// minimums, 256 unsigned 4-bit values (ggml's `q4_K`, `Q4_K_M` files' main type).
    Q4K,
    /// As [`GgmlType::Q4K`], with 5-bit values (ggml's `q5_K`, `Q5_K_M` files' main type).
    Q5K,
    /// Super-blocks of 256: an f16 scale, sixteen 8-bit sub-block scales, 256 signed 6-bit
    /// values (ggml's `q6_K`; also the embeddings and some projections of `Q4_K_M` and
    /// `Q5_K_M` files).
    Q6K,
    /// Any other ggml type (other k-quants, i-quants, ...), by its number.
    Other(u32),
}

impl GgmlType {
    fn from_code(code: u32) -> GgmlType {
        match code {
            0 => GgmlType::F32,
            1 => GgmlType::F16,
            2 => GgmlType::Q4_0,
            3 => GgmlType::Q4_1,
            6 => GgmlType::Q5_0,
            7 => GgmlType::Q5_1,
            8 => GgmlType::Q8_0,
            12 => GgmlType::Q4K,
            13 => GgmlType::Q5K,
            14 => GgmlType::Q6K,
            30 => GgmlType::BF16,
            other => GgmlType::Other(other),
        }
    }

    /// Elements per block and bytes per block; `None` for a type rumus does not decode.
    pub fn block(self) -> Option<(u64, u64)> {
        match self {
            GgmlType::F32 => Some((1, 4)),
            GgmlType::F16 | GgmlType::BF16 => Some((1, 2)),
            GgmlType::Q4_0 => Some((32, 18)),
            GgmlType::Q4_1 => Some((32, 20)),
            GgmlType::Q8_0 => Some((32, 34)),
            GgmlType::Q5_0 => Some((32, 22)),
            GgmlType::Q5_1 => Some((32, 24)),
            GgmlType::Q4K => Some((256, 144)),
            GgmlType::Q5K => Some((256, 176)),
            GgmlType::Q6K => Some((256, 210)),
            GgmlType::Other(_) => None,
        }
    }

    /// ggml's name of the type (`q4_1`), or its number.
    pub fn name(self) -> String {
        match self {
            GgmlType::F32 => "f32".into(),
            GgmlType::F16 => "f16".into(),
            GgmlType::BF16 => "bf16".into(),
            GgmlType::Q4_0 => "q4_0".into(),
            GgmlType::Q4_1 => "q4_1".into(),
            GgmlType::Q8_0 => "q8_0".into(),
            GgmlType::Q5_0 => "q5_0".into(),
            GgmlType::Q5_1 => "q5_1".into(),
            GgmlType::Q4K => "q4_k".into(),
            GgmlType::Q5K => "q5_k".into(),
            GgmlType::Q6K => "q6_k".into(),
            GgmlType::Other(code) => format!("ggml type {code}"),
        }
    }
}

/// One tensor's entry in the file.
#[derive(Debug, Clone, PartialEq)]
pub struct GgufTensorInfo {
    /// Its name (`blk.0.attn_q.weight`).
    pub name: String,
    /// Its dims, outermost first as rumus and PyTorch write them: ggml's `ne` reversed (a
    /// `[576, 49152]` ggml matrix is `[49152, 576]`, 49,152 rows of 576).
    pub dims: Vec<usize>,
    /// How its elements are encoded.
    pub ggml_type: GgmlType,
    /// Where its bytes start, from the start of the data section.
    pub offset: u64,
    /// How many bytes it takes (`None` for a type rumus does not decode).
    pub bytes: Option<u64>,
}

/// A parsed GGUF file's structure.
#[derive(Debug, Clone)]
pub(super) struct Parsed {
    pub version: u32,
    pub metadata: Vec<(String, GgufValue)>,
    pub tensors: Vec<GgufTensorInfo>,
    /// Where the data section starts in the file.
    pub data_start: u64,
}

/// Little-endian reads from a byte slice, every one checked against its end.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
}

type Parse<T> = std::result::Result<T, String>;

impl<'a> Reader<'a> {
    fn remaining(&self) -> usize {
        self.bytes.len() - self.at
    }

    fn take(&mut self, n: usize, what: &str) -> Parse<&'a [u8]> {
        if n > self.remaining() {
            return Err(format!(
                "{what} at byte {} needs {n} bytes, but the file ends after {}",
                self.at,
                self.remaining()
            ));
        }
        let slice = &self.bytes[self.at..self.at + n];
        self.at += n;
        Ok(slice)
    }

    fn array<const N: usize>(&mut self, what: &str) -> Parse<[u8; N]> {
        Ok(self.take(N, what)?.try_into().expect("N bytes"))
    }

    fn u32(&mut self, what: &str) -> Parse<u32> {
        Ok(u32::from_le_bytes(self.array(what)?))
    }

    fn u64(&mut self, what: &str) -> Parse<u64> {
        Ok(u64::from_le_bytes(self.array(what)?))
    }

    /// A count of things that each take at least `min_bytes`: no larger than what the rest
    /// of the file could hold.
    fn count(&mut self, what: &str, min_bytes: usize) -> Parse<usize> {
        let at = self.at;
        let n = self.u64(what)?;
        let most = self.remaining() / min_bytes.max(1);
        if n > most as u64 {
            return Err(format!(
                "{what} at byte {at} is {n}, more than the {} bytes left can hold",
                self.remaining()
            ));
        }
        Ok(n as usize)
    }

    fn string(&mut self, what: &str) -> Parse<String> {
        let len = self.count(what, 1)?;
        Ok(String::from_utf8_lossy(self.take(len, what)?).into_owned())
    }

    fn value(&mut self, kind: u32, depth: usize, what: &str) -> Parse<GgufValue> {
        Ok(match kind {
            0 => GgufValue::U8(self.array::<1>(what)?[0]),
            1 => GgufValue::I8(self.array::<1>(what)?[0] as i8),
            2 => GgufValue::U16(u16::from_le_bytes(self.array(what)?)),
            3 => GgufValue::I16(i16::from_le_bytes(self.array(what)?)),
            4 => GgufValue::U32(self.u32(what)?),
            5 => GgufValue::I32(i32::from_le_bytes(self.array(what)?)),
            6 => GgufValue::F32(f32::from_le_bytes(self.array(what)?)),
            7 => match self.array::<1>(what)?[0] {
                0 => GgufValue::Bool(false),
                1 => GgufValue::Bool(true),
                other => return Err(format!("{what}: a bool holds 0 or 1, not {other}")),
            },
            8 => GgufValue::String(self.string(what)?),
            9 => {
                if depth >= MAX_NESTING {
                    return Err(format!("{what}: arrays nest deeper than {MAX_NESTING}"));
                }
                let element = self.u32(what)?;
                // Every element takes a byte at least (a string or an array 8).
                let n = self.count(what, 1)?;
                let mut values = Vec::with_capacity(n);
                for _ in 0..n {
                    values.push(self.value(element, depth + 1, what)?);
                }
                GgufValue::Array(values)
            }
            10 => GgufValue::U64(self.u64(what)?),
            11 => GgufValue::I64(i64::from_le_bytes(self.array(what)?)),
            12 => GgufValue::F64(f64::from_le_bytes(self.array(what)?)),
            other => {
                return Err(format!(
                    "{what} has value type {other}, which GGUF does not define"
                ));
            }
        })
    }
}

/// The structure of the GGUF file `bytes`, every length checked against `bytes.len()`.
pub(super) fn parse(bytes: &[u8]) -> Parse<Parsed> {
    let mut r = Reader { bytes, at: 0 };
    let magic = r.array::<4>("the magic number")?;
    if &magic != MAGIC {
        return Err(format!(
            "not a GGUF file: it starts with {magic:?}, not \"GGUF\""
        ));
    }
    let version = r.u32("the version")?;
    if !(2..=3).contains(&version) {
        return Err(format!(
            "GGUF version {version}; rumus reads versions 2 and 3"
        ));
    }
    // A tensor info takes 8 (name length) + 4 (dims) + 4 (type) + 8 (offset) bytes at least;
    // a metadata pair 8 (key length) + 4 (type) + 1.
    let tensor_count = r.count("the tensor count", 24)?;
    let kv_count = r.count("the metadata count", 13)?;
    let mut metadata = Vec::with_capacity(kv_count);
    let mut keys = HashSet::new();
    for _ in 0..kv_count {
        let key = r.string("a metadata key")?;
        let kind = r.u32("a metadata type")?;
        let value = r.value(kind, 0, &format!("metadata `{key}`"))?;
        if !keys.insert(key.clone()) {
            return Err(format!("metadata key `{key}` appears twice"));
        }
        metadata.push((key, value));
    }
    let alignment = match metadata.iter().find(|(k, _)| k == "general.alignment") {
        Some((_, value)) => match value.as_u64() {
            Some(a) if a.is_power_of_two() => a,
            _ => {
                return Err(format!(
                    "general.alignment is {value:?}, not a power of two"
                ));
            }
        },
        None => DEFAULT_ALIGNMENT,
    };
    let mut tensors = Vec::with_capacity(tensor_count);
    let mut names = HashSet::new();
    for _ in 0..tensor_count {
        let name = r.string("a tensor name")?;
        let info = tensor_info(&mut r, name, alignment)?;
        if !names.insert(info.name.clone()) {
            return Err(format!("tensor `{}` appears twice", info.name));
        }
        tensors.push(info);
    }
    let data_start = (r.at as u64).div_ceil(alignment) * alignment;
    let data_len = (bytes.len() as u64).saturating_sub(data_start);
    for t in &tensors {
        // (an empty tensor needs no bytes, wherever it says it starts)
        if let Some(size) = t.bytes.filter(|&size| size > 0)
            && t.offset.checked_add(size).is_none_or(|end| end > data_len)
        {
            return Err(format!(
                "tensor `{}` ({size} bytes at offset {} of the data) runs past the end of the \
                 file, whose data section holds {data_len} bytes",
                t.name, t.offset
            ));
        }
    }
    Ok(Parsed {
        version,
        metadata,
        tensors,
        data_start,
    })
}

/// The rest of a tensor info after its name.
fn tensor_info(r: &mut Reader<'_>, name: String, alignment: u64) -> Parse<GgufTensorInfo> {
    let n_dims = r.u32("a tensor's dims")?;
    if n_dims > MAX_DIMS {
        return Err(format!(
            "tensor `{name}` has {n_dims} dims; GGUF allows {MAX_DIMS}"
        ));
    }
    let mut ne = Vec::with_capacity(n_dims as usize);
    for _ in 0..n_dims {
        ne.push(r.u64("a tensor dim")?);
    }
    let ggml_type = GgmlType::from_code(r.u32("a tensor type")?);
    let offset = r.u64("a tensor offset")?;
    if !offset.is_multiple_of(alignment) {
        return Err(format!(
            "tensor `{name}` starts at offset {offset}, not a multiple of the alignment \
             {alignment}"
        ));
    }
    // The product of the nonzero dims must fit too: products of some of them (strides, the
    // element count taken in another order) are computed elsewhere.
    let overflow = || format!("tensor `{name}` has dims {ne:?}, whose product overflows");
    ne.iter()
        .filter(|&&d| d != 0)
        .try_fold(1u64, |n, &d| n.checked_mul(d))
        .filter(|&n| usize::try_from(n).is_ok())
        .ok_or_else(overflow)?;
    let count: u64 = ne.iter().product();
    let bytes = match ggml_type.block() {
        Some((elements, block_bytes)) => {
            if !ne.first().copied().unwrap_or(1).is_multiple_of(elements) {
                return Err(format!(
                    "tensor `{name}` of type {} has rows of {} elements, not whole blocks of \
                     {elements}",
                    ggml_type.name(),
                    ne.first().copied().unwrap_or(1)
                ));
            }
            Some(
                (count / elements)
                    .checked_mul(block_bytes)
                    .ok_or_else(|| format!("tensor `{name}`'s size in bytes overflows"))?,
            )
        }
        None => None,
    };
    Ok(GgufTensorInfo {
        name,
        dims: ne.iter().rev().map(|&d| d as usize).collect(),
        ggml_type,
        offset,
        bytes,
    })
}

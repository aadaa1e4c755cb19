//! The safetensors container: an 8-byte little-endian header length, a JSON header that maps
//! each tensor's name to its dtype, shape and byte range (plus an optional `__metadata__` map
//! of strings), then the tensors' bytes, back to back.
//!
//! Reading checks what the format promises before anything is used: the header fits in the
//! file, the byte ranges tile the data exactly (no gaps, no overlaps, nothing left over), and
//! each range is as long as its shape and dtype say. Files written here are read by
//! PyTorch's `safetensors` and the other way round (tests/model_files.rs loads one).

use std::collections::HashMap;

use super::json::{self, Json};

/// Headers beyond this are refused as damage rather than allocated (the reference reader's
/// limit too).
const MAX_HEADER_BYTES: u64 = 100_000_000;

/// The header key of the string map that travels with the tensors.
const METADATA_KEY: &str = "__metadata__";

/// A tensor's element type as the header spells it. rumus reads and writes the first five;
/// the others (BF16, U8, ...) are carried through [`Dtype::Other`] so that the error about
/// them can name them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Dtype {
    F32,
    F64,
    F16,
    BF16,
    I64,
    Bool,
    Other(String),
}

impl Dtype {
    fn from_tag(tag: &str) -> Dtype {
        match tag {
            "F32" => Dtype::F32,
            "F64" => Dtype::F64,
            "F16" => Dtype::F16,
            "BF16" => Dtype::BF16,
            "I64" => Dtype::I64,
            "BOOL" => Dtype::Bool,
            other => Dtype::Other(other.to_string()),
        }
    }

    /// The header's name for the dtype.
    pub(super) fn tag(&self) -> &str {
        match self {
            Dtype::F32 => "F32",
            Dtype::F64 => "F64",
            Dtype::F16 => "F16",
            Dtype::BF16 => "BF16",
            Dtype::I64 => "I64",
            Dtype::Bool => "BOOL",
            Dtype::Other(tag) => tag,
        }
    }

    /// Bytes per element, for the dtypes whose size rumus knows.
    pub(super) fn element_size(&self) -> Option<usize> {
        match self {
            Dtype::Bool => Some(1),
            Dtype::F16 | Dtype::BF16 => Some(2),
            Dtype::F32 => Some(4),
            Dtype::F64 | Dtype::I64 => Some(8),
            Dtype::Other(tag) => match tag.as_str() {
                "U8" | "I8" | "F8_E5M2" | "F8_E4M3" => Some(1),
                "I16" | "U16" => Some(2),
                "I32" | "U32" => Some(4),
                "U64" => Some(8),
                _ => None,
            },
        }
    }
}

/// One tensor of a file: its entry in the header and its bytes.
pub(super) struct TensorView<'a> {
    pub name: String,
    pub dtype: Dtype,
    pub dims: Vec<usize>,
    pub data: &'a [u8],
}

/// The contents of a safetensors file, borrowed from its bytes.
pub(super) struct SafetensorsFile<'a> {
    /// In the order their bytes appear in the file.
    pub tensors: Vec<TensorView<'a>>,
    /// The `__metadata__` map; empty when the file has none.
    pub metadata: HashMap<String, String>,
}

/// Reads a file's bytes. The error says what is wrong (callers add the file's name).
pub(super) fn parse(bytes: &[u8]) -> Result<SafetensorsFile<'_>, String> {
    let Some(length) = bytes.get(..8) else {
        return Err(format!(
            "the file is {} bytes long, shorter than the 8-byte header length",
            bytes.len()
        ));
    };
    let header_len = u64::from_le_bytes(length.try_into().expect("8 bytes"));
    let available = bytes.len() as u64 - 8;
    if header_len > MAX_HEADER_BYTES || header_len > available {
        return Err(format!(
            "the header length is {header_len} bytes, but {available} bytes follow it (and \
             the format allows at most {MAX_HEADER_BYTES})"
        ));
    }
    let (header, data) = bytes[8..].split_at(header_len as usize);
    let header =
        std::str::from_utf8(header).map_err(|e| format!("the header is not UTF-8 text ({e})"))?;
    let Json::Object(members) = json::parse(header).map_err(|e| format!("bad header: {e}"))? else {
        return Err("the header is not a JSON object".into());
    };

    let mut metadata = HashMap::new();
    let mut entries = Vec::with_capacity(members.len());
    for (name, value) in members {
        if name == METADATA_KEY {
            metadata = read_metadata(value)?;
        } else {
            entries.push(read_entry(name, &value)?);
        }
    }
    entries.sort_by_key(|e| e.range);
    let mut end = 0;
    let mut tensors = Vec::with_capacity(entries.len());
    for Entry {
        name,
        dtype,
        dims,
        range: (begin, stop),
    } in entries
    {
        if begin != end {
            return Err(format!(
                "tensor `{name}` starts at data byte {begin}, but the tensor before it ends at \
                 {end} (ranges must tile the data)"
            ));
        }
        if stop > data.len() {
            return Err(format!(
                "tensor `{name}` ends at data byte {stop}, past the data's {} bytes (the file \
                 is truncated?)",
                data.len()
            ));
        }
        tensors.push(TensorView {
            name,
            dtype,
            dims,
            data: &data[begin..stop],
        });
        end = stop;
    }
    if end != data.len() {
        return Err(format!(
            "the tensors cover {end} data bytes, but the file holds {} after its header",
            data.len()
        ));
    }
    Ok(SafetensorsFile { tensors, metadata })
}

/// A header entry, before its byte range is checked against its neighbours.
struct Entry {
    name: String,
    dtype: Dtype,
    dims: Vec<usize>,
    range: (usize, usize),
}

fn read_entry(name: String, value: &Json) -> Result<Entry, String> {
    let field = |key: &str| {
        value
            .get(key)
            .ok_or_else(|| format!("the header entry of tensor `{name}` has no `{key}`"))
    };
    let integers = |key: &str| -> Result<Vec<usize>, String> {
        let bad = || format!("`{key}` of tensor `{name}` is not a list of whole numbers");
        match field(key)? {
            Json::Array(items) => items
                .iter()
                .map(|item| {
                    item.as_u64()
                        .and_then(|n| usize::try_from(n).ok())
                        .ok_or_else(bad)
                })
                .collect(),
            _ => Err(bad()),
        }
    };
    let dtype = field("dtype")?
        .as_str()
        .map(Dtype::from_tag)
        .ok_or_else(|| format!("`dtype` of tensor `{name}` is not a string"))?;
    let dims = integers("shape")?;
    let &[begin, stop] = integers("data_offsets")?.as_slice() else {
        return Err(format!(
            "`data_offsets` of tensor `{name}` is not a pair [begin, end]"
        ));
    };
    if begin > stop {
        return Err(format!(
            "tensor `{name}` has data_offsets [{begin}, {stop}], which run backwards"
        ));
    }
    if let Some(size) = dtype.element_size() {
        let expected = dims
            .iter()
            .try_fold(size, |n, &d| n.checked_mul(d))
            .ok_or_else(|| format!("tensor `{name}` has shape {dims:?}, whose size overflows"))?;
        if stop - begin != expected {
            return Err(format!(
                "tensor `{name}` holds {} bytes, but shape {dims:?} of {} needs {expected}",
                stop - begin,
                dtype.tag()
            ));
        }
    }
    Ok(Entry {
        name,
        dtype,
        dims,
        range: (begin, stop),
    })
}

fn read_metadata(value: Json) -> Result<HashMap<String, String>, String> {
    let Json::Object(members) = value else {
        return Err(format!(
            "`{METADATA_KEY}` is {}, not an object of strings",
            value.kind()
        ));
    };
    members
        .into_iter()
        .map(|(key, value)| match value {
            Json::String(text) => Ok((key, text)),
            other => Err(format!(
                "metadata `{key}` is {}, not a string",
                other.kind()
            )),
        })
        .collect()
}

/// A tensor to write: the borrowed parts of its header entry and bytes.
pub(super) struct TensorToWrite<'a> {
    pub name: &'a str,
    pub dtype: &'a Dtype,
    pub dims: &'a [usize],
    pub data: &'a [u8],
}

/// The bytes of a file holding `tensors` and, when not empty, `metadata`.
///
/// Tensors are laid out widest element first and the header is padded with spaces to a
/// multiple of 8 bytes, so every tensor starts aligned to its element size (a reader that
/// maps the file can use the bytes in place). Metadata keys are written sorted, so equal
/// inputs give equal files.
pub(super) fn serialize(tensors: &[TensorToWrite], metadata: &HashMap<String, String>) -> Vec<u8> {
    let mut order: Vec<&TensorToWrite> = tensors.iter().collect();
    order.sort_by_key(|t| std::cmp::Reverse(t.dtype.element_size().unwrap_or(1)));

    let mut members = Vec::with_capacity(order.len() + 1);
    if !metadata.is_empty() {
        let mut entries: Vec<(&String, &String)> = metadata.iter().collect();
        entries.sort();
        let map: Vec<String> = entries
            .into_iter()
            .map(|(k, v)| format!("{}:{}", json::quote(k), json::quote(v)))
            .collect();
        members.push(format!(
            "{}:{{{}}}",
            json::quote(METADATA_KEY),
            map.join(",")
        ));
    }
    let mut offset = 0;
    for t in &order {
        let dims: Vec<String> = t.dims.iter().map(usize::to_string).collect();
        members.push(format!(
            "{}:{{\"dtype\":{},\"shape\":[{}],\"data_offsets\":[{offset},{}]}}",
            json::quote(t.name),
            json::quote(t.dtype.tag()),
            dims.join(","),
            offset + t.data.len()
        ));
        offset += t.data.len();
    }
    let mut header = format!("{{{}}}", members.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }

    let mut out = Vec::with_capacity(8 + header.len() + offset);
    out.extend_from_slice(&(header.len() as u64).to_le_bytes());
    out.extend_from_slice(header.as_bytes());
    for t in order {
        out.extend_from_slice(t.data);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file_with_header(header: &str, data: &[u8]) -> Vec<u8> {
        let mut out = (header.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(header.as_bytes());
        out.extend_from_slice(data);
        out
    }

    #[test]
    fn writes_then_reads_tensors_and_metadata() {
        let (a, b) = ([7u8; 6], [1u8; 16]);
        let tensors = [
            TensorToWrite {
                name: "half \"quoted\"",
                dtype: &Dtype::F16,
                dims: &[3],
                data: &a,
            },
            TensorToWrite {
                name: "wide",
                dtype: &Dtype::F64,
                dims: &[2, 1],
                data: &b,
            },
        ];
        let metadata = HashMap::from([("k\n".to_string(), "v\u{1}".to_string())]);
        let bytes = serialize(&tensors, &metadata);
        assert_eq!(bytes[..8], ((bytes.len() - 8 - 22) as u64).to_le_bytes());
        let file = parse(&bytes).unwrap();
        assert_eq!(file.metadata, metadata);
        // Widest first: the f64 tensor comes first, aligned at the data's start.
        let names: Vec<&str> = file.tensors.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(names, ["wide", "half \"quoted\""]);
        assert_eq!(file.tensors[1].dtype, Dtype::F16);
        assert_eq!(file.tensors[1].dims, [3]);
        assert_eq!(file.tensors[1].data, a);
        assert_eq!(file.tensors[0].data, b);
    }

    #[test]
    fn ranges_must_tile_the_data() {
        let entry = |offsets: &str| {
            format!(r#"{{"t":{{"dtype":"U8","shape":[2],"data_offsets":{offsets}}}}}"#)
        };
        let cases = [
            (entry("[1,3]"), 3, "starts at data byte 1"),
            (entry("[0,2]"), 3, "cover 2 data bytes"),
            (entry("[0,2]"), 1, "past the data"),
            (entry("[2,0]"), 3, "run backwards"),
            (entry("[0,3]"), 3, "needs 2"),
            (entry("[0]"), 3, "not a pair"),
        ];
        for (header, data_len, expected) in cases {
            let error = parse(&file_with_header(&header, &vec![0; data_len]))
                .err()
                .unwrap_or_else(|| panic!("{header} was accepted"));
            assert!(error.contains(expected), "{header}: {error}");
        }
    }

    #[test]
    fn damaged_headers_are_errors() {
        let cases: [(Vec<u8>, &str); 6] = [
            (vec![1, 2, 3], "shorter than"),
            (u64::MAX.to_le_bytes().to_vec(), "header length"),
            (file_with_header("[]", &[]), "not a JSON object"),
            (file_with_header("{\"t\":{}}", &[]), "has no `dtype`"),
            (
                file_with_header("{\"__metadata__\":{\"a\":1}}", &[]),
                "not a string",
            ),
            (
                file_with_header(
                    r#"{"t":{"dtype":"F32","shape":[4611686018427387904,8],"data_offsets":[0,0]}}"#,
                    &[],
                ),
                "overflows",
            ),
        ];
        for (bytes, expected) in cases {
            let error = parse(&bytes).err().expect("accepted a damaged file");
            assert!(error.contains(expected), "{error}");
        }
        let mut not_utf8 = file_with_header("{}  ", &[]);
        not_utf8[9] = 0xff;
        assert!(parse(&not_utf8).err().unwrap().contains("UTF-8"));
    }

    #[test]
    fn an_unknown_dtype_is_carried_by_name() {
        let header = r#"{"t":{"dtype":"F4","shape":[3],"data_offsets":[0,2]}}"#;
        let bytes = file_with_header(header, &[0, 0]);
        let file = parse(&bytes).unwrap();
        assert_eq!(file.tensors[0].dtype, Dtype::Other("F4".into()));
    }

    #[test]
    fn reads_the_metadata_of_a_file_from_the_reference_writer() {
        let bytes = include_bytes!("../../../tests/fixtures/dtypes.safetensors");
        let file = parse(bytes).unwrap();
        assert_eq!(file.metadata["format"], "pt");
        assert_eq!(
            file.metadata["note"],
            "quote \" backslash \\ newline \n e-acute \u{e9}"
        );
        assert_eq!(file.tensors.len(), 6);
    }
}

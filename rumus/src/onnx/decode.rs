//! Reading an ONNX file: the protobuf wire format, decoded by hand into the part of
//! `onnx.proto` a model's forward pass needs (the graph's nodes, initializers, inputs and
//! outputs, the opset). Every length and count comes from the file, so each is checked
//! against the bytes left before anything is allocated; a corrupt file is an error naming
//! what is wrong and where, never a panic.

use crate::dtype::DType;
use crate::error::{Error, Result};

/// A decoded attribute value (`AttributeProto`; graphs and sparse tensors are not read).
#[derive(Debug, Clone)]
pub enum AttributeValue {
    Float(f32),
    Int(i64),
    String(Vec<u8>),
    Tensor(TensorData),
    Floats(Vec<f32>),
    Ints(Vec<i64>),
    /// A kind no supported op uses (graphs, sparse tensors, type protos).
    Other,
}

/// A node (`NodeProto`).
#[derive(Debug, Clone, Default)]
pub struct NodeProto {
    pub op_type: String,
    pub domain: String,
    pub name: String,
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<(String, AttributeValue)>,
}

/// A tensor (`TensorProto`): its values as stored, little-endian.
#[derive(Debug, Clone)]
pub struct TensorData {
    pub name: String,
    pub dims: Vec<usize>,
    pub values: TensorValues,
}

/// Values of a tensor, in the dtype rumus keeps them in.
#[derive(Debug, Clone)]
pub enum TensorValues {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

/// A graph input or output: its name and the static part of its shape (`None` for a
/// symbolic dim such as a batch size exported as dynamic).
#[derive(Debug, Clone)]
pub struct ValueInfo {
    pub name: String,
    pub dims: Vec<Option<usize>>,
}

/// The parts of a `ModelProto` the runner reads.
#[derive(Debug, Clone, Default)]
pub struct ModelProto {
    /// Version of the default (`ai.onnx`) opset.
    pub opset: Option<i64>,
    pub producer: String,
    pub nodes: Vec<NodeProto>,
    pub initializers: Vec<TensorData>,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
}

/// A cursor over one message's bytes.
struct Reader<'a> {
    bytes: &'a [u8],
    at: usize,
    /// The file, for messages.
    path: &'a str,
    /// Which message is being read, for messages.
    what: &'static str,
}

/// One field: its number and value.
enum Field<'a> {
    Varint(u64),
    Fixed64(u64),
    Bytes(&'a [u8]),
    Fixed32(u32),
}

impl<'a> Reader<'a> {
    fn new(bytes: &'a [u8], path: &'a str, what: &'static str) -> Self {
        Reader {
            bytes,
            at: 0,
            path,
            what,
        }
    }

    fn error(&self, message: impl std::fmt::Display) -> Error {
        Error::Format {
            path: self.path.to_string(),
            message: format!(
                "not a readable ONNX model: {} at byte {} of a {}-byte {}",
                message,
                self.at,
                self.bytes.len(),
                self.what
            ),
        }
    }

    fn varint(&mut self) -> Result<u64> {
        let mut value = 0u64;
        for shift in (0..64).step_by(7) {
            let Some(&byte) = self.bytes.get(self.at) else {
                return Err(self.error("a number runs past the end"));
            };
            self.at += 1;
            value |= u64::from(byte & 0x7f) << shift;
            if byte & 0x80 == 0 {
                return Ok(value);
            }
        }
        Err(self.error("a number is longer than ten bytes"))
    }

    fn take(&mut self, len: usize) -> Result<&'a [u8]> {
        if len > self.bytes.len() - self.at {
            return Err(self.error(format!(
                "a field of {len} bytes is longer than the {} bytes left",
                self.bytes.len() - self.at
            )));
        }
        let slice = &self.bytes[self.at..self.at + len];
        self.at += len;
        Ok(slice)
    }

    /// The next field, or `None` at the end of the message.
    fn next(&mut self) -> Result<Option<(u64, Field<'a>)>> {
        if self.at == self.bytes.len() {
            return Ok(None);
        }
        let key = self.varint()?;
        let number = key >> 3;
        let field = match key & 7 {
            0 => Field::Varint(self.varint()?),
            1 => Field::Fixed64(u64::from_le_bytes(self.take(8)?.try_into().expect("8"))),
            2 => {
                let len = self.varint()?;
                let len = usize::try_from(len).map_err(|_| self.error("a huge length"))?;
                Field::Bytes(self.take(len)?)
            }
            5 => Field::Fixed32(u32::from_le_bytes(self.take(4)?.try_into().expect("4"))),
            other => return Err(self.error(format!("wire type {other} (groups are not ONNX)"))),
        };
        Ok(Some((number, field)))
    }

    fn sub(&self, bytes: &'a [u8], what: &'static str) -> Reader<'a> {
        Reader::new(bytes, self.path, what)
    }

    fn string(&self, bytes: &[u8]) -> Result<String> {
        String::from_utf8(bytes.to_vec()).map_err(|_| self.error("a name that is not UTF-8"))
    }
}

/// Repeated numeric fields come packed (one length-delimited run) or one per field.
fn push_varints(reader: &Reader<'_>, field: Field<'_>, out: &mut Vec<i64>) -> Result<()> {
    match field {
        Field::Varint(v) => out.push(v as i64),
        Field::Bytes(bytes) => {
            let mut packed = reader.sub(bytes, "packed list");
            while packed.at < bytes.len() {
                out.push(packed.varint()? as i64);
            }
        }
        _ => return Err(reader.error("a list of integers of the wrong wire type")),
    }
    Ok(())
}

/// Little-endian values of `W` bytes each (a length not a multiple of `W` is checked by
/// the callers).
fn little_endian<const W: usize, T>(bytes: &[u8], from: impl Fn([u8; W]) -> T) -> Vec<T> {
    bytes
        .chunks_exact(W)
        .map(|c| from(c.try_into().expect("chunks of W bytes")))
        .collect()
}

/// A repeated `float` (`W = 4`) or `double` (`W = 8`) field: one fixed-width value, or a
/// packed run of them.
fn push_fixed<const W: usize, T>(
    reader: &Reader<'_>,
    field: Field<'_>,
    out: &mut Vec<T>,
    from: fn([u8; W]) -> T,
) -> Result<()> {
    let single = match field {
        Field::Fixed32(bits) if W == 4 => bits.to_le_bytes().to_vec(),
        Field::Fixed64(bits) if W == 8 => bits.to_le_bytes().to_vec(),
        Field::Bytes(bytes) if bytes.len() % W == 0 => {
            out.extend(little_endian(bytes, from));
            return Ok(());
        }
        _ => return Err(reader.error("a list of floats of the wrong wire type or length")),
    };
    out.extend(little_endian(&single, from));
    Ok(())
}

/// Decodes a whole model file.
pub fn decode_model(bytes: &[u8], path: &str) -> Result<ModelProto> {
    let mut reader = Reader::new(bytes, path, "ModelProto");
    let mut model = ModelProto::default();
    let mut graph = None;
    while let Some((number, field)) = reader.next()? {
        match (number, field) {
            (2, Field::Bytes(b)) => model.producer = reader.string(b)?,
            (7, Field::Bytes(b)) => graph = Some(b),
            (8, Field::Bytes(b)) => {
                let (domain, version) = decode_opset(reader.sub(b, "OperatorSetIdProto"))?;
                if domain.is_empty() || domain == "ai.onnx" {
                    model.opset = Some(version);
                }
            }
            _ => {}
        }
    }
    let Some(graph) = graph else {
        return Err(reader.error("no graph"));
    };
    decode_graph(reader.sub(graph, "GraphProto"), &mut model)?;
    Ok(model)
}

fn decode_opset(mut r: Reader<'_>) -> Result<(String, i64)> {
    let (mut domain, mut version) = (String::new(), 0);
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => domain = r.string(b)?,
            (2, Field::Varint(v)) => version = v as i64,
            _ => {}
        }
    }
    Ok((domain, version))
}

fn decode_graph(mut r: Reader<'_>, model: &mut ModelProto) -> Result<()> {
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => model.nodes.push(decode_node(r.sub(b, "NodeProto"))?),
            (5, Field::Bytes(b)) => model
                .initializers
                .push(decode_tensor(r.sub(b, "TensorProto"))?),
            (11, Field::Bytes(b)) => model
                .inputs
                .push(decode_value_info(r.sub(b, "ValueInfoProto"))?),
            (12, Field::Bytes(b)) => model
                .outputs
                .push(decode_value_info(r.sub(b, "ValueInfoProto"))?),
            _ => {}
        }
    }
    Ok(())
}

fn decode_node(mut r: Reader<'_>) -> Result<NodeProto> {
    let mut node = NodeProto::default();
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => node.inputs.push(r.string(b)?),
            (2, Field::Bytes(b)) => node.outputs.push(r.string(b)?),
            (3, Field::Bytes(b)) => node.name = r.string(b)?,
            (4, Field::Bytes(b)) => node.op_type = r.string(b)?,
            (7, Field::Bytes(b)) => node.domain = r.string(b)?,
            (5, Field::Bytes(b)) => node
                .attributes
                .push(decode_attribute(r.sub(b, "AttributeProto"))?),
            _ => {}
        }
    }
    Ok(node)
}

fn decode_attribute(mut r: Reader<'_>) -> Result<(String, AttributeValue)> {
    let mut name = String::new();
    let mut kind = 0;
    let (mut f, mut i, mut s, mut t) = (None, None, None, None);
    let (mut floats, mut ints) = (Vec::new(), Vec::new());
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => name = r.string(b)?,
            (2, Field::Fixed32(bits)) => f = Some(f32::from_bits(bits)),
            (3, Field::Varint(v)) => i = Some(v as i64),
            (4, Field::Bytes(b)) => s = Some(b.to_vec()),
            (5, Field::Bytes(b)) => t = Some(decode_tensor(r.sub(b, "TensorProto"))?),
            (7, field) => push_fixed(&r, field, &mut floats, f32::from_le_bytes)?,
            (8, field) => push_varints(&r, field, &mut ints)?,
            (20, Field::Varint(v)) => kind = v,
            _ => {}
        }
    }
    let value = match kind {
        1 => AttributeValue::Float(f.unwrap_or(0.0)),
        2 => AttributeValue::Int(i.unwrap_or(0)),
        3 => AttributeValue::String(s.unwrap_or_default()),
        4 => match t {
            Some(t) => AttributeValue::Tensor(t),
            None => return Err(r.error(format!("attribute {name} promises a tensor, has none"))),
        },
        6 => AttributeValue::Floats(floats),
        7 => AttributeValue::Ints(ints),
        _ => AttributeValue::Other,
    };
    Ok((name, value))
}

/// `TensorProto.DataType` codes rumus reads, with the dtype each is kept as (int32 and
/// smaller integers widen to i64; float16 widens to f32).
fn data_type(code: i64) -> Option<DType> {
    match code {
        1 | 10 => Some(DType::F32),
        11 => Some(DType::F64),
        2..=7 | 12 | 13 => Some(DType::I64),
        9 => Some(DType::Bool),
        _ => None,
    }
}

fn decode_tensor(mut r: Reader<'_>) -> Result<TensorData> {
    let mut dims = Vec::new();
    let mut code = 0;
    let mut name = String::new();
    let mut raw: Option<&[u8]> = None;
    let (mut floats, mut int64s, mut doubles) = (Vec::new(), Vec::new(), Vec::new());
    let mut int32s = Vec::new();
    let mut external = false;
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, field) => push_varints(&r, field, &mut dims)?,
            (2, Field::Varint(v)) => code = v as i64,
            (4, field) => push_fixed(&r, field, &mut floats, f32::from_le_bytes)?,
            (5, field) => push_varints(&r, field, &mut int32s)?,
            (7, field) => push_varints(&r, field, &mut int64s)?,
            (8, Field::Bytes(b)) => name = r.string(b)?,
            (9, Field::Bytes(b)) => raw = Some(b),
            (10, field) => push_fixed(&r, field, &mut doubles, f64::from_le_bytes)?,
            (13, _) => external = true,
            (14, Field::Varint(1)) => external = true,
            _ => {}
        }
    }
    if external {
        return Err(r.error(format!(
            "tensor {name:?} keeps its data in an external file, which rumus does not read; \
             export with the weights inside the model (`save_as_external_data=False`)"
        )));
    }
    let dims: Vec<usize> = dims
        .iter()
        .map(|&d| usize::try_from(d).map_err(|_| r.error(format!("tensor {name:?} has dim {d}"))))
        .collect::<Result<_>>()?;
    let numel = dims
        .iter()
        .try_fold(1usize, |n, &d| n.checked_mul(d))
        .ok_or_else(|| {
            r.error(format!(
                "tensor {name:?} has dims {dims:?}, too many elements"
            ))
        })?;
    let dtype = data_type(code).ok_or_else(|| {
        r.error(format!(
            "tensor {name:?} has data type {code}, which rumus does not read"
        ))
    })?;
    let values = match raw {
        Some(raw) => from_raw(&r, &name, code, raw, numel)?,
        None => match dtype {
            DType::F32 if code == 10 => {
                // float16 in int32_data, one value per element.
                TensorValues::F32(
                    int32s
                        .iter()
                        .map(|&bits| half::f16::from_bits(bits as u16).to_f32())
                        .collect(),
                )
            }
            DType::F32 => TensorValues::F32(floats),
            DType::F64 => TensorValues::F64(doubles),
            DType::Bool => TensorValues::Bool(int32s.iter().map(|&v| v != 0).collect()),
            _ if code == 7 => TensorValues::I64(int64s),
            _ => TensorValues::I64(int32s),
        },
    };
    let len = match &values {
        TensorValues::F32(v) => v.len(),
        TensorValues::F64(v) => v.len(),
        TensorValues::I64(v) => v.len(),
        TensorValues::Bool(v) => v.len(),
    };
    if len != numel {
        return Err(r.error(format!(
            "tensor {name:?} of dims {dims:?} holds {len} values, not {numel}"
        )));
    }
    Ok(TensorData { name, dims, values })
}

fn from_raw(
    r: &Reader<'_>,
    name: &str,
    code: i64,
    raw: &[u8],
    numel: usize,
) -> Result<TensorValues> {
    let width = match code {
        1 | 6 | 12 => 4,
        11 | 7 | 13 => 8,
        10 | 5 | 4 => 2,
        2 | 3 | 9 => 1,
        _ => 0,
    };
    if Some(raw.len()) != numel.checked_mul(width) {
        return Err(r.error(format!(
            "tensor {name:?} has {} bytes of data, not {numel} values of {width} bytes",
            raw.len()
        )));
    }
    let ints = |from: fn(&[u8]) -> i64| raw.chunks_exact(width).map(from).collect();
    Ok(match code {
        1 => TensorValues::F32(little_endian(raw, f32::from_le_bytes)),
        10 => TensorValues::F32(little_endian(raw, |b| half::f16::from_le_bytes(b).to_f32())),
        11 => TensorValues::F64(little_endian(raw, f64::from_le_bytes)),
        7 => TensorValues::I64(little_endian(raw, i64::from_le_bytes)),
        13 => TensorValues::I64(little_endian(raw, |b| u64::from_le_bytes(b) as i64)),
        6 => TensorValues::I64(ints(|c| {
            i64::from(i32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        })),
        12 => TensorValues::I64(ints(|c| {
            i64::from(u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
        })),
        5 => TensorValues::I64(ints(|c| i64::from(i16::from_le_bytes([c[0], c[1]])))),
        4 => TensorValues::I64(ints(|c| i64::from(u16::from_le_bytes([c[0], c[1]])))),
        3 => TensorValues::I64(ints(|c| i64::from(c[0] as i8))),
        2 => TensorValues::I64(ints(|c| i64::from(c[0]))),
        9 => TensorValues::Bool(raw.iter().map(|&b| b != 0).collect()),
        _ => unreachable!("data_type admitted only the codes above"),
    })
}

fn decode_value_info(mut r: Reader<'_>) -> Result<ValueInfo> {
    let mut info = ValueInfo {
        name: String::new(),
        dims: Vec::new(),
    };
    while let Some((number, field)) = r.next()? {
        match (number, field) {
            (1, Field::Bytes(b)) => info.name = r.string(b)?,
            (2, Field::Bytes(b)) => info.dims = decode_type_dims(r.sub(b, "TypeProto"))?,
            _ => {}
        }
    }
    Ok(info)
}

/// The dims of a `TypeProto.tensor_type.shape` (empty for a type without a shape).
fn decode_type_dims(mut r: Reader<'_>) -> Result<Vec<Option<usize>>> {
    let mut dims = Vec::new();
    while let Some((number, field)) = r.next()? {
        if let (1, Field::Bytes(tensor_type)) = (number, field) {
            let mut t = r.sub(tensor_type, "TypeProto.Tensor");
            while let Some((number, field)) = t.next()? {
                if let (2, Field::Bytes(shape)) = (number, field) {
                    let mut s = t.sub(shape, "TensorShapeProto");
                    while let Some((number, field)) = s.next()? {
                        if let (1, Field::Bytes(dim)) = (number, field) {
                            let mut d = s.sub(dim, "Dimension");
                            let mut value = None;
                            while let Some((number, field)) = d.next()? {
                                if let (1, Field::Varint(v)) = (number, field) {
                                    value = usize::try_from(v).ok();
                                }
                            }
                            dims.push(value);
                        }
                    }
                }
            }
        }
    }
    Ok(dims)
}

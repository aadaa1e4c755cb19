//! The part of ONNX's protobuf schema (`onnx.proto`, IR version 8) an exported model uses,
//! encoded by hand: a model is a handful of nested messages of varints, strings and packed
//! numbers, which does not justify a protobuf compiler in the build.

use crate::dtype::DType;

/// ONNX's `TensorProto.DataType` code of `dtype`.
pub fn elem_type(dtype: DType) -> i64 {
    match dtype {
        DType::F32 => 1,
        DType::I64 => 7,
        DType::Bool => 9,
        DType::F16 => 10,
        DType::BF16 => 16,
        DType::F64 => 11,
    }
}

/// An attribute of a node (`AttributeProto`).
#[derive(Debug, Clone, PartialEq)]
pub enum Attribute {
    Int(&'static str, i64),
    Float(&'static str, f32),
    Ints(&'static str, Vec<i64>),
}

/// A node of the graph (`NodeProto`).
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    pub op_type: &'static str,
    pub name: String,
    /// Value names; an empty name is an omitted optional input.
    pub inputs: Vec<String>,
    pub outputs: Vec<String>,
    pub attributes: Vec<Attribute>,
}

/// A constant of the graph (`TensorProto` with `raw_data`, little-endian).
#[derive(Debug, Clone, PartialEq)]
pub struct Initializer {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<usize>,
    pub raw: Vec<u8>,
}

/// A graph input or output (`ValueInfoProto` with a tensor type and shape).
#[derive(Debug, Clone)]
pub struct ValueInfo {
    pub name: String,
    pub dtype: DType,
    pub dims: Vec<Dim>,
}

/// One dimension of a graph input or output (`TensorShapeProto.Dimension`).
#[derive(Debug, Clone, PartialEq)]
pub enum Dim {
    /// A size fixed in the file (`dim_value`).
    Fixed(usize),
    /// A size given at run time, known by name (`dim_param`): two dimensions of one name
    /// are equal.
    Named(String),
    /// A size given at run time that no name describes (neither field set).
    Unknown,
}

/// A whole model (`ModelProto` with one `GraphProto`).
#[derive(Debug, Clone)]
pub struct Model {
    pub graph_name: String,
    pub opset: i64,
    pub nodes: Vec<Node>,
    pub initializers: Vec<Initializer>,
    pub inputs: Vec<ValueInfo>,
    pub outputs: Vec<ValueInfo>,
}

/// The IR version of ONNX 1.13 (opset 17 and 18 need IR >= 8).
const IR_VERSION: i64 = 8;

impl Model {
    pub fn encode(&self) -> Vec<u8> {
        let mut graph = Message::default();
        for node in &self.nodes {
            graph.message(1, &encode_node(node));
        }
        graph.string(2, &self.graph_name);
        for initializer in &self.initializers {
            graph.message(5, &encode_initializer(initializer));
        }
        for input in &self.inputs {
            graph.message(11, &encode_value_info(input));
        }
        for output in &self.outputs {
            graph.message(12, &encode_value_info(output));
        }
        let mut opset = Message::default();
        opset.string(1, "");
        opset.int(2, self.opset);

        let mut model = Message::default();
        model.int(1, IR_VERSION);
        model.string(2, "rumus");
        model.string(3, env!("CARGO_PKG_VERSION"));
        model.message(7, &graph.bytes);
        model.message(8, &opset.bytes);
        model.bytes
    }
}

fn encode_node(node: &Node) -> Vec<u8> {
    let mut m = Message::default();
    for input in &node.inputs {
        m.string(1, input);
    }
    for output in &node.outputs {
        m.string(2, output);
    }
    m.string(3, &node.name);
    m.string(4, node.op_type);
    for attribute in &node.attributes {
        m.message(5, &encode_attribute(attribute));
    }
    m.bytes
}

/// `AttributeProto.AttributeType` codes.
const ATTRIBUTE_FLOAT: i64 = 1;
const ATTRIBUTE_INT: i64 = 2;
const ATTRIBUTE_INTS: i64 = 7;

fn encode_attribute(attribute: &Attribute) -> Vec<u8> {
    let mut m = Message::default();
    match attribute {
        Attribute::Float(name, value) => {
            m.string(1, name);
            m.fixed32(2, value.to_bits());
            m.int(20, ATTRIBUTE_FLOAT);
        }
        Attribute::Int(name, value) => {
            m.string(1, name);
            m.int(3, *value);
            m.int(20, ATTRIBUTE_INT);
        }
        Attribute::Ints(name, values) => {
            m.string(1, name);
            for &value in values {
                m.int(8, value);
            }
            m.int(20, ATTRIBUTE_INTS);
        }
    }
    m.bytes
}

fn encode_initializer(initializer: &Initializer) -> Vec<u8> {
    let mut m = Message::default();
    for &d in &initializer.dims {
        m.int(1, d as i64);
    }
    m.int(2, elem_type(initializer.dtype));
    m.string(8, &initializer.name);
    m.length_delimited(9, &initializer.raw);
    m.bytes
}

fn encode_value_info(value: &ValueInfo) -> Vec<u8> {
    let mut shape = Message::default();
    for d in &value.dims {
        let mut dim = Message::default();
        match d {
            Dim::Fixed(size) => dim.int(1, *size as i64),
            Dim::Named(name) => dim.string(2, name),
            Dim::Unknown => {}
        }
        shape.message(1, &dim.bytes);
    }
    let mut tensor_type = Message::default();
    tensor_type.int(1, elem_type(value.dtype));
    tensor_type.message(2, &shape.bytes);
    let mut type_proto = Message::default();
    type_proto.message(1, &tensor_type.bytes);
    let mut m = Message::default();
    m.string(1, &value.name);
    m.message(2, &type_proto.bytes);
    m.bytes
}

/// Protobuf wire format: each field is a key (`number << 3 | wire type`) and its value.
#[derive(Default)]
struct Message {
    bytes: Vec<u8>,
}

impl Message {
    fn varint(&mut self, mut value: u64) {
        while value >= 0x80 {
            self.bytes.push((value as u8) | 0x80);
            value >>= 7;
        }
        self.bytes.push(value as u8);
    }

    fn key(&mut self, field: u32, wire_type: u8) {
        self.varint(u64::from(field) << 3 | u64::from(wire_type));
    }

    /// An `int32`/`int64` field (negative values take ten bytes, as protobuf encodes them).
    fn int(&mut self, field: u32, value: i64) {
        self.key(field, 0);
        self.varint(value as u64);
    }

    fn fixed32(&mut self, field: u32, bits: u32) {
        self.key(field, 5);
        self.bytes.extend_from_slice(&bits.to_le_bytes());
    }

    fn length_delimited(&mut self, field: u32, data: &[u8]) {
        self.key(field, 2);
        self.varint(data.len() as u64);
        self.bytes.extend_from_slice(data);
    }

    fn string(&mut self, field: u32, text: &str) {
        self.length_delimited(field, text.as_bytes());
    }

    fn message(&mut self, field: u32, encoded: &[u8]) {
        self.length_delimited(field, encoded);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Values from the protobuf encoding guide: 150 is `96 01`, a string field is its key,
    /// length and bytes, and -1 is ten bytes.
    #[test]
    fn fields_encode_as_the_wire_format_defines() {
        let mut m = Message::default();
        m.int(1, 150);
        assert_eq!(m.bytes, [0x08, 0x96, 0x01]);
        let mut m = Message::default();
        m.string(2, "testing");
        assert_eq!(m.bytes, b"\x12\x07testing");
        let mut m = Message::default();
        m.int(1, -1);
        assert_eq!(m.bytes.len(), 11);
        assert_eq!(m.bytes[10], 0x01);
    }
}

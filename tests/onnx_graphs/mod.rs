//! ONNX files written field by field, for graphs no exporter would write: the hostile
//! models of `tests/hostile_onnx.rs` and the fuzz seeds made from them. Only the fields the
//! importer reads (`onnx.proto`, IR version 8): a model is nested length-delimited messages
//! of varints, strings and packed integers.

/// A protobuf message under construction.
#[derive(Default)]
struct Message(Vec<u8>);

impl Message {
    fn varint(&mut self, mut v: u64) {
        while v >= 0x80 {
            self.0.push(v as u8 | 0x80);
            v >>= 7;
        }
        self.0.push(v as u8);
    }

    fn key(&mut self, field: u64, wire: u64) {
        self.varint(field << 3 | wire);
    }

    fn int(&mut self, field: u64, v: i64) -> &mut Self {
        self.key(field, 0);
        self.varint(v as u64);
        self
    }

    fn bytes(&mut self, field: u64, bytes: &[u8]) -> &mut Self {
        self.key(field, 2);
        self.varint(bytes.len() as u64);
        self.0.extend_from_slice(bytes);
        self
    }

    fn packed(&mut self, field: u64, values: &[i64]) -> &mut Self {
        let mut run = Message::default();
        values.iter().for_each(|&v| run.varint(v as u64));
        self.bytes(field, &run.0)
    }
}

/// An attribute of a node.
pub enum Attr {
    Int(&'static str, i64),
    Str(&'static str, &'static str),
    /// (Window geometry for `tests/onnx_import.rs`; each test binary uses its own part.)
    #[allow(dead_code)]
    Ints(&'static str, &'static [i64]),
}

/// A graph in the default domain at one opset.
pub struct Graph {
    opset: i64,
    graph: Message,
}

/// ONNX's element type codes.
const FLOAT: i64 = 1;
const INT64: i64 = 7;

impl Graph {
    pub fn new(opset: i64) -> Self {
        let mut graph = Message::default();
        graph.bytes(2, b"hostile");
        Graph { opset, graph }
    }

    fn tensor(name: &str, dims: &[usize], code: i64, raw: &[u8]) -> Vec<u8> {
        let dims: Vec<i64> = dims.iter().map(|&d| d as i64).collect();
        let mut t = Message::default();
        t.packed(1, &dims)
            .int(2, code)
            .bytes(8, name.as_bytes())
            .bytes(9, raw);
        t.0
    }

    /// A 1-D `int64` initializer (a shape, axes, sizes).
    pub fn ints(&mut self, name: &str, values: &[i64]) -> &mut Self {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = Graph::tensor(name, &[values.len()], INT64, &raw);
        self.graph.bytes(5, &t);
        self
    }

    /// A `float` initializer of `dims`.
    pub fn floats(&mut self, name: &str, dims: &[usize], values: &[f32]) -> &mut Self {
        let raw: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let t = Graph::tensor(name, dims, FLOAT, &raw);
        self.graph.bytes(5, &t);
        self
    }

    /// A graph input (`float`, static dims) or, with `field` 12, an output.
    fn value(&mut self, field: u64, name: &str, dims: &[usize]) -> &mut Self {
        let mut shape = Message::default();
        for &d in dims {
            shape.bytes(1, &Message::default().int(1, d as i64).0);
        }
        let mut tensor = Message::default();
        tensor.int(1, FLOAT).bytes(2, &shape.0);
        let mut info = Message::default();
        info.bytes(1, name.as_bytes())
            .bytes(2, &Message::default().bytes(1, &tensor.0).0);
        self.graph.bytes(field, &info.0);
        self
    }

    pub fn input(&mut self, name: &str, dims: &[usize]) -> &mut Self {
        self.value(11, name, dims)
    }

    pub fn output(&mut self, name: &str) -> &mut Self {
        self.value(12, name, &[])
    }

    pub fn node(
        &mut self,
        op: &str,
        inputs: &[&str],
        outputs: &[&str],
        attrs: &[Attr],
    ) -> &mut Self {
        let mut node = Message::default();
        inputs.iter().for_each(|i| {
            node.bytes(1, i.as_bytes());
        });
        outputs.iter().for_each(|o| {
            node.bytes(2, o.as_bytes());
        });
        node.bytes(3, format!("{op}_{}", outputs[0]).as_bytes())
            .bytes(4, op.as_bytes());
        for attr in attrs {
            let mut a = Message::default();
            match *attr {
                Attr::Int(name, v) => a.bytes(1, name.as_bytes()).int(3, v).int(20, 2),
                Attr::Str(name, s) => a
                    .bytes(1, name.as_bytes())
                    .bytes(4, s.as_bytes())
                    .int(20, 3),
                Attr::Ints(name, v) => a.bytes(1, name.as_bytes()).packed(8, v).int(20, 7),
            };
            node.bytes(5, &a.0);
        }
        self.graph.bytes(1, &node.0);
        self
    }

    /// The model file.
    pub fn bytes(&self) -> Vec<u8> {
        let mut opset = Message::default();
        opset.bytes(1, b"").int(2, self.opset);
        let mut model = Message::default();
        model
            .int(1, 8)
            .bytes(2, b"rumus tests")
            .bytes(7, &self.graph.0)
            .bytes(8, &opset.0);
        model.0
    }
}

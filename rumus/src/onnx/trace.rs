//! Tracing a forward pass into ONNX nodes. While a trace runs on this thread, every
//! exportable op reports itself through the ops' trace hook: the outermost op of a nesting (a `linear`
//! that calls `matmul` inside) becomes nodes, the ops inside it do not. Tensors are known by
//! identity: the graph input, the module's parameters and buffers (initializers under their
//! dotted names), the outputs of traced ops, and constants made during the pass (baked in).
//!
//! The example input requires a gradient during the trace, so every tensor computed from it
//! carries graph metadata: one that reaches a traced op without having been produced by one
//! came out of an op with no ONNX form, and the export fails naming that op instead of
//! baking a computed value into the file as a constant.

use std::cell::RefCell;
use std::collections::HashMap;

use super::proto::{Attribute, Initializer, Node};
use crate::error::{Error, Result};
use crate::ops::hooks::{OpCall, Trace, install_trace};
use crate::tensor::DynTensor;

pub(super) const OP: &str = "onnx::export";

/// What a trace has gathered so far.
pub(super) struct Tracer {
    /// Nesting depth of traced ops being run.
    depth: usize,
    /// Value name of each known tensor, by identity.
    names: HashMap<usize, String>,
    /// Every tensor named, kept alive so no identity is reused during the trace.
    keep: Vec<DynTensor>,
    /// The module's tensors not used yet: they become initializers when an op reads them.
    pending: HashMap<String, DynTensor>,
    pub(super) nodes: Vec<Node>,
    pub(super) initializers: Vec<Initializer>,
    /// The first op that could not be exported.
    pub(super) error: Option<Error>,
    /// For fresh value and node names.
    counter: usize,
}

thread_local! {
    static TRACER: RefCell<Option<Tracer>> = const { RefCell::new(None) };
}

/// Whether a trace is running on this thread.
fn tracing() -> bool {
    TRACER.with(|t| t.borrow().is_some())
}

/// Runs `forward` with a fresh tracer that knows `named` tensors under their names (the
/// graph input and the module's tensors, the latter becoming initializers when used), and
/// returns its result with what was traced.
pub(super) fn run(
    named: Vec<(String, DynTensor, bool)>,
    forward: impl FnOnce() -> Result<DynTensor>,
) -> Result<(DynTensor, Tracer)> {
    if tracing() {
        return Err(Error::InvalidArgument {
            op: OP,
            message: "an export is already tracing on this thread; export one model at a time"
                .into(),
        });
    }
    let mut tracer = Tracer {
        depth: 0,
        names: HashMap::new(),
        keep: Vec::new(),
        pending: HashMap::new(),
        nodes: Vec::new(),
        initializers: Vec::new(),
        error: None,
        counter: 0,
    };
    for (name, tensor, is_initializer) in named {
        if is_initializer {
            tracer.pending.insert(name.clone(), tensor.clone());
        }
        tracer.name(&tensor, name);
    }
    TRACER.with(|t| *t.borrow_mut() = Some(tracer));
    let previous = install_trace(Some(&Hook));
    let result = forward();
    install_trace(previous);
    let tracer = TRACER
        .with(|t| t.borrow_mut().take())
        .expect("the tracer was installed above");
    Ok((result?, tracer))
}

impl Tracer {
    fn name(&mut self, tensor: &DynTensor, name: String) {
        self.names.insert(tensor.identity(), name);
        self.keep.push(tensor.clone());
    }

    /// Makes a module tensor an initializer the first time an op reads it.
    fn claim(&mut self, name: &str) -> Result<()> {
        if let Some(tensor) = self.pending.remove(name) {
            self.initializers.push(initializer(name, &tensor)?);
        }
        Ok(())
    }

    fn fresh(&mut self, stem: &str) -> String {
        self.counter += 1;
        format!("/{stem}_{}", self.counter)
    }

    /// The value name of `tensor`, once it was produced (the output of the graph).
    pub(super) fn name_of(&self, tensor: &DynTensor) -> Option<&str> {
        self.names.get(&tensor.identity()).map(String::as_str)
    }
}

/// The tracer as the ops see it, installed for the length of [`run`].
struct Hook;

impl Trace for Hook {
    fn enter(&self) {
        TRACER.with(|t| {
            if let Some(tracer) = t.borrow_mut().as_mut() {
                tracer.depth += 1;
            }
        });
    }

    /// The outermost op of a nesting becomes nodes, given its output.
    fn leave(&self, call: &OpCall<'_>, operands: &[&DynTensor], output: Option<&DynTensor>) {
        TRACER.with(|t| {
            let mut t = t.borrow_mut();
            let Some(tracer) = t.as_mut() else {
                return;
            };
            tracer.depth -= 1;
            // An op that returned one of its inputs (a reshape to the same shape) adds nothing.
            let known = output.is_some_and(|out| tracer.names.contains_key(&out.identity()));
            if let (0, false, Some(out), None) = (tracer.depth, known, output, &tracer.error) {
                let mut writer = Emit { tracer };
                if let Err(e) = super::calls::emit(&mut writer, call, operands, out) {
                    writer.tracer.error = Some(e);
                }
            }
        });
    }
}

/// Writes the nodes of one op.
pub(crate) struct Emit<'a> {
    tracer: &'a mut Tracer,
}

impl Emit<'_> {
    /// The value name of an input of the op: a known tensor, or a constant made during the
    /// pass (an initializer). A tensor computed from the graph input by an untraced op is an
    /// error.
    pub(crate) fn input(&mut self, tensor: &DynTensor) -> Result<String> {
        if let Some(name) = self.tracer.names.get(&tensor.identity()) {
            let name = name.clone();
            self.tracer.claim(&name)?;
            return Ok(name);
        }
        if tensor.requires_grad() {
            return Err(Error::InvalidArgument {
                op: OP,
                message: format!(
                    "a {:?} value reaches the graph from an op without an ONNX export ({}); \
                     write the forward pass with exportable ops",
                    tensor.dims(),
                    tensor.grad_fn_name().unwrap_or("unknown op")
                ),
            });
        }
        let name = self.tracer.fresh("constant");
        self.tracer.initializers.push(initializer(&name, tensor)?);
        self.tracer.name(tensor, name.clone());
        Ok(name)
    }

    /// An optional input: its name, or the empty name ONNX reads as "omitted".
    pub(crate) fn optional(&mut self, tensor: Option<&DynTensor>) -> Result<String> {
        tensor.map_or(Ok(String::new()), |t| self.input(t))
    }

    /// A constant `i64` vector (shapes, axes), as an initializer.
    pub(crate) fn ints(&mut self, values: &[i64]) -> Result<String> {
        let tensor = DynTensor::from_vec(values.to_vec(), &[values.len()])?;
        self.input(&tensor)
    }

    /// A constant scalar of `like`'s dtype, as an initializer.
    pub(crate) fn scalar(&mut self, value: f64, like: &DynTensor) -> Result<String> {
        let tensor = DynTensor::scalar(value, like.dtype())?;
        self.input(&tensor)
    }

    /// A fresh name for a value between the nodes of one op.
    pub(crate) fn temp(&mut self) -> String {
        self.tracer.fresh("t")
    }

    /// The name of the op's result.
    pub(crate) fn output(&mut self, tensor: &DynTensor) -> String {
        let name = self.tracer.fresh("v");
        self.tracer.name(tensor, name.clone());
        name
    }

    pub(crate) fn node(
        &mut self,
        op_type: &'static str,
        inputs: Vec<String>,
        outputs: Vec<String>,
        attributes: Vec<Attribute>,
    ) {
        let name = self.tracer.fresh(op_type);
        self.tracer.nodes.push(Node {
            op_type,
            name,
            inputs,
            outputs,
            attributes,
        });
    }

    /// The common case: one node from `inputs` to the op's output.
    pub(crate) fn single(
        &mut self,
        op_type: &'static str,
        inputs: Vec<String>,
        out: &DynTensor,
        attributes: Vec<Attribute>,
    ) {
        let output = self.output(out);
        self.node(op_type, inputs, vec![output], attributes);
    }
}

/// `tensor`'s values as an initializer named `name`.
pub(super) fn initializer(name: &str, tensor: &DynTensor) -> Result<Initializer> {
    use crate::storage::CpuBuffer;
    let raw = match tensor.to_contiguous_buffer()? {
        CpuBuffer::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuBuffer::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuBuffer::F16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuBuffer::BF16(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuBuffer::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        CpuBuffer::Bool(v) => v.iter().map(|&b| u8::from(b)).collect(),
    };
    Ok(Initializer {
        name: name.to_string(),
        dtype: tensor.dtype(),
        dims: tensor.dims().to_vec(),
        raw,
    })
}

//! The one place every traced op runs through, as PyTorch's dispatcher runs an op through
//! its autocast, tracing and autograd keys: [`apply`] lets an installed autocast hook take
//! the call, runs the op's kernels, records the op's node on the tape, and shows the call
//! to an installed trace hook. An op describes itself as an [`OpCall`] (its arguments as
//! plain data) so the layers above `ops` (`amp`, `onnx`) can act on it without the ops
//! knowing them: they install their hooks here while they are active ([`install_autocast`],
//! [`install_trace`]), per thread.
//!
//! With no hook installed, an op pays one thread-local read of [`FLAGS`] for all of this.

use std::cell::Cell;

use super::BackwardOp;
use super::{BinaryOp, CompareOp, UnaryOp};
use crate::autograd::record;
use crate::error::Result;
use crate::tensor::DynTensor;

/// `(height, width)` of a window, a stride, a padding, ...
type Pair = (usize, usize);

/// An op call as data: which op and its non-tensor arguments (tensors that are not operands
/// of the op's gradient, such as a mask or indices, too). The operands go beside it, in the
/// order each variant names; `bias?` is there only when given.
// Read by the ONNX tracer only (the `onnx` feature).
#[cfg_attr(not(feature = "onnx"), allow(dead_code))]
#[derive(Debug, Clone, Copy)]
pub(crate) enum OpCall<'a> {
    /// `[x]`.
    Unary(UnaryOp),
    /// `[lhs, rhs]`.
    Binary(BinaryOp),
    /// `[lhs, rhs]`.
    Compare(CompareOp),
    /// `[on_true, on_false]`.
    Where { condition: &'a DynTensor },
    /// `[lhs, rhs]`, `bool` masks.
    And,
    /// `[x]`, a `bool` mask.
    Not,
    /// `[x, mask]`.
    MaskedFill { value: f64 },
    /// `[lhs, rhs]`, any ranks (`matmul`).
    MatMul,
    /// `[lhs, rhs, bias?]`, both of rank 2 or more, `bias` along the last axis: the product
    /// kernel `matmul` and `linear` reach (what autocast takes).
    Product,
    /// `[x, weight, bias?]`.
    Linear,
    /// `[x, weight, bias?]`.
    Conv2d {
        stride: Pair,
        padding: Pair,
        dilation: Pair,
        groups: usize,
    },
    /// `[x, weight, bias?]`.
    ConvTranspose2d {
        stride: Pair,
        padding: Pair,
        output_padding: Pair,
        dilation: Pair,
    },
    /// `[x]`.
    MaxPool2d {
        kernel: Pair,
        stride: Pair,
        padding: Pair,
    },
    /// `[x]`.
    AvgPool2d {
        kernel: Pair,
        stride: Pair,
        padding: Pair,
        count_include_pad: bool,
    },
    /// `[x]`.
    AdaptiveAvgPool2d { output_size: Pair },
    /// `[x]`.
    Contiguous,
    /// `[x]`; the new dims are the output's.
    Reshape,
    /// `[x]`.
    Permute { perm: &'a [usize] },
    /// `[x]`; the new dims are the output's.
    Expand,
    /// `[x]`.
    Narrow {
        axis: isize,
        start: usize,
        len: usize,
    },
    /// `[x]`; `log_softmax` when `log`.
    Softmax { axis: isize, log: bool },
    /// `[x]`: `sum`, or `mean` when `mean`.
    Reduce {
        axes: &'a [isize],
        keepdim: bool,
        mean: bool,
    },
    /// `[x]`: `max`, or `min` when not `max`.
    Extremum {
        axes: &'a [isize],
        keepdim: bool,
        max: bool,
    },
    /// `[x]`: `argmax`, or `argmin` when not `max`.
    ArgExtremum {
        axis: isize,
        keepdim: bool,
        max: bool,
    },
    /// The tensors joined.
    Concat { axis: isize },
    /// `[x]` (`index_select`).
    Gather { axis: isize, indices: &'a DynTensor },
    /// `[x]`; the dtype is the output's.
    Cast,
    /// `[x]`, normalised over its last axis.
    LayerNorm {
        weight: Option<&'a DynTensor>,
        bias: Option<&'a DynTensor>,
        eps: f64,
    },
    /// `[x]`; `running` is `(mean, var)`.
    BatchNorm {
        running: Option<(&'a DynTensor, &'a DynTensor)>,
        weight: Option<&'a DynTensor>,
        bias: Option<&'a DynTensor>,
        training: bool,
        eps: f64,
    },
    /// `[weight]`, rows picked by `indices`.
    Embedding { indices: &'a DynTensor },
}

/// Records an op's node on the tape, over the operands the op was applied to.
#[derive(Clone, Copy)]
pub(crate) struct Tape<'a> {
    operands: &'a [&'a DynTensor],
}

impl Tape<'_> {
    /// `output` as a node whose backward op `backward` makes, when an operand requires a
    /// gradient and grad mode is on; else `output` as it is. An op that returns an operand
    /// unchanged, a value of ops that recorded themselves, or one without a gradient does
    /// not call it.
    #[inline]
    pub(crate) fn node(
        self,
        output: DynTensor,
        backward: impl FnOnce() -> BackwardOp,
    ) -> DynTensor {
        record(output, self.operands, backward)
    }
}

/// Runs reduced-precision versions of ops while an autocast scope is active (`amp`).
pub(crate) trait Autocast: Sync {
    /// Whether `call` on `operands` runs in reduced precision now.
    fn applies(&self, call: &OpCall<'_>, operands: &[&DynTensor]) -> bool;

    /// `call` on `operands` in reduced precision, recorded on the tape; called only where
    /// [`applies`](Self::applies) holds.
    fn run(&self, call: &OpCall<'_>, operands: &[&DynTensor]) -> Result<DynTensor>;

    /// The reduced precision: `f16` or `bf16`.
    fn dtype(&self) -> crate::dtype::DType;
}

/// Watches the ops a pass runs (the ONNX export).
pub(crate) trait Trace: Sync {
    /// An op starts (ops nest: one op can run others).
    fn enter(&self);

    /// The op that started last ended with `output` (`None` when it failed).
    fn leave(&self, call: &OpCall<'_>, operands: &[&DynTensor], output: Option<&DynTensor>);
}

const AUTOCAST: u8 = 1;
const TRACE: u8 = 2;
const ANOMALY: u8 = 4;

thread_local! {
    /// Which hooks are installed on this thread: what an op reads when none is.
    static FLAGS: Cell<u8> = const { Cell::new(0) };
    static AUTOCAST_HOOK: Cell<Option<&'static dyn Autocast>> = const { Cell::new(None) };
    static TRACE_HOOK: Cell<Option<&'static dyn Trace>> = const { Cell::new(None) };
}

fn set_flag(flag: u8, on: bool) {
    FLAGS.with(|flags| {
        let rest = flags.get() & !flag;
        flags.set(if on { rest | flag } else { rest });
    });
}

/// Installs `hook` as this thread's autocast (`None` removes it) and returns the one it
/// replaces.
pub(crate) fn install_autocast(
    hook: Option<&'static dyn Autocast>,
) -> Option<&'static dyn Autocast> {
    set_flag(AUTOCAST, hook.is_some());
    AUTOCAST_HOOK.with(|h| h.replace(hook))
}

/// Installs `hook` as this thread's tracer (`None` removes it) and returns the one it
/// replaces.
#[cfg_attr(not(feature = "onnx"), allow(dead_code))]
pub(crate) fn install_trace(hook: Option<&'static dyn Trace>) -> Option<&'static dyn Trace> {
    set_flag(TRACE, hook.is_some());
    TRACE_HOOK.with(|h| h.replace(hook))
}

/// Makes every op on this thread check its output for NaN and infinity (anomaly mode).
pub(crate) fn set_anomaly_flag(on: bool) {
    set_flag(ANOMALY, on);
}

/// Whether an autocast hook is installed on this thread (the fused attention and the
/// direct convolutions choose their kernels by it).
pub(crate) fn autocast_enabled() -> bool {
    FLAGS.with(Cell::get) & AUTOCAST != 0
}

/// The dtype this thread's autocast scope runs products in, if one is active.
pub(crate) fn autocast_dtype() -> Option<crate::dtype::DType> {
    if !autocast_enabled() {
        return None;
    }
    AUTOCAST_HOOK.with(Cell::get).map(|h| h.dtype())
}

/// Whether the autocast hook would take `call` on `operands` now.
pub(crate) fn autocast_applies(call: &OpCall<'_>, operands: &[&DynTensor]) -> bool {
    autocast_enabled()
        && AUTOCAST_HOOK
            .with(Cell::get)
            .is_some_and(|h| h.applies(call, operands))
}

/// Whether a tracer watches this thread's ops (ops with a fused form that has no trace
/// take their composed form then).
pub(crate) fn tracing() -> bool {
    FLAGS.with(Cell::get) & TRACE != 0
}

/// Runs the op `call` on `operands` (see [`OpCall`] for their order): the autocast hook's
/// version where it takes the call, else `forward`, which records the op's node through the
/// [`Tape`] it is given; a tracer sees the call and its output.
#[inline]
pub(crate) fn apply(
    call: OpCall<'_>,
    operands: &[&DynTensor],
    forward: impl FnOnce(Tape<'_>) -> Result<DynTensor>,
) -> Result<DynTensor> {
    let flags = FLAGS.with(Cell::get);
    if flags == 0 {
        return forward(Tape { operands });
    }
    hooked(flags, call, operands, forward)
}

/// [`apply`] with a hook installed, out of line so the ops' path without hooks stays
/// small.
#[cold]
#[inline(never)]
fn hooked(
    flags: u8,
    call: OpCall<'_>,
    operands: &[&DynTensor],
    forward: impl FnOnce(Tape<'_>) -> Result<DynTensor>,
) -> Result<DynTensor> {
    let tracer = match flags & TRACE {
        0 => None,
        _ => TRACE_HOOK.with(Cell::get),
    };
    if let Some(tracer) = tracer {
        tracer.enter();
    }
    let autocast = match flags & AUTOCAST {
        0 => None,
        _ => AUTOCAST_HOOK
            .with(Cell::get)
            .filter(|h| h.applies(&call, operands)),
    };
    let output = match autocast {
        Some(hook) => hook.run(&call, operands),
        None => forward(Tape { operands }),
    };
    if let Some(tracer) = tracer {
        tracer.leave(&call, operands, output.as_ref().ok());
    }
    if flags & ANOMALY != 0
        && let Ok(output) = &output
    {
        super::anomaly::check_forward(&call, operands, output)?;
    }
    output
}

#[cfg(test)]
mod tests {
    use std::cell::RefCell;

    use super::*;
    use crate::dtype::DType;

    thread_local! {
        /// What the test hooks saw on this thread: `(nesting depth, call)` per finished op.
        static SEEN: RefCell<(usize, Vec<(usize, String)>)> = const { RefCell::new((0, Vec::new())) };
    }

    fn name(call: &OpCall<'_>) -> String {
        let full = format!("{call:?}");
        full.split([' ', '('])
            .next()
            .unwrap_or_default()
            .to_string()
    }

    struct Recorder;

    impl Trace for Recorder {
        fn enter(&self) {
            SEEN.with(|s| s.borrow_mut().0 += 1);
        }

        fn leave(&self, call: &OpCall<'_>, _: &[&DynTensor], output: Option<&DynTensor>) {
            assert!(output.is_some());
            SEEN.with(|s| {
                let mut s = s.borrow_mut();
                s.0 -= 1;
                let depth = s.0;
                s.1.push((depth, name(call)));
            });
        }
    }

    fn traced(f: impl FnOnce() -> Result<DynTensor>) -> Vec<(usize, String)> {
        SEEN.with(|s| *s.borrow_mut() = (0, Vec::new()));
        let previous = install_trace(Some(&Recorder));
        f().unwrap();
        install_trace(previous);
        SEEN.with(|s| std::mem::take(&mut s.borrow_mut().1))
    }

    #[test]
    fn a_tracer_sees_every_op_with_the_ops_it_runs_nested_inside() {
        let x = DynTensor::ones(&[2, 3], DType::F32).unwrap();
        let w = DynTensor::ones(&[4, 3], DType::F32).unwrap();
        let seen = traced(|| x.add(&x)?.relu());
        assert_eq!(seen, [(0, "Binary".into()), (0, "Unary".into())]);
        // `linear` without a bias is `x @ w^T`: the transpose and the product run inside it.
        let seen = traced(|| x.linear(&w, None));
        assert_eq!(seen.last(), Some(&(0, "Linear".to_string())));
        assert!(seen.contains(&(1, "Permute".into())), "{seen:?}");
        assert!(seen.contains(&(2, "Product".into())), "{seen:?}");
        assert!(seen[..seen.len() - 1].iter().all(|(depth, _)| *depth > 0));
        // Removed, the tracer sees nothing.
        SEEN.with(|s| *s.borrow_mut() = (0, Vec::new()));
        x.add(&x).unwrap();
        assert!(SEEN.with(|s| s.borrow().1.is_empty()));
        assert!(!tracing());
    }

    /// Takes every product and answers zeros (of the product's shape for 2-D operands).
    struct Zeros;

    impl Autocast for Zeros {
        fn applies(&self, call: &OpCall<'_>, _: &[&DynTensor]) -> bool {
            matches!(call, OpCall::Product)
        }

        fn run(&self, _: &OpCall<'_>, operands: &[&DynTensor]) -> Result<DynTensor> {
            let (a, b) = (operands[0], operands[1]);
            DynTensor::zeros(&[a.dims()[0], b.dims()[1]], DType::F32)
        }

        fn dtype(&self) -> DType {
            DType::F16
        }
    }

    #[test]
    fn an_autocast_hook_takes_the_calls_it_applies_to_while_installed() {
        let a = DynTensor::from_vec(vec![1.0f32, 2.0, 3.0, 4.0], &[2, 2]).unwrap();
        let previous = install_autocast(Some(&Zeros));
        assert!(autocast_enabled());
        assert!(autocast_applies(&OpCall::Product, &[&a, &a]));
        let product = a.matmul(&a).unwrap().to_vec::<f32>().unwrap();
        let sum = a.add(&a).unwrap().to_vec::<f32>().unwrap();
        install_autocast(previous);
        assert_eq!(product, [0.0; 4]);
        assert_eq!(sum, [2.0, 4.0, 6.0, 8.0]);
        assert!(!autocast_enabled());
        // [[1, 2], [3, 4]]^2 by hand.
        let product = a.matmul(&a).unwrap().to_vec::<f32>().unwrap();
        assert_eq!(product, [7.0, 10.0, 15.0, 22.0]);
    }
}

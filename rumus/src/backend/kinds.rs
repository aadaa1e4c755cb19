//! What kernels are asked to compute: the op codes every backend understands. They sit here,
//! below the ops that use them, so a backend's kernels never import `ops`; `rumus::ops`
//! re-exports them under their public names.

/// `sqrt(2 / pi)`, the scale inside GELU's tanh approximation.
pub(crate) const SQRT_2_OVER_PI: f64 = 0.797_884_560_802_865_4;
/// The cubic coefficient of GELU's tanh approximation.
pub(crate) const GELU_TANH_COEF: f64 = 0.044_715;
/// `1 / sqrt(2 pi)`, the normal density at 0.
pub(crate) const FRAC_1_SQRT_2PI: f64 = 0.398_942_280_401_432_7;

/// A function applied to every element.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum UnaryOp {
    /// `-x`.
    Neg,
    /// `e^x`.
    Exp,
    /// Natural logarithm.
    Log,
    /// Square root.
    Sqrt,
    /// `1 / sqrt(x)`.
    Rsqrt,
    /// `|x|`.
    Abs,
    /// -1, 0 or 1; its gradient is zero everywhere.
    Sign,
    /// The Gauss error function.
    Erf,
    /// Sine (radians).
    Sin,
    /// Cosine (radians).
    Cos,
    /// The largest integer not above `x`; its gradient is zero everywhere.
    Floor,
    /// `ln(1 + x)`, accurate for `x` near zero where `ln` of the sum loses every digit.
    Log1p,
    /// `max(x, 0)`.
    Relu,
    /// `x` for `x > 0`, else `x` times the slope held.
    LeakyRelu(f64),
    /// `1 / (1 + e^-x)`, computed without overflow for either sign.
    Sigmoid,
    /// Hyperbolic tangent.
    Tanh,
    /// `x * Phi(x)` with the exact normal CDF.
    Gelu,
    /// The tanh approximation of GELU used by GPT-2.
    GeluTanh,
    /// `x * sigmoid(x)` (swish).
    Silu,
    /// `ln(1 + e^(beta x)) / beta`, linear above `threshold` (PyTorch's defaults: 1, 20).
    Softplus {
        /// Sharpness: larger values approach ReLU.
        beta: f64,
        /// Above this value of `beta x` the result is `x`.
        threshold: f64,
    },
    /// `x ^ p` with the scalar exponent held.
    Powf(f64),
    /// `x` limited to `[min, max]`; NaN stays NaN.
    Clamp {
        /// Lower bound.
        min: f64,
        /// Upper bound.
        max: f64,
    },
    /// `x + s` with the scalar held.
    AddScalar(f64),
    /// `x * s` with the scalar held.
    MulScalar(f64),
}

impl UnaryOp {
    /// The op's lowercase name (`"relu"`, `"add_scalar"`), as error messages show it.
    pub fn name(self) -> &'static str {
        match self {
            UnaryOp::Neg => "neg",
            UnaryOp::Exp => "exp",
            UnaryOp::Log => "log",
            UnaryOp::Sqrt => "sqrt",
            UnaryOp::Rsqrt => "rsqrt",
            UnaryOp::Abs => "abs",
            UnaryOp::Sign => "sign",
            UnaryOp::Erf => "erf",
            UnaryOp::Sin => "sin",
            UnaryOp::Cos => "cos",
            UnaryOp::Floor => "floor",
            UnaryOp::Log1p => "log1p",
            UnaryOp::Relu => "relu",
            UnaryOp::LeakyRelu(_) => "leaky_relu",
            UnaryOp::Sigmoid => "sigmoid",
            UnaryOp::Tanh => "tanh",
            UnaryOp::Gelu => "gelu",
            UnaryOp::GeluTanh => "gelu_tanh",
            UnaryOp::Silu => "silu",
            UnaryOp::Softplus { .. } => "softplus",
            UnaryOp::Powf(_) => "powf",
            UnaryOp::Clamp { .. } => "clamp",
            UnaryOp::AddScalar(_) => "add_scalar",
            UnaryOp::MulScalar(_) => "mul_scalar",
        }
    }

    /// Every op (parameters are placeholders): the list kernels' op-code constants are
    /// generated from (`UNARY_RELU` in WGSL).
    pub const ALL: [UnaryOp; 24] = [
        UnaryOp::Neg,
        UnaryOp::Exp,
        UnaryOp::Log,
        UnaryOp::Sqrt,
        UnaryOp::Rsqrt,
        UnaryOp::Abs,
        UnaryOp::Sign,
        UnaryOp::Erf,
        UnaryOp::Relu,
        UnaryOp::LeakyRelu(0.0),
        UnaryOp::Sigmoid,
        UnaryOp::Tanh,
        UnaryOp::Gelu,
        UnaryOp::GeluTanh,
        UnaryOp::Silu,
        UnaryOp::Softplus {
            beta: 0.0,
            threshold: 0.0,
        },
        UnaryOp::Powf(0.0),
        UnaryOp::Clamp { min: 0.0, max: 0.0 },
        UnaryOp::AddScalar(0.0),
        UnaryOp::MulScalar(0.0),
        UnaryOp::Sin,
        UnaryOp::Cos,
        UnaryOp::Floor,
        UnaryOp::Log1p,
    ];

    /// The op's number in kernels that switch on it: its place in [`UnaryOp::ALL`].
    pub fn code(self) -> u32 {
        let same = |other: &UnaryOp| std::mem::discriminant(other) == std::mem::discriminant(&self);
        Self::ALL
            .iter()
            .position(same)
            .expect("every op is in UnaryOp::ALL") as u32
    }

    /// Activations whose input gradient takes one pass over the output gradient and the
    /// input (`fused_backward`), on the host and on a GPU.
    pub(crate) fn gradient_in_one_pass(self) -> bool {
        matches!(
            self,
            UnaryOp::Relu
                | UnaryOp::LeakyRelu(_)
                | UnaryOp::Sigmoid
                | UnaryOp::Tanh
                | UnaryOp::Gelu
                | UnaryOp::GeluTanh
                | UnaryOp::Silu
        )
    }
}

/// Arithmetic between two tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BinaryOp {
    /// `a + b`.
    Add,
    /// `a - b`.
    Sub,
    /// `a * b`.
    Mul,
    /// `a / b`.
    Div,
    /// `a ^ b`, a floating-point power.
    Pow,
}

impl BinaryOp {
    /// Every op: the list kernels' op-code constants are generated from (`BINARY_ADD`).
    pub const ALL: [BinaryOp; 5] = [
        BinaryOp::Add,
        BinaryOp::Sub,
        BinaryOp::Mul,
        BinaryOp::Div,
        BinaryOp::Pow,
    ];

    /// The op's number in kernels that switch on it.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The op's lowercase name, as error messages show it.
    pub fn name(self) -> &'static str {
        match self {
            BinaryOp::Add => "add",
            BinaryOp::Sub => "sub",
            BinaryOp::Mul => "mul",
            BinaryOp::Div => "div",
            BinaryOp::Pow => "pow",
        }
    }
}

/// Element comparisons; the result is a `bool` tensor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CompareOp {
    /// `a == b`.
    Eq,
    /// `a != b`.
    Ne,
    /// `a < b`.
    Lt,
    /// `a <= b`.
    Le,
    /// `a > b`.
    Gt,
    /// `a >= b`.
    Ge,
}

/// Dropout's draws: elements whose draw under `seed` falls below `p` are zeroed, the others
/// multiplied by `scale`, `1 / (1 - p)`. An element's draw is a hash of the seed and its
/// index in contiguous order, the same on every backend.
#[derive(Debug, Clone, Copy)]
pub struct DropoutDraws {
    /// The probability of zeroing an element.
    pub p: f64,
    /// What kept elements are multiplied by.
    pub scale: f64,
    /// The seed of the draws.
    pub seed: u64,
}

impl DropoutDraws {
    /// The draws that zero with probability `p` (`0 < p < 1`).
    pub fn new(p: f64, seed: u64) -> Self {
        DropoutDraws {
            p,
            scale: 1.0 / (1.0 - p),
            seed,
        }
    }
}

/// Scalars of one Adam step, already bias-corrected.
#[derive(Clone, Copy)]
pub struct AdamScalars<T> {
    /// `lr / (1 - beta1^t)`.
    pub step_size: T,
    /// Decay rate of the first-moment (mean) estimate.
    pub beta1: T,
    /// Decay rate of the second-moment (uncentred variance) estimate.
    pub beta2: T,
    /// Term added to the denominator for numerical stability.
    pub eps: T,
    /// `1 / sqrt(1 - beta2^t)`.
    pub inv_sqrt_correction2: T,
    /// L2 penalty added to the gradient (Adam's `weight_decay`).
    pub l2: T,
    /// Factor applied to the parameter first (AdamW's `1 - lr * weight_decay`).
    pub decay: T,
}

impl<T: Copy> AdamScalars<T> {
    /// Every scalar converted by `f` (to the element type of the memory updated).
    pub fn map<U>(self, f: impl Fn(T) -> U) -> AdamScalars<U> {
        AdamScalars {
            step_size: f(self.step_size),
            beta1: f(self.beta1),
            beta2: f(self.beta2),
            eps: f(self.eps),
            inv_sqrt_correction2: f(self.inv_sqrt_correction2),
            l2: f(self.l2),
            decay: f(self.decay),
        }
    }
}

impl CompareOp {
    /// Every comparison: the list kernels' op-code constants are generated from
    /// (`COMPARE_EQ`).
    pub const ALL: [CompareOp; 6] = [
        CompareOp::Eq,
        CompareOp::Ne,
        CompareOp::Lt,
        CompareOp::Le,
        CompareOp::Gt,
        CompareOp::Ge,
    ];

    /// The comparison's number in kernels that switch on it.
    pub fn code(self) -> u32 {
        self as u32
    }

    /// The comparison's lowercase name (`"eq"`, `"lt"`).
    pub fn name(self) -> &'static str {
        match self {
            CompareOp::Eq => "eq",
            CompareOp::Ne => "ne",
            CompareOp::Lt => "lt",
            CompareOp::Le => "le",
            CompareOp::Gt => "gt",
            CompareOp::Ge => "ge",
        }
    }
}

/// What a reduction computes for each group.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The sum of the group.
    Sum,
    /// The largest element of the group.
    Max,
    /// The smallest element of the group.
    Min,
}

impl Reduction {
    /// The op's name in error messages.
    pub fn name(self) -> &'static str {
        match self {
            Reduction::Sum => "sum",
            Reduction::Max => "max",
            Reduction::Min => "min",
        }
    }
}

/// The name of softmax (log-softmax with `log`) in messages.
pub(crate) fn softmax_name(log: bool) -> &'static str {
    if log { "log_softmax" } else { "softmax" }
}

/// Geometry of a 2-D sliding window, all sizes as `[height, width]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Window2d {
    /// Size of one input plane.
    pub input: [usize; 2],
    /// Size of the window, `[KH, KW]`.
    pub kernel: [usize; 2],
    /// Step between successive windows.
    pub stride: [usize; 2],
    /// Zeros added on both sides (window reductions skip them).
    pub padding: [usize; 2],
    /// Distance between kernel taps (1 = dense).
    pub dilation: [usize; 2],
}

impl Window2d {
    /// Extent of the dilated kernel along axis `a`.
    pub fn span(&self, a: usize) -> usize {
        self.dilation[a] * (self.kernel[a] - 1) + 1
    }

    /// Output positions `[OH, OW]`; the caller checked that the dilated kernel fits the
    /// padded input and that strides are positive.
    pub fn output(&self) -> [usize; 2] {
        [0, 1].map(|a| (self.input[a] + 2 * self.padding[a] - self.span(a)) / self.stride[a] + 1)
    }

    /// Taps per window, `K = KH * KW`.
    pub fn taps(&self) -> usize {
        self.kernel[0] * self.kernel[1]
    }

    /// Output positions per plane, `L = OH * OW`.
    pub fn positions(&self) -> usize {
        let [oh, ow] = self.output();
        oh * ow
    }
}

/// The window kernels of convolution and pooling, over contiguous `[planes, H, W]` elements.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WindowKernel {
    /// Every window copied into columns `[planes, K, L]` (im2col).
    Unfold,
    /// Columns summed back into planes (col2im), `Unfold`'s adjoint.
    Fold,
    /// The sum of each window, `[planes, OH, OW]`.
    Sum,
    /// Each window's value added to every element of it, `Sum`'s adjoint.
    Spread,
}

impl WindowKernel {
    /// The kernel's name, as error messages show it.
    pub fn name(self) -> &'static str {
        match self {
            WindowKernel::Unfold => "unfold2d",
            WindowKernel::Fold => "fold2d",
            WindowKernel::Sum => "window_sum2d",
            WindowKernel::Spread => "window_spread2d",
        }
    }
}

/// A convolution that a backend runs with direct kernels of its own (no columns): its sizes
/// and the instruction set the forward pass used, which the backward uses too.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DirectConv {
    /// Batch, channels, plane, kernel and padding.
    pub shape: crate::backend::cpu::direct_conv::Conv2dShape,
    /// The vector instruction set of the kernels.
    pub isa: crate::backend::cpu::simd::Isa,
}

/// Sizes of one fused attention: `batch` independent problems (batch times heads) of `t`
/// queries and `s` keys, query/key width `d` and value width `dv`.
#[derive(Debug, Clone, Copy)]
pub struct Geometry {
    /// Independent problems (every leading dim multiplied).
    pub batch: usize,
    /// Queries per problem.
    pub t: usize,
    /// Keys (and values) per problem.
    pub s: usize,
    /// Width of queries and keys.
    pub d: usize,
    /// Width of values (and of the output).
    pub dv: usize,
    /// Problems that share one row of the key padding mask (the heads of one sample).
    pub problems_per_mask_row: usize,
    /// Query `i` sees keys `0..=i` only.
    pub causal: bool,
    /// The factor of `q k^T`.
    pub scale: f64,
    /// Dropout of the probabilities, if any.
    pub dropout: Option<AttentionDropout>,
}

/// Dropout of attention probabilities: probability `(n, i, j)` (problem, query, key) is
/// zeroed or scaled by `1 / (1 - p)` by the draw for its index in the problems' `[T, S]`
/// probabilities under `seed` (`backend::cpu::dropout`), the draw a dropout of those
/// probabilities would make.
#[derive(Debug, Clone, Copy)]
pub struct AttentionDropout {
    /// Probability that a probability is zeroed, below 1.
    pub p: f64,
    /// Seed of the draws.
    pub seed: u64,
}

/// A quantized weight matrix as a backend uploads it: `rows` x `cols` int8 values
/// (`value(row, col)`), one f32 scale per row, and the bias (`rows` values, or none).
pub struct Int8Matrix<'a> {
    /// Output channels.
    pub rows: usize,
    /// Inputs per output channel.
    pub cols: usize,
    /// The int8 value at (row, column).
    pub value: &'a dyn Fn(usize, usize) -> i8,
    /// Each row's scale.
    pub scales: &'a [f32],
    /// The bias, if any.
    pub bias: Option<&'a [f32]>,
}

/// The GPU kernels of a custom op, in WGSL, all in one module.
///
/// Each entry point is launched with `@workgroup_size(256)` threads per workgroup over a
/// one-dimensional range of threads, numbered `gid.y * p[1] + gid.x`; a thread whose number
/// is `p[0]` or more must do nothing. Every element is `f32`. Bindings of group 0:
///
/// | binding | forward | backward |
/// |---|---|---|
/// | 0 | `p: array<u32>`, read | the same |
/// | 1 ..= n | input k - 1 (`array<f32>`, read) | the same |
/// | n + 1 | the output (`read_write`) | the forward's output (`read_write`, to be read) |
/// | n + 2 | | the output's gradient (read) |
/// | n + 3 ..= 2n + 2 | | input k's gradient (`read_write`) |
///
/// The parameter block `p` holds: `p[0]` the threads launched (the output's element count
/// for the forward; the largest element count of the output and the inputs for the
/// backward), `p[1]` threads per row of the grid, `p[2]` the output's element count,
/// `p[3 + k]` input k's element count, and from `p[16]` on the words of
/// [`CustomOp::wgsl_params`](crate::ops::custom::CustomOp::wgsl_params). The backward
/// kernel writes every element of every input's gradient (the buffers start undefined).
/// The output has the same access in both passes, so one module declares each binding once
/// for both entry points.
///
/// The source is compiled once per device, with wgpu's bounds checks on (it is not rumus's
/// own code); a source that does not compile or does not match the bindings above is an
/// error of the first [`apply`](crate::ops::custom::apply) on the GPU, with wgpu's message.
///
/// A kernel that never finishes (a loop whose bound is wrong) makes the next wait for the
/// GPU an error after the device's wait limit (`GpuDevice::set_wait_timeout`) instead of a
/// hang. On lavapipe, Mesa's CPU device, an invocation runs at most 65,535 loop iterations
/// in all, its loops together, and then leaves them silently: longer work needs more of it
/// written out per iteration, or more invocations.
#[derive(Debug, Clone, Copy)]
pub struct Wgsl {
    /// The module's text, usually `include_str!` of a `.wgsl` file.
    pub source: &'static str,
    /// Entry point of the forward pass.
    pub forward: &'static str,
    /// Entry point of the backward pass.
    pub backward: &'static str,
}

/// Most inputs a custom op's GPU kernels take (a backward binds `2n + 3` buffers).
pub const MAX_GPU_INPUTS: usize = 8;

/// Most words of [`CustomOp::wgsl_params`](crate::ops::custom::CustomOp::wgsl_params).
pub const MAX_WGSL_PARAMS: usize = 48;

/// A custom op's kernels as a backend runs them: plain data taken from the op (its name,
/// its WGSL module if it has one, and the words of its parameter block).
#[derive(Debug, Clone)]
pub struct CustomKernel {
    /// The op's name, for error messages.
    pub name: &'static str,
    /// Its GPU kernels.
    pub wgsl: Option<Wgsl>,
    /// Its own parameter words (`p[16..]`).
    pub params: Vec<u32>,
}

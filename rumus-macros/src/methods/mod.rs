//! The one table of tensor methods: every method `tensor_fn!` and `#[model]` forwards
//! understand (`x.relu()`, `x.sum(1)`, `x.matmul(y)`), with its shape rule and its place in
//! the typed `Tensor` API.
//!
//! Everything else reads this table, so a method is added in one line here:
//! - the DSL ([`crate::dsl::lower`]) dispatches on an entry's [`Rule`];
//! - `rumus::Tensor` gets the entries marked [`Typed::Generated`] from `__typed_methods!`
//!   (a `try_` form and a panicking form, with the entry's doc line);
//! - `__method_cases!` writes, for every entry of the typed API, a test that calls the method
//!   through `tensor_fn!` and through `Tensor` and compares the two results' types and values,
//!   and the list of names that rumus's drift test checks the typed `impl` blocks against.

pub mod cases;
pub mod typed;

use crate::dsl::ast::BinOp;

/// How a method's result shape follows from its operands, and which arguments it takes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Rule {
    /// No arguments, the receiver's shape (`relu`, `exp`).
    Same,
    /// No arguments, the receiver's shape, and an op that cannot fail (`detach`).
    SameInfallible,
    /// Number arguments with these names, the receiver's shape (`powf(exponent)`).
    Scalars(&'static [&'static str]),
    /// Normalised along one axis, the receiver's shape: `x.softmax(axis)` (the typed form
    /// takes the last axis).
    AlongAxis,
    /// The listed axes reduced away (`sum(1)`, `mean([0, 2])`), or kept with size 1.
    Reduce { keepdim: bool },
    /// Every element reduced to a scalar, shape `[]`.
    ReduceAll,
    /// The index of the extreme along one axis, that axis removed.
    ArgReduce,
    /// Element-wise with a second tensor, NumPy broadcasting, as the operator does.
    Binary(BinOp),
    /// The matrix product `@`; `rank` restricts both operands (`bmm`: 3).
    Product { rank: Option<usize> },
    /// `x.linear(w)` or `x.linear(w, b)`: `[M, K]` with `[N, K]` (and `[N]`) gives `[M, N]`.
    Linear,
    /// `x.reshape([B, 8, 64])`, one `_` inferred.
    Reshape,
    /// `x.flatten(start)` or `x.flatten(start, end)`: the axes merged into one.
    Flatten,
    /// `x.transpose(a, b)`: two axes swapped.
    Transpose,
    /// `x.t()`: a matrix transposed.
    MatrixTranspose,
    /// `x.permute([0, 2, 1])`.
    Permute,
    /// `x.unsqueeze(axis)`: a size-1 axis inserted.
    Unsqueeze,
    /// `x.squeeze(axis)`: a size-1 axis removed.
    Squeeze,
    /// `x.narrow(axis, start, len)`.
    Narrow,
    /// `x.slice(axis, start..end)`.
    Slice,
    /// `[.., T, E]` to `[.., H, T, E / H]`.
    SplitHeads,
    /// `[.., H, T, D]` to `[.., T, H * D]`.
    MergeHeads,
    /// `x.max_pool2d(kernel, stride)` on `[N, C, H, W]`; `exact` refuses a window that
    /// leaves rows or columns out.
    Pool { exact: bool },
    /// `x.adaptive_avg_pool2d([oh, ow])` on `[N, C, H, W]`.
    AdaptivePool,
}

/// Where a method stands in the typed `Tensor` API.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Typed {
    /// Only the DSL has it (axis arguments the types cannot carry).
    No,
    /// Written out in rumus because its signature names shapes the rule alone cannot give
    /// (`matmul` of `[M, K]` and `[K, N]`); the generated test proves it agrees.
    Written,
    /// Generated into `impl<S: Shape, E: Float> Tensor<S, E>` with this doc line.
    Generated(&'static str),
}

/// One method: its name, its shape rule, its typed form.
#[derive(Clone, Copy, Debug)]
pub struct Method {
    pub name: &'static str,
    pub rule: Rule,
    pub typed: Typed,
}

const fn generated(name: &'static str, rule: Rule, doc: &'static str) -> Method {
    Method {
        name,
        rule,
        typed: Typed::Generated(doc),
    }
}

const fn written(name: &'static str, rule: Rule) -> Method {
    Method {
        name,
        rule,
        typed: Typed::Written,
    }
}

const fn dsl_only(name: &'static str, rule: Rule) -> Method {
    Method {
        name,
        rule,
        typed: Typed::No,
    }
}

/// The table. The generated typed methods appear in rustdoc in this order.
pub const METHODS: &[Method] = &[
    generated("sum_all", Rule::ReduceAll, "Sum of all elements."),
    generated("mean_all", Rule::ReduceAll, "Mean of all elements."),
    generated("softmax", Rule::AlongAxis, "Softmax over the last axis."),
    generated(
        "log_softmax",
        Rule::AlongAxis,
        "Log-softmax over the last axis.",
    ),
    generated("add_scalar", Rule::Scalars(&["value"]), "`self + value`."),
    generated("mul_scalar", Rule::Scalars(&["value"]), "`self * value`."),
    generated(
        "leaky_relu",
        Rule::Scalars(&["negative_slope"]),
        "`x` where positive, `negative_slope * x` elsewhere.",
    ),
    generated(
        "powf",
        Rule::Scalars(&["exponent"]),
        "`x ^ exponent` per element.",
    ),
    generated(
        "clamp",
        Rule::Scalars(&["min", "max"]),
        "Every element limited to `[min, max]`.",
    ),
    generated("neg", Rule::Same, "`-x` per element."),
    generated("exp", Rule::Same, "`e^x` per element."),
    generated("log", Rule::Same, "Natural logarithm per element."),
    generated("sqrt", Rule::Same, "Square root per element."),
    generated("rsqrt", Rule::Same, "`1 / sqrt(x)` per element."),
    generated("abs", Rule::Same, "`|x|` per element."),
    generated("erf", Rule::Same, "The Gauss error function per element."),
    generated("sin", Rule::Same, "Sine per element (radians)."),
    generated("cos", Rule::Same, "Cosine per element (radians)."),
    generated(
        "floor",
        Rule::Same,
        "The largest integer not above each element (no gradient).",
    ),
    generated(
        "log1p",
        Rule::Same,
        "`ln(1 + x)` per element, accurate near zero (PyTorch's `torch.log1p`).",
    ),
    generated("relu", Rule::Same, "`max(x, 0)` per element."),
    generated("sigmoid", Rule::Same, "`1 / (1 + e^-x)` per element."),
    generated("tanh", Rule::Same, "Hyperbolic tangent per element."),
    generated(
        "gelu",
        Rule::Same,
        "GELU with the exact normal CDF (PyTorch's default `approximate='none'`).",
    ),
    generated(
        "gelu_tanh",
        Rule::Same,
        "GELU with the tanh approximation (`approximate='tanh'`).",
    ),
    generated("silu", Rule::Same, "`x * sigmoid(x)` per element (swish)."),
    generated(
        "add",
        Rule::Binary(BinOp::Add),
        "`self + rhs`, broadcast as [`Elementwise`] allows (what `&a + &b` computes).",
    ),
    generated(
        "sub",
        Rule::Binary(BinOp::Sub),
        "`self - rhs`, broadcast as [`Elementwise`] allows.",
    ),
    generated(
        "mul",
        Rule::Binary(BinOp::Mul),
        "`self * rhs` element by element, broadcast as [`Elementwise`] allows.",
    ),
    generated(
        "div",
        Rule::Binary(BinOp::Div),
        "`self / rhs` element by element, broadcast as [`Elementwise`] allows.",
    ),
    written("detach", Rule::SameInfallible),
    written("matmul", Rule::Product { rank: None }),
    written("bmm", Rule::Product { rank: Some(3) }),
    written("linear", Rule::Linear),
    written("t", Rule::MatrixTranspose),
    written("reshape", Rule::Reshape),
    dsl_only("contiguous", Rule::Same),
    dsl_only("sum", Rule::Reduce { keepdim: false }),
    dsl_only("mean", Rule::Reduce { keepdim: false }),
    dsl_only("max", Rule::Reduce { keepdim: false }),
    dsl_only("min", Rule::Reduce { keepdim: false }),
    dsl_only("sum_keepdim", Rule::Reduce { keepdim: true }),
    dsl_only("mean_keepdim", Rule::Reduce { keepdim: true }),
    dsl_only("max_keepdim", Rule::Reduce { keepdim: true }),
    dsl_only("min_keepdim", Rule::Reduce { keepdim: true }),
    dsl_only("argmax", Rule::ArgReduce),
    dsl_only("argmin", Rule::ArgReduce),
    dsl_only("view", Rule::Reshape),
    dsl_only("flatten", Rule::Flatten),
    dsl_only("transpose", Rule::Transpose),
    dsl_only("permute", Rule::Permute),
    dsl_only("unsqueeze", Rule::Unsqueeze),
    dsl_only("squeeze", Rule::Squeeze),
    dsl_only("narrow", Rule::Narrow),
    dsl_only("slice", Rule::Slice),
    dsl_only("split_heads", Rule::SplitHeads),
    dsl_only("merge_heads", Rule::MergeHeads),
    dsl_only("max_pool2d", Rule::Pool { exact: false }),
    dsl_only("avg_pool2d", Rule::Pool { exact: false }),
    dsl_only("max_pool2d_exact", Rule::Pool { exact: true }),
    dsl_only("avg_pool2d_exact", Rule::Pool { exact: true }),
    dsl_only("adaptive_avg_pool2d", Rule::AdaptivePool),
];

/// The entry named `name`.
pub fn lookup(name: &str) -> Option<&'static Method> {
    METHODS.iter().find(|m| m.name == name)
}

/// Whether `name(x, ..)` is also accepted as a free function: the element-wise and
/// along-an-axis methods (`relu(x)`, `softmax(x, 1)`).
pub fn callable(name: &str) -> bool {
    lookup(name).is_some_and(|m| matches!(m.rule, Rule::Same | Rule::AlongAxis))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_name_appears_once() {
        for (i, m) in METHODS.iter().enumerate() {
            assert!(
                METHODS[..i].iter().all(|earlier| earlier.name != m.name),
                "`{}` is in the method table twice",
                m.name
            );
        }
    }
}

//! Forward values and gradients of rumus ops against PyTorch.
//!
//! `tests/fixtures/ops.txt` holds reference cases written by `tests/fixtures/make_op_fixtures.py`
//! (inputs, outputs, a cotangent per output and the vector-Jacobian product for every float
//! input, all float32). This test reads only that committed file, so it needs no PyTorch. Each
//! case name maps to the same computation written with rumus; a case without one fails the test,
//! so nothing in the file is skipped.

use std::collections::HashSet;
use std::fmt::Write as _;

use rumus::DynTensor;
use rumus::autograd::grad_with;
use rumus::nn::{
    CrossEntropyOptions, KlReduction, NllLossOptions, Reduction, binary_cross_entropy,
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
    nll_loss, smooth_l1_loss,
};

const FIXTURES: &str = include_str!("fixtures/ops.txt");
const MIN_CASES: usize = 40;
const ATOL: f64 = 1e-6;
const RTOL: f64 = 1e-5;
/// Mismatched elements reported per tensor before the rest are only counted.
const MAX_REPORTED: usize = 5;

// ---- the fixture file ----

#[derive(Debug, Clone, PartialEq)]
enum Values {
    F32(Vec<f32>),
    I64(Vec<i64>),
    Bool(Vec<bool>),
}

impl Values {
    fn dtype(&self) -> &'static str {
        match self {
            Values::F32(_) => "f32",
            Values::I64(_) => "i64",
            Values::Bool(_) => "bool",
        }
    }
}

#[derive(Debug, Clone)]
struct Fixture {
    key: String,
    dims: Vec<usize>,
    values: Values,
}

impl Fixture {
    fn to_tensor(&self) -> DynTensor {
        let made = match &self.values {
            Values::F32(v) => DynTensor::from_vec(v.clone(), &self.dims),
            Values::I64(v) => DynTensor::from_vec(v.clone(), &self.dims),
            Values::Bool(v) => DynTensor::from_vec(v.clone(), &self.dims),
        };
        made.unwrap_or_else(|e| panic!("fixture {}: {e}", self.key))
    }
}

#[derive(Debug, Clone)]
struct Case {
    name: String,
    line: usize,
    tensors: Vec<Fixture>,
}

impl Case {
    fn get(&self, key: &str) -> Option<&Fixture> {
        self.tensors.iter().find(|t| t.key == key)
    }
}

fn parse_values(kind: &str, raw: &[&str], at: &str) -> Values {
    fn all<T: std::str::FromStr>(raw: &[&str], at: &str) -> Vec<T> {
        raw.iter()
            .map(|v| {
                v.parse()
                    .unwrap_or_else(|_| panic!("{at}: cannot parse value {v:?}"))
            })
            .collect()
    }
    match kind {
        "f32" => Values::F32(all(raw, at)),
        "i64" => Values::I64(all(raw, at)),
        "bool" => Values::Bool(
            raw.iter()
                .map(|v| match *v {
                    "0" => false,
                    "1" => true,
                    other => panic!("{at}: bool values are 0 or 1, found {other:?}"),
                })
                .collect(),
        ),
        other => panic!("{at}: unknown dtype {other:?}"),
    }
}

/// Reads the fixture format described in `make_op_fixtures.py`; panics on anything malformed.
fn parse(text: &str) -> Vec<Case> {
    let mut cases: Vec<Case> = Vec::new();
    let mut open: Option<Case> = None;
    for (number, line) in text.lines().enumerate() {
        let at = format!("ops.txt line {}", number + 1);
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let fields: Vec<&str> = line.split_ascii_whitespace().collect();
        match fields[0] {
            "case" => {
                assert!(
                    open.is_none(),
                    "{at}: `case` before the previous case's `end`"
                );
                assert_eq!(fields.len(), 2, "{at}: expected `case NAME`");
                let name = fields[1].to_string();
                assert!(
                    cases.iter().all(|c| c.name != name),
                    "{at}: case {name} appears twice"
                );
                open = Some(Case {
                    name,
                    line: number + 1,
                    tensors: Vec::new(),
                });
            }
            "tensor" => {
                let case = open
                    .as_mut()
                    .unwrap_or_else(|| panic!("{at}: `tensor` outside a case"));
                assert!(
                    fields.len() >= 4,
                    "{at}: expected `tensor KEY DTYPE DIMS VALUES...`"
                );
                let key = fields[1].to_string();
                assert!(
                    case.get(&key).is_none(),
                    "{at}: case {} has {key} twice",
                    case.name
                );
                let dims: Vec<usize> = match fields[3] {
                    "-" => Vec::new(),
                    d => d
                        .split(',')
                        .map(|s| s.parse().unwrap_or_else(|_| panic!("{at}: bad dims {d:?}")))
                        .collect(),
                };
                let raw = &fields[4..];
                let numel: usize = dims.iter().product();
                assert_eq!(
                    raw.len(),
                    numel,
                    "{at}: {key} has dims {dims:?} but {} values",
                    raw.len()
                );
                case.tensors.push(Fixture {
                    key,
                    dims,
                    values: parse_values(fields[2], raw, &at),
                });
            }
            "end" => cases.push(
                open.take()
                    .unwrap_or_else(|| panic!("{at}: `end` outside a case")),
            ),
            other => panic!("{at}: unknown record {other:?}"),
        }
    }
    assert!(open.is_none(), "ops.txt ends inside a case (missing `end`)");
    cases
}

// ---- the rumus side ----

/// A case's inputs as rumus tensors: `in.*` as leaves requiring a gradient (file order),
/// `idx.*` and `mask.*` as plain tensors. Indexing by the name without its prefix.
struct Inputs {
    case: String,
    floats: Vec<(String, DynTensor)>,
    others: Vec<(String, DynTensor)>,
}

impl std::ops::Index<&str> for Inputs {
    type Output = DynTensor;

    fn index(&self, name: &str) -> &DynTensor {
        self.floats
            .iter()
            .chain(&self.others)
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .unwrap_or_else(|| panic!("case {}: the rumus implementation reads input {name:?}, which the fixture lacks", self.case))
    }
}

type Outputs = rumus::Result<Vec<DynTensor>>;
type Implementation = fn(&Inputs) -> Outputs;

fn one(t: DynTensor) -> Outputs {
    Ok(vec![t])
}

/// Cross-entropy options with PyTorch's default `ignore_index` (-100).
fn ce(reduction: Reduction, label_smoothing: f64) -> CrossEntropyOptions {
    CrossEntropyOptions {
        reduction,
        label_smoothing,
        ..CrossEntropyOptions::default()
    }
}

/// `POS_WEIGHT` of make_op_fixtures.py (PyTorch gives it no gradient, so it is no input).
fn pos_weight() -> DynTensor {
    DynTensor::from_vec(vec![0.5f32, 2.0, 3.0, 1.0], &[4]).expect("four values")
}

/// The rumus computation of each case in the fixture file (the same ops, in the same order, as
/// the PyTorch lambda of the same name).
fn implementation(name: &str) -> Option<Implementation> {
    let f: Implementation = match name {
        // element-wise arithmetic with broadcasting
        "add_broadcast_row" | "add_broadcast_both" => |t| one(t["x"].add(&t["y"])?),
        "sub_broadcast_rank" => |t| one(t["x"].sub(&t["y"])?),
        "mul_broadcast_col" => |t| one(t["x"].mul(&t["y"])?),
        "mul_same_input" => |t| one(t["x"].mul(&t["x"])?.add(&t["x"])?),
        "div_broadcast" | "div_scalar_rank0" => |t| one(t["x"].div(&t["y"])?),
        "pow_tensor_tensor" | "pow_tensor_broadcast" => |t| one(t["a"].pow(&t["b"])?),
        // unary functions
        "powf_int" => |t| one(t["x"].powf(3.0)?),
        "powf_frac" => |t| one(t["x"].powf(1.7)?),
        "powf_negative" => |t| one(t["x"].powf(-1.5)?),
        "neg" => |t| one(t["x"].neg()?),
        "exp" => |t| one(t["x"].exp()?),
        "log" => |t| one(t["x"].log()?),
        "sqrt" => |t| one(t["x"].sqrt()?),
        "rsqrt" => |t| one(t["x"].rsqrt()?),
        "abs" => |t| one(t["x"].abs()?),
        "clamp" => |t| one(t["x"].clamp(-0.5, 0.8)?),
        "relu" => |t| one(t["x"].relu()?),
        "leaky_relu" => |t| one(t["x"].leaky_relu(0.1)?),
        "sigmoid" => |t| one(t["x"].sigmoid()?),
        "tanh" => |t| one(t["x"].tanh()?),
        "gelu" => |t| one(t["x"].gelu()?),
        "gelu_tanh" => |t| one(t["x"].gelu_tanh()?),
        "silu" => |t| one(t["x"].silu()?),
        "softplus" => |t| one(t["x"].softplus(1.0, 20.0)?),
        "softplus_beta_threshold" => |t| one(t["x"].softplus(2.0, 3.0)?),
        "erf" => |t| one(t["x"].erf()?),
        "sin" => |t| one(t["x"].sin()?),
        "cos" => |t| one(t["x"].cos()?),
        "floor" => |t| one(t["x"].floor()?),
        "log1p" | "log1p_tiny" => |t| one(t["x"].log1p()?),
        "flip_two_axes" => |t| one(t["x"].flip(&[0, -1])?),
        "roll_positive" => |t| one(t["x"].roll(2, 1)?),
        "roll_negative_past_length" => |t| one(t["x"].roll(-7, -1)?),
        "repeat_with_leading_axis" => |t| one(t["x"].repeat(&[2, 1, 3])?),
        "tril_above_diagonal" => |t| one(t["x"].tril(1)?),
        "triu_below_diagonal" => |t| one(t["x"].triu(-1)?),
        "maximum_broadcast" | "maximum_nan" => |t| one(t["a"].maximum(&t["b"])?),
        "minimum_broadcast" => |t| one(t["a"].minimum(&t["b"])?),
        "logical_or" => |t| one(t["a"].logical_or(&t["b"])?),
        "cumsum_last_axis" => |t| one(t["x"].cumsum(-1)?),
        "cumsum_first_axis" => |t| one(t["x"].cumsum(0)?),
        "cumsum_ints" => |t| one(t["i"].cumsum(1)?),
        // reductions
        "sum_axes" => |t| one(t["x"].sum(&[0, 2], false)?),
        "sum_keepdim" => |t| one(t["x"].sum(&[1], true)?),
        "sum_all" => |t| one(t["x"].sum_all()?),
        "mean_axis" => |t| one(t["x"].mean(&[-1], false)?),
        "mean_axes_keepdim" => |t| one(t["x"].mean(&[0, 1], true)?),
        "mean_all" => |t| one(t["x"].mean_all()?),
        "max_axis" => |t| one(t["x"].max(&[1], false)?),
        "max_axes_keepdim" => |t| one(t["x"].max(&[0, 2], true)?),
        "min_axis_keepdim" => |t| one(t["x"].min(&[0], true)?),
        "var_unbiased" => |t| one(t["x"].var(&[1], 1, false)?),
        "var_axes_keepdim" => |t| one(t["x"].var(&[0, 2], 1, true)?),
        "var_biased" => |t| one(t["x"].var(&[-1], 0, false)?),
        "std_unbiased" => |t| one(t["x"].std(&[-1], 1, false)?),
        "logsumexp" => |t| one(t["x"].logsumexp(&[1], false)?),
        "logsumexp_axes_keepdim" => |t| one(t["x"].logsumexp(&[0, 2], true)?),
        "argmax_argmin" => |t| Ok(vec![t["x"].argmax(1, false)?, t["x"].argmin(0, false)?]),
        // softmax
        "softmax_middle_axis" => |t| one(t["x"].softmax(1)?),
        "softmax_last_axis" => |t| one(t["x"].softmax(-1)?),
        "log_softmax_middle_axis" => |t| one(t["x"].log_softmax(1)?),
        "log_softmax_last_axis" => |t| one(t["x"].log_softmax(-1)?),
        "softmax_of_permuted" => |t| one(t["x"].permute(&[2, 0, 1])?.softmax(-1)?),
        // matmul
        "matmul_2d"
        | "matmul_batched"
        | "matmul_broadcast_batch"
        | "matmul_batch_times_2d"
        | "matmul_matrix_vector"
        | "matmul_vector_matrix"
        | "matmul_vector_vector" => |t| one(t["a"].matmul(&t["b"])?),
        "matmul_transposed_operands" => {
            |t| one(t["a"].transpose(0, 1)?.matmul(&t["b"].transpose(0, 1)?)?)
        }
        // views
        "reshape" => |t| one(t["x"].reshape(&[4, 6])?),
        "flatten_unsqueeze" => |t| one(t["x"].flatten(1, -1)?.unsqueeze(0)?),
        "transpose_then_mul" => |t| one(t["x"].transpose(0, 1)?.mul(&t["y"])?),
        "transpose_then_reshape" => |t| one(t["x"].transpose(0, 2)?.reshape(&[4, 6])?.exp()?),
        "permute" => |t| one(t["x"].permute(&[2, 0, 1])?),
        "permute_then_sum" => |t| one(t["x"].permute(&[1, 2, 0])?.sum(&[-1], false)?.tanh()?),
        "broadcast_to" => |t| one(t["x"].broadcast_to(&[2, 3, 4])?),
        "expand_then_mul" => |t| one(t["x"].broadcast_to(&[2, 3, 4])?.mul(&t["y"])?),
        "narrow" => |t| one(t["x"].narrow(1, 1, 3)?),
        "narrow_of_transpose" => |t| one(t["x"].transpose(0, 1)?.narrow(0, 1, 2)?.sigmoid()?),
        // indexing
        "index_select_rows" => |t| one(t["x"].index_select(0, &t["i"])?),
        "index_select_last_axis" => |t| one(t["x"].index_select(2, &t["i"])?),
        "index_add" => |t| one(t["x"].index_add(0, &t["i"], &t["s"])?),
        "gather_cols" => |t| one(t["x"].gather(1, &t["i"])?),
        "gather_rows" => |t| one(t["x"].gather(0, &t["i"])?),
        "scatter_add" => |t| one(t["x"].scatter_add(1, &t["i"], &t["s"])?),
        // joining and splitting
        "cat_axis0" => |t| one(DynTensor::cat(&[&t["a"], &t["b"], &t["c"]], 0)?),
        "cat_axis1" => |t| one(DynTensor::cat(&[&t["a"], &t["b"]], 1)?),
        "stack_axis1" => |t| one(DynTensor::stack(&[&t["a"], &t["b"], &t["c"]], 1)?),
        "split_all_pieces" => |t| t["x"].split(2, 0),
        "chunk_one_piece" => |t| t["x"].chunk(3, 1),
        // selection
        "where_broadcast" => |t| one(DynTensor::where_(&t["m"], &t["a"], &t["b"])?),
        "masked_fill" => |t| one(t["x"].masked_fill(&t["m"], -1.5)?),
        // kinks and ties
        "relu_at_zero" => |t| one(t["x"].relu()?),
        "leaky_relu_at_zero" => |t| one(t["x"].leaky_relu(0.2)?),
        "abs_at_zero" => |t| one(t["x"].abs()?),
        "softplus_at_threshold" => |t| one(t["x"].softplus(2.0, 1.0)?),
        "amax_ties" => |t| one(t["x"].max(&[0, 2], false)?),
        "amin_ties_keepdim" => |t| one(t["x"].min(&[1], true)?),
        // non-contiguous, offset and stride-0 operands
        "matmul_of_narrow" => |t| one(t["a"].narrow(1, 1, 4)?.matmul(&t["b"].narrow(0, 2, 4)?)?),
        "matmul_expanded_operand" => |t| one(t["a"].broadcast_to(&[3, 4])?.matmul(&t["b"])?),
        "gram_matrix" => |t| one(t["x"].transpose(0, 1)?.matmul(&t["x"])?),
        "sum_of_expanded" => |t| one(t["x"].broadcast_to(&[2, 3, 4])?.sum(&[0, 1], false)?),
        "softmax_of_narrow" => |t| one(t["x"].narrow(1, 1, 3)?.softmax(0)?),
        "log_softmax_of_transposed" => |t| one(t["x"].transpose(0, 1)?.log_softmax(1)?),
        "index_select_of_transposed" => {
            |t| one(t["x"].transpose(0, 1)?.index_select(0, &t["i"])?)
        }
        "gather_of_transposed" => |t| one(t["x"].transpose(0, 1)?.gather(1, &t["i"])?),
        "gather_smaller_index" => |t| one(t["x"].gather(2, &t["i"])?),
        "scatter_add_of_transposed" => |t| {
            one(t["x"]
                .transpose(0, 1)?
                .scatter_add(0, &t["i"], &t["s"].transpose(0, 1)?)?)
        },
        "cat_of_transposed" => |t| one(DynTensor::cat(&[&t["a"].transpose(0, 1)?, &t["b"]], 1)?),
        "where_of_transposed" => |t| {
            one(DynTensor::where_(
                &t["m"],
                &t["a"].transpose(0, 1)?,
                &t["b"],
            )?)
        },
        "add_transposed_and_row" => |t| one(t["x"].transpose(0, 1)?.add(&t["y"])?),
        "unary_of_narrow" => |t| one(t["x"].narrow(0, 1, 2)?.narrow(1, 2, 3)?.erf()?),
        "var_of_permuted" => |t| one(t["x"].permute(&[2, 0, 1])?.var(&[1, 2], 1, false)?),
        // more shapes and scalar forms
        "chunk_uneven" => |t| t["x"].chunk(3, 0),
        "add_rank0" => |t| one(t["x"].add(&t["y"])?),
        "scalar_arithmetic" => |t| {
            one(t["x"]
                .mul_scalar(2.5)?
                .add_scalar(1.0)?
                .sub_scalar(0.25)?
                .div_scalar(4.0)?
                .rsub_scalar(1.0)?)
        },
        "cast_roundtrip" => |t| {
            one(t["x"]
                .to_dtype(rumus::DType::F64)?
                .exp()?
                .to_dtype(rumus::DType::F32)?)
        },
        // composites
        "mlp_cross_entropy" => |t| {
            let h = t["x"].matmul(&t["w1"])?.add(&t["b1"])?.relu()?;
            let log_probs = h.matmul(&t["w2"])?.add(&t["b2"])?.log_softmax(1)?;
            one(log_probs
                .gather(1, &t["t"].unsqueeze(1)?)?
                .mean_all()?
                .neg()?)
        },
        "layer_norm" => |t| {
            let x = &t["x"];
            let centered = x.sub(&x.mean(&[-1], true)?)?;
            let scale = x.var(&[-1], 0, true)?.add_scalar(1e-5)?.sqrt()?;
            one(centered.div(&scale)?.mul(&t["g"])?.add(&t["b"])?)
        },
        "attention" => |t| {
            let scores = t["q"].matmul(&t["k"].transpose(-1, -2)?)?.mul_scalar(0.5)?;
            one(scores.softmax(-1)?.matmul(&t["v"])?)
        },
        // convolution and pooling
        "unfold2d" => |t| one(t["x"].unfold2d((2, 3), (2, 1), (1, 2), (2, 1))?),
        "fold2d" => |t| one(t["x"].fold2d((5, 4), (3, 2), (2, 1), (1, 1), (1, 2))?),
        "conv2d_basic" | "conv2d_pointwise" => {
            |t| one(t["x"].conv2d(&t["w"], Some(&t["b"]), (1, 1), (0, 0), (1, 1), 1)?)
        }
        "conv2d_stride_padding_dilation" => {
            |t| one(t["x"].conv2d(&t["w"], Some(&t["b"]), (2, 1), (1, 2), (2, 1), 1)?)
        }
        "conv2d_groups" => {
            |t| one(t["x"].conv2d(&t["w"], Some(&t["b"]), (2, 2), (1, 1), (1, 1), 2)?)
        }
        "conv2d_depthwise_no_bias" => {
            |t| one(t["x"].conv2d(&t["w"], None, (1, 1), (1, 1), (1, 1), 3)?)
        }
        "max_pool2d" => |t| one(t["x"].max_pool2d((2, 2), (2, 2), (0, 0))?),
        "max_pool2d_overlap_padding" => |t| one(t["x"].max_pool2d((3, 3), (2, 2), (1, 1))?),
        "max_pool2d_ties" => |t| one(t["x"].max_pool2d((3, 3), (1, 1), (1, 1))?),
        "max_pool2d_rectangular" => |t| one(t["x"].max_pool2d((3, 2), (1, 2), (1, 0))?),
        "avg_pool2d_include_pad" => |t| one(t["x"].avg_pool2d((3, 3), (2, 2), (1, 1), true)?),
        "avg_pool2d_exclude_pad" => |t| one(t["x"].avg_pool2d((3, 3), (2, 2), (1, 1), false)?),
        "avg_pool2d_rectangular_exclude_pad" => {
            |t| one(t["x"].avg_pool2d((2, 3), (2, 1), (1, 1), false)?)
        }
        "adaptive_avg_pool2d_non_dividing" | "adaptive_avg_pool2d_dividing" => {
            |t| one(t["x"].adaptive_avg_pool2d((3, 2))?)
        }
        "adaptive_avg_pool2d_global" => |t| one(t["x"].adaptive_avg_pool2d((1, 1))?),
        "adaptive_avg_pool2d_upsample" => |t| one(t["x"].adaptive_avg_pool2d((5, 4))?),
        "small_cnn" => |t| {
            let h = t["x"]
                .conv2d(&t["w1"], Some(&t["b1"]), (1, 1), (1, 1), (1, 1), 1)?
                .tanh()?
                .max_pool2d((2, 2), (2, 2), (0, 0))?;
            let h = h
                .conv2d(&t["w2"], Some(&t["b2"]), (1, 1), (1, 1), (1, 1), 2)?
                .tanh()?;
            one(h.adaptive_avg_pool2d((1, 1))?.flatten(1, -1)?)
        },
        // losses
        "mse_loss_mean" => |t| one(mse_loss(&t["x"], &t["y"], Reduction::Mean)?),
        "mse_loss_sum" => |t| one(mse_loss(&t["x"], &t["y"], Reduction::Sum)?),
        "mse_loss_none" => |t| one(mse_loss(&t["x"], &t["y"], Reduction::None)?),
        "l1_loss_mean" => |t| one(l1_loss(&t["x"], &t["y"], Reduction::Mean)?),
        "l1_loss_none" => |t| one(l1_loss(&t["x"], &t["y"], Reduction::None)?),
        "smooth_l1_loss_mean" => |t| one(smooth_l1_loss(&t["x"], &t["y"], 1.0, Reduction::Mean)?),
        "smooth_l1_loss_beta_none" => {
            |t| one(smooth_l1_loss(&t["x"], &t["y"], 0.5, Reduction::None)?)
        }
        "smooth_l1_loss_beta_zero_sum" => {
            |t| one(smooth_l1_loss(&t["x"], &t["y"], 0.0, Reduction::Sum)?)
        }
        "huber_loss_mean" => |t| one(huber_loss(&t["x"], &t["y"], 1.0, Reduction::Mean)?),
        "huber_loss_delta_sum" => |t| one(huber_loss(&t["x"], &t["y"], 0.5, Reduction::Sum)?),
        "huber_loss_delta_none" => |t| one(huber_loss(&t["x"], &t["y"], 2.0, Reduction::None)?),
        "cross_entropy_mean"
        | "cross_entropy_large_logits"
        | "cross_entropy_ignore_index_mean"
        | "cross_entropy_all_ignored" => |t| {
            one(cross_entropy(
                &t["x"],
                &t["t"],
                &CrossEntropyOptions::default(),
            )?)
        },
        "cross_entropy_sum" => |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::Sum, 0.0))?),
        "cross_entropy_ignore_index_none" | "cross_entropy_spatial_none" => {
            |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::None, 0.0))?)
        }
        "cross_entropy_custom_ignore_index_sum" => |t| {
            let options = CrossEntropyOptions {
                ignore_index: Some(2),
                ..ce(Reduction::Sum, 0.0)
            };
            one(cross_entropy(&t["x"], &t["t"], &options)?)
        },
        "cross_entropy_label_smoothing_mean"
        | "cross_entropy_spatial"
        | "cross_entropy_unbatched" => {
            |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::Mean, 0.1))?)
        }
        "cross_entropy_label_smoothing_ignore_index_mean" => {
            |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::Mean, 0.2))?)
        }
        "cross_entropy_label_smoothing_ignore_index_sum" => {
            |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::Sum, 0.3))?)
        }
        "cross_entropy_label_smoothing_ignore_index_none" => {
            |t| one(cross_entropy(&t["x"], &t["t"], &ce(Reduction::None, 0.25))?)
        }
        "nll_loss_mean" => |t| {
            one(nll_loss(
                &t["x"].log_softmax(1)?,
                &t["t"],
                &NllLossOptions::default(),
            )?)
        },
        "nll_loss_ignore_index_sum" => |t| {
            let options = NllLossOptions {
                reduction: Reduction::Sum,
                ignore_index: Some(-1),
            };
            one(nll_loss(&t["x"], &t["t"], &options)?)
        },
        "nll_loss_spatial_none" => |t| {
            let options = NllLossOptions {
                reduction: Reduction::None,
                ..NllLossOptions::default()
            };
            one(nll_loss(&t["x"], &t["t"], &options)?)
        },
        "binary_cross_entropy_mean" => {
            |t| one(binary_cross_entropy(&t["x"], &t["y"], Reduction::Mean)?)
        }
        "binary_cross_entropy_sum" => {
            |t| one(binary_cross_entropy(&t["x"], &t["y"], Reduction::Sum)?)
        }
        "binary_cross_entropy_none" | "binary_cross_entropy_at_bounds" => {
            |t| one(binary_cross_entropy(&t["x"], &t["y"], Reduction::None)?)
        }
        "bce_with_logits_mean" => |t| {
            one(binary_cross_entropy_with_logits(
                &t["x"],
                &t["y"],
                None,
                Reduction::Mean,
            )?)
        },
        "bce_with_logits_sum_large" => |t| {
            one(binary_cross_entropy_with_logits(
                &t["x"],
                &t["y"],
                None,
                Reduction::Sum,
            )?)
        },
        "bce_with_logits_none_at_zero" => |t| {
            one(binary_cross_entropy_with_logits(
                &t["x"],
                &t["y"],
                None,
                Reduction::None,
            )?)
        },
        "bce_with_logits_pos_weight_mean" => |t| {
            one(binary_cross_entropy_with_logits(
                &t["x"],
                &t["y"],
                Some(&pos_weight()),
                Reduction::Mean,
            )?)
        },
        "bce_with_logits_pos_weight_none" => |t| {
            one(binary_cross_entropy_with_logits(
                &t["x"],
                &t["y"],
                Some(&pos_weight()),
                Reduction::None,
            )?)
        },
        "kl_div_batchmean" => |t| {
            one(kl_div(
                &t["x"].log_softmax(-1)?,
                &t["y"],
                KlReduction::BatchMean,
                false,
            )?)
        },
        "kl_div_mean" => |t| {
            one(kl_div(
                &t["x"].log_softmax(-1)?,
                &t["y"],
                KlReduction::Mean,
                false,
            )?)
        },
        "kl_div_sum" => |t| one(kl_div(&t["x"], &t["y"], KlReduction::Sum, false)?),
        "kl_div_none" | "kl_div_zero_target" => {
            |t| one(kl_div(&t["x"], &t["y"], KlReduction::None, false)?)
        }
        "kl_div_log_target_batchmean" => |t| {
            one(kl_div(
                &t["x"].log_softmax(-1)?,
                &t["y"].log_softmax(-1)?,
                KlReduction::BatchMean,
                true,
            )?)
        },
        "kl_div_log_target_none" => |t| one(kl_div(&t["x"], &t["y"], KlReduction::None, true)?),
        _ => return None,
    };
    Some(f)
}

// ---- comparison ----

fn values_of(t: &DynTensor) -> Values {
    match t.dtype() {
        rumus::DType::F32 => Values::F32(t.to_vec::<f32>().expect("f32 tensor")),
        rumus::DType::I64 => Values::I64(t.to_vec::<i64>().expect("i64 tensor")),
        rumus::DType::Bool => Values::Bool(t.to_vec::<bool>().expect("bool tensor")),
        _ => Values::F32(t.to_f64_vec().into_iter().map(|v| v as f32).collect()),
    }
}

fn close(actual: f32, expected: f32) -> bool {
    if actual == expected || (actual.is_nan() && expected.is_nan()) {
        return true;
    }
    let (a, b) = (f64::from(actual), f64::from(expected));
    (a - b).abs() <= ATOL + RTOL * b.abs()
}

/// Compares a rumus tensor with the fixture `expected`: dims, dtype and every element. Appends
/// one line per problem to `failures`.
fn compare(case: &str, actual: &DynTensor, expected: &Fixture, failures: &mut Vec<String>) {
    let key = &expected.key;
    if actual.dims() != expected.dims.as_slice() {
        failures.push(format!(
            "case {case}: {key}: rumus shape {:?}, torch shape {:?}",
            actual.dims(),
            expected.dims
        ));
        return;
    }
    let got = values_of(actual);
    if got.dtype() != expected.values.dtype() {
        failures.push(format!(
            "case {case}: {key}: rumus dtype {}, torch dtype {}",
            got.dtype(),
            expected.values.dtype()
        ));
        return;
    }
    let bad: Vec<String> = match (&got, &expected.values) {
        (Values::F32(a), Values::F32(b)) => a
            .iter()
            .zip(b)
            .enumerate()
            .filter(|&(_, (&x, &y))| !close(x, y))
            .map(|(i, (&x, &y))| {
                let tol = ATOL + RTOL * f64::from(y).abs();
                format!(
                    "case {case}: {key}[{i}]: rumus {x:e}, torch {y:e} (|diff| {:e} > tol {tol:e})",
                    (f64::from(x) - f64::from(y)).abs()
                )
            })
            .collect(),
        (Values::I64(a), Values::I64(b)) => exact_mismatches(a, b, case, key),
        (Values::Bool(a), Values::Bool(b)) => exact_mismatches(a, b, case, key),
        _ => unreachable!("dtypes compared above"),
    };
    let extra = bad.len().saturating_sub(MAX_REPORTED);
    failures.extend(bad.into_iter().take(MAX_REPORTED));
    if extra > 0 {
        failures.push(format!(
            "case {case}: {key}: {extra} more mismatched elements"
        ));
    }
}

fn indexed_keys(case: &Case, prefix: &str) -> Vec<usize> {
    let mut found: Vec<usize> = case
        .tensors
        .iter()
        .filter_map(|t| t.key.strip_prefix(prefix))
        .map(|i| {
            i.parse()
                .unwrap_or_else(|_| panic!("case {}: bad key {prefix}{i}", case.name))
        })
        .collect();
    found.sort_unstable();
    found
}

/// Runs one case through rumus and returns every disagreement with the fixture.
fn check_case(case: &Case, implementation: Implementation) -> Vec<String> {
    let name = &case.name;
    let mut failures = Vec::new();
    for t in &case.tensors {
        let known = ["in.", "idx.", "mask.", "out.", "cot.", "grad."];
        if !known.iter().any(|p| t.key.starts_with(p)) {
            failures.push(format!("case {name}: unknown key {}", t.key));
        }
    }
    let inputs = Inputs {
        case: name.clone(),
        floats: case
            .tensors
            .iter()
            .filter_map(|t| {
                Some((
                    t.key.strip_prefix("in.")?.to_string(),
                    t.to_tensor().requires_grad_().expect("float input"),
                ))
            })
            .collect(),
        others: case
            .tensors
            .iter()
            .filter_map(|t| {
                Some((
                    t.key
                        .strip_prefix("idx.")
                        .or_else(|| t.key.strip_prefix("mask."))?
                        .to_string(),
                    t.to_tensor(),
                ))
            })
            .collect(),
    };

    let outputs = match implementation(&inputs) {
        Ok(outputs) => outputs,
        Err(e) => return vec![format!("case {name}: rumus forward failed: {e}")],
    };
    let out_keys = indexed_keys(case, "out.");
    if out_keys != (0..outputs.len()).collect::<Vec<_>>() {
        failures.push(format!(
            "case {name}: rumus gives {} outputs, the fixture has out.{out_keys:?}",
            outputs.len()
        ));
        return failures;
    }
    for (i, out) in outputs.iter().enumerate() {
        compare(
            name,
            out,
            case.get(&format!("out.{i}")).expect("checked above"),
            &mut failures,
        );
    }

    // Vector-Jacobian product with the recorded cotangents.
    let cot_keys = indexed_keys(case, "cot.");
    if let Some(&bad) = cot_keys.iter().find(|&&i| i >= outputs.len()) {
        failures.push(format!("case {name}: cot.{bad} has no output"));
        return failures;
    }
    let seeds: Vec<DynTensor> = cot_keys
        .iter()
        .map(|i| case.get(&format!("cot.{i}")).expect("listed").to_tensor())
        .collect();
    let grad_keys: Vec<&str> = case
        .tensors
        .iter()
        .filter_map(|t| t.key.strip_prefix("grad."))
        .collect();
    let input_names: Vec<&str> = inputs.floats.iter().map(|(n, _)| n.as_str()).collect();
    if seeds.is_empty() {
        if !grad_keys.is_empty() {
            failures.push(format!(
                "case {name}: gradients {grad_keys:?} recorded without a cotangent"
            ));
        }
        return failures;
    }
    if grad_keys != input_names {
        failures.push(format!(
            "case {name}: gradients recorded for {grad_keys:?}, float inputs are {input_names:?}"
        ));
        return failures;
    }
    let roots: Vec<&DynTensor> = cot_keys.iter().map(|&i| &outputs[i]).collect();
    let seed_refs: Vec<&DynTensor> = seeds.iter().collect();
    let leaves: Vec<&DynTensor> = inputs.floats.iter().map(|(_, t)| t).collect();
    let grads = match grad_with(&roots, &seed_refs, &leaves, false) {
        Ok(grads) => grads,
        Err(e) => {
            failures.push(format!("case {name}: rumus backward failed: {e}"));
            return failures;
        }
    };
    for ((input, leaf), grad) in inputs.floats.iter().zip(&grads) {
        if grad.dims() != leaf.dims() {
            failures.push(format!(
                "case {name}: grad.{input}: gradient shape {:?} differs from input shape {:?}",
                grad.dims(),
                leaf.dims()
            ));
            continue;
        }
        compare(
            name,
            grad,
            case.get(&format!("grad.{input}")).expect("checked above"),
            &mut failures,
        );
    }
    failures
}

#[test]
fn matches_pytorch_reference_values() {
    let cases = parse(FIXTURES);
    assert!(
        cases.len() >= MIN_CASES,
        "ops.txt has {} cases, fewer than {MIN_CASES}: regenerate it with make_op_fixtures.py",
        cases.len()
    );
    let mut failures = Vec::new();
    let mut passed = 0;
    for case in &cases {
        let Some(implementation) = implementation(&case.name) else {
            failures.push(format!(
                "case {} (ops.txt line {}): no rumus implementation; add it to `implementation`",
                case.name, case.line
            ));
            continue;
        };
        let problems = check_case(case, implementation);
        if problems.is_empty() {
            passed += 1;
        }
        failures.extend(problems);
    }
    let mut report = String::new();
    for f in &failures {
        writeln!(report, "  {f}").unwrap();
    }
    assert!(
        failures.is_empty(),
        "{passed} of {} cases match PyTorch; mismatches:\n{report}",
        cases.len()
    );
    eprintln!("all {} PyTorch reference cases match", cases.len());
}

#[test]
fn fixture_names_are_unique_and_implemented() {
    let cases = parse(FIXTURES);
    let names: HashSet<&str> = cases.iter().map(|c| c.name.as_str()).collect();
    assert_eq!(names.len(), cases.len());
    let missing: Vec<&str> = cases
        .iter()
        .map(|c| c.name.as_str())
        .filter(|n| implementation(n).is_none())
        .collect();
    assert!(
        missing.is_empty(),
        "cases without a rumus implementation: {missing:?}"
    );
}

/// The checker itself: a wrong value, a wrong gradient and an unknown case are all reported.
#[test]
fn checker_reports_mismatches() {
    let text = "\
case neg
tensor in.x f32 2 1 -2
tensor out.0 f32 2 -1 2.0001
tensor cot.0 f32 2 1 1
tensor grad.x f32 1,2 -1 -1
end
case not_an_op
tensor in.x f32 - 1
end
";
    let cases = parse(text);
    assert_eq!(cases.len(), 2);
    let failures = check_case(&cases[0], implementation("neg").unwrap());
    assert_eq!(failures.len(), 2, "{failures:#?}");
    assert!(
        failures[0].contains("case neg: out.0[1]") && failures[0].contains("rumus 2e0"),
        "{}",
        failures[0]
    );
    assert!(
        failures[1].contains("grad.x") && failures[1].contains("shape"),
        "{}",
        failures[1]
    );
    assert!(implementation("not_an_op").is_none());
    assert!(
        close(1.0, 1.0 + 1e-6)
            && !close(0.0, 2e-6)
            && close(1000.0, 1000.009)
            && !close(1000.0, 1000.02)
    );
}

/// Elements of integer or bool tensors that differ (these must match exactly).
fn exact_mismatches<T: PartialEq + std::fmt::Display>(
    got: &[T],
    expected: &[T],
    case: &str,
    key: &str,
) -> Vec<String> {
    got.iter()
        .zip(expected)
        .enumerate()
        .filter(|(_, (x, y))| x != y)
        .map(|(i, (x, y))| format!("case {case}: {key}[{i}]: rumus {x}, torch {y}"))
        .collect()
}

/// `log1p` near zero, where `log(1 + x)` in f32 keeps only the digits of `1 + x`: every
/// result within a relative 1e-6 of `ln_1p` in f64 (the fixture's absolute tolerance cannot
/// tell the two apart at these sizes).
#[test]
fn log1p_keeps_the_digits_of_tiny_inputs() -> rumus::Result<()> {
    let xs: Vec<f32> = vec![1e-10, -3e-9, 2.5e-7, -7e-6, 4e-5, 1e-3];
    let out = DynTensor::from_vec(xs.clone(), &[xs.len()])?
        .log1p()?
        .to_vec::<f32>()?;
    for (x, y) in xs.iter().zip(&out) {
        let exact = f64::from(*x).ln_1p();
        let relative = (f64::from(*y) - exact).abs() / exact.abs();
        assert!(relative <= 1e-6, "log1p({x:e}) = {y:e}, exact {exact:e}");
    }
    Ok(())
}

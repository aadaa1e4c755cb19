//! Every differentiable op against central finite differences in f64, to first and second
//! order, including broadcast operands and non-contiguous (transposed, sliced) inputs.

mod common;

use common::{check_first_and_second_order, indices, positive, randn};
use rumus::DynTensor;

macro_rules! case {
    ($name:ident, [$($input:expr),* $(,)?], |$x:ident| $body:expr) => {
        #[test]
        fn $name() {
            check_first_and_second_order(stringify!($name), |$x: &[DynTensor]| $body, vec![$($input),*]);
        }
    };
}

/// A transposed (non-contiguous) view of `x`.
fn t(x: &DynTensor) -> rumus::Result<DynTensor> {
    x.transpose(0, 1)
}

// ---- binary arithmetic with broadcasting ----
case!(
    add_broadcast_row,
    [randn(&[3, 4], 1), randn(&[4], 2)],
    |x| x[0].add(&x[1])
);
case!(
    add_broadcast_both,
    [randn(&[2, 1, 3], 1), randn(&[4, 1], 2)],
    |x| x[0].add(&x[1])
);
case!(sub_broadcast, [randn(&[3, 1], 1), randn(&[1, 4], 2)], |x| x
    [0]
.sub(&x[1]));
case!(
    mul_broadcast_column,
    [randn(&[3, 4], 1), randn(&[3, 1], 2)],
    |x| x[0].mul(&x[1])
);
case!(mul_same_tensor, [randn(&[3, 4], 1)], |x| x[0].mul(&x[0]));
case!(div_broadcast, [randn(&[3, 4], 1), positive(&[4], 2)], |x| x
    [0]
.div(&x[1]));
case!(
    div_non_contiguous,
    [randn(&[4, 3], 1), positive(&[3, 4], 2)],
    |x| t(&x[0])?.div(&x[1])
);
case!(pow_tensor, [positive(&[3, 4], 1), randn(&[3, 4], 2)], |x| x
    [0]
.pow(&x[1]));
case!(
    pow_broadcast_exponent,
    [positive(&[3, 4], 1), randn(&[1], 2)],
    |x| x[0].pow(&x[1])
);
case!(scalar_ops, [randn(&[3, 4], 1)], |x| x[0]
    .add_scalar(2.0)?
    .mul_scalar(-3.0)?
    .sub_scalar(1.0)?
    .div_scalar(4.0)?
    .rsub_scalar(0.5));

// ---- unary functions, applied to transposed views ----
case!(neg, [randn(&[4, 3], 1)], |x| t(&x[0])?.neg());
case!(exp, [randn(&[4, 3], 1)], |x| t(&x[0])?.exp());
case!(log, [positive(&[4, 3], 1)], |x| t(&x[0])?.log());
case!(sqrt, [positive(&[4, 3], 1)], |x| t(&x[0])?.sqrt());
case!(rsqrt, [positive(&[4, 3], 1)], |x| t(&x[0])?.rsqrt());
case!(powf, [positive(&[4, 3], 1)], |x| t(&x[0])?.powf(2.5));
case!(abs, [randn(&[4, 3], 1)], |x| t(&x[0])?.abs());
case!(clamp, [randn(&[4, 3], 1)], |x| t(&x[0])?.clamp(-0.5, 0.7));
case!(relu, [randn(&[4, 3], 1)], |x| t(&x[0])?.relu());
case!(leaky_relu, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .leaky_relu(0.1));
case!(sigmoid, [randn(&[4, 3], 1)], |x| t(&x[0])?.sigmoid());
case!(tanh, [randn(&[4, 3], 1)], |x| t(&x[0])?.tanh());
case!(gelu, [randn(&[4, 3], 1)], |x| t(&x[0])?.gelu());
case!(gelu_tanh, [randn(&[4, 3], 1)], |x| t(&x[0])?.gelu_tanh());
case!(silu, [randn(&[4, 3], 1)], |x| t(&x[0])?.silu());
// beta * x crosses the threshold for some elements, so both branches are exercised.
case!(softplus, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .softplus(2.0, 1.0));
case!(erf, [randn(&[4, 3], 1)], |x| t(&x[0])?.erf());
case!(flip, [randn(&[3, 4], 1)], |x| t(&x[0])?.flip(&[0, 1]));
case!(roll, [randn(&[3, 4], 1)], |x| t(&x[0])?.roll(2, 1));
case!(repeat, [randn(&[3, 2], 1)], |x| t(&x[0])?
    .repeat(&[2, 1, 2]));
case!(triu, [randn(&[3, 4], 1)], |x| t(&x[0])?.triu(-1));
case!(maximum, [randn(&[3, 4], 1), randn(&[4], 2)], |x| x[0]
    .maximum(&x[1]));
case!(cumsum, [randn(&[3, 4], 1)], |x| t(&x[0])?.cumsum(0));
case!(log1p, [randn(&[4, 3], 1)], |x| t(&x[0])?.abs()?.log1p());
case!(sin, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .mul_scalar(3.0)?
    .sin());
case!(cos, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .mul_scalar(3.0)?
    .cos());

// ---- reductions ----
case!(sum_axis, [randn(&[3, 4], 1)], |x| x[0].sum(&[0], false));
case!(sum_axes_keepdim, [randn(&[2, 3, 4], 1)], |x| x[0]
    .sum(&[0, 2], true));
case!(sum_negative_axis_non_contiguous, [randn(&[4, 3], 1)], |x| {
    t(&x[0])?.sum(&[-1], false)
});
case!(sum_all, [randn(&[2, 3, 4], 1)], |x| x[0].sum_all());
case!(mean, [randn(&[3, 4], 1)], |x| x[0].mean(&[1], true));
case!(mean_all, [randn(&[3, 4], 1)], |x| x[0].mean_all());
case!(max_axis, [randn(&[3, 4], 1)], |x| x[0].max(&[1], false));
case!(max_all_non_contiguous, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .max(&[0, 1], false));
case!(min_axis, [randn(&[3, 4], 1)], |x| x[0].min(&[0], true));
case!(var_unbiased, [randn(&[3, 5], 1)], |x| x[0].var(
    &[1],
    1,
    false
));
case!(var_biased_all, [randn(&[3, 5], 1)], |x| x[0].var(
    &[0, 1],
    0,
    false
));
case!(std, [randn(&[3, 5], 1)], |x| x[0].std(&[0], 1, true));
case!(logsumexp, [randn(&[3, 5], 1)], |x| x[0]
    .logsumexp(&[1], false));

// ---- softmax ----
case!(softmax_last, [randn(&[3, 5], 1)], |x| x[0].softmax(-1));
case!(softmax_middle_axis, [randn(&[2, 3, 4], 1)], |x| x[0]
    .softmax(1));
case!(log_softmax, [randn(&[3, 5], 1)], |x| x[0].log_softmax(1));
case!(log_softmax_non_contiguous, [randn(&[5, 3], 1)], |x| t(
    &x[0]
)?
.log_softmax(0));

// ---- matrix products ----
case!(matmul_2d, [randn(&[3, 4], 1), randn(&[4, 2], 2)], |x| x[0]
    .matmul(&x[1]));
case!(
    matmul_transposed_operands,
    [randn(&[4, 3], 1), randn(&[2, 4], 2)],
    |x| t(&x[0])?.matmul(&t(&x[1])?)
);
case!(
    matmul_batched,
    [randn(&[2, 3, 4], 1), randn(&[2, 4, 5], 2)],
    |x| x[0].matmul(&x[1])
);
case!(
    matmul_broadcast_batch,
    [randn(&[2, 1, 3, 4], 1), randn(&[3, 4, 2], 2)],
    |x| x[0].matmul(&x[1])
);
case!(
    matmul_matrix_times_batch,
    [randn(&[3, 4], 1), randn(&[2, 4, 5], 2)],
    |x| x[0].matmul(&x[1])
);
case!(
    matmul_vector_left,
    [randn(&[4], 1), randn(&[4, 3], 2)],
    |x| x[0].matmul(&x[1])
);
case!(
    matmul_vector_right,
    [randn(&[3, 4], 1), randn(&[4], 2)],
    |x| x[0].matmul(&x[1])
);
case!(matmul_dot, [randn(&[4], 1), randn(&[4], 2)], |x| x[0]
    .matmul(&x[1]));
// `linear` with the bias added by the product: 2-d and batched inputs, a strided bias view,
// a transposed input, and without a bias
case!(
    linear_2d,
    [randn(&[3, 4], 1), randn(&[5, 4], 2), randn(&[5], 3)],
    |x| x[0].linear(&x[1], Some(&x[2]))
);
case!(
    linear_batched_input,
    [randn(&[2, 3, 4], 1), randn(&[5, 4], 2), randn(&[5], 3)],
    |x| x[0].linear(&x[1], Some(&x[2]))
);
case!(
    linear_strided_bias_and_input,
    [randn(&[4, 3], 1), randn(&[2, 4], 2), randn(&[6], 3)],
    |x| t(&x[0])?.linear(&x[1], Some(&x[2].narrow(0, 1, 2)?))
);
case!(
    linear_without_bias,
    [randn(&[3, 4], 1), randn(&[5, 4], 2)],
    |x| x[0].linear(&x[1], None)
);
case!(
    linear_of_a_vector,
    [randn(&[4], 1), randn(&[5, 4], 2), randn(&[5], 3)],
    |x| x[0].linear(&x[1], Some(&x[2]))
);

// ---- views ----
case!(reshape, [randn(&[3, 4], 1)], |x| x[0]
    .reshape(&[2, 6])?
    .exp());
case!(reshape_non_contiguous, [randn(&[3, 4], 1)], |x| t(&x[0])?
    .reshape(&[2, 6])?
    .exp());
case!(reshape_infer, [randn(&[3, 4], 1)], |x| x[0]
    .reshape_infer(&[-1, 2])?
    .tanh());
case!(flatten, [randn(&[2, 3, 2], 1)], |x| x[0]
    .flatten(1, 2)?
    .sigmoid());
case!(squeeze_unsqueeze, [randn(&[3, 1, 4], 1)], |x| x[0]
    .squeeze(1)?
    .unsqueeze(0)?
    .exp());
case!(permute, [randn(&[2, 3, 4], 1)], |x| x[0]
    .permute(&[2, 0, 1])?
    .exp());
case!(transpose, [randn(&[3, 4], 1)], |x| x[0]
    .transpose(-1, 0)?
    .tanh());
case!(broadcast_to, [randn(&[3, 1], 1)], |x| x[0]
    .broadcast_to(&[2, 3, 4])?
    .exp());
case!(narrow, [randn(&[4, 5], 1)], |x| x[0].narrow(1, 1, 3)?.exp());
case!(slice_of_transpose, [randn(&[4, 5], 1)], |x| t(&x[0])?
    .slice(0, 2..5)?
    .exp());
case!(contiguous, [randn(&[4, 3], 1)], |x| t(&x[0])?
    .contiguous()?
    .exp());

// ---- indexing ----
case!(index_select_repeats, [randn(&[4, 3], 1)], |x| x[0]
    .index_select(0, &indices(&[3, 0, 3, 1], &[4]))?
    .tanh());
case!(
    index_select_axis1_non_contiguous,
    [randn(&[3, 4], 1)],
    |x| t(&x[0])?.index_select(1, &indices(&[2, 2, 0], &[3]))
);
case!(index_add, [randn(&[4, 3], 1), randn(&[2, 3], 2)], |x| x[0]
    .index_add(0, &indices(&[1, 1], &[2]), &x[1])?
    .tanh());
case!(gather, [randn(&[3, 4], 1)], |x| x[0]
    .gather(1, &indices(&[0, 3, 3, 1, 2, 0], &[3, 2]))?
    .exp());
case!(scatter_add, [randn(&[3, 4], 1), randn(&[2, 4], 2)], |x| x
    [0]
.scatter_add(0, &indices(&[0, 2, 2, 1, 0, 0, 1, 2], &[2, 4]), &x[1])?
.tanh());

// ---- joining and splitting ----
case!(
    cat,
    [randn(&[2, 3], 1), randn(&[2, 1], 2), randn(&[2, 2], 3)],
    |x| DynTensor::cat(&[&x[0], &x[1], &x[2]], 1)?.exp()
);
case!(
    cat_non_contiguous,
    [randn(&[3, 2], 1), randn(&[1, 3], 2)],
    |x| DynTensor::cat(&[&t(&x[0])?, &x[1]], 0)?.exp()
);
case!(stack, [randn(&[2, 3], 1), randn(&[2, 3], 2)], |x| {
    DynTensor::stack(&[&x[0], &x[1]], 1)?.tanh()
});
case!(split, [randn(&[5, 2], 1)], |x| {
    let parts = x[0].split(2, 0)?;
    parts[0].exp()?.sum_all()?.add(&parts[2].tanh()?.sum_all()?)
});
case!(chunk, [randn(&[2, 6], 1)], |x| {
    let parts = x[0].chunk(3, 1)?;
    parts[1].mul(&parts[2])
});

// ---- selection ----
case!(where_broadcast, [randn(&[3, 4], 1), randn(&[4], 2)], |x| {
    let condition = x[0].gt_scalar(0.0)?.detach();
    DynTensor::where_(&condition, &x[0].exp()?, &x[1])
});
case!(masked_fill, [randn(&[3, 4], 1)], |x| x[0]
    .masked_fill(&x[0].lt_scalar(0.0)?, 0.25)?
    .exp());

// ---- a composite: cross-entropy of a tiny MLP written with core ops ----
case!(
    mlp_cross_entropy,
    [randn(&[5, 4], 1), randn(&[4, 3], 2), randn(&[3], 3)],
    |x| {
        let logits = x[0].matmul(&x[1])?.add(&x[2])?;
        let picked = logits
            .log_softmax(1)?
            .gather(1, &indices(&[0, 2, 1, 1, 0], &[5, 1]))?;
        picked.mean_all()?.neg()
    }
);

// ---- convolution and pooling ----
case!(
    unfold2d_stride_padding_dilation,
    [randn(&[1, 2, 5, 4], 1)],
    |x| { x[0].unfold2d((2, 2), (2, 1), (1, 1), (2, 1))?.tanh() }
);
case!(fold2d, [randn(&[1, 2, 4, 10], 1)], |x| x[0]
    .fold2d((4, 3), (2, 2), (1, 2), (1, 1), (1, 1))?
    .exp());
case!(
    conv2d_stride_padding_dilation,
    [randn(&[2, 2, 5, 5], 1), randn(&[3, 2, 2, 2], 2)],
    |x| x[0].conv2d(&x[1], None, (2, 2), (1, 1), (2, 2), 1)
);
case!(
    conv2d_groups_bias,
    [
        randn(&[2, 4, 3, 3], 1),
        randn(&[4, 2, 2, 2], 2),
        randn(&[4], 3)
    ],
    |x| x[0].conv2d(&x[1], Some(&x[2]), (1, 1), (1, 1), (1, 1), 2)
);
// A 1x1 kernel skips the unfold; the input is a non-contiguous view.
case!(
    conv2d_pointwise_non_contiguous,
    [
        randn(&[2, 3, 4, 3], 1),
        randn(&[2, 3, 1, 1], 2),
        randn(&[2], 3)
    ],
    |x| x[0]
        .transpose(2, 3)?
        .conv2d(&x[1], Some(&x[2]), (1, 1), (0, 0), (1, 1), 1)?
        .tanh()
);
/// f32 convolutions with stride 1 and one group run on the CPU's direct kernels (on x86-64
/// with AVX2 or AVX-512); f64 ones take the general path that the cases above check against
/// finite differences. Both must agree on the values, the input, weight and bias gradients,
/// and a second-order gradient through a recorded backward pass.
#[test]
fn conv2d_direct_kernels_match_the_general_path() {
    use rumus::{DType, grad};
    let cases = [
        ([2, 3, 7, 9], [5, 3, 3, 3], (1, 1)),
        ([3, 4, 6, 11], [70, 4, 2, 3], (1, 2)),
        ([1, 16, 10, 12], [40, 16, 3, 3], (0, 1)),
        ([2, 2, 9, 6], [3, 2, 5, 5], (2, 4)),
    ];
    for (case, (x_dims, w_dims, padding)) in cases.into_iter().enumerate() {
        let seed = 10 * case as u64;
        let inputs = [
            randn(&x_dims, seed),
            randn(&w_dims, seed + 1),
            randn(&[w_dims[0]], seed + 2),
        ];
        let run = |dtype: DType| -> rumus::Result<Vec<DynTensor>> {
            let xs: Vec<DynTensor> = inputs
                .iter()
                .map(|t| t.to_dtype(dtype)?.requires_grad_())
                .collect::<rumus::Result<_>>()?;
            let refs: Vec<&DynTensor> = xs.iter().collect();
            let y = xs[0].conv2d(&xs[1], Some(&xs[2]), (1, 1), padding, (1, 1), 1)?;
            let loss = y
                .mul(&randn(y.dims(), seed + 3).to_dtype(dtype)?)?
                .sum_all()?;
            let first = grad(&[&loss], &refs, false)?;
            let recorded = grad(&[&loss], &refs, true)?;
            let curvature = recorded[0].mul(&recorded[0])?.sum_all()?;
            let second = grad(&[&curvature], &refs[1..2], false)?;
            let mut out = vec![y];
            out.extend(first);
            out.extend(second);
            out.iter().map(|t| t.to_dtype(DType::F64)).collect()
        };
        let (direct, general) = (run(DType::F32).unwrap(), run(DType::F64).unwrap());
        let names = ["output", "dx", "dw", "db", "d(|dx|^2)/dw"];
        for ((name, d), g) in names.iter().zip(&direct).zip(&general) {
            let (d, g) = (d.to_vec::<f64>().unwrap(), g.to_vec::<f64>().unwrap());
            let scale = g.iter().fold(1.0f64, |m, v| m.max(v.abs()));
            for (i, (a, e)) in d.iter().zip(&g).enumerate() {
                assert!(
                    (a - e).abs() <= 1e-5 * scale,
                    "case {case} {name}[{i}]: f32 {a} against f64 {e}"
                );
            }
        }
    }
}

// randn values have no ties, so every window has one maximum.
case!(
    max_pool2d_overlapping_padding,
    [randn(&[1, 2, 5, 5], 1)],
    |x| x[0].max_pool2d((3, 3), (2, 2), (1, 1))?.exp()
);
case!(max_pool2d_rectangular, [randn(&[2, 1, 4, 5], 1)], |x| x[0]
    .max_pool2d((2, 3), (1, 2), (1, 0)));
case!(
    avg_pool2d_count_include_pad,
    [randn(&[1, 2, 5, 5], 1)],
    |x| { x[0].avg_pool2d((3, 3), (2, 2), (1, 1), true)?.exp() }
);
case!(avg_pool2d_exclude_pad, [randn(&[1, 2, 5, 5], 1)], |x| {
    x[0].avg_pool2d((3, 2), (2, 1), (1, 1), false)?.exp()
});
case!(
    adaptive_avg_pool2d_non_dividing,
    [randn(&[1, 2, 5, 7], 1)],
    |x| { x[0].adaptive_avg_pool2d((3, 4))?.exp() }
);
case!(
    adaptive_avg_pool2d_dividing,
    [randn(&[2, 1, 4, 6], 1)],
    |x| { x[0].adaptive_avg_pool2d((2, 3))?.exp() }
);
case!(adaptive_avg_pool2d_global, [randn(&[2, 2, 3, 3], 1)], |x| {
    x[0].adaptive_avg_pool2d((1, 1))?.exp()
});

/// A weight used transposed (`x @ W^T`, as every `Linear` uses its weight) receives its
/// gradient in its own memory order, so an optimizer reads it without a copy. The values of
/// this path are checked against finite differences by `matmul_transposed_operands`; here
/// `loss = sum(x @ W^T)`, whose weight gradient is `dW[o, i] = sum_n x[n, i]`.
#[test]
fn a_weight_used_transposed_gets_a_contiguous_gradient() -> rumus::Result<()> {
    let x = randn(&[5, 3], 1);
    let w = randn(&[4, 3], 2).requires_grad_()?;
    let loss = x.matmul(&t(&w)?)?.sum_all()?;
    let dw = &rumus::grad(&[&loss], &[&w], false)?[0];
    assert_eq!(dw.dims(), &[4, 3]);
    assert!(dw.is_contiguous(), "the gradient of W is a strided view");
    let xs = x.to_vec::<f64>()?;
    let column_sums: Vec<f64> = (0..3)
        .map(|i| (0..5).map(|n| xs[n * 3 + i]).sum())
        .collect();
    for (k, found) in dw.to_vec::<f64>()?.into_iter().enumerate() {
        assert!(
            (found - column_sums[k % 3]).abs() < 1e-12,
            "dW[{k}] = {found}"
        );
    }
    Ok(())
}

//! Every loss against central finite differences in f64, to first and second order, in each
//! reduction mode and with the options that change the formula. Float targets are checked as
//! inputs too; class-index targets are constants.

mod common;

use common::{check_first_and_second_order, indices, randn};
use rumus::nn::{
    CrossEntropyOptions, KlReduction, NllLossOptions, Reduction, binary_cross_entropy,
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
    nll_loss, smooth_l1_loss,
};
use rumus::rng::Generator;
use rumus::{DType, DynTensor};

macro_rules! case {
    ($name:ident, [$($input:expr),* $(,)?], |$x:ident| $body:expr) => {
        #[test]
        fn $name() {
            check_first_and_second_order(stringify!($name), |$x: &[DynTensor]| $body, vec![$($input),*]);
        }
    };
}

/// f64 values uniform in `[low, high)`.
fn uniform(dims: &[usize], low: f64, high: f64, seed: u64) -> DynTensor {
    DynTensor::uniform_with(dims, low, high, DType::F64, &mut Generator::new(seed)).unwrap()
}

fn ce(
    reduction: Reduction,
    ignore_index: Option<i64>,
    label_smoothing: f64,
) -> CrossEntropyOptions {
    CrossEntropyOptions {
        reduction,
        ignore_index,
        label_smoothing,
    }
}

// ---- regression ----
case!(mse_mean, [randn(&[3, 4], 1), randn(&[3, 4], 2)], |x| {
    mse_loss(&x[0], &x[1], Reduction::Mean)
});
case!(
    mse_sum_non_contiguous,
    [randn(&[4, 3], 1), randn(&[3, 4], 2)],
    |x| mse_loss(&x[0].transpose(0, 1)?, &x[1], Reduction::Sum)
);
case!(mse_none, [randn(&[2, 3], 1), randn(&[2, 3], 2)], |x| {
    mse_loss(&x[0], &x[1], Reduction::None)
});
case!(
    l1_mean,
    [randn(&[3, 4], 1), randn(&[3, 4], 2)],
    |x| l1_loss(&x[0], &x[1], Reduction::Mean)
);
case!(
    l1_none,
    [randn(&[2, 3], 1), randn(&[2, 3], 2)],
    |x| l1_loss(&x[0], &x[1], Reduction::None)
);
// |x - t| lies on both sides of beta = 1.
case!(
    smooth_l1_mean,
    [randn(&[3, 4], 1), randn(&[3, 4], 2)],
    |x| smooth_l1_loss(&x[0], &x[1], 1.0, Reduction::Mean)
);
case!(
    smooth_l1_none_beta,
    [randn(&[3, 4], 3), randn(&[3, 4], 4)],
    |x| smooth_l1_loss(&x[0], &x[1], 0.5, Reduction::None)
);
case!(
    smooth_l1_beta_zero_is_l1,
    [randn(&[2, 3], 1), randn(&[2, 3], 2)],
    |x| smooth_l1_loss(&x[0], &x[1], 0.0, Reduction::Sum)
);
case!(huber_sum, [randn(&[3, 4], 1), randn(&[3, 4], 2)], |x| {
    huber_loss(&x[0], &x[1], 0.8, Reduction::Sum)
});
case!(huber_none, [randn(&[2, 3], 5), randn(&[2, 3], 6)], |x| {
    huber_loss(&x[0], &x[1], 1.5, Reduction::None)
});

// ---- class-index targets ----
case!(cross_entropy_mean, [randn(&[4, 3], 1)], |x| cross_entropy(
    &x[0],
    &indices(&[0, 2, 1, 2], &[4]),
    &CrossEntropyOptions::default()
));
case!(cross_entropy_sum_ignore_index, [randn(&[4, 3], 1)], |x| {
    cross_entropy(
        &x[0],
        &indices(&[0, -100, 1, 2], &[4]),
        &ce(Reduction::Sum, Some(-100), 0.0),
    )
});
case!(cross_entropy_mean_ignore_index, [randn(&[5, 3], 1)], |x| {
    cross_entropy(
        &x[0],
        &indices(&[0, 1, 1, 2, 1], &[5]),
        &ce(Reduction::Mean, Some(1), 0.0),
    )
});
case!(cross_entropy_none_ignore_index, [randn(&[4, 3], 1)], |x| {
    cross_entropy(
        &x[0],
        &indices(&[2, 7, 0, 1], &[4]),
        &ce(Reduction::None, Some(7), 0.0),
    )
});
case!(cross_entropy_label_smoothing, [randn(&[4, 3], 1)], |x| {
    cross_entropy(
        &x[0],
        &indices(&[0, 2, 1, 2], &[4]),
        &ce(Reduction::Mean, None, 0.2),
    )
});
case!(
    cross_entropy_label_smoothing_ignore_index,
    [randn(&[4, 3], 1)],
    |x| cross_entropy(
        &x[0],
        &indices(&[0, -100, 1, 2], &[4]),
        &ce(Reduction::Mean, Some(-100), 0.3)
    )
);
case!(
    cross_entropy_label_smoothing_none,
    [randn(&[3, 4], 1)],
    |x| cross_entropy(
        &x[0],
        &indices(&[3, 0, -1], &[3]),
        &ce(Reduction::None, Some(-1), 0.1)
    )
);
// [N, C, d] logits with [N, d] targets; the logits are a non-contiguous view.
case!(cross_entropy_spatial, [randn(&[2, 3, 3], 1)], |x| {
    cross_entropy(
        &x[0].transpose(1, 2)?,
        &indices(&[0, 2, -100, 1, 1, 0], &[2, 3]),
        &ce(Reduction::Mean, Some(-100), 0.1),
    )
});
case!(
    cross_entropy_unbatched,
    [randn(&[4], 1)],
    |x| cross_entropy(
        &x[0],
        &indices(&[2], &[]),
        &ce(Reduction::None, Some(-100), 0.0)
    )
);
case!(nll_mean_ignore_index, [randn(&[4, 3], 1)], |x| nll_loss(
    &x[0].log_softmax(1)?,
    &indices(&[1, 0, -100, 2], &[4]),
    &NllLossOptions::default()
));
// nll_loss does not need log-probabilities: its input is used as it is.
case!(nll_sum_raw_input, [randn(&[3, 4], 1)], |x| nll_loss(
    &x[0].tanh()?,
    &indices(&[3, 3, 0], &[3]),
    &NllLossOptions {
        reduction: Reduction::Sum,
        ignore_index: None
    }
));

// ---- binary ----
case!(
    binary_cross_entropy_mean,
    [
        uniform(&[3, 4], 0.05, 0.95, 1),
        uniform(&[3, 4], 0.0, 1.0, 2)
    ],
    |x| binary_cross_entropy(&x[0], &x[1], Reduction::Mean)
);
case!(
    binary_cross_entropy_of_sigmoid_none,
    [randn(&[2, 3], 1), uniform(&[2, 3], 0.0, 1.0, 2)],
    |x| binary_cross_entropy(&x[0].sigmoid()?, &x[1], Reduction::None)
);
case!(
    bce_with_logits_mean,
    [randn(&[3, 4], 1), uniform(&[3, 4], 0.0, 1.0, 2)],
    |x| binary_cross_entropy_with_logits(&x[0], &x[1], None, Reduction::Mean)
);
// Zero logits: the decomposition max(x, 0) + ln(1 + e^-|x|) would have kinks here.
case!(
    bce_with_logits_at_zero,
    [
        DynTensor::zeros(&[2, 3], DType::F64).unwrap(),
        uniform(&[2, 3], 0.0, 1.0, 2)
    ],
    |x| binary_cross_entropy_with_logits(&x[0], &x[1], None, Reduction::Sum)
);
case!(
    bce_with_logits_pos_weight_sum,
    [randn(&[3, 4], 1), uniform(&[3, 4], 0.0, 1.0, 2)],
    |x| {
        let pos_weight = uniform(&[4], 0.5, 3.0, 3);
        binary_cross_entropy_with_logits(&x[0], &x[1], Some(&pos_weight), Reduction::Sum)
    }
);
case!(
    bce_with_logits_pos_weight_none,
    [randn(&[2, 3], 1), uniform(&[2, 3], 0.0, 1.0, 2)],
    |x| {
        let pos_weight = uniform(&[2, 1], 0.5, 3.0, 3);
        binary_cross_entropy_with_logits(&x[0], &x[1], Some(&pos_weight), Reduction::None)
    }
);

// ---- distributions ----
case!(
    kl_div_batchmean,
    [
        randn(&[3, 4], 1).log_softmax(1).unwrap(),
        randn(&[3, 4], 2).softmax(1).unwrap()
    ],
    |x| kl_div(&x[0], &x[1], KlReduction::BatchMean, false)
);
case!(
    kl_div_mean,
    [randn(&[3, 4], 1), uniform(&[3, 4], 0.1, 1.0, 2)],
    |x| kl_div(&x[0], &x[1], KlReduction::Mean, false)
);
case!(
    kl_div_sum_log_target,
    [randn(&[3, 4], 1), randn(&[3, 4], 2)],
    |x| kl_div(&x[0], &x[1], KlReduction::Sum, true)
);
case!(
    kl_div_none,
    [randn(&[2, 3], 1), uniform(&[2, 3], 0.1, 1.0, 2)],
    |x| kl_div(&x[0], &x[1], Reduction::None.into(), false)
);
// A zero target contributes nothing: only the input's gradient is checked there.
case!(kl_div_zero_target, [randn(&[2, 3], 1)], |x| {
    let target = DynTensor::from_vec(vec![0.0f64, 0.5, 0.5, 0.25, 0.0, 0.75], &[2, 3])?;
    kl_div(&x[0], &target, KlReduction::BatchMean, false)
});

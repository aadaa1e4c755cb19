//! Normalisation and embedding functions against finite differences (first and second order).

mod common;

use common::{check_first_and_second_order, indices, randn};
use rumus::DynTensor;
use rumus::nn::functional::{batch_norm, embedding, group_norm, layer_norm, rms_norm};

macro_rules! case {
    ($name:ident, [$($input:expr),* $(,)?], |$x:ident| $body:expr) => {
        #[test]
        fn $name() {
            check_first_and_second_order(stringify!($name), |$x: &[DynTensor]| $body, vec![$($input),*]);
        }
    };
}

case!(
    layer_norm_rank3_affine,
    [randn(&[2, 3, 5], 1), randn(&[5], 2), randn(&[5], 3)],
    |x| layer_norm(&x[0], Some(&x[1]), Some(&x[2]), 1e-5)
);
case!(layer_norm_plain, [randn(&[4, 6], 1)], |x| layer_norm(
    &x[0], None, None, 1e-5
));
case!(
    layer_norm_weight_only,
    [randn(&[3, 7], 4), randn(&[7], 5)],
    |x| layer_norm(&x[0], Some(&x[1]), None, 1e-5)
);
case!(
    layer_norm_bias_only,
    [randn(&[2, 2, 4], 6), randn(&[4], 7)],
    |x| layer_norm(&x[0], None, Some(&x[1]), 1e-5)
);
case!(rms_norm_affine, [randn(&[3, 4], 1), randn(&[4], 2)], |x| {
    rms_norm(&x[0], Some(&x[1]), 1e-6)
});
case!(
    group_norm_two_groups,
    [randn(&[2, 4, 3], 1), randn(&[4], 2), randn(&[4], 3)],
    |x| group_norm(&x[0], 2, Some(&x[1]), Some(&x[2]), 1e-5)
);
case!(
    batch_norm_training_2d,
    [randn(&[3, 2, 2, 2], 1), randn(&[2], 2), randn(&[2], 3)],
    |x| batch_norm(&x[0], None, Some(&x[1]), Some(&x[2]), true, 1e-5)
);
case!(batch_norm_training_1d, [randn(&[5, 3], 1)], |x| batch_norm(
    &x[0], None, None, None, true, 1e-5
));
case!(embedding_repeated_rows, [randn(&[5, 3], 1)], |x| embedding(
    &x[0],
    &indices(&[4, 0, 4, 2, 1, 4], &[2, 3])
)?
.tanh());
case!(
    conv_transpose2d_strided,
    [
        randn(&[1, 2, 3, 3], 1),
        randn(&[2, 2, 2, 2], 2),
        randn(&[2], 3)
    ],
    |x| x[0].conv_transpose2d(&x[1], Some(&x[2]), (2, 2), (1, 1), (1, 1), (1, 1))
);
case!(
    conv_transpose2d_dilated,
    [randn(&[1, 1, 2, 3], 1), randn(&[1, 2, 2, 2], 2)],
    |x| x[0].conv_transpose2d(&x[1], None, (1, 1), (0, 0), (0, 0), (2, 2))
);
// Conv1d is a height-1 conv2d: the same composite the layer runs.
case!(
    conv1d_strided_dilated,
    [randn(&[2, 2, 7], 1), randn(&[3, 2, 3], 2), randn(&[3], 3)],
    |x| x[0]
        .unsqueeze(2)?
        .conv2d(&x[1].unsqueeze(2)?, Some(&x[2]), (1, 2), (0, 1), (1, 2), 1)?
        .squeeze(2)
);
// Linear: x W^T + b over the last axis of a rank-3 input.
case!(
    linear_rank3,
    [randn(&[2, 3, 4], 1), randn(&[5, 4], 2), randn(&[5], 3)],
    |x| x[0].matmul(&x[1].transpose(0, 1)?)?.add(&x[2])
);

//! Losses refuse bad arguments with errors (never panics) whose messages name what is wrong:
//! the bad label with its position and the class count, the two shapes that differ, the
//! dtype found.

use rumus::nn::{
    CrossEntropyOptions, KlReduction, NllLossOptions, Reduction, binary_cross_entropy,
    binary_cross_entropy_with_logits, cross_entropy, huber_loss, kl_div, l1_loss, mse_loss,
    nll_loss, smooth_l1_loss,
};
use rumus::{DType, DynTensor, Error, ShapeError};

fn zeros(dims: &[usize]) -> DynTensor {
    DynTensor::zeros(dims, DType::F32).unwrap()
}

fn full(dims: &[usize], value: f64) -> DynTensor {
    DynTensor::full(dims, value, DType::F32).unwrap()
}

fn labels(values: &[i64], dims: &[usize]) -> DynTensor {
    DynTensor::from_vec(values.to_vec(), dims).unwrap()
}

/// The error of `result`, checking that its message is exactly `expected`.
fn error_is(result: rumus::Result<DynTensor>, expected: &str) -> Error {
    match result {
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.dims()),
        Err(e) => {
            assert_eq!(e.to_string(), expected);
            e
        }
    }
}

#[test]
fn class_index_out_of_range() {
    let logits = zeros(&[3, 4]);
    let e = error_is(
        cross_entropy(
            &logits,
            &labels(&[0, 4, 1], &[3]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: target 4 at position [1] is not a class index for 4 classes (valid: 0..4, or the ignore_index -100)",
    );
    assert!(matches!(e, Error::InvalidArgument { .. }));
    // A negative label other than the ignore index.
    error_is(
        cross_entropy(
            &logits,
            &labels(&[0, 1, -1], &[3]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: target -1 at position [2] is not a class index for 4 classes (valid: 0..4, or the ignore_index -100)",
    );
    // Without an ignore index, -100 is just another bad label.
    let no_ignore = CrossEntropyOptions {
        ignore_index: None,
        ..CrossEntropyOptions::default()
    };
    error_is(
        cross_entropy(&logits, &labels(&[-100, 1, 2], &[3]), &no_ignore),
        "cross_entropy: target -100 at position [0] is not a class index for 4 classes (valid: 0..4)",
    );
    // The position is a coordinate of the target tensor, here [N, d1].
    error_is(
        cross_entropy(
            &zeros(&[2, 3, 2]),
            &labels(&[0, 2, 1, 3], &[2, 2]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: target 3 at position [1, 1] is not a class index for 3 classes (valid: 0..3, or the ignore_index -100)",
    );
    error_is(
        nll_loss(
            &zeros(&[2, 5]),
            &labels(&[7, 0], &[2]),
            &NllLossOptions {
                reduction: Reduction::Sum,
                ignore_index: Some(0),
            },
        ),
        "nll_loss: target 7 at position [0] is not a class index for 5 classes (valid: 0..5, or the ignore_index 0)",
    );
    // A single sample [C] with a rank-0 target.
    error_is(
        cross_entropy(&zeros(&[3]), &labels(&[3], &[]), &no_ignore),
        "cross_entropy: target 3 at position [] is not a class index for 3 classes (valid: 0..3)",
    );
}

#[test]
fn class_targets_must_be_i64() {
    let e = error_is(
        cross_entropy(
            &zeros(&[2, 3]),
            &zeros(&[2]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: expected an i64 tensor of class indices as the target, got a f32 tensor",
    );
    assert!(matches!(
        e,
        Error::DType {
            found: DType::F32,
            ..
        }
    ));
    error_is(
        nll_loss(
            &zeros(&[2, 3]),
            &DynTensor::from_vec(vec![true, false], &[2]).unwrap(),
            &NllLossOptions::default(),
        ),
        "nll_loss: expected an i64 tensor of class indices as the target, got a bool tensor",
    );
    // The scores themselves must be floating-point.
    error_is(
        cross_entropy(
            &labels(&[1, 2, 3, 4], &[2, 2]),
            &labels(&[0, 1], &[2]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: expected a floating-point input, got a i64 tensor",
    );
}

#[test]
fn class_target_shape_mismatch() {
    let e = error_is(
        cross_entropy(
            &zeros(&[2, 3, 4]),
            &labels(&[0; 6], &[2, 3]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: the input has shape [2, 3, 4], so the target needs shape [2, 4] (the input's shape without the class axis 1), but it has shape [2, 3]",
    );
    assert!(matches!(e, Error::Shape(ShapeError::Invalid { .. })));
    error_is(
        nll_loss(
            &zeros(&[4, 3]),
            &labels(&[0; 4], &[4, 1]),
            &NllLossOptions::default(),
        ),
        "nll_loss: the input has shape [4, 3], so the target needs shape [4] (the input's shape without the class axis 1), but it has shape [4, 1]",
    );
    error_is(
        cross_entropy(
            &zeros(&[5]),
            &labels(&[1], &[1]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: the input has shape [5], so the target needs shape [] (the input's shape without the class axis 0), but it has shape [1]",
    );
    error_is(
        cross_entropy(
            &zeros(&[]),
            &labels(&[1], &[]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: the input needs a class axis: shape [C], [N, C] or [N, C, d1, ...], got a rank-0 tensor",
    );
    error_is(
        cross_entropy(
            &zeros(&[2, 0]),
            &labels(&[-100, -100], &[2]),
            &CrossEntropyOptions::default(),
        ),
        "cross_entropy: the input has shape [2, 0]: its class axis 1 is empty",
    );
}

#[test]
fn label_smoothing_out_of_range() {
    for bad in [1.5, -0.1, f64::NAN] {
        let options = CrossEntropyOptions {
            label_smoothing: bad,
            ..CrossEntropyOptions::default()
        };
        error_is(
            cross_entropy(&zeros(&[2, 3]), &labels(&[0, 1], &[2]), &options),
            &format!("cross_entropy: label_smoothing must be in [0, 1], got {bad}"),
        );
    }
}

#[test]
fn element_wise_shape_mismatch_names_both_shapes() {
    let (input, target) = (zeros(&[2, 3]), zeros(&[3]));
    let message = |op: &str| {
        format!(
            "{op}: input has shape [2, 3] but target has shape [3]; they must be equal (losses do not broadcast)"
        )
    };
    let e = error_is(
        mse_loss(&input, &target, Reduction::Mean),
        &message("mse_loss"),
    );
    assert!(matches!(e, Error::Shape(ShapeError::Invalid { .. })));
    error_is(
        l1_loss(&input, &target, Reduction::Sum),
        &message("l1_loss"),
    );
    error_is(
        smooth_l1_loss(&input, &target, 1.0, Reduction::None),
        &message("smooth_l1_loss"),
    );
    error_is(
        huber_loss(&input, &target, 1.0, Reduction::Mean),
        &message("huber_loss"),
    );
    error_is(
        binary_cross_entropy(&input, &target, Reduction::Mean),
        &message("binary_cross_entropy"),
    );
    error_is(
        binary_cross_entropy_with_logits(&input, &target, None, Reduction::Mean),
        &message("binary_cross_entropy_with_logits"),
    );
    error_is(
        kl_div(&input, &target, KlReduction::BatchMean, false),
        &message("kl_div"),
    );
}

#[test]
fn element_wise_dtypes() {
    let x = zeros(&[2, 2]);
    let e = error_is(
        mse_loss(
            &x,
            &DynTensor::zeros(&[2, 2], DType::F64).unwrap(),
            Reduction::Mean,
        ),
        "mse_loss: operands have different dtypes (f32 and f64); convert one with `.to_dtype()`",
    );
    assert!(matches!(e, Error::DTypeMismatch { .. }));
    let ints = labels(&[1, 2, 3, 4], &[2, 2]);
    error_is(
        l1_loss(&ints, &ints, Reduction::Mean),
        "l1_loss: expected a floating-point input, got a i64 tensor",
    );
}

#[test]
fn bad_scalar_options() {
    let (x, y) = (zeros(&[3]), full(&[3], 1.0));
    for beta in [-0.5, f64::NAN] {
        error_is(
            smooth_l1_loss(&x, &y, beta, Reduction::Mean),
            &format!("smooth_l1_loss: beta must be non-negative, got {beta}"),
        );
    }
    for delta in [0.0, -1.0, f64::NAN] {
        error_is(
            huber_loss(&x, &y, delta, Reduction::Mean),
            &format!("huber_loss: delta must be positive, got {delta}"),
        );
    }
}

#[test]
fn probabilities_outside_unit_interval() {
    let probs = DynTensor::from_vec(vec![0.5f32, 1.25, 0.0, 1.0], &[2, 2]).unwrap();
    let e = error_is(
        binary_cross_entropy(&probs, &zeros(&[2, 2]), Reduction::Mean),
        "binary_cross_entropy: probabilities must lie in [0, 1], but the input at position [0, 1] is 1.25",
    );
    assert!(matches!(e, Error::InvalidArgument { .. }));
    let probs = DynTensor::from_vec(vec![0.5f32, 0.25, f32::NAN], &[3]).unwrap();
    error_is(
        binary_cross_entropy(&probs, &zeros(&[3]), Reduction::Sum),
        "binary_cross_entropy: probabilities must lie in [0, 1], but the input at position [2] is NaN",
    );
    // Exactly 0 and 1 are fine: the logarithms are floored at -100.
    let probs = DynTensor::from_vec(vec![0.0f32, 1.0], &[2]).unwrap();
    let target = DynTensor::from_vec(vec![1.0f32, 0.0], &[2]).unwrap();
    let loss = binary_cross_entropy(&probs, &target, Reduction::None).unwrap();
    assert_eq!(loss.to_vec::<f32>().unwrap(), vec![100.0, 100.0]);
}

#[test]
fn pos_weight_must_broadcast_to_the_target() {
    let (logits, target) = (zeros(&[2, 4]), zeros(&[2, 4]));
    let e = error_is(
        binary_cross_entropy_with_logits(&logits, &target, Some(&zeros(&[3])), Reduction::Mean),
        "binary_cross_entropy_with_logits pos_weight: shapes [3] and [2, 4] cannot be broadcast (axis 0 from the right: 3 vs 4; sizes must be equal or one of them 1)",
    );
    assert!(matches!(
        e,
        Error::Shape(ShapeError::NotBroadcastable { .. })
    ));
    // Broadcastable, but to a larger shape than the target's.
    error_is(
        binary_cross_entropy_with_logits(
            &logits,
            &target,
            Some(&zeros(&[3, 1, 4])),
            Reduction::Mean,
        ),
        "binary_cross_entropy_with_logits pos_weight: pos_weight has shape [3, 1, 4], which does not broadcast to the target's shape [2, 4]",
    );
    error_is(
        binary_cross_entropy_with_logits(
            &logits,
            &target,
            Some(&DynTensor::ones(&[4], DType::F64).unwrap()),
            Reduction::Mean,
        ),
        "binary_cross_entropy_with_logits: operands have different dtypes (f32 and f64); convert one with `.to_dtype()`",
    );
}

/// Edge cases that are not errors, with PyTorch's values.
#[test]
fn edge_values() {
    // Every target ignored: the mean is 0 / 0.
    let all_ignored = cross_entropy(
        &zeros(&[2, 3]),
        &labels(&[-100, -100], &[2]),
        &CrossEntropyOptions::default(),
    )
    .unwrap();
    assert!(all_ignored.item::<f32>().unwrap().is_nan());
    // ... but their sum is 0, and ignored targets have loss 0 under `None`.
    let summed = CrossEntropyOptions {
        reduction: Reduction::Sum,
        ..CrossEntropyOptions::default()
    };
    let sum = cross_entropy(&zeros(&[2, 3]), &labels(&[-100, -100], &[2]), &summed).unwrap();
    assert_eq!(sum.item::<f32>().unwrap(), 0.0);
    // An empty batch: the mean of nothing is NaN, the sum 0.
    let empty = mse_loss(&zeros(&[0, 3]), &zeros(&[0, 3]), Reduction::Mean).unwrap();
    assert!(empty.item::<f32>().unwrap().is_nan());
    let empty = cross_entropy(&zeros(&[0, 3]), &labels(&[], &[0]), &summed).unwrap();
    assert_eq!(empty.item::<f32>().unwrap(), 0.0);
    // Huge logits stay finite.
    let logits = DynTensor::from_vec(vec![1000.0f32, -1000.0, 0.0], &[1, 3]).unwrap();
    let loss = cross_entropy(
        &logits,
        &labels(&[1], &[1]),
        &CrossEntropyOptions::default(),
    )
    .unwrap()
    .item::<f32>()
    .unwrap();
    assert_eq!(loss, 2000.0);
    let bce = binary_cross_entropy_with_logits(
        &DynTensor::from_vec(vec![-1000.0f32, 1000.0], &[2]).unwrap(),
        &DynTensor::from_vec(vec![1.0f32, 1.0], &[2]).unwrap(),
        None,
        Reduction::None,
    )
    .unwrap();
    assert_eq!(bce.to_vec::<f32>().unwrap(), vec![1000.0, 0.0]);
}

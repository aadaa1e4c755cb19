//! Convolution and pooling refuse bad arguments with errors (never panics) whose messages
//! name the sizes that disagree.

use rumus::{DType, DynTensor, Error, ShapeError};

fn zeros(dims: &[usize]) -> DynTensor {
    DynTensor::zeros(dims, DType::F32).unwrap()
}

/// The error of `result`, checking that its message mentions every one of `parts`.
fn error_naming(result: rumus::Result<DynTensor>, parts: &[&str]) -> Error {
    let error = match result {
        Ok(t) => panic!("expected an error, got a tensor of shape {:?}", t.dims()),
        Err(e) => e,
    };
    let message = error.to_string();
    for part in parts {
        assert!(
            message.contains(part),
            "message {message:?} does not mention {part:?}"
        );
    }
    error
}

#[test]
fn kernel_larger_than_input() {
    let x = zeros(&[1, 2, 4, 4]);
    let e = error_naming(
        x.conv2d(&zeros(&[3, 2, 5, 5]), None, (1, 1), (0, 0), (1, 1), 1),
        &["conv2d", "5x5", "4x4", "[1, 2, 4, 4]"],
    );
    assert!(matches!(e, Error::Shape(ShapeError::Invalid { .. })));
    // Padding makes room for it; dilation makes the span larger again.
    assert_eq!(
        x.conv2d(&zeros(&[3, 2, 5, 5]), None, (1, 1), (1, 1), (1, 1), 1)
            .unwrap()
            .dims(),
        &[1, 3, 2, 2]
    );
    error_naming(
        x.conv2d(&zeros(&[3, 2, 3, 2]), None, (1, 1), (0, 0), (2, 1), 1),
        &["5x2", "4x4", "dilation (2, 1)"],
    );
    error_naming(
        x.unfold2d((3, 6), (1, 1), (0, 0), (1, 1)),
        &["unfold2d", "3x6", "4x4"],
    );
    error_naming(x.max_pool2d((5, 2), (1, 1), (0, 0)), &["max_pool2d", "5x2"]);
    error_naming(
        x.avg_pool2d((2, 7), (1, 1), (0, 1), true),
        &["avg_pool2d", "2x7", "4x6"],
    );
}

#[test]
fn channel_mismatch() {
    let x = zeros(&[2, 3, 8, 8]);
    let e = error_naming(
        x.conv2d(&zeros(&[4, 2, 3, 3]), None, (1, 1), (0, 0), (1, 1), 1),
        &["[2, 3, 8, 8]", "3 channels", "[4, 2, 3, 3]", "expects 2"],
    );
    assert!(matches!(e, Error::Shape(ShapeError::Invalid { .. })));
    // With groups the weight holds C / groups channels per group.
    error_naming(
        zeros(&[1, 4, 5, 5]).conv2d(&zeros(&[4, 4, 3, 3]), None, (1, 1), (0, 0), (1, 1), 2),
        &["4 channels", "[4, 4, 3, 3]", "expects 8", "2 groups"],
    );
}

#[test]
fn groups_not_dividing() {
    let e = error_naming(
        zeros(&[1, 4, 5, 5]).conv2d(&zeros(&[6, 2, 3, 3]), None, (1, 1), (0, 0), (1, 1), 3),
        &["groups = 3", "4 input channels"],
    );
    assert!(matches!(e, Error::Shape(ShapeError::Invalid { .. })));
    error_naming(
        zeros(&[1, 4, 5, 5]).conv2d(&zeros(&[3, 2, 3, 3]), None, (1, 1), (0, 0), (1, 1), 2),
        &["groups = 2", "3 output channels", "[3, 2, 3, 3]"],
    );
    error_naming(
        zeros(&[1, 4, 5, 5]).conv2d(&zeros(&[4, 4, 3, 3]), None, (1, 1), (0, 0), (1, 1), 0),
        &["groups must be positive"],
    );
}

#[test]
fn bias_of_the_wrong_length() {
    error_naming(
        zeros(&[1, 2, 5, 5]).conv2d(
            &zeros(&[4, 2, 3, 3]),
            Some(&zeros(&[3])),
            (1, 1),
            (0, 0),
            (1, 1),
            1,
        ),
        &["bias", "[3]", "4 output channels", "[4]"],
    );
}

#[test]
fn wrong_ranks() {
    let e = error_naming(
        zeros(&[2, 8, 8]).conv2d(&zeros(&[4, 2, 3, 3]), None, (1, 1), (0, 0), (1, 1), 1),
        &["conv2d input", "[2, 8, 8]"],
    );
    assert!(matches!(
        e,
        Error::Shape(ShapeError::RankMismatch {
            expected: 4,
            found: 3,
            ..
        })
    ));
    error_naming(
        zeros(&[1, 2, 8, 8]).conv2d(&zeros(&[4, 2, 3]), None, (1, 1), (0, 0), (1, 1), 1),
        &["conv2d weight", "[4, 2, 3]"],
    );
    error_naming(
        zeros(&[8, 8]).unfold2d((2, 2), (1, 1), (0, 0), (1, 1)),
        &["unfold2d", "[8, 8]"],
    );
    error_naming(
        zeros(&[2, 8, 8]).max_pool2d((2, 2), (2, 2), (0, 0)),
        &["max_pool2d"],
    );
    error_naming(
        zeros(&[8, 8]).adaptive_avg_pool2d((2, 2)),
        &["adaptive_avg_pool2d"],
    );
}

#[test]
fn zero_stride_dilation_or_kernel() {
    let x = zeros(&[1, 1, 6, 6]);
    error_naming(
        x.unfold2d((2, 2), (0, 1), (0, 0), (1, 1)),
        &["stride", "(0, 1)"],
    );
    error_naming(
        x.unfold2d((2, 2), (1, 1), (0, 0), (1, 0)),
        &["dilation", "(1, 0)"],
    );
    error_naming(x.unfold2d((0, 2), (1, 1), (0, 0), (1, 1)), &["kernel size"]);
    error_naming(
        x.conv2d(&zeros(&[1, 1, 2, 2]), None, (1, 0), (0, 0), (1, 1), 1),
        &["conv2d", "stride"],
    );
    error_naming(x.max_pool2d((2, 2), (0, 0), (0, 0)), &["stride"]);
    error_naming(x.adaptive_avg_pool2d((0, 3)), &["(0, 3)"]);
    let transpose = |x: &DynTensor, weight: &[usize], stride, dilation| {
        x.conv_transpose2d(&zeros(weight), None, stride, (0, 0), (0, 0), dilation)
    };
    error_naming(
        transpose(&x, &[1, 1, 2, 2], (0, 1), (1, 1)),
        &["conv_transpose2d", "stride", "(0, 1)"],
    );
    error_naming(
        transpose(&x, &[1, 1, 2, 2], (1, 1), (1, 0)),
        &["conv_transpose2d", "dilation", "(1, 0)"],
    );
    error_naming(
        transpose(&x, &[1, 1, 0, 2], (1, 1), (1, 1)),
        &["conv_transpose2d", "kernel size", "(0, 2)"],
    );
    // An empty image has no transposed convolution: its output size would underflow.
    error_naming(
        transpose(&zeros(&[1, 1, 0, 6]), &[1, 1, 2, 2], (1, 1), (1, 1)),
        &["conv_transpose2d", "input size", "(0, 6)"],
    );
}

#[test]
fn non_float_inputs() {
    let x = DynTensor::zeros(&[1, 1, 4, 4], DType::I64).unwrap();
    for result in [
        x.unfold2d((2, 2), (1, 1), (0, 0), (1, 1)),
        x.max_pool2d((2, 2), (2, 2), (0, 0)),
        x.avg_pool2d((2, 2), (2, 2), (0, 0), true),
        x.adaptive_avg_pool2d((2, 2)),
        x.conv2d(&x, None, (1, 1), (0, 0), (1, 1), 1),
    ] {
        assert!(matches!(result, Err(Error::DType { .. })), "{result:?}");
    }
    let e = error_naming(
        zeros(&[1, 1, 4, 4]).conv2d(
            &DynTensor::zeros(&[1, 1, 2, 2], DType::F64).unwrap(),
            None,
            (1, 1),
            (0, 0),
            (1, 1),
            1,
        ),
        &["conv2d"],
    );
    assert!(matches!(e, Error::DTypeMismatch { .. }));
}

#[test]
fn pool_padding_beyond_half_the_kernel() {
    let x = zeros(&[1, 1, 6, 6]);
    error_naming(
        x.max_pool2d((3, 3), (1, 1), (2, 1)),
        &["max_pool2d", "padding (2, 1)", "(3, 3)"],
    );
    error_naming(
        x.avg_pool2d((2, 2), (1, 1), (0, 2), false),
        &["avg_pool2d", "padding (0, 2)"],
    );
}

#[test]
fn fold2d_with_the_wrong_column_count() {
    // Output (4, 4) with a 2x2 kernel and stride 2: 4 taps x 2x2 windows.
    let cols = zeros(&[1, 3, 4, 5]);
    error_naming(
        cols.fold2d((4, 4), (2, 2), (2, 2), (0, 0), (1, 1)),
        &["fold2d", "[1, 3, 4, 5]", "[1, 3, 4, 4]"],
    );
    assert_eq!(
        zeros(&[1, 3, 4, 4])
            .fold2d((4, 4), (2, 2), (2, 2), (0, 0), (1, 1))
            .unwrap()
            .dims(),
        &[1, 3, 4, 4]
    );
}

#[test]
fn oversized_arguments_do_not_overflow() {
    let x = zeros(&[1, 1, 4, 4]);
    assert!(x.unfold2d((2, 2), (1, 1), (usize::MAX, 0), (1, 1)).is_err());
    assert!(x.unfold2d((3, 2), (1, 1), (0, 0), (usize::MAX, 1)).is_err());
    let w = zeros(&[1, 1, 3, 3]);
    for (stride, dilation) in [((usize::MAX / 2, 1), (1, 1)), ((1, 1), (1, usize::MAX / 2))] {
        error_naming(
            x.conv_transpose2d(&w, None, stride, (0, 0), (0, 0), dilation),
            &["conv_transpose2d", "overflow"],
        );
    }
}

//! Sizes above the parallel grain (2^15 elements) take the multi-threaded kernel paths; they
//! must agree with plain loops written here, independently of the library.

mod common;

use common::randn;
use rumus::DynTensor;

fn assert_close(actual: &[f64], expected: &[f64], what: &str) {
    assert_eq!(actual.len(), expected.len(), "{what}: length");
    for (i, (a, e)) in actual.iter().zip(expected).enumerate() {
        assert!(
            (a - e).abs() <= 1e-9 * (1.0 + e.abs()),
            "{what}: element {i}: {a} vs {e}"
        );
    }
}

#[test]
fn elementwise_on_a_large_transposed_view_with_broadcast() {
    let (rows, cols) = (300, 200);
    let a = randn(&[rows, cols], 1);
    let b = randn(&[rows], 2);
    // a^T is [cols, rows]; b broadcasts along its rows.
    let out = a
        .transpose(0, 1)
        .unwrap()
        .mul(&b)
        .unwrap()
        .exp()
        .unwrap()
        .to_f64_vec();
    let (av, bv) = (a.to_f64_vec(), b.to_f64_vec());
    let expected: Vec<f64> = (0..cols)
        .flat_map(|c| (0..rows).map(move |r| (r, c)))
        .map(|(r, c)| (av[r * cols + c] * bv[r]).exp())
        .collect();
    assert_close(&out, &expected, "exp(a^T * b)");
}

#[test]
fn reductions_over_large_tensors() {
    let (rows, cols) = (512, 128);
    let a = randn(&[rows, cols], 3);
    let av = a.to_f64_vec();
    let column_sums: Vec<f64> = (0..cols)
        .map(|c| (0..rows).map(|r| av[r * cols + c]).sum())
        .collect();
    assert_close(
        &a.sum(&[0], false).unwrap().to_f64_vec(),
        &column_sums,
        "sum over axis 0",
    );
    let row_max: Vec<f64> = (0..rows)
        .map(|r| {
            av[r * cols..(r + 1) * cols]
                .iter()
                .cloned()
                .fold(f64::MIN, f64::max)
        })
        .collect();
    assert_close(
        &a.max(&[1], false).unwrap().to_f64_vec(),
        &row_max,
        "max over axis 1",
    );
    let total: f64 = av.iter().sum();
    assert_close(&a.sum_all().unwrap().to_f64_vec(), &[total], "sum of all");
}

#[test]
fn softmax_over_many_rows() {
    let (rows, cols) = (1024, 40);
    let a = randn(&[rows, cols], 4);
    let av = a.to_f64_vec();
    let mut expected = Vec::with_capacity(rows * cols);
    for r in 0..rows {
        let row = &av[r * cols..(r + 1) * cols];
        let total: f64 = row.iter().map(|x| x.exp()).sum();
        expected.extend(row.iter().map(|x| x.exp() / total));
    }
    assert_close(&a.softmax(1).unwrap().to_f64_vec(), &expected, "softmax");
}

fn naive_batched_matmul(
    a: &[f64],
    b: &[f64],
    batches: usize,
    m: usize,
    k: usize,
    n: usize,
) -> Vec<f64> {
    let mut out = vec![0.0; batches * m * n];
    for t in 0..batches {
        for i in 0..m {
            for j in 0..n {
                out[(t * m + i) * n + j] = (0..k)
                    .map(|p| a[(t * m + i) * k + p] * b[(t * k + p) * n + j])
                    .sum();
            }
        }
    }
    out
}

#[test]
fn many_small_products_in_parallel() {
    let (batches, m, k, n) = (100, 16, 16, 16);
    let (a, b) = (randn(&[batches, m, k], 5), randn(&[batches, k, n], 6));
    let expected = naive_batched_matmul(&a.to_f64_vec(), &b.to_f64_vec(), batches, m, k, n);
    assert_close(
        &a.matmul(&b).unwrap().to_f64_vec(),
        &expected,
        "batched matmul",
    );
}

/// Products big enough to be split across threads: more columns than rows (split by
/// columns) and more rows than columns (split by rows).
#[test]
fn one_large_product_split_across_threads() {
    for (m, k, n) in [(150, 130, 170), (170, 130, 150)] {
        large_product_matches_the_definition(m, k, n);
    }
}

fn large_product_matches_the_definition(m: usize, k: usize, n: usize) {
    let (a, b) = (randn(&[m, k], 7), randn(&[n, k], 8));
    // b^T is a strided view: gemm reads it without a copy.
    let bt = b.transpose(0, 1).unwrap();
    let expected = naive_batched_matmul(&a.to_f64_vec(), &bt.to_f64_vec(), 1, m, k, n);
    assert_close(
        &a.matmul(&bt).unwrap().to_f64_vec(),
        &expected,
        "matmul with a transposed operand",
    );
    // A transposed left operand: its rows are columns in memory, so each thread's block of
    // rows starts at a column offset.
    let at = randn(&[k, m], 9).transpose(0, 1).unwrap();
    let expected_at = naive_batched_matmul(&at.to_f64_vec(), &bt.to_f64_vec(), 1, m, k, n);
    assert_close(
        &at.matmul(&bt).unwrap().to_f64_vec(),
        &expected_at,
        "matmul of two transposed operands",
    );
    let f32_result = a
        .to_dtype(rumus::DType::F32)
        .unwrap()
        .matmul(&bt.to_dtype(rumus::DType::F32).unwrap())
        .unwrap();
    for (i, (x, e)) in f32_result.to_f64_vec().iter().zip(&expected).enumerate() {
        assert!(
            (x - e).abs() <= 1e-4 * (1.0 + e.abs()),
            "f32 element {i}: {x} vs {e}"
        );
    }
}

#[test]
fn cat_and_index_select_of_large_tensors() {
    let a = randn(&[200, 100], 9);
    let b = randn(&[200, 80], 10);
    let joined = DynTensor::cat(&[&a, &b], 1).unwrap();
    let (av, bv, jv) = (a.to_f64_vec(), b.to_f64_vec(), joined.to_f64_vec());
    for r in 0..200 {
        assert_eq!(&jv[r * 180..r * 180 + 100], &av[r * 100..(r + 1) * 100]);
        assert_eq!(&jv[r * 180 + 100..(r + 1) * 180], &bv[r * 80..(r + 1) * 80]);
    }
    let order: Vec<i64> = (0..200).rev().collect();
    let picked = joined
        .index_select(0, &DynTensor::from_vec(order, &[200]).unwrap())
        .unwrap()
        .to_f64_vec();
    assert_eq!(&picked[..180], &jv[199 * 180..]);
}

#[test]
fn degenerate_shapes_are_handled_or_refused() {
    // A shape whose element count overflows is an error, not a wrapped size.
    let huge = [(1usize << 63) + 1, 2];
    assert!(DynTensor::from_vec(vec![0.0f32; 2], &huge).is_err());
    assert!(
        DynTensor::zeros(&[1, 1], rumus::DType::F32)
            .unwrap()
            .broadcast_to(&[usize::MAX, 2])
            .is_err()
    );
    // An empty inner dimension on an offset view multiplies to zeros.
    let x = randn(&[2, 3], 1)
        .transpose(0, 1)
        .unwrap()
        .narrow(0, 2, 1)
        .unwrap()
        .narrow(1, 2, 0)
        .unwrap();
    let product = x
        .matmul(&DynTensor::zeros(&[0, 2], rumus::DType::F64).unwrap())
        .unwrap();
    assert_eq!(product.to_f64_vec(), vec![0.0, 0.0]);
    // Splitting an empty axis gives one empty piece, like PyTorch.
    assert_eq!(
        DynTensor::zeros(&[0, 3], rumus::DType::F32)
            .unwrap()
            .chunk(2, 0)
            .unwrap()
            .len(),
        1
    );
    // In-place writes through a broadcast view would hit one element several times.
    let base = DynTensor::zeros(&[4], rumus::DType::F32).unwrap();
    let view = base.broadcast_to(&[3, 4]).unwrap();
    assert!(
        view.add_scaled_(1.0, &DynTensor::ones(&[3, 4], rumus::DType::F32).unwrap())
            .is_err()
    );
    // So would a copy into one, in dtypes without arithmetic too (PyTorch refuses both).
    let counts = DynTensor::zeros(&[4], rumus::DType::I64).unwrap();
    let rows = DynTensor::from_vec((0..12i64).collect::<Vec<_>>(), &[3, 4]).unwrap();
    let error = counts
        .broadcast_to(&[3, 4])
        .unwrap()
        .copy_(&rows)
        .unwrap_err()
        .to_string();
    assert!(error.contains("broadcast view"), "{error}");
    assert_eq!(
        counts.to_vec::<i64>().unwrap(),
        [0, 0, 0, 0],
        "nothing written"
    );
    // sum_to refuses a target the tensor does not broadcast from.
    assert!(randn(&[3, 2], 2).sum_to(&[2, 3]).is_err());
    assert!(randn(&[3], 3).sum_to(&[1, 3]).is_err());
}

#[test]
fn reused_buffers_never_leak_old_values_into_results() {
    // Large outputs come from the buffer pool, which hands out memory holding earlier
    // results. Fill the pool with garbage between two identical computations: both must
    // equal the naive reference.
    let (m, k, n) = (300, 260, 280);
    let (a, b) = (randn(&[m, k], 21), randn(&[k, n], 22));
    let expected = naive_batched_matmul(&a.to_f64_vec(), &b.to_f64_vec(), 1, m, k, n);
    let images = randn(&[8, 16, 30, 30], 23);
    let columns = images
        .unfold2d((3, 3), (1, 1), (1, 1), (1, 1))
        .unwrap()
        .to_f64_vec();
    for round in 0..2 {
        for _ in 0..4 {
            drop(DynTensor::full(&[m, n], f64::NAN, rumus::DType::F64).unwrap());
            drop(DynTensor::full(&[8, 16, 9, 900], 7.0, rumus::DType::F64).unwrap());
        }
        let product = a.matmul(&b).unwrap();
        assert_close(
            &product.to_f64_vec(),
            &expected,
            "matmul into a reused buffer",
        );
        let shifted = product.add_scalar(1.0).unwrap().to_f64_vec();
        let reference: Vec<f64> = expected.iter().map(|v| v + 1.0).collect();
        assert_close(&shifted, &reference, "elementwise into a reused buffer");
        let again = images.unfold2d((3, 3), (1, 1), (1, 1), (1, 1)).unwrap();
        assert_eq!(
            again.to_f64_vec(),
            columns,
            "unfold (zero padding) in round {round}"
        );
    }
}

#[test]
fn sums_over_leading_axes_match_a_naive_sum() {
    // The fast path for bias-style gradients: leading axes of a contiguous tensor, large
    // enough to be split across threads, plus the empty and size-zero edge cases.
    let x = randn(&[40, 30, 70], 31);
    let values = x.to_f64_vec();
    for axes in [vec![0], vec![0, 1]] {
        let rows: usize = axes.iter().map(|&a| x.dims()[a]).product();
        let inner = values.len() / rows;
        let expected: Vec<f64> = (0..inner)
            .map(|j| (0..rows).map(|i| values[i * inner + j]).sum())
            .collect();
        let axes_isize: Vec<isize> = axes.iter().map(|&a| a as isize).collect();
        let actual = x.sum(&axes_isize, false).unwrap().to_f64_vec();
        assert_close(&actual, &expected, &format!("sum over {axes:?}"));
    }
    let empty_rows = DynTensor::zeros(&[0, 5], rumus::DType::F32).unwrap();
    assert_eq!(
        empty_rows.sum(&[0], false).unwrap().to_f64_vec(),
        vec![0.0; 5]
    );
    let no_columns = DynTensor::zeros(&[5, 0], rumus::DType::F32).unwrap();
    assert_eq!(no_columns.sum(&[0], false).unwrap().dims(), &[0]);
}

/// Sizes past an address space, empty tensors whose other dims multiply past `usize`, and
/// views broadcast to 2^62 elements: every op gives a result or an error, never a panic or an
/// aborted allocation. (Sizes are chosen so that the answer does not depend on how much
/// memory the machine would lend: every refused request overflows or exceeds `isize::MAX`.)
#[test]
fn huge_and_empty_sizes_give_results_or_errors() {
    use rumus::DType;
    const HALF: usize = usize::MAX / 2;
    let zeros = |dims: &[usize]| DynTensor::zeros(dims, DType::F32).unwrap();

    // Windows are walked in signed offsets: spans and padded sizes past isize are refused.
    let one = zeros(&[1, 1, 1, 1]);
    let (pad, dilation) = (((1usize << 62) + 1, 0), (1usize << 63, 1));
    assert!(one.unfold2d((2, 1), (1, 1), pad, dilation).is_err());
    let weight = zeros(&[1, 1, 2, 1]);
    assert!(one.conv2d(&weight, None, (1, 1), pad, dilation, 1).is_err());
    assert!(
        one.fold2d((1, 1), (1, 1), (usize::MAX, 1), (HALF, 0), (1, 1))
            .is_err()
    );
    assert!(one.max_pool2d((usize::MAX, 1), (1, 1), (HALF, 0)).is_err());
    assert!(
        one.avg_pool2d((usize::MAX, 1), (1, 1), (HALF, 0), true)
            .is_err()
    );
    // Planes without pixels have no windows, even padded.
    let flat = zeros(&[1, 1, 0, 2]);
    let error = flat
        .max_pool2d((2, 2), (1, 1), (1, 1))
        .unwrap_err()
        .to_string();
    assert!(error.contains("non-empty"), "{error}");
    assert!(flat.avg_pool2d((2, 2), (1, 1), (1, 1), false).is_err());
    assert!(flat.unfold2d((2, 2), (1, 1), (1, 1), (1, 1)).is_err());
    // Zero channels divide into any number of groups, but 2^63 groups of them do not fit.
    let no_channels = zeros(&[1, 0, 4, 4]);
    assert!(
        no_channels
            .conv2d(&zeros(&[0, 2, 3, 3]), None, (1, 1), (0, 0), (1, 1), 1 << 63)
            .is_err()
    );
    assert!(one.adaptive_avg_pool2d((HALF, 1)).is_err());

    // An empty tensor whose other axes multiply to 2^80.
    let empty = zeros(&[0, 1 << 40, 1 << 40]);
    assert_eq!(empty.numel(), 0);
    assert!(empty.flatten(1, 2).is_err(), "a merged axis of 2^80");
    assert!(
        zeros(&[2, 3])
            .reshape_infer(&[-1, isize::MAX, isize::MAX])
            .is_err()
    );
    // Reductions of it are empty, as PyTorch's are.
    let reduced = [
        empty.sum(&[1, 2], false),
        empty.mean(&[1, 2], false),
        empty.max(&[1, 2], false),
        empty.var(&[1, 2], 1, false),
        empty.logsumexp(&[1, 2], false),
    ];
    for result in reduced {
        assert_eq!(result.unwrap().dims(), &[0]);
    }
    assert_eq!(empty.transpose(0, 2).unwrap().exp().unwrap().numel(), 0);
    let batches = zeros(&[1 << 32, 1, 0, 0]).matmul(&zeros(&[1, 1 << 32, 0, 0]));
    assert_eq!(batches.unwrap().dims(), &[1 << 32, 1 << 32, 0, 0]);
    let joined = DynTensor::cat(&[&empty, &empty], 0).unwrap();
    assert_eq!(joined.dims(), &[0, 1 << 40, 1 << 40]);
    // Empty or not, a sum of integers is refused alike (sums are of floats).
    let ints = |n: usize| DynTensor::zeros(&[n], DType::I64).unwrap();
    assert!(ints(0).sum_all().is_err() && ints(2).sum_all().is_err());
    // No images: 0 windows in all, but (2^32 + 1)^2 positions per plane still overflow.
    let no_images = zeros(&[0, 1, 1, 1]);
    assert!(
        no_images
            .unfold2d((1, 1), (1, 1), (1 << 31, 1 << 31), (1, 1))
            .is_err()
    );
    assert_eq!(
        rumus::nn::causal_mask(usize::MAX, 0).unwrap().dims(),
        &[usize::MAX, 0]
    );
    assert!(rumus::nn::causal_mask(1 << 40, 1 << 40).is_err());

    // A joined axis past usize.
    let long = zeros(&[1]).broadcast_to(&[HALF]).unwrap();
    assert!(DynTensor::cat(&[&long, &long, &long], 0).is_err());
    // Ops that copy a broadcast view of 2^62 elements (2^64 bytes) first.
    let view = zeros(&[1]).broadcast_to(&[1 << 62]).unwrap();
    assert!(view.sum_all().is_err());
    assert!(view.sum_to(&[1]).is_err());
    assert!(view.softmax(0).is_err());
    assert!(view.try_to_f64_vec().is_err());
    let none = DynTensor::from_vec(Vec::<i64>::new(), &[0]).unwrap();
    assert!(view.index_add(0, &none, &zeros(&[0])).is_err());
    let mask = DynTensor::zeros(&[1], DType::Bool).unwrap();
    assert!(
        mask.broadcast_to(&[1 << 62])
            .unwrap()
            .logical_not()
            .is_err()
    );
}

/// `clamp` with `min > max` gives `max` everywhere (PyTorch computes `min(max(x, min), max)`),
/// and `uniform` refuses ranges it cannot draw from.
#[test]
fn crossed_bounds_behave_as_in_pytorch() {
    use rumus::DType;
    let x = DynTensor::from_vec(vec![-3.0f32, 0.5, 4.0], &[3]).unwrap();
    assert_eq!(
        x.clamp(2.0, 1.0).unwrap().to_vec::<f32>().unwrap(),
        [1.0, 1.0, 1.0]
    );
    for (low, high) in [(1.0, 0.0), (f64::NEG_INFINITY, 0.0), (0.0, f64::NAN)] {
        let error = DynTensor::uniform(&[3], low, high, DType::F32).unwrap_err();
        assert!(error.to_string().contains("finite bounds"), "{error}");
    }
    // Nothing to draw: any bounds do.
    assert!(DynTensor::uniform(&[0, 3], f64::NEG_INFINITY, f64::INFINITY, DType::F32).is_ok());
    // A layer without inputs draws its bias from U(0, 0), as PyTorch's `fan_in > 0 else 0`.
    let no_inputs = rumus::nn::Linear::<0, 3>::new().unwrap();
    let bias = no_inputs.bias.as_ref().unwrap().to_vec::<f32>().unwrap();
    assert_eq!(bias, [0.0, 0.0, 0.0]);
    let drawn = DynTensor::uniform(&[100], -2.0, -2.0, DType::F32).unwrap();
    assert!(drawn.to_vec::<f32>().unwrap().iter().all(|&v| v == -2.0));
}

#[test]
fn a_depthwise_convolution_without_gradients_agrees_with_the_recorded_path() {
    // Without a gradient to record the CPU runs its direct depthwise kernel (eight channels
    // per vector, tasks over groups of planes); with one, the unfold-and-product path.
    for (stride, bias, channels) in [(1, true, 24), (2, false, 13)] {
        let x = randn(&[2, channels, 40, 37], 10);
        let weight = randn(&[channels, 1, 3, 3], 11);
        let b = randn(&[channels], 12);
        let conv = |x: &DynTensor| {
            x.conv2d(
                &weight,
                bias.then_some(&b),
                (stride, stride),
                (1, 1),
                (1, 1),
                channels,
            )
            .unwrap()
        };
        let recorded = conv(&x.detach().requires_grad_().unwrap());
        assert!(recorded.requires_grad());
        let direct = {
            let _guard = rumus::no_grad();
            conv(&x)
        };
        assert_eq!(direct.dims(), recorded.dims());
        assert_close(
            &direct.to_f64_vec(),
            &recorded.to_f64_vec(),
            &format!("depthwise stride {stride}"),
        );
    }
}

//! The trainer's metrics against values worked out independently: scikit-learn's documented
//! F1 example, top-k accuracy by sorting each row, perplexity of uniform scores (the class
//! count) and of random logits against `exp` of rumus's cross-entropy, and regression errors
//! by hand. A metric fed two batches equals the metric of their concatenation.

use rumus::DynTensor;
use rumus::nn::{CrossEntropyOptions, cross_entropy};
use rumus::rng::Generator;
use rumus::train::{Accuracy, F1Score, MeanAbsoluteError, MeanSquaredError, Metric, Perplexity};

fn scores(values: Vec<f32>, classes: usize) -> DynTensor {
    let rows = values.len() / classes;
    DynTensor::from_vec(values, &[rows, classes]).unwrap()
}

fn labels(values: &[i64]) -> DynTensor {
    DynTensor::from_vec(values.to_vec(), &[values.len()]).unwrap()
}

/// One-hot scores: class `p` scores 1 in its row.
fn predicted(classes: &[usize], count: usize) -> DynTensor {
    let mut values = vec![0.0f32; classes.len() * count];
    for (row, &p) in classes.iter().enumerate() {
        values[row * count + p] = 1.0;
    }
    scores(values, count)
}

/// scikit-learn's `f1_score` documentation: y_true [0, 1, 2, 0, 1, 2], y_pred
/// [0, 2, 1, 0, 0, 1], `average="macro"` gives 0.26666... (class 0: 0.8, classes 1 and 2: 0).
#[test]
fn macro_f1_matches_the_scikit_learn_example() {
    let mut f1 = F1Score::macro_average(3);
    f1.update(
        &predicted(&[0, 2, 1, 0, 0, 1], 3),
        &labels(&[0, 1, 2, 0, 1, 2]),
    )
    .unwrap();
    assert!((f1.compute() - 0.8 / 3.0).abs() < 1e-12, "{}", f1.compute());
    assert_eq!(f1.name(), "f1");
    // Over two batches: the counts add up, the scores are not averaged per batch.
    let mut split = F1Score::macro_average(3);
    split
        .update(&predicted(&[0, 2, 1], 3), &labels(&[0, 1, 2]))
        .unwrap();
    split
        .update(&predicted(&[0, 0, 1], 3), &labels(&[0, 1, 2]))
        .unwrap();
    assert_eq!(split.compute(), f1.compute());
    // A class that never occurs (3 of 4) is left out of the average, as scikit-learn does.
    let mut absent = F1Score::macro_average(4);
    absent
        .update(
            &predicted(&[0, 2, 1, 0, 0, 1], 4),
            &labels(&[0, 1, 2, 0, 1, 2]),
        )
        .unwrap();
    assert_eq!(absent.compute(), f1.compute());
}

/// Top-k by sorting: the class is among the `k` largest of its row.
#[test]
fn top_k_accuracy_matches_sorting_each_row() {
    let mut g = Generator::new(3);
    let (rows, classes) = (64, 10);
    let values: Vec<f32> = (0..rows * classes)
        .map(|_| g.next_normal() as f32)
        .collect();
    let truth: Vec<i64> = (0..rows).map(|_| g.below(classes as u64) as i64).collect();
    for k in [1, 3, 5] {
        let expected = values
            .chunks(classes)
            .zip(&truth)
            .filter(|(row, label)| {
                let mut order: Vec<usize> = (0..classes).collect();
                order.sort_by(|&a, &b| row[b].total_cmp(&row[a]));
                order[..k].contains(&(**label as usize))
            })
            .count() as f64
            / rows as f64;
        let mut metric = if k == 1 {
            Accuracy::new()
        } else {
            Accuracy::top_k(k).unwrap()
        };
        // In two batches of 32.
        for half in 0..2 {
            let part = &values[half * 32 * classes..(half + 1) * 32 * classes];
            let target = &truth[half * 32..(half + 1) * 32];
            metric
                .update(&scores(part.to_vec(), classes), &labels(target))
                .unwrap();
        }
        assert_eq!(metric.compute(), expected, "top-{k}");
    }
    assert_eq!(Accuracy::top_k(5).unwrap().name(), "top5_accuracy");
    let err = Accuracy::top_k(0).unwrap_err().to_string();
    assert!(err.contains("k is 0"), "{err}");
}

#[test]
fn perplexity_is_the_class_count_for_uniform_scores_and_exp_of_cross_entropy() {
    let mut uniform = Perplexity::new();
    uniform
        .update(&scores(vec![0.25; 4 * 50], 50), &labels(&[0, 7, 49, 3]))
        .unwrap();
    assert!(
        (uniform.compute() - 50.0).abs() < 1e-9,
        "{}",
        uniform.compute()
    );

    let mut g = Generator::new(8);
    let (rows, vocabulary) = (40, 17);
    let values: Vec<f32> = (0..rows * vocabulary)
        .map(|_| 3.0 * g.next_normal() as f32)
        .collect();
    let tokens: Vec<i64> = (0..rows)
        .map(|_| g.below(vocabulary as u64) as i64)
        .collect();
    let logits = scores(values, vocabulary);
    let target = labels(&tokens);
    let loss = cross_entropy(&logits, &target, &CrossEntropyOptions::default()).unwrap();
    let expected = loss.try_to_f64_vec().unwrap()[0].exp();
    let mut metric = Perplexity::new();
    metric.update(&logits, &target).unwrap();
    let relative = (metric.compute() - expected).abs() / expected;
    assert!(relative < 1e-5, "{} vs {expected}", metric.compute());
    metric.reset();
    assert!(metric.compute().is_nan(), "nothing seen after a reset");
}

#[test]
fn regression_errors_by_hand() {
    let p = DynTensor::from_vec(vec![1.0f32, 2.0, 3.0], &[3, 1]).unwrap();
    let t = DynTensor::from_vec(vec![2.0f32, 2.0, 5.0], &[3]).unwrap();
    let mut mae = MeanAbsoluteError::default();
    let mut mse = MeanSquaredError::default();
    mae.update(&p, &t).unwrap();
    mse.update(&p, &t).unwrap();
    assert_eq!((mae.compute(), mse.compute()), (1.0, 5.0 / 3.0));
    let short = DynTensor::from_vec(vec![1.0f32], &[1]).unwrap();
    let err = mae.update(&short, &t).unwrap_err().to_string();
    assert!(err.contains("[1]") && err.contains("[3]"), "{err}");
}

/// Wrong shapes and labels are errors that say what the metric takes.
#[test]
fn metrics_refuse_inputs_they_cannot_read() {
    let mut accuracy = Accuracy::new();
    let err = accuracy
        .update(&scores(vec![0.0; 6], 3), &labels(&[0, 1, 2]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("scores [N, C] and class indices [N]"), "{err}");
    let err = accuracy
        .update(&scores(vec![0.0; 6], 3), &labels(&[0, 3]))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("target 1 is 3, not a class index in 0..3"),
        "{err}"
    );
    let mut f1 = F1Score::macro_average(4);
    let err = f1
        .update(&scores(vec![0.0; 6], 3), &labels(&[0, 1]))
        .unwrap_err()
        .to_string();
    assert!(err.contains("F1Score::macro_average(3)"), "{err}");
}

//! The README's main job, shortened: the digits MLP must learn the held-out test images.

#[path = "../examples/digits/training.rs"]
mod training;

#[test]
fn digits_mlp_reaches_96_percent_test_accuracy() {
    let mut reports = Vec::new();
    let (_, accuracy) = training::train(15, |r| {
        reports.push((r.epoch, r.train_loss, r.test_accuracy))
    })
    .unwrap();
    let epochs: Vec<usize> = reports.iter().map(|r| r.0).collect();
    assert_eq!(epochs, (1..=15).collect::<Vec<_>>());
    assert_eq!(reports.last().unwrap().2, accuracy);
    let (first_loss, last_loss) = (reports[0].1, reports.last().unwrap().1);
    assert!(
        last_loss < first_loss / 2.0,
        "training loss goes down: {reports:?}"
    );
    assert!(accuracy >= 0.96, "test accuracy {accuracy:.4} below 0.96");
}

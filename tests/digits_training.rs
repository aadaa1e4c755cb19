//! The README's main job, shortened: the digits MLP must learn the held-out test images.

#[path = "../examples/digits/training.rs"]
mod training;

#[test]
fn digits_mlp_reaches_96_percent_test_accuracy() {
    let mut losses = Vec::new();
    let (_, accuracy) = training::train(15, |report| losses.push(report.train_loss)).unwrap();
    assert!(
        losses.last().unwrap() < &losses[0],
        "training loss goes down: {losses:?}"
    );
    assert!(accuracy >= 0.96, "test accuracy {accuracy:.4} below 0.96");
}

//! The README's main job, run in full (it takes about a second): the digits MLP must learn
//! the held-out test images.

#[path = "../examples/digits/training.rs"]
mod training;

#[test]
fn digits_mlp_reaches_96_percent_test_accuracy() {
    let history = training::train(rumus::train::Trainer::new(30).quiet()).unwrap();
    let epochs: Vec<usize> = history.iter().map(|s| s.epoch).collect();
    assert_eq!(epochs, (1..=30).collect::<Vec<_>>());
    let (first, last) = (
        history[0].train.mean_loss(),
        history.last().unwrap().train.mean_loss(),
    );
    assert!(
        last < first / 2.0,
        "training loss goes down: {first} -> {last}"
    );
    let accuracy = history.last().unwrap().eval.accuracy();
    assert!(accuracy >= 0.96, "test accuracy {accuracy:.4} below 0.96");
}

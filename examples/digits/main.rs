//! Handwritten digits: a small MLP trained on the 8x8 UCI digits, embedded in the binary.
//!
//! ```text
//! cargo run --release --example digits
//! ```
//!
//! Prints a summary line per epoch and `test_accuracy=` at the end, logs every epoch to
//! `digits_metrics.csv`, and draws the loss and accuracy curves (train in red, test in blue)
//! to `digits_curve.png`.

mod training;

fn main() -> rumus::Result<()> {
    let start = std::time::Instant::now();
    let trainer = rumus::train::Trainer::new(30)
        .csv("digits_metrics.csv")
        .curve("digits_curve.png");
    let history = training::train(trainer)?;
    let last = history.last().expect("at least one epoch");
    println!(
        "trained in {:.1} s; metrics in digits_metrics.csv, curves in digits_curve.png",
        start.elapsed().as_secs_f64()
    );
    println!("test_accuracy={:.4}", last.eval.accuracy());
    Ok(())
}

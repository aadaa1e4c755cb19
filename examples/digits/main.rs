//! Handwritten digits: a small MLP trained on the 8x8 UCI digits, embedded in the binary.
//!
//! ```text
//! cargo run --release --example digits
//! ```
//!
//! Prints a summary line per epoch and `test_accuracy=` at the end, and writes the loss and
//! accuracy curves to `digits_curve.png` (red: train loss, blue: test loss, green: test
//! accuracy).

mod training;

fn main() -> rumus::Result<()> {
    let start = std::time::Instant::now();
    let history = training::train(rumus::train::Trainer::new(30).curve("digits_curve.png"))?;
    let last = history.last().expect("at least one epoch");
    println!(
        "trained in {:.1} s; curve written to digits_curve.png",
        start.elapsed().as_secs_f64()
    );
    println!("test_accuracy={:.4}", last.eval.accuracy());
    Ok(())
}

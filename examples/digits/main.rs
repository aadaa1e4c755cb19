//! Handwritten digits: a small MLP trained on the 8x8 UCI digits, embedded in the binary.
//!
//! ```text
//! cargo run --release --example digits
//! ```

mod training;

fn main() -> rumus::Result<()> {
    let start = std::time::Instant::now();
    let (_model, test_accuracy) = training::train(30, |report| {
        println!(
            "epoch {:>2}  train_loss={:.4}  test_accuracy={:.4}",
            report.epoch, report.train_loss, report.test_accuracy
        );
    })?;
    println!("trained in {:.1} s", start.elapsed().as_secs_f64());
    println!("test_accuracy={test_accuracy:.4}");
    Ok(())
}

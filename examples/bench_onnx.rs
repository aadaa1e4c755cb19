//! Inference time of an ONNX file under rumus's importer, timed by `tests/bench/compare_onnx.py`
//! (which exports the models and runs onnxruntime on the same files in the same run). Prints
//! `milliseconds` (median after warm-up) of `OnnxModel::run` on a random input of the given
//! dims. Thread count: `RAYON_NUM_THREADS`.
//!
//! ```text
//! cargo run --release --example bench_onnx -- model.onnx 1,3,224,224 [f32|i64:VOCAB] [REPS]
//! ```

use rumus::onnx::OnnxModel;
use rumus::prelude::*;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

fn main() -> rumus::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = "usage: bench_onnx MODEL.onnx DIMS (comma-separated) [f32|i64:VOCAB] [REPS]";
    let (Some(path), Some(dims)) = (args.first(), args.get(1)) else {
        eprintln!("{usage}");
        std::process::exit(2);
    };
    let dims: Vec<usize> = dims
        .split(',')
        .map(|d| {
            d.parse()
                .unwrap_or_else(|_| panic!("{usage}: {d:?} is not a size"))
        })
        .collect();
    let kind = args.get(2).map_or("f32", String::as_str);
    let reps: usize = args.get(3).map_or(20, |r| r.parse().expect(usage));
    manual_seed(0);
    let _guard = rumus::no_grad();
    let input = match kind.strip_prefix("i64:") {
        Some(vocab) => {
            let vocab: u64 = vocab.parse().expect(usage);
            let mut rng = rumus::rng::Generator::new(1);
            let numel = dims.iter().product();
            let ids = (0..numel).map(|_| rng.below(vocab) as i64).collect();
            DynTensor::from_vec(ids, &dims)?
        }
        None => DynTensor::randn(&dims, DType::F32)?,
    };
    let model = OnnxModel::load(path)?;
    let ms = median_ms(3, reps, || {
        model.run(&[&input]).unwrap();
    });
    println!("{ms:.4}");
    Ok(())
}

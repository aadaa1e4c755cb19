//! Micro-benchmarks of the CPU kernels: matrix products, convolution, element-wise and
//! reduction kernels, and the fixed cost of one tiny op. `cargo bench -p rumus`.

use criterion::{BenchmarkId, Criterion, criterion_group, criterion_main};
use rumus::{DType, DynTensor};

fn randn(dims: &[usize]) -> DynTensor {
    DynTensor::randn(dims, DType::F32).expect("valid dims")
}

fn matmul(c: &mut Criterion) {
    let mut group = c.benchmark_group("sgemm");
    for n in [128usize, 256, 512] {
        let (a, b) = (randn(&[n, n]), randn(&[n, n]));
        group.bench_with_input(BenchmarkId::from_parameter(n), &n, |bench, _| {
            bench.iter(|| a.matmul(&b).expect("matmul"))
        });
    }
    group.finish();
}

fn convolution(c: &mut Criterion) {
    let x = randn(&[16, 32, 28, 28]);
    let w = randn(&[64, 32, 3, 3]);
    c.bench_function("conv2d 3x3 32->64 16x28x28", |bench| {
        bench.iter(|| {
            x.conv2d(&w, None, (1, 1), (1, 1), (1, 1), 1)
                .expect("conv2d")
        })
    });
}

fn elementwise_and_reductions(c: &mut Criterion) {
    let (a, b) = (randn(&[1024, 1024]), randn(&[1024, 1024]));
    c.bench_function("add 1M", |bench| bench.iter(|| a.add(&b).expect("add")));
    let bias = randn(&[1024]);
    c.bench_function("add broadcast row 1M", |bench| {
        bench.iter(|| a.add(&bias).expect("add"))
    });
    c.bench_function("sum over rows 1M", |bench| {
        bench.iter(|| a.sum(&[0], false).expect("sum"))
    });
    c.bench_function("softmax rows 1M", |bench| {
        bench.iter(|| a.softmax(-1).expect("softmax"))
    });
    c.bench_function("transpose copy 1M", |bench| {
        bench.iter(|| a.transpose(0, 1).expect("view").contiguous().expect("copy"))
    });
}

fn tiny_op(c: &mut Criterion) {
    let (x, y) = (randn(&[16]), randn(&[16]));
    c.bench_function("add 16 (untracked)", |bench| {
        bench.iter(|| x.add(&y).expect("add"))
    });
    let tracked = x.clone().requires_grad_().expect("float");
    c.bench_function("add 16 (tracked)", |bench| {
        bench.iter(|| tracked.add(&y).expect("add"))
    });
}

criterion_group!(
    kernels,
    matmul,
    convolution,
    elementwise_and_reductions,
    tiny_op
);
criterion_main!(kernels);

//! Data-parallel costs under `mpirun`: the all-reduce of rumus's `Mpi` engine against a
//! plain blocking `MPI_Allreduce` loop on the same buffers (and a plain `MPI_Iallreduce` +
//! `MPI_Wait`, the non-blocking algorithm rumus polls, without its staging copies), and the digits-sized MLP's
//! training step (per-rank batch 64) on however many ranks the job has. Rank 0 prints one
//! `name value` line per measurement (medians after warm-up).
//!
//! ```text
//! cargo build --release --example bench_distributed --features distributed
//! RAYON_NUM_THREADS=1 mpirun -np 1 target/release/examples/bench_distributed
//! RAYON_NUM_THREADS=1 mpirun --oversubscribe -np 2 target/release/examples/bench_distributed
//! ```

use std::sync::Arc;

use mpi::collective::SystemOperation;
use mpi::traits::CommunicatorCollectives as _;
use rumus::distributed::{Collective, DistributedDataParallel, Elements, Mpi};
use rumus::nn::{CrossEntropyOptions, Forward, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

#[path = "common/mlp.rs"]
mod mlp;
use mlp::Mlp;

/// conv32-pool-conv64-pool-fc128-fc10 on 28x28 images (the MNIST example's network).
#[path = "mnist/model.rs"]
mod mnist_model;
use mnist_model::Cnn;

fn main() -> rumus::Result<()> {
    let engine = Arc::new(Mpi::init()?);
    let comm: Arc<dyn Collective> = engine.clone();
    let world = mpi::topology::SimpleCommunicator::world();
    let main = comm.rank() == 0;
    if main {
        println!("ranks {}", comm.world_size());
    }
    for floats in [1usize << 10, 1 << 14, 1 << 18, 1 << 22] {
        let mut data = vec![1.0f32; floats];
        let ours = median_ms(3, 15, || {
            comm.all_reduce_sum(Elements::F32(&mut data)).unwrap();
        });
        let send = vec![1.0f32; floats];
        let mut recv = vec![0.0f32; floats];
        // Direct MPI calls go through `exclusive`: rumus's heartbeat thread calls MPI too.
        let plain = median_ms(3, 15, || {
            engine.exclusive(|| {
                world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum())
            });
        });
        let nonblocking = median_ms(3, 15, || {
            engine.exclusive(|| {
                mpi::request::scope(|scope| {
                    world
                        .immediate_all_reduce_into(
                            scope,
                            &send[..],
                            &mut recv[..],
                            SystemOperation::sum(),
                        )
                        .wait();
                })
            });
        });
        if main {
            let megabytes = (floats * 4) as f64 / 1e6;
            println!(
                "allreduce_{floats} rumus_ms={ours:.3} plain_ms={plain:.3} plain_nonblocking_ms={nonblocking:.3} ratio={:.2} rumus_MBps={:.0}",
                ours / plain,
                megabytes / (ours / 1e3)
            );
        }
    }
    let mlp = ddp_step::<_, (Dyn, D<784>)>(&comm, Mlp::new, &[64, 784], 30)?;
    let cnn = ddp_step::<_, (Dyn, D<1>, D<28>, D<28>)>(&comm, Cnn::new, &[64, 1, 28, 28], 10)?;
    if main {
        let world = comm.world_size() as f64;
        for (name, step) in [("mlp", mlp), ("cnn", cnn)] {
            println!(
                "{name}_step_ms={step:.3} samples_per_s={:.0}",
                64.0 * world / (step / 1e3)
            );
        }
    }
    Ok(())
}

/// Median milliseconds of one data-parallel Adam step (forward, cross-entropy, backward
/// with the bucketed all-reduce, step) of `build`'s model on a random per-rank batch of
/// `input_dims`; every rank times the same steps, and the barrier keeps them in line.
fn ddp_step<M, S>(
    comm: &Arc<dyn Collective>,
    build: fn() -> rumus::Result<M>,
    input_dims: &[usize],
    repetitions: usize,
) -> rumus::Result<f64>
where
    M: Module + Forward<S>,
    S: Shape,
{
    manual_seed(comm.rank() as u64);
    let model = build()?;
    let ddp = DistributedDataParallel::new(comm.clone(), &model)?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<S>::randn_with_dims(input_dims)?;
    let batch = input_dims[0];
    let labels = DynTensor::from_vec((0..batch as i64).map(|i| i % 10).collect(), &[batch])?;
    let step = median_ms(3, repetitions, || {
        let logits = model.forward_typed(&x).unwrap();
        let loss =
            cross_entropy(logits.as_dyn(), &labels, &CrossEntropyOptions::default()).unwrap();
        optimizer.step(&mut ddp.backward(&loss).unwrap()).unwrap();
    });
    comm.barrier()?;
    Ok(step)
}

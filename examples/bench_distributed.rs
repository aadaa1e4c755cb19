//! Data-parallel costs under `mpirun`: the all-reduce of rumus's `Mpi` engine against a
//! plain blocking `MPI_Allreduce` loop on the same buffers, and the digits-sized MLP's
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
use rumus::nn::{CrossEntropyOptions, Module, cross_entropy};
use rumus::optim::{Adam, AdamConfig, Optimizer};
use rumus::prelude::*;

#[path = "common/median.rs"]
mod median;
use median::median_ms;

#[path = "common/mlp.rs"]
mod mlp;
use mlp::Mlp;

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
        let plain = median_ms(3, 15, || {
            world.all_reduce_into(&send[..], &mut recv[..], SystemOperation::sum());
        });
        if main {
            let megabytes = (floats * 4) as f64 / 1e6;
            println!(
                "allreduce_{floats} rumus_ms={ours:.3} plain_ms={plain:.3} ratio={:.2} rumus_MBps={:.0}",
                ours / plain,
                megabytes / (ours / 1e3)
            );
        }
    }
    manual_seed(0);
    let model = Mlp::new()?;
    let ddp = DistributedDataParallel::new(comm.clone(), &model)?;
    let mut optimizer = Adam::new(model.parameters(), AdamConfig::adam())?;
    let x = Tensor::<(Dyn, D<784>)>::randn_with_dims(&[64, 784])?;
    let labels = DynTensor::from_vec((0..64).map(|i| i % 10).collect::<Vec<i64>>(), &[64])?;
    let step = median_ms(5, 30, || {
        let logits = model.forward(&x).unwrap();
        let loss =
            cross_entropy(logits.as_dyn(), &labels, &CrossEntropyOptions::default()).unwrap();
        optimizer.step(&mut ddp.backward(&loss).unwrap()).unwrap();
    });
    comm.barrier()?;
    if main {
        println!(
            "mlp_step_ms={step:.3} samples_per_s={:.0}",
            64.0 * comm.world_size() as f64 / (step / 1e3)
        );
    }
    Ok(())
}

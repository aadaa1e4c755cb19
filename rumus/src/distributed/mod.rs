//! Data-parallel training across processes and machines, over MPI (behind the
//! `distributed` feature).
//!
//! Start the same program on every process with `mpirun -np N`; each process is a rank:
//!
//! ```no_run
//! use std::sync::Arc;
//! use rumus::distributed::{Collective, DistributedDataParallel, Mpi};
//! use rumus::nn::{Linear, Module};
//!
//! # fn main() -> rumus::Result<()> {
//! let comm: Arc<dyn Collective> = Arc::new(Mpi::init()?);
//! let model = Linear::<784, 10>::new()?;
//! // Every rank starts from rank 0's parameters.
//! let ddp = DistributedDataParallel::new(comm.clone(), &model)?;
//! // Each rank takes its own slice of every global batch:
//! // rumus::distributed::shard(DataLoader::new(data, 32)?.shuffle(seed), &*comm)?
//! # let x = rumus::Tensor::<(rumus::D<32>, rumus::D<784>)>::try_zeros()?;
//! let loss = model.try_forward(&x)?.sum_all();
//! // Gradients averaged over every rank, sent while the backward pass still runs.
//! let mut grads = ddp.backward(loss.as_dyn())?;
//! # let _ = &mut grads;
//! # Ok(())
//! # }
//! ```
//!
//! What lives here:
//! - [`Collective`], the one interface to the communication engine, with [`Mpi`] (OpenMPI or
//!   MPICH through the `mpi` crate) and [`Solo`] (one process) behind it;
//! - tensor collectives: [`all_reduce`], [`broadcast_`], [`all_gather`];
//! - [`DistributedDataParallel`]: bucketed gradient averaging overlapped with the backward
//!   pass, and gradient accumulation without communication;
//! - [`ZeroRedundancyOptimizer`]: optimizer state sharded across ranks (ZeRO stage 1);
//! - [`save_checkpoint`] and [`on_rank0`]: work one rank does for all, its failure an error
//!   on every rank;
//! - sharded loading: [`shard`] (checked against every rank's loader) or
//!   [`DataLoader::shard`](crate::data::DataLoader::shard).
//!
//! Every collective first compares a small fingerprint of each rank's call (which
//! collective, how many elements of which type, the latest sharded epoch's order), and the
//! wrappers compare every rank's parameter names and shapes when they are built: ranks that
//! disagree fail together with an error naming the first rank that differs, before any
//! data moves. A collective that some rank never joins fails on the others: within
//! [`DEFAULT_LIVENESS`] when the rank died (a heartbeat notices), after the engine's
//! timeout when it is alive but elsewhere.

mod collective;
mod ddp;
mod fingerprint;
mod mpi_engine;
mod mpi_heartbeat;
mod rank0;
mod same_model;
mod shard;
mod tensors;
mod zero;

pub use collective::{Collective, Elements, Solo};
pub use ddp::{DEFAULT_BUCKET_BYTES, DistributedDataParallel};
pub use mpi_engine::{DEFAULT_LIVENESS, DEFAULT_TIMEOUT, Mpi};
pub use rank0::{on_rank0, save_checkpoint};
pub use shard::shard;
pub use tensors::{Reduction, all_gather, all_reduce, broadcast_};
pub use zero::ZeroRedundancyOptimizer;

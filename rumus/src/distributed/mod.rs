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
//! // DataLoader::new(data, 32)?.shuffle(seed).shard(comm.rank(), comm.world_size())?
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
//! - sharded loading is [`DataLoader::shard`](crate::data::DataLoader::shard).
//!
//! A collective that some rank never joins (it died, hangs, or called another one) fails
//! on the others after the engine's timeout instead of hanging.

mod collective;
mod ddp;
mod mpi_engine;
mod rank0;
mod tensors;
mod zero;

pub use collective::{Collective, Elements, Solo};
pub use ddp::{DEFAULT_BUCKET_BYTES, DistributedDataParallel};
pub use mpi_engine::{DEFAULT_TIMEOUT, Mpi};
pub use rank0::{on_rank0, save_checkpoint};
pub use tensors::{Reduction, all_gather, all_reduce, broadcast_};
pub use zero::ZeroRedundancyOptimizer;

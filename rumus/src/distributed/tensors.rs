//! Collectives on tensors: what a training loop calls to average a metric, share a tensor
//! from rank 0, or gather every rank's predictions. CPU tensors are sent as they are; GPU
//! tensors are staged through host memory for now (a counted transfer each way).

use super::collective::{Collective, Elements, distributed_error};
use crate::autograd::no_grad;
use crate::dtype::DType;
use crate::error::Result;
use crate::tensor::DynTensor;

/// A tensor's elements copied to the host, in a type a collective can send.
pub(crate) enum HostBuffer {
    F32(Vec<f32>),
    F64(Vec<f64>),
    I64(Vec<i64>),
}

impl HostBuffer {
    pub(crate) fn of(op: &'static str, tensor: &DynTensor) -> Result<HostBuffer> {
        Ok(match tensor.dtype() {
            DType::F32 => HostBuffer::F32(tensor.to_vec()?),
            DType::F64 => HostBuffer::F64(tensor.to_vec()?),
            DType::I64 => HostBuffer::I64(tensor.to_vec()?),
            other => {
                return Err(distributed_error(
                    op,
                    format!("{other} tensors cannot be sent; convert to f32, f64 or i64 first"),
                ));
            }
        })
    }

    pub(crate) fn zeros(op: &'static str, dtype: DType, len: usize) -> Result<HostBuffer> {
        Ok(match dtype {
            DType::F32 => HostBuffer::F32(vec![0.0; len]),
            DType::F64 => HostBuffer::F64(vec![0.0; len]),
            DType::I64 => HostBuffer::I64(vec![0; len]),
            other => {
                return Err(distributed_error(
                    op,
                    format!("{other} tensors cannot be sent; convert to f32, f64 or i64 first"),
                ));
            }
        })
    }

    pub(crate) fn elements(&mut self) -> Elements<'_> {
        match self {
            HostBuffer::F32(data) => Elements::F32(data),
            HostBuffer::F64(data) => Elements::F64(data),
            HostBuffer::I64(data) => Elements::I64(data),
        }
    }

    fn scale(&mut self, factor: f64) {
        match self {
            HostBuffer::F32(data) => data.iter_mut().for_each(|x| *x *= factor as f32),
            HostBuffer::F64(data) => data.iter_mut().for_each(|x| *x *= factor),
            HostBuffer::I64(_) => {}
        }
    }

    /// A tensor of `dims` on `like`'s device holding these elements.
    pub(crate) fn into_tensor(self, dims: &[usize], like: &DynTensor) -> Result<DynTensor> {
        let host = match self {
            HostBuffer::F32(data) => DynTensor::from_vec(data, dims)?,
            HostBuffer::F64(data) => DynTensor::from_vec(data, dims)?,
            HostBuffer::I64(data) => DynTensor::from_vec(data, dims)?,
        };
        host.to(&like.device())
    }
}

/// How [`all_reduce`] combines the ranks' tensors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reduction {
    /// The element-wise sum.
    Sum,
    /// The sum divided by the world size (integer tensors: the sum).
    Mean,
}

/// The element-wise sum (or mean) of `tensor` over every rank, on `tensor`'s device. The
/// result is detached: a collective is not recorded on the tape.
pub fn all_reduce(comm: &dyn Collective, tensor: &DynTensor, how: Reduction) -> Result<DynTensor> {
    let mut buffer = HostBuffer::of("all_reduce", tensor)?;
    comm.all_reduce_sum(buffer.elements())?;
    if how == Reduction::Mean {
        buffer.scale(1.0 / comm.world_size() as f64);
    }
    buffer.into_tensor(tensor.dims(), tensor)
}

/// Overwrites `tensor` on every rank with `root`'s values, in place (under `no_grad`, so a
/// parameter keeps its identity and its optimizer state). Every rank's tensor must have the
/// same shape and dtype.
pub fn broadcast_(comm: &dyn Collective, tensor: &DynTensor, root: usize) -> Result<()> {
    let mut buffer = HostBuffer::of("broadcast", tensor)?;
    comm.broadcast(buffer.elements(), root)?;
    if comm.rank() == root {
        return Ok(());
    }
    let value = buffer.into_tensor(tensor.dims(), tensor)?;
    let _guard = no_grad();
    tensor.copy_(&value)
}

/// Every rank's `tensor` concatenated along axis 0 in rank order. The ranks' tensors may
/// differ in their first axis (an uneven last batch) but must agree on the others.
pub fn all_gather(comm: &dyn Collective, tensor: &DynTensor) -> Result<DynTensor> {
    let world = comm.world_size();
    let Some((&rows, rest)) = tensor.dims().split_first() else {
        return Err(distributed_error(
            "all_gather",
            "a scalar has no axis 0 to gather along; reshape it to [1] first",
        ));
    };
    // Every rank's leading size, and its trailing shape to compare with ours.
    let mut shapes = vec![0i64; world * (1 + rest.len())];
    let mut own: Vec<i64> = std::iter::once(rows as i64)
        .chain(rest.iter().map(|&d| d as i64))
        .collect();
    let per_rank = own.len();
    comm.all_gather(
        Elements::I64(&mut own),
        Elements::I64(&mut shapes),
        &vec![per_rank; world],
    )?;
    let mut counts = Vec::with_capacity(world);
    let mut total_rows = 0;
    for (rank, shape) in shapes.chunks(per_rank).enumerate() {
        if shape[1..] != own[1..] {
            return Err(distributed_error(
                "all_gather",
                format!(
                    "rank {rank} sends trailing dims {:?} but rank {} sends {:?}; all but axis 0 must match",
                    &shape[1..],
                    comm.rank(),
                    rest
                ),
            ));
        }
        let row_len: usize = rest.iter().product();
        counts.push(shape[0] as usize * row_len);
        total_rows += shape[0] as usize;
    }
    let mut local = HostBuffer::of("all_gather", tensor)?;
    let mut gathered = HostBuffer::zeros("all_gather", tensor.dtype(), counts.iter().sum())?;
    comm.all_gather(local.elements(), gathered.elements(), &counts)?;
    let mut dims = tensor.dims().to_vec();
    dims[0] = total_rows;
    gathered.into_tensor(&dims, tensor)
}

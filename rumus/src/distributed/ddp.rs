//! [`DistributedDataParallel`]: every rank runs the same model on its own slice of the
//! global batch, and the gradients are averaged across ranks before the optimizer step, so
//! every rank takes the same step a single process would take on the whole batch.
//!
//! Gradients travel in buckets of about [`DEFAULT_BUCKET_BYTES`], formed in reverse
//! parameter order because that is the order the backward pass finishes them in. A bucket
//! is handed to a communication thread the moment its last gradient is final (through
//! [`DynTensor::backward_with_ready_hook`]), so the all-reduce of the last layers' gradients
//! runs while the backward pass is still working on the first layers. The thread reduces
//! buckets strictly in bucket order, so every rank issues the same collectives in the same
//! order whatever order its gradients became ready in.
//!
//! Each bucket carries one extra element per parameter: how many ranks had a gradient for
//! it. A parameter no rank's loss reached gets no gradient (as in a single process), and one
//! only some ranks reached is averaged over all ranks, the others counting zero (PyTorch's
//! rule).
//!
//! The average is over ranks, not items: with a mean loss on each rank, a last global batch
//! that [`DataLoader::shard`](crate::data::DataLoader::shard) split unevenly (slices that
//! differ by one item) weights each rank's items by `1 / (world * slice)`, not exactly
//! `1 / batch` as one process would. PyTorch's `DistributedDataParallel` does the same;
//! use `drop_last` where that matters.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::mpsc::{Receiver, Sender, channel};

use super::collective::{Collective, distributed_error};
use super::same_model::check_same_tensors;
use super::tensors::{HostBuffer, broadcast_};
use crate::autograd::{GradientStore, TensorId};
use crate::dtype::DType;
use crate::error::Result;
use crate::nn::Module;
use crate::tensor::DynTensor;

/// PyTorch's default bucket size: large enough that per-message latency is small against
/// bandwidth, small enough that the first bucket is ready early in the backward pass.
pub const DEFAULT_BUCKET_BYTES: usize = 25 << 20;

/// Averages gradients across ranks during the backward pass.
pub struct DistributedDataParallel {
    comm: Arc<dyn Collective>,
    /// Trainable parameters in declaration order.
    params: Vec<DynTensor>,
    /// Bucket 0 holds the last parameters.
    buckets: Vec<Bucket>,
    /// For each parameter id: its bucket and its position in that bucket.
    slots: HashMap<TensorId, (usize, usize)>,
}

struct Bucket {
    /// Indices into `params`, in the order their elements are packed.
    members: Vec<usize>,
    dtype: DType,
    /// Gradient elements (the presence counts follow them).
    len: usize,
}

/// One bucket's gradients on their way to the communication thread.
struct Packed {
    bucket: usize,
    buffer: HostBuffer,
}

impl DistributedDataParallel {
    /// Wraps `model`'s trainable parameters and makes every rank start from rank 0's
    /// parameters and buffers (running statistics included).
    pub fn new(comm: Arc<dyn Collective>, model: &dyn Module) -> Result<Self> {
        Self::with_bucket_bytes(comm, model, DEFAULT_BUCKET_BYTES)
    }

    /// Like [`DistributedDataParallel::new`], with buckets of about `bucket_bytes` (a
    /// parameter larger than that gets a bucket of its own).
    pub fn with_bucket_bytes(
        comm: Arc<dyn Collective>,
        model: &dyn Module,
        bucket_bytes: usize,
    ) -> Result<Self> {
        let named = model.named_tensors();
        check_same_tensors(
            &*comm,
            "DistributedDataParallel::new",
            named.iter().map(|(name, t)| (name.clone(), t)),
        )?;
        // Buffers too (BatchNorm's running statistics), as PyTorch's DDP does at start.
        for (_, tensor) in named {
            broadcast_(&*comm, &tensor, 0)?;
        }
        let params: Vec<DynTensor> = model
            .parameters()
            .into_iter()
            .filter(DynTensor::requires_grad)
            .collect();
        let mut buckets: Vec<Bucket> = Vec::new();
        for (index, param) in params.iter().enumerate().rev() {
            let dtype = param.dtype();
            if !matches!(dtype, DType::F32 | DType::F64) {
                return Err(distributed_error(
                    "DistributedDataParallel::new",
                    format!(
                        "parameter {index} is {dtype}; gradients are averaged in f32 or f64 only"
                    ),
                ));
            }
            let bytes = param.numel() * dtype.size_in_bytes();
            let fits = buckets.last().is_some_and(|b| {
                b.dtype == dtype && (b.len * dtype.size_in_bytes() + bytes) <= bucket_bytes
            });
            if !fits {
                buckets.push(Bucket {
                    members: Vec::new(),
                    dtype,
                    len: 0,
                });
            }
            let bucket = buckets.last_mut().expect("pushed above");
            bucket.members.push(index);
            bucket.len += param.numel();
        }
        let mut slots = HashMap::new();
        for (b, bucket) in buckets.iter().enumerate() {
            for (position, &index) in bucket.members.iter().enumerate() {
                let id = params[index].id().expect("trainable parameters have ids");
                slots.insert(id, (b, position));
            }
        }
        Ok(DistributedDataParallel {
            comm,
            params,
            buckets,
            slots,
        })
    }

    /// The communicator the gradients travel through.
    pub fn comm(&self) -> &Arc<dyn Collective> {
        &self.comm
    }

    /// How many buckets a backward pass sends.
    pub fn bucket_count(&self) -> usize {
        self.buckets.len()
    }

    /// Back-propagates `loss` and returns gradients averaged over every rank.
    pub fn backward(&self, loss: &DynTensor) -> Result<GradientStore> {
        self.backward_accumulated(loss, GradientStore::new())
    }

    /// Back-propagates `loss` into `accumulated` without any communication: the
    /// micro-batches of gradient accumulation before the last one (PyTorch's `no_sync`).
    pub fn accumulate(&self, loss: &DynTensor, accumulated: &mut GradientStore) -> Result<()> {
        accumulated.merge(loss.backward()?)
    }

    /// Back-propagates `loss`, adds the gradients of earlier [`accumulate`] calls, and
    /// averages the totals over every rank: the last micro-batch of gradient accumulation.
    ///
    /// [`accumulate`]: DistributedDataParallel::accumulate
    pub fn backward_accumulated(
        &self,
        loss: &DynTensor,
        accumulated: GradientStore,
    ) -> Result<GradientStore> {
        if self.comm.world_size() == 1 {
            let mut grads = loss.backward()?;
            grads.merge(accumulated)?;
            return Ok(grads);
        }
        let (to_comm, comm_inbox) = channel::<Packed>();
        let (to_main, main_inbox) = channel::<Result<Packed>>();
        let comm = &*self.comm;
        std::thread::scope(|scope| {
            scope.spawn(move || reduce_in_order(comm, self.buckets.len(), comm_inbox, to_main));
            self.backward_and_send(loss, accumulated, to_comm)
                .and_then(|grads| self.receive(grads, &main_inbox))
        })
    }

    /// Runs the backward pass, sending each bucket as soon as it is complete, then sends the
    /// buckets whose gradients never all arrived. Returns the local gradients with
    /// `accumulated` added.
    fn backward_and_send(
        &self,
        loss: &DynTensor,
        accumulated: GradientStore,
        to_comm: Sender<Packed>,
    ) -> Result<GradientStore> {
        let mut ready: Vec<Vec<Option<DynTensor>>> = self
            .buckets
            .iter()
            .map(|b| vec![None; b.members.len()])
            .collect();
        let mut missing: Vec<usize> = self.buckets.iter().map(|b| b.members.len()).collect();
        let mut sent = vec![false; self.buckets.len()];
        let mut grads = loss.backward_with_ready_hook(&mut |id, grad| {
            let Some(&(b, position)) = self.slots.get(&id) else {
                return Ok(());
            };
            ready[b][position] = Some(grad.clone());
            missing[b] -= 1;
            if missing[b] == 0 {
                let buffer = self.pack(b, &ready[b], &accumulated)?;
                sent[b] = true;
                // A closed channel means the thread stopped on an error, which `receive`
                // reports.
                let _ = to_comm.send(Packed { bucket: b, buffer });
            }
            Ok(())
        })?;
        for (b, bucket) in self.buckets.iter().enumerate() {
            if sent[b] {
                continue;
            }
            let local: Vec<Option<DynTensor>> = bucket
                .members
                .iter()
                .map(|&index| grads.get(&self.params[index]).cloned())
                .collect();
            let buffer = self.pack(b, &local, &accumulated)?;
            let _ = to_comm.send(Packed { bucket: b, buffer });
        }
        grads.merge(accumulated)?;
        Ok(grads)
    }

    /// Bucket `b`'s gradients (plus accumulated ones) in one host buffer, followed by one
    /// presence count (0 or 1) per member.
    fn pack(
        &self,
        b: usize,
        local: &[Option<DynTensor>],
        accumulated: &GradientStore,
    ) -> Result<HostBuffer> {
        let bucket = &self.buckets[b];
        let mut parts: Vec<Option<DynTensor>> = Vec::with_capacity(local.len());
        for (&index, grad) in bucket.members.iter().zip(local) {
            let earlier = accumulated.get(&self.params[index]);
            parts.push(match (grad, earlier) {
                (Some(g), Some(e)) => Some(g.add(e)?),
                (Some(g), None) => Some(g.clone()),
                (None, Some(e)) => Some(e.clone()),
                (None, None) => None,
            });
        }
        match bucket.dtype {
            DType::F64 => pack_as::<f64>(bucket, &self.params, &parts).map(HostBuffer::F64),
            _ => pack_as::<f32>(bucket, &self.params, &parts).map(HostBuffer::F32),
        }
    }

    /// Collects every reduced bucket and replaces the local gradients with the averages.
    fn receive(
        &self,
        mut grads: GradientStore,
        inbox: &Receiver<Result<Packed>>,
    ) -> Result<GradientStore> {
        let world = self.comm.world_size() as f64;
        for _ in 0..self.buckets.len() {
            let Ok(reduced) = inbox.recv() else {
                return Err(distributed_error(
                    "DistributedDataParallel::backward",
                    "the communication thread stopped before every bucket was reduced",
                ));
            };
            let Packed { bucket: b, buffer } = reduced?;
            let bucket = &self.buckets[b];
            let mut offset = 0;
            for (position, &index) in bucket.members.iter().enumerate() {
                let param = &self.params[index];
                let n = param.numel();
                let range = offset..offset + n;
                offset += n;
                grads.remove(param);
                let averaged = match &buffer {
                    HostBuffer::F32(data) => {
                        if data[bucket.len + position] == 0.0 {
                            continue;
                        }
                        let values = data[range].iter().map(|&x| x / world as f32).collect();
                        HostBuffer::F32(values)
                    }
                    HostBuffer::F64(data) => {
                        if data[bucket.len + position] == 0.0 {
                            continue;
                        }
                        HostBuffer::F64(data[range].iter().map(|&x| x / world).collect())
                    }
                    HostBuffer::I64(_) => unreachable!("buckets are f32 or f64"),
                };
                let grad = averaged.into_tensor(param.dims(), param)?;
                grads.accumulate(param.id().expect("trainable"), grad)?;
            }
        }
        Ok(grads)
    }
}

/// Concatenates the members' gradients (zeros where a member has none) and appends their
/// presence counts.
fn pack_as<T>(bucket: &Bucket, params: &[DynTensor], parts: &[Option<DynTensor>]) -> Result<Vec<T>>
where
    T: crate::element::Element + Default + Copy + From<u8>,
{
    let mut data: Vec<T> = Vec::with_capacity(bucket.len + bucket.members.len());
    for (&index, part) in bucket.members.iter().zip(parts) {
        match part {
            Some(grad) => data.extend(grad.to_vec::<T>()?),
            None => data.extend(std::iter::repeat_n(T::default(), params[index].numel())),
        }
    }
    data.extend(parts.iter().map(|p| T::from(p.is_some() as u8)));
    Ok(data)
}

/// The communication thread: all-reduces buckets strictly in bucket order, holding back any
/// that arrive early, and stops at the first error.
fn reduce_in_order(
    comm: &dyn Collective,
    buckets: usize,
    inbox: Receiver<Packed>,
    outbox: Sender<Result<Packed>>,
) {
    let mut early: HashMap<usize, HostBuffer> = HashMap::new();
    for next in 0..buckets {
        let mut buffer = loop {
            if let Some(buffer) = early.remove(&next) {
                break buffer;
            }
            match inbox.recv() {
                Ok(Packed { bucket, buffer }) => {
                    early.insert(bucket, buffer);
                }
                // The backward pass failed; nothing more will come.
                Err(_) => return,
            }
        };
        let result = comm.all_reduce_sum(buffer.elements());
        let failed = result.is_err();
        let _ = outbox.send(result.map(|()| Packed {
            bucket: next,
            buffer,
        }));
        if failed {
            return;
        }
    }
}

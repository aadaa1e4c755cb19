//! The one interface data-parallel training talks to: rank, world size and four collective
//! operations. [`Mpi`](super::Mpi) implements it over MPI; [`Solo`] is the world of one
//! process. A second engine (NCCL-class, for several GPUs of one host) implements the same
//! trait and everything above it (tensor collectives, [`DistributedDataParallel`](super::DistributedDataParallel),
//! the sharded optimizer) works unchanged.
//!
//! Every rank must call the same collectives in the same order with the same sizes: that is
//! MPI's rule, and the wrappers above keep it (their collectives are complete when their
//! methods return).

use crate::error::Result;

/// A buffer of one element type, read and written in place by a collective.
pub enum Elements<'a> {
    /// 32-bit floats.
    F32(&'a mut [f32]),
    /// 64-bit floats.
    F64(&'a mut [f64]),
    /// 64-bit signed integers.
    I64(&'a mut [i64]),
    /// Raw bytes.
    U8(&'a mut [u8]),
}

impl Elements<'_> {
    /// Number of elements (not bytes).
    pub fn len(&self) -> usize {
        match self {
            Elements::F32(data) => data.len(),
            Elements::F64(data) => data.len(),
            Elements::I64(data) => data.len(),
            Elements::U8(data) => data.len(),
        }
    }

    /// Whether the buffer holds no elements.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The elements' bytes in memory order (every element type here is plain old data).
    pub fn as_bytes(&self) -> &[u8] {
        let (ptr, bytes) = match self {
            Elements::F32(data) => (data.as_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::F64(data) => (data.as_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::I64(data) => (data.as_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::U8(data) => (data.as_ptr(), data.len()),
        };
        // SAFETY: the slice is borrowed for `self`'s lifetime, and any bit pattern of these
        // element types is valid as bytes.
        unsafe { std::slice::from_raw_parts(ptr, bytes) }
    }

    /// The elements' bytes, writable (every bit pattern is a valid element of these types).
    pub fn as_bytes_mut(&mut self) -> &mut [u8] {
        let (ptr, len) = match self {
            Elements::F32(data) => (data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::F64(data) => (data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::I64(data) => (data.as_mut_ptr().cast::<u8>(), std::mem::size_of_val(*data)),
            Elements::U8(data) => (data.as_mut_ptr(), data.len()),
        };
        // SAFETY: `ptr` points at `len` bytes borrowed mutably for `self`'s lifetime, and
        // every bit pattern is a valid element of these types.
        unsafe { std::slice::from_raw_parts_mut(ptr, len) }
    }

    /// Bytes per element.
    pub fn element_size(&self) -> usize {
        match self {
            Elements::F32(_) => 4,
            Elements::F64(_) | Elements::I64(_) => 8,
            Elements::U8(_) => 1,
        }
    }

    /// The element type's name, for error messages.
    pub fn type_name(&self) -> &'static str {
        match self {
            Elements::F32(_) => "f32",
            Elements::F64(_) => "f64",
            Elements::I64(_) => "i64",
            Elements::U8(_) => "u8",
        }
    }
}

/// Collective communication among the processes of one training job.
pub trait Collective: Send + Sync {
    /// This process's number, `0..world_size()`.
    fn rank(&self) -> usize;

    /// How many processes take part.
    fn world_size(&self) -> usize;

    /// Replaces `data` on every rank with the element-wise sum over all ranks (`u8` buffers
    /// cannot be summed).
    fn all_reduce_sum(&self, data: Elements<'_>) -> Result<()>;

    /// Replaces `data` on every rank with `root`'s.
    fn broadcast(&self, data: Elements<'_>, root: usize) -> Result<()>;

    /// Fills `gathered` on every rank with each rank's `local` in rank order; rank `r`
    /// contributes `counts[r]` elements, so `local` has `counts[rank]` elements and
    /// `gathered` their sum. Both must have the same element type.
    fn all_gather(
        &self,
        local: Elements<'_>,
        gathered: Elements<'_>,
        counts: &[usize],
    ) -> Result<()>;

    /// Returns once every rank has called it.
    fn barrier(&self) -> Result<()>;
}

/// A job of one process: every collective is the identity. Training code written for
/// several processes runs unchanged without a launcher.
#[derive(Debug, Default, Clone, Copy)]
pub struct Solo;

impl Collective for Solo {
    fn rank(&self) -> usize {
        0
    }

    fn world_size(&self) -> usize {
        1
    }

    fn all_reduce_sum(&self, data: Elements<'_>) -> Result<()> {
        check_summable("all_reduce_sum", &data)
    }

    fn broadcast(&self, _data: Elements<'_>, root: usize) -> Result<()> {
        check_root("broadcast", root, 1)
    }

    fn all_gather(
        &self,
        local: Elements<'_>,
        gathered: Elements<'_>,
        counts: &[usize],
    ) -> Result<()> {
        let mut gathered = gathered;
        check_gather(&local, &gathered, counts, 0, 1)?;
        gathered.as_bytes_mut().copy_from_slice(local.as_bytes());
        Ok(())
    }

    fn barrier(&self) -> Result<()> {
        Ok(())
    }
}

pub(crate) fn distributed_error(op: &'static str, message: impl Into<String>) -> crate::Error {
    crate::Error::Distributed {
        op,
        message: message.into(),
    }
}

pub(crate) fn check_summable(op: &'static str, data: &Elements<'_>) -> Result<()> {
    if matches!(data, Elements::U8(_)) {
        return Err(distributed_error(
            op,
            "u8 buffers cannot be summed; send them as i64",
        ));
    }
    Ok(())
}

pub(crate) fn check_root(op: &'static str, root: usize, world_size: usize) -> Result<()> {
    if root >= world_size {
        return Err(distributed_error(
            op,
            format!("root rank {root} does not exist in a world of {world_size} processes"),
        ));
    }
    Ok(())
}

/// The local checks of an all-gather: one count per rank, buffer lengths that match them,
/// one element type.
pub(crate) fn check_gather(
    local: &Elements<'_>,
    gathered: &Elements<'_>,
    counts: &[usize],
    rank: usize,
    world_size: usize,
) -> Result<()> {
    if counts.len() != world_size {
        return Err(distributed_error(
            "all_gather",
            format!(
                "{} counts given for a world of {world_size} processes; give one per rank",
                counts.len()
            ),
        ));
    }
    let own = counts[rank];
    if local.type_name() != gathered.type_name() {
        return Err(distributed_error(
            "all_gather",
            format!(
                "the local buffer holds {} and the gathered one {}; they must match",
                local.type_name(),
                gathered.type_name()
            ),
        ));
    }
    let total: usize = counts.iter().sum();
    if local.len() != own || gathered.len() != total {
        return Err(distributed_error(
            "all_gather",
            format!(
                "rank {rank} sends {} elements into {} (counts {counts:?} ask for {own} into {total})",
                local.len(),
                gathered.len()
            ),
        ));
    }
    Ok(())
}

//! The keys and values a Llama model keeps of the tokens it has run.

use crate::error::Result;
use crate::tensor::DynTensor;

/// The keys and values of the tokens a [`Llama`](super::Llama) has run, per block, so that
/// each new token attends to them without running them again.
///
/// Each block's keys (rotated) and values live in buffers `[kv_heads, capacity, head_width]`
/// allocated once: a token's keys are written in place after the earlier ones, so decoding
/// does not copy the cache per token. A cache made with [`Llama::new_cache`](super::Llama)
/// starts small and doubles its capacity when full (a few reallocations over a long
/// conversation); [`Llama::cache_with_capacity`](super::Llama) allocates it all at once, as
/// [`Llama::generate`](super::Llama::generate) does for its prompt and new tokens.
///
/// A cache is not `Clone`: its buffers are written in place, so a shallow copy would let two
/// conversations overwrite each other's keys. [`KvCache::try_clone`] copies them, to branch
/// a conversation from a shared prefix.
pub struct KvCache {
    layers: Vec<Option<Layer>>,
    len: usize,
    capacity: usize,
}

struct Layer {
    keys: DynTensor,
    values: DynTensor,
}

impl KvCache {
    pub(super) fn new(blocks: usize, capacity: usize) -> KvCache {
        KvCache {
            layers: (0..blocks).map(|_| None).collect(),
            len: 0,
            capacity: capacity.max(1),
        }
    }

    /// A copy with buffers of its own (the held tokens' keys and values copied), which
    /// continues independently of this one.
    ///
    /// # Errors
    /// No memory for the copy.
    pub fn try_clone(&self) -> Result<KvCache> {
        let copy = |t: &DynTensor| -> Result<DynTensor> {
            let fresh = DynTensor::zeros_on(t.dims(), t.dtype(), &t.device())?;
            fresh.copy_(t)?;
            Ok(fresh)
        };
        let layers = self
            .layers
            .iter()
            .map(|layer| {
                layer
                    .as_ref()
                    .map(|l| {
                        Ok(Layer {
                            keys: copy(&l.keys)?,
                            values: copy(&l.values)?,
                        })
                    })
                    .transpose()
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(KvCache {
            layers,
            len: self.len,
            capacity: self.capacity,
        })
    }

    /// Tokens whose keys and values the cache holds.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// Tokens it holds before its buffers grow.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Bytes its buffers take (allocated, not only used).
    pub fn bytes(&self) -> usize {
        self.layers
            .iter()
            .flatten()
            .map(|l| 2 * l.keys.numel() * l.keys.dtype().size_in_bytes())
            .sum()
    }

    /// Appends block `block`'s keys and values of `new` tokens (`[kv_heads, new, hw]`, or
    /// `[B, kv_heads, new, hw]` for a batch of sequences, following the `len()` held) and
    /// returns all its keys and values so far, `[.., len() + new, hw]` views of its buffers.
    ///
    /// # Errors
    /// Keys of another batch or head layout than the cache holds.
    pub(super) fn append(
        &mut self,
        block: usize,
        keys: &DynTensor,
        values: &DynTensor,
    ) -> Result<(DynTensor, DynTensor)> {
        // The token axis: the second from last.
        let axis = keys.rank() - 2;
        let at = axis as isize;
        let (new, start) = (keys.dims()[axis], self.len);
        let needed = start + new;
        if needed > self.capacity {
            self.capacity = needed.max(2 * self.capacity);
        }
        let capacity = self.capacity;
        let layer = &mut self.layers[block];
        if let Some(held) = layer.as_ref()
            && (held.keys.rank() != keys.rank() || held.keys.dims()[..axis] != keys.dims()[..axis])
        {
            return Err(crate::error::Error::InvalidArgument {
                op: "KvCache",
                message: format!(
                    "the cache holds keys {:?} a token; this step gives {:?} (a cache serves \
                     batches of one size: make one per batch size)",
                    &held.keys.dims()[..axis],
                    &keys.dims()[..axis]
                ),
            });
        }
        let stale = layer
            .as_ref()
            .is_some_and(|l| l.keys.dims()[axis] < capacity);
        if layer.is_none() || stale {
            let mut dims = keys.dims().to_vec();
            dims[axis] = capacity;
            // On the keys' device, in their dtype.
            let (dtype, device) = (keys.dtype(), keys.device());
            let grown = Layer {
                keys: DynTensor::zeros_on(&dims, dtype, &device)?,
                values: DynTensor::zeros_on(&dims, dtype, &device)?,
            };
            if let Some(old) = layer.take()
                && start > 0
            {
                grown
                    .keys
                    .narrow(at, 0, start)?
                    .copy_(&old.keys.narrow(at, 0, start)?)?;
                grown
                    .values
                    .narrow(at, 0, start)?
                    .copy_(&old.values.narrow(at, 0, start)?)?;
            }
            *layer = Some(grown);
        }
        let layer = layer.as_ref().expect("made above");
        layer.keys.narrow(at, start, new)?.copy_(keys)?;
        layer.values.narrow(at, start, new)?.copy_(values)?;
        Ok((
            layer.keys.narrow(at, 0, needed)?,
            layer.values.narrow(at, 0, needed)?,
        ))
    }

    /// Counts `new` tokens as held once every block has appended theirs.
    pub(super) fn advance(&mut self, new: usize) {
        self.len += new;
    }
}

//! Runtime geometry of a tensor: sizes, strides and offset into its storage, plus the shape
//! arithmetic every op shares (axis normalisation, broadcasting).

use std::mem::MaybeUninit;

use smallvec::SmallVec;

use crate::error::ShapeError;

/// Sizes or strides of one tensor, held inline up to rank 6: building a layout (every op
/// builds one or more) then allocates nothing.
pub type Dims = SmallVec<[usize; 6]>;

/// Sizes, strides (in elements) and starting offset of a view into a storage.
#[derive(Debug, PartialEq, Eq)]
pub struct Layout {
    dims: Dims,
    strides: Dims,
    offset: usize,
}

/// Copies the inline arrays with `from_slice` (a `memcpy`): `SmallVec`'s own `Clone` extends
/// element by element, which callgrind showed as the costliest step of a small op's layout
/// handling.
impl Clone for Layout {
    fn clone(&self) -> Self {
        Layout {
            dims: Dims::from_slice(&self.dims),
            strides: Dims::from_slice(&self.strides),
            offset: self.offset,
        }
    }
}

/// Row-major strides of a contiguous tensor with these sizes. The product saturates: it can
/// only overflow for a tensor with no elements (`[0, 2^40, 2^40]`), whose strides address
/// nothing.
pub fn contiguous_strides(dims: &[usize]) -> Dims {
    // Every op's output layout comes through here: an inline array of zeros skips
    // `SmallVec`'s growth checks for the usual ranks.
    let mut strides: Dims = if dims.len() <= 6 {
        SmallVec::from_buf_and_len([0; 6], dims.len())
    } else {
        smallvec::smallvec![0; dims.len()]
    };
    let mut step = 1usize;
    for (stride, &size) in strides.iter_mut().zip(dims).rev() {
        *stride = step;
        step = step.saturating_mul(size);
    }
    strides
}

impl Layout {
    /// The row-major layout of `dims` at offset 0.
    #[inline]
    pub fn contiguous(dims: &[usize]) -> Self {
        let rank = dims.len();
        if rank > 6 {
            return Layout {
                strides: contiguous_strides(dims),
                dims: Dims::from_slice(dims),
                offset: 0,
            };
        }
        // Every op's output layout comes through here: both inline arrays are filled in one
        // pass, without `SmallVec`'s capacity checks.
        let (mut sizes, mut strides) = ([0; 6], [0; 6]);
        let mut step = 1usize;
        for axis in (0..rank).rev() {
            sizes[axis] = dims[axis];
            strides[axis] = step;
            step = step.saturating_mul(dims[axis]);
        }
        Layout {
            dims: Dims::from_buf_and_len(sizes, rank),
            strides: Dims::from_buf_and_len(strides, rank),
            offset: 0,
        }
    }

    /// [`Layout::contiguous`] written into `place`, where the layout will live: sizes and
    /// strides go straight into its inline arrays, not through a copy on the stack (an op's
    /// result handle is built this way, in its heap allocation).
    #[inline]
    pub(crate) fn write_contiguous(place: &mut MaybeUninit<Layout>, dims: &[usize]) {
        let rank = dims.len();
        if rank > 6 {
            place.write(Layout::contiguous(dims));
            return;
        }
        let layout = place.write(Layout {
            dims: Dims::from_buf_and_len([0; 6], rank),
            strides: Dims::from_buf_and_len([0; 6], rank),
            offset: 0,
        });
        let (sizes, strides) = (layout.dims.as_mut_slice(), layout.strides.as_mut_slice());
        let mut step = 1usize;
        for ((size, stride), &dim) in sizes.iter_mut().zip(strides.iter_mut()).zip(dims).rev() {
            *size = dim;
            *stride = step;
            step = step.saturating_mul(dim);
        }
    }

    /// A layout with these sizes, strides and offset, taken as given (`dims` and `strides`
    /// must have the same length; checked in debug builds only).
    pub fn new(dims: &[usize], strides: &[usize], offset: usize) -> Self {
        debug_assert_eq!(dims.len(), strides.len());
        Layout {
            dims: Dims::from_slice(dims),
            strides: Dims::from_slice(strides),
            offset,
        }
    }

    // The accessors are `#[inline]`: every op calls them from other codegen units, which
    // builds without link-time optimisation between units (`lto = "off"`) do not inline.

    /// Size of each axis.
    #[inline]
    pub fn dims(&self) -> &[usize] {
        &self.dims
    }

    /// Step in the storage, in elements, between neighbours along each axis.
    #[inline]
    pub fn strides(&self) -> &[usize] {
        &self.strides
    }

    /// Index in the storage of the first element.
    #[inline]
    pub fn offset(&self) -> usize {
        self.offset
    }

    /// Number of axes.
    #[inline]
    pub fn rank(&self) -> usize {
        self.dims.len()
    }

    /// Number of elements: the product of the sizes (1 for a scalar). A zero anywhere makes
    /// it 0 however large the other sizes ([2^40, 2^40, 0] holds nothing).
    #[inline]
    pub fn numel(&self) -> usize {
        if self.dims.contains(&0) {
            return 0;
        }
        self.dims.iter().product()
    }

    /// True when the elements are laid out row-major without gaps (offset may be non-zero).
    #[inline]
    pub fn is_contiguous(&self) -> bool {
        let mut expected = 1;
        for (&size, &stride) in self.dims.iter().zip(&self.strides).rev() {
            if size != 1 && stride != expected {
                return false;
            }
            // Saturates only for tensors without elements (see `contiguous_strides`).
            expected = expected.saturating_mul(size);
        }
        true
    }

    /// The same storage seen with axes reordered: axis `i` of the result is axis `perm[i]`.
    pub fn permute(&self, perm: &[usize]) -> Layout {
        Layout {
            dims: perm.iter().map(|&p| self.dims[p]).collect(),
            strides: perm.iter().map(|&p| self.strides[p]).collect(),
            offset: self.offset,
        }
    }

    /// `len` elements of `axis` starting at `start`, sharing storage.
    pub fn narrow(&self, axis: usize, start: usize, len: usize) -> Layout {
        let mut dims = self.dims.clone();
        dims[axis] = len;
        // A view of no elements reads nothing, and its strides may be saturated ([0, 2^40,
        // 2^40]): its offset stays.
        let offset = if dims.contains(&0) {
            self.offset
        } else {
            self.offset + start * self.strides[axis]
        };
        Layout {
            dims,
            strides: self.strides.clone(),
            offset,
        }
    }

    /// Broadcast view to `target` (which must be a valid broadcast of `dims`): new or size-1
    /// axes get stride 0.
    pub fn broadcast_to(&self, target: &[usize]) -> Layout {
        // Most operands of most ops already have the output's dims.
        if self.dims.as_slice() == target {
            return self.clone();
        }
        let extra = target.len() - self.dims.len();
        let strides = target
            .iter()
            .enumerate()
            .map(|(i, &size)| {
                if i < extra {
                    0
                } else {
                    let src = i - extra;
                    if self.dims[src] == 1 && size != 1 {
                        0
                    } else {
                        self.strides[src]
                    }
                }
            })
            .collect();
        Layout {
            dims: Dims::from_slice(target),
            strides,
            offset: self.offset,
        }
    }

    /// The same elements in the same row-major order with the fewest axes: size-1 axes
    /// dropped and neighbours merged where the outer one steps over the whole inner one
    /// (`stride[i] == stride[i + 1] * dims[i + 1]`, broadcast axes included). Strided loops
    /// then run long inner rows: a gradient broadcast from a scalar to `[64, 64, 28, 28]`
    /// becomes one row of 3.2 million elements instead of 114,688 rows of 28.
    pub fn coalesced(&self) -> Layout {
        if self.numel() == 0 {
            // No elements: one empty axis (merging the others could overflow their sizes).
            return Layout {
                dims: smallvec::smallvec![0],
                strides: smallvec::smallvec![1],
                offset: self.offset,
            };
        }
        let mut dims = Dims::new();
        let mut strides = Dims::new();
        for (&size, &stride) in self.dims.iter().zip(&self.strides) {
            if size == 1 {
                continue;
            }
            match (dims.last_mut(), strides.last_mut()) {
                (Some(outer), Some(outer_stride)) if *outer_stride == stride * size => {
                    *outer *= size;
                    *outer_stride = stride;
                }
                _ => {
                    dims.push(size);
                    strides.push(stride);
                }
            }
        }
        Layout {
            dims,
            strides,
            offset: self.offset,
        }
    }

    /// A contiguous layout reinterpreted with new sizes (caller checked the element count).
    pub fn reshaped(&self, dims: &[usize]) -> Layout {
        debug_assert!(self.is_contiguous());
        Layout {
            dims: Dims::from_slice(dims),
            strides: contiguous_strides(dims),
            offset: self.offset,
        }
    }
}

/// Number of elements of `dims`, or an error when the product does not fit in `usize`
/// (such a shape could never be allocated; wrapping would corrupt every size computed later).
pub fn checked_numel(dims: &[usize], context: &str) -> Result<usize, ShapeError> {
    // A zero anywhere makes an empty tensor, however large the other dims: [0, 2^40, 2^40]
    // holds nothing, as [2^40, 2^40, 0] does.
    if dims.contains(&0) {
        return Ok(0);
    }
    dims.iter()
        .try_fold(1usize, |acc, &d| acc.checked_mul(d))
        .ok_or_else(|| ShapeError::Invalid {
            context: context.to_string(),
            message: format!("shape {dims:?} has more elements than fit in memory"),
        })
}

/// Turns a possibly negative axis into an index, or says which axis was wrong.
pub fn normalize_axis(axis: isize, rank: usize, context: &str) -> Result<usize, ShapeError> {
    let r = rank as isize;
    let index = if axis < 0 { axis + r } else { axis };
    if index < 0 || index >= r {
        return Err(ShapeError::AxisOutOfRange {
            context: context.to_string(),
            axis,
            rank,
        });
    }
    Ok(index as usize)
}

/// Normalises and sorts a list of axes, rejecting duplicates.
pub fn normalize_axes(
    axes: &[isize],
    rank: usize,
    context: &str,
) -> Result<Vec<usize>, ShapeError> {
    let mut out = axes
        .iter()
        .map(|&a| normalize_axis(a, rank, context))
        .collect::<Result<Vec<_>, _>>()?;
    out.sort_unstable();
    if out.windows(2).any(|w| w[0] == w[1]) {
        return Err(ShapeError::Invalid {
            context: context.to_string(),
            message: format!("axis list {axes:?} names an axis twice"),
        });
    }
    Ok(out)
}

/// NumPy broadcasting: align from the right; sizes must match or one must be 1.
pub fn broadcast_shapes(lhs: &[usize], rhs: &[usize], context: &str) -> Result<Dims, ShapeError> {
    if lhs == rhs {
        return Ok(Dims::from_slice(lhs));
    }
    let rank = lhs.len().max(rhs.len());
    let mut out: Dims = smallvec::smallvec![0; rank];
    for i in 0..rank {
        let l = if i < lhs.len() {
            lhs[lhs.len() - 1 - i]
        } else {
            1
        };
        let r = if i < rhs.len() {
            rhs[rhs.len() - 1 - i]
        } else {
            1
        };
        out[rank - 1 - i] = match (l, r) {
            _ if l == r => l,
            (1, r) => r,
            (l, 1) => l,
            _ => {
                return Err(ShapeError::NotBroadcastable {
                    context: context.to_string(),
                    lhs: lhs.to_vec(),
                    rhs: rhs.to_vec(),
                    axis: i,
                    lhs_size: l,
                    rhs_size: r,
                });
            }
        };
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn broadcasting_follows_numpy() {
        assert_eq!(
            broadcast_shapes(&[4, 1, 3], &[5, 1], "t")
                .unwrap()
                .as_slice(),
            &[4, 5, 3]
        );
        assert!(broadcast_shapes(&[2, 3], &[4], "t").is_err());
    }

    #[test]
    fn transposed_view_is_not_contiguous() {
        let layout = Layout::contiguous(&[2, 3]);
        assert!(layout.is_contiguous());
        assert!(!layout.permute(&[1, 0]).is_contiguous());
        assert_eq!(layout.narrow(1, 1, 2).offset(), 1);
    }

    /// Storage offsets of every element in row-major order, walked axis by axis.
    fn offsets(layout: &Layout) -> Vec<usize> {
        let mut out = vec![layout.offset()];
        for (&size, &stride) in layout.dims().iter().zip(layout.strides()) {
            out = out
                .iter()
                .flat_map(|&base| (0..size).map(move |i| base + i * stride))
                .collect();
        }
        out
    }

    #[test]
    fn coalescing_keeps_every_offset_and_merges_what_it_can() {
        let base = Layout::contiguous(&[2, 3, 4, 5]);
        let cases = [
            (base.clone(), 1),
            (base.permute(&[0, 2, 1, 3]), 4),
            (base.narrow(3, 1, 3), 2),
            (
                Layout::contiguous(&[3, 1, 4]).broadcast_to(&[2, 3, 5, 4]),
                4,
            ),
            (Layout::contiguous(&[]).broadcast_to(&[64, 64, 28, 28]), 1),
            (Layout::contiguous(&[1, 1]), 0),
        ];
        for (layout, axes) in cases {
            let merged = layout.coalesced();
            assert_eq!(offsets(&merged), offsets(&layout), "{layout:?}");
            assert_eq!(merged.rank(), axes, "{layout:?} -> {merged:?}");
        }
    }
}

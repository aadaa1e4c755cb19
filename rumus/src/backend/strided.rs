//! Strided views of several operands over the same dims, with adjacent axes merged wherever
//! every operand walks them contiguously, so most views reach a device kernel as rank 1 and
//! cost one division per element to index (the wgpu and CUDA backends both index this way).

use crate::error::{DeviceError, Result};
use crate::shape::Layout;

/// Axes a strided device kernel indexes at most (after merging).
pub(crate) const MAX_RANK: usize = 8;

/// Views of several operands over the same `dims`, merged and ready for a parameter block.
pub(crate) struct Strided {
    pub dims: Vec<usize>,
    pub strides: Vec<Vec<usize>>,
    pub offsets: Vec<usize>,
}

impl Strided {
    /// Merges axis `d` into `d + 1` wherever every operand has `stride[d] == stride[d+1] *
    /// dims[d+1]`, and drops axes of size 1.
    pub fn new(op: &'static str, dims: &[usize], layouts: &[&Layout]) -> Result<Strided> {
        if dims.contains(&0) {
            // No elements: one empty axis (merging the others could overflow their sizes).
            return Ok(Strided {
                dims: vec![0],
                strides: vec![vec![1]; layouts.len()],
                offsets: layouts.iter().map(|layout| layout.offset()).collect(),
            });
        }
        let mut out_dims: Vec<usize> = Vec::new();
        let mut out_strides: Vec<Vec<usize>> = vec![Vec::new(); layouts.len()];
        for (axis, &size) in dims.iter().enumerate() {
            if size == 1 {
                continue;
            }
            let mergeable = !out_dims.is_empty()
                && layouts.iter().zip(&out_strides).all(|(layout, strides)| {
                    *strides.last().expect("same length as out_dims")
                        == layout.strides()[axis] * size
                });
            if mergeable {
                *out_dims.last_mut().expect("checked non-empty") *= size;
                for (layout, strides) in layouts.iter().zip(&mut out_strides) {
                    *strides.last_mut().expect("checked non-empty") = layout.strides()[axis];
                }
            } else {
                out_dims.push(size);
                for (layout, strides) in layouts.iter().zip(&mut out_strides) {
                    strides.push(layout.strides()[axis]);
                }
            }
        }
        if out_dims.len() > MAX_RANK {
            return Err(DeviceError::RankTooLarge {
                op,
                rank: out_dims.len(),
                limit: MAX_RANK,
            }
            .into());
        }
        Ok(Strided {
            dims: out_dims,
            strides: out_strides,
            offsets: layouts.iter().map(|layout| layout.offset()).collect(),
        })
    }
}

//! Joining contiguous buffers along one axis.

/// Concatenates `parts` (each contiguous `[outer, part_len, inner]`) along the middle axis.
pub fn concat<T: Copy>(parts: &[(&[T], usize)], outer: usize, inner: usize) -> Vec<T> {
    let total: usize = parts.iter().map(|(_, len)| len).sum();
    let mut out = Vec::with_capacity(outer * total * inner);
    for o in 0..outer {
        for (data, len) in parts {
            let run = len * inner;
            out.extend_from_slice(&data[o * run..(o + 1) * run]);
        }
    }
    out
}

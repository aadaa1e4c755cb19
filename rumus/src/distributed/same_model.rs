//! The check that every rank built the same model, run once when a data-parallel wrapper is
//! constructed.
//!
//! Per-collective fingerprints catch two ranks whose tensors differ in size, but not two
//! models whose parameters happen to add up to the same counts, nor which parameter differs.
//! So the wrappers gather every rank's list of tensor names, element types and shapes (a few
//! bytes per tensor, once) and fail on every rank with the first difference.

use super::collective::{Collective, Elements, distributed_error};
use crate::error::Result;
use crate::tensor::DynTensor;

/// Fails on every rank, naming the first difference, unless every rank passes the same
/// names, dtypes and shapes in the same order. `op` names the caller in the error.
pub(crate) fn check_same_tensors<'a>(
    comm: &dyn Collective,
    op: &'static str,
    tensors: impl IntoIterator<Item = (String, &'a DynTensor)>,
) -> Result<()> {
    let world = comm.world_size();
    if world == 1 {
        return Ok(());
    }
    let mut own: Vec<u8> = tensors
        .into_iter()
        .map(|(name, t)| format!("`{name}` ({} {:?})", t.dtype(), t.dims()))
        .collect::<Vec<_>>()
        .join("\n")
        .into_bytes();
    let mut length = [own.len() as i64];
    let mut lengths = vec![0i64; world];
    comm.all_gather(
        Elements::I64(&mut length),
        Elements::I64(&mut lengths),
        &vec![1; world],
    )?;
    let counts: Vec<usize> = lengths.iter().map(|&l| l as usize).collect();
    let mut all = vec![0u8; counts.iter().sum()];
    comm.all_gather(Elements::U8(&mut own), Elements::U8(&mut all), &counts)?;
    let mut lists = Vec::with_capacity(world);
    let mut start = 0;
    for count in counts {
        lists.push(String::from_utf8_lossy(&all[start..start + count]).into_owned());
        start += count;
    }
    let first: Vec<&str> = lines(&lists[0]);
    for (r, list) in lists.iter().enumerate().skip(1) {
        let other = lines(list);
        if other == first {
            continue;
        }
        let message = match other.iter().zip(&first).position(|(a, b)| a != b) {
            Some(i) => format!(
                "rank {r} has {} where rank 0 has {} (tensor {i} in declaration order)",
                other[i], first[i]
            ),
            None => format!(
                "rank {r} has {} tensors where rank 0 has {}",
                other.len(),
                first.len()
            ),
        };
        return Err(distributed_error(
            op,
            format!("{message}; every rank must build the same model"),
        ));
    }
    Ok(())
}

fn lines(list: &str) -> Vec<&str> {
    if list.is_empty() {
        Vec::new()
    } else {
        list.split('\n').collect()
    }
}

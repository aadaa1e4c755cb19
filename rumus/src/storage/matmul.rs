//! Matrix products as storage runs them.

use super::Storage;
use super::dispatch::{Operand, on_backend};
use crate::backend::Matmul;
use crate::error::Result;

use triomphe::Arc;

impl Storage {
    /// `a @ b` of operands broadcast to `[batch.., m, k]` and `[batch.., k, n]`, plus `bias`
    /// on every row; `widen` returns `f16` operands' sums in `f32` where the backend can.
    ///
    /// A bias on another device than the operands is `linear`'s error, operands on two
    /// devices `matmul`'s.
    pub(crate) fn matmul(
        a: Operand<'_>,
        b: Operand<'_>,
        bias: Option<Operand<'_>>,
        out_dims: &[usize],
        widen: bool,
    ) -> Result<Arc<Storage>> {
        match bias {
            None => on_backend!("matmul", [a, b], |be, [a, b]| be
                .matmul(a, b, None, out_dims, widen)),
            Some(bias) => {
                let op = if a.storage.device() == b.storage.device() {
                    "linear"
                } else {
                    "matmul"
                };
                on_backend!(op, [a, b, bias], |be, [a, b, bias]| be.matmul(
                    a,
                    b,
                    Some(bias),
                    out_dims,
                    widen
                ))
            }
        }
    }
}

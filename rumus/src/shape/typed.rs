//! Shapes as types: tuples of [`Dim`]s up to rank 6, with the checks that turn a runtime
//! shape into a typed one.

use super::dim::{Dim, Unify};
use crate::error::ShapeError;

/// A tensor shape known (partly) at compile time.
pub trait Shape: Copy + Default + Send + Sync + 'static {
    /// Number of axes.
    const RANK: usize;
    /// Per axis, the static size or `None` for a runtime dim.
    fn static_dims() -> Vec<Option<usize>>;
    /// The shape as people read it, e.g. `[Dyn, 784]`.
    fn describe() -> String;

    /// Checks runtime `dims` against this shape: same rank, and every static axis equal.
    fn check(dims: &[usize], context: &str) -> Result<(), ShapeError> {
        if dims.len() != Self::RANK {
            return Err(ShapeError::RankMismatch {
                context: context.to_string(),
                expected: Self::RANK,
                expected_shape: Self::describe(),
                found: dims.len(),
                found_shape: dims.to_vec(),
            });
        }
        for (axis, (expected, &found)) in Self::static_dims().into_iter().zip(dims).enumerate() {
            if let Some(expected) = expected.filter(|&e| e != found) {
                return Err(ShapeError::AxisMismatch {
                    context: format!("{context} (as {})", Self::describe()),
                    axis,
                    expected,
                    found,
                });
            }
        }
        Ok(())
    }

    /// The dims when every axis is static.
    fn all_static() -> Option<Vec<usize>> {
        Self::static_dims().into_iter().collect()
    }
}

/// Axis-by-axis [`Unify`] of two shapes of equal rank.
#[diagnostic::on_unimplemented(
    message = "shape `{Self}` cannot be matched with `{Other}`",
    label = "shapes differ in rank or in a static dimension",
    note = "shapes match when they have the same rank and every axis pair matches (equal static sizes, or `Dyn` against anything)"
)]
pub trait UnifyShape<Other: Shape>: Shape {
    /// The shape the pair denotes: each axis the more specific of the two.
    type Output: Shape;
}

impl Shape for () {
    const RANK: usize = 0;
    fn static_dims() -> Vec<Option<usize>> {
        Vec::new()
    }
    fn describe() -> String {
        "[]".into()
    }
}

#[diagnostic::do_not_recommend]
impl UnifyShape<()> for () {
    type Output = ();
}

macro_rules! tuple_shape {
    ($rank:literal; $($a:ident $b:ident),+) => {
        impl<$($a: Dim),+> Shape for ($($a,)+) {
            const RANK: usize = $rank;
            fn static_dims() -> Vec<Option<usize>> {
                vec![$($a::SIZE),+]
            }
            fn describe() -> String {
                let labels: Vec<String> = vec![$($a::label()),+];
                format!("[{}]", labels.join(", "))
            }
        }

        #[diagnostic::do_not_recommend]
        impl<$($a: Unify<$b>, $b: Dim),+> UnifyShape<($($b,)+)> for ($($a,)+) {
            type Output = ($(<$a as Unify<$b>>::Output,)+);
        }
    };
}

tuple_shape!(1; A0 B0);
tuple_shape!(2; A0 B0, A1 B1);
tuple_shape!(3; A0 B0, A1 B1, A2 B2);
tuple_shape!(4; A0 B0, A1 B1, A2 B2, A3 B3);
tuple_shape!(5; A0 B0, A1 B1, A2 B2, A3 B3, A4 B4);
tuple_shape!(6; A0 B0, A1 B1, A2 B2, A3 B3, A4 B4, A5 B5);

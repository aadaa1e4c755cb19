//! Dimensions as types. A static dim is `D<784>` (const generic, so a mismatch reads
//! `expected D<784>, found D<512>`); `Dyn` is a size known only at run time; a named runtime
//! dim (declared with [`dim!`](crate::dim)) is a size known at run time that only matches
//! itself, so swapping batch and sequence axes is a compile error.

use std::fmt::Debug;

/// One axis of a typed shape.
pub trait Dim: Copy + Default + Debug + Send + Sync + 'static {
    /// The size when it is fixed at compile time.
    const SIZE: Option<usize>;
    /// How the dim reads in messages: `784`, `Dyn`, `Batch`.
    fn label() -> String;
}

/// A dimension of exactly `N`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct D<const N: usize>;

impl<const N: usize> Dim for D<N> {
    const SIZE: Option<usize> = Some(N);
    fn label() -> String {
        N.to_string()
    }
}

/// A dimension whose size is only known at run time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct Dyn;

impl Dim for Dyn {
    const SIZE: Option<usize> = None;
    fn label() -> String {
        "Dyn".into()
    }
}

/// Two dims that may describe the same axis, and the dim that results: equal static dims
/// give themselves, a static or named dim meets `Dyn` and stays static or named (after one
/// run-time check), a named dim meets only itself.
#[diagnostic::on_unimplemented(
    message = "dimension `{Self}` cannot be matched with `{Other}`",
    label = "this axis has dimension `{Self}`, but `{Other}` is required",
    note = "static dims match only an equal size (`D<784>` with `D<784>`); `Dyn` matches any dim after a run-time check; a named dim matches only itself or `Dyn`"
)]
pub trait Unify<Other: Dim>: Dim {
    /// The dim the pair denotes (the more specific of the two).
    type Output: Dim;
}

#[diagnostic::do_not_recommend]
impl<T: Dim> Unify<T> for T {
    type Output = T;
}

#[diagnostic::do_not_recommend]
impl<const N: usize> Unify<Dyn> for D<N> {
    type Output = D<N>;
}

#[diagnostic::do_not_recommend]
impl<const N: usize> Unify<D<N>> for Dyn {
    type Output = D<N>;
}

/// Declares a named runtime dimension: a size known at run time that only matches itself.
///
/// ```
/// rumus::dim!(pub Batch);
/// rumus::dim!(pub Seq);
/// let x = rumus::Tensor::<(Batch, Seq)>::zeros_with_dims(&[2, 5]).unwrap();
/// assert_eq!(x.dims(), &[2, 5]);
/// ```
#[macro_export]
macro_rules! dim {
    ($(#[$meta:meta])* $vis:vis $name:ident) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
        $vis struct $name;

        impl $crate::Dim for $name {
            const SIZE: ::core::option::Option<usize> = ::core::option::Option::None;
            fn label() -> ::std::string::String {
                ::std::string::String::from(stringify!($name))
            }
        }

        impl $crate::shape::Unify<$crate::Dyn> for $name {
            type Output = $name;
        }

        impl $crate::shape::Unify<$name> for $crate::Dyn {
            type Output = $name;
        }
    };
}

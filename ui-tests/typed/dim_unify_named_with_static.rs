use rumus::prelude::*;
use rumus::shape::Unify;

rumus::dim!(Batch);

fn unify<A: Unify<B>, B: Dim>() {}

fn main() {
    unify::<Batch, D<32>>();
}

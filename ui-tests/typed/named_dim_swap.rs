use rumus::prelude::*;

rumus::dim!(Batch);
rumus::dim!(Seq);

fn main() {
    let x = Tensor::<(Batch, Seq, D<8>)>::zeros_with_dims(&[2, 5, 8]).unwrap();
    let y = Tensor::<(Seq, Batch, D<8>)>::zeros_with_dims(&[5, 2, 8]).unwrap();
    let _z = &x + &y;
}

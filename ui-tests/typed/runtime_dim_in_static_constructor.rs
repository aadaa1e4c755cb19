use rumus::prelude::*;

fn main() {
    let _x = Tensor::<(Dyn, D<784>)>::zeros();
}

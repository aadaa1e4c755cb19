use rumus::prelude::*;

#[model]
struct Inner {
    fc: Linear<8, 8>,
}

#[model]
struct Outer {
    inner: Inner,
    head: Linear<8, 2>,
}

#[model]
impl Outer {
    tensor_fn! {
        fn forward(&self, x: [B, 8]) -> [B, 2] {
            let h = self.inner(x);
            self.head(h)
        }
    }
}

fn main() {}

//! The MNIST classifier: conv32-pool-conv64-pool-fc128-fc10. Shared by the `mnist` example
//! and the CPU benchmark's CNN workload.

use rumus::prelude::*;

#[model]
pub struct Cnn {
    pub conv1: Conv2d<1, 32, 3>,
    pub conv2: Conv2d<32, 64, 3>,
    pub fc1: Linear<1600, 128>,
    pub fc2: Linear<128, 10>,
}

#[model]
impl Cnn {
    tensor_fn! {
        pub fn forward(&self, x: [B, 1, 28, 28]) -> [B, 10] {
            let h = self.conv1(x).relu().max_pool2d(2);
            let h = self.conv2(h).relu().max_pool2d(2);
            let h = self.fc1(h.flatten(1)).relu();
            self.fc2(h)
        }
    }
}

//! The everyday layers come with the prelude alone: a model of them needs no `rumus::nn` path.
use rumus::prelude::*;

#[model]
struct Everyday {
    #[conv(padding = 1)]
    conv1d: Conv1d<4, 8, 3>,
    embed: Embedding<20, 4>,
    norm: LayerNorm<8>,
    #[conv(padding = 1)]
    conv2d: Conv2d<1, 4, 3>,
    bn2: BatchNorm2d<4>,
    #[pool(kernel = 2)]
    max: MaxPool2d,
    #[pool(kernel = 2)]
    avg: AvgPool2d,
    flat: Flatten,
    #[dropout(p = 0.5)]
    drop: Dropout,
    fc: Linear<16, 8>,
    bn1: BatchNorm1d<8>,
    relu: Relu,
    gelu: Gelu,
    sigmoid: Sigmoid,
    silu: Silu,
    tanh: Tanh,
}

#[model]
impl Everyday {
    tensor_fn! {
        fn sequence(&self, ids: [B, T; i64]) -> [B, T, 8] {
            let h = self.embed(ids).transpose(1, 2);          // [B, 4, T]
            let h = self.conv1d(h).transpose(1, 2);           // [B, T, 8]
            self.norm(h)
        }

        fn image(&self, x: [B, 1, 8, 8]) -> [B, 8] {
            let h = self.max(self.bn2(self.conv2d(x)));       // [B, 4, 4, 4]
            let h = self.drop(self.flat(self.avg(h)));        // [B, 16]
            let h = self.relu(self.gelu(self.bn1(self.fc(h))));
            self.tanh(self.silu(self.sigmoid(h)))
        }
    }
}

fn main() -> rumus::Result<()> {
    let model = Everyday::new()?;
    let ids: Tensor<(Dyn, Dyn), i64> =
        DynTensor::from_vec(vec![1i64, 4, 19, 0, 7, 2], &[2, 3])?.try_typed()?;
    assert_eq!(model.sequence(&ids)?.dims(), &[2, 3, 8]);
    let x = Tensor::<(Dyn, D<1>, D<8>, D<8>)>::randn_with_dims(&[2, 1, 8, 8])?;
    assert_eq!(model.image(&x)?.dims(), &[2, 8]);
    Ok(())
}

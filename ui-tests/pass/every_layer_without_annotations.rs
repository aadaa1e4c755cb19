//! Every layer of `rumus::nn` in a DSL forward pass, none of them annotated: the macro computes
//! each output shape from the field's type and attributes.
use rumus::nn::{
    AdaptiveAvgPool2d, BatchNorm1d, BatchNorm2d, Conv1d, ConvTranspose2d, Dropout, Embedding,
    Flatten, Gelu, GroupNorm, Gru, LayerNorm, Lstm, MaxPool2d, MultiheadAttention, Relu, RmsNorm,
    TransformerEncoderBlock,
};
use rumus::prelude::*;

mod config {
    pub const HIDDEN: usize = 32;
}

#[model]
struct Vision {
    #[conv(padding = 1, bias = false)]
    conv1: Conv2d<1, 8, 3>,
    bn1: BatchNorm2d<8>,
    act: Relu,
    #[pool(kernel = 2)]
    pool: MaxPool2d,
    norm: GroupNorm<2, 8>,
    #[conv(stride = 2, output_padding = 1, padding = 1)]
    up: ConvTranspose2d<8, 4, 3>,
    #[pool(output = [2, 2])]
    squeeze: AdaptiveAvgPool2d,
    flat: Flatten,
    #[dropout(p = 0.25)]
    drop: Dropout,
    fc: Linear<16, { config::HIDDEN }>,
    bn2: BatchNorm1d<{ config::HIDDEN }>,
    w: Tensor<(D<10>, D<{ config::HIDDEN }>)>,
}

#[model]
impl Vision {
    tensor_fn! {
        fn forward(&self, x: [B, 1, 28, 28]) -> [B, 10] {
            let h = self.act(self.bn1(self.conv1(x)));   // [B, 8, 28, 28]
            let h = self.norm(self.pool(h));             // [B, 8, 14, 14]
            let h = self.squeeze(self.up(h));            // [B, 4, 28, 28] -> [B, 4, 2, 2]
            let h = self.drop(self.flat(h));             // [B, 16]
            let h = self.bn2(self.fc(h)).relu();         // [B, HIDDEN]
            h @ self.w.t()
        }
    }
}

#[model]
struct Language {
    token: Embedding<50, 16>,
    position: Embedding<12, 16>,
    #[dropout(p = 0.0)]
    block: TransformerEncoderBlock<16, 4, 32>,
    attn: MultiheadAttention<16, 2>,
    #[conv(padding = 1)]
    conv: Conv1d<16, 16, 3>,
    lstm: Lstm<16, 24>,
    gru: Gru<24, 16>,
    norm: LayerNorm<16>,
    rms: RmsNorm<16>,
    gelu: Gelu,
    head: Linear<16, 50>,
}

#[model]
impl Language {
    tensor_fn! {
        fn forward(&self, ids: [B, T; i64], positions: [T; i64], memory: [B, S, 16]) -> [B, T, 50] {
            let h = self.token(ids) + self.position(positions);   // [B, T, 16]
            let h = self.block(h, causal);
            let h = self.attn(h, memory, memory) + self.attn(h);
            let c = self.conv(h.transpose(1, 2)).transpose(1, 2);  // [B, T, 16]
            let r = self.gru(self.lstm(self.rms(c)));              // [B, T, 24] -> [B, T, 16]
            self.head(self.gelu(self.norm(r)))
        }
    }
}

fn main() -> rumus::Result<()> {
    let vision = Vision::new()?;
    let x = Tensor::<(Dyn, D<1>, D<28>, D<28>)>::randn_with_dims(&[2, 1, 28, 28])?;
    assert_eq!(vision.forward(&x)?.dims(), &[2, 10]);

    let language = Language::new()?;
    let ids: Tensor<(Dyn, Dyn), i64> =
        DynTensor::from_vec(vec![1i64, 4, 19, 0, 7, 2, 3, 3], &[2, 4])?.try_typed()?;
    let positions: Tensor<(Dyn,), i64> =
        DynTensor::from_vec(vec![0i64, 1, 2, 3], &[4])?.try_typed()?;
    let memory = Tensor::<(Dyn, Dyn, D<16>)>::randn_with_dims(&[2, 5, 16])?;
    assert_eq!(language.forward(&ids, &positions, &memory)?.dims(), &[2, 4, 50]);
    Ok(())
}

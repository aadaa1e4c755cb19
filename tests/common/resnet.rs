//! A torchvision-style ResNet (BasicBlocks of bias-free convolutions and BatchNorm, a
//! projection shortcut, `nn.Sequential` stages as tuple structs), with the names PyTorch
//! gives its state dict: the model of `tests/fixtures/make_resnet_weights.py`.

use rumus::nn::BatchNorm2d;
use rumus::prelude::*;

/// torchvision's `downsample`: `nn.Sequential(conv1x1, BatchNorm2d)`, so fields `0` and `1`.
#[model]
pub struct Downsample(
    #[conv(stride = 2, bias = false)] pub Conv2d<8, 16, 1>,
    pub BatchNorm2d<16>,
);

/// A BasicBlock that keeps 8 channels.
#[model]
pub struct Block8 {
    #[conv(padding = 1, bias = false)]
    pub conv1: Conv2d<8, 8, 3>,
    pub bn1: BatchNorm2d<8>,
    #[conv(padding = 1, bias = false)]
    pub conv2: Conv2d<8, 8, 3>,
    pub bn2: BatchNorm2d<8>,
}

/// A BasicBlock from 8 to 16 channels at stride 2, with its projection shortcut.
#[model]
pub struct Block8To16 {
    #[conv(stride = 2, padding = 1, bias = false)]
    pub conv1: Conv2d<8, 16, 3>,
    pub bn1: BatchNorm2d<16>,
    #[conv(padding = 1, bias = false)]
    pub conv2: Conv2d<16, 16, 3>,
    pub bn2: BatchNorm2d<16>,
    pub downsample: Downsample,
}

/// `layer1 = nn.Sequential(BasicBlock(8, 8))`.
#[model]
pub struct Layer1(pub Block8);

/// `layer2 = nn.Sequential(BasicBlock(8, 16, stride=2))`.
#[model]
pub struct Layer2(pub Block8To16);

#[model]
pub struct SmallResNet {
    #[conv(padding = 1, bias = false)]
    pub conv1: Conv2d<3, 8, 3>,
    pub bn1: BatchNorm2d<8>,
    pub layer1: Layer1,
    pub layer2: Layer2,
    pub fc: Linear<16, 10>,
}

/// The same network without its classifier: a backbone for non-strict loading.
#[model]
pub struct Backbone {
    #[conv(padding = 1, bias = false)]
    pub conv1: Conv2d<3, 8, 3>,
    pub bn1: BatchNorm2d<8>,
    pub layer1: Layer1,
    pub layer2: Layer2,
}

impl Block8 {
    pub fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let out = self.bn1.forward_dyn(&self.conv1.forward_dyn(x)?)?.relu()?;
        let out = self.bn2.forward_dyn(&self.conv2.forward_dyn(&out)?)?;
        out.add(x)?.relu()
    }
}

impl Block8To16 {
    pub fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let identity = self
            .downsample
            .1
            .forward_dyn(&self.downsample.0.forward_dyn(x)?)?;
        let out = self.bn1.forward_dyn(&self.conv1.forward_dyn(x)?)?.relu()?;
        let out = self.bn2.forward_dyn(&self.conv2.forward_dyn(&out)?)?;
        out.add(&identity)?.relu()
    }
}

impl SmallResNet {
    pub fn forward(&self, x: &DynTensor) -> rumus::Result<DynTensor> {
        let x = self.bn1.forward_dyn(&self.conv1.forward_dyn(x)?)?.relu()?;
        let x = self.layer2.0.forward(&self.layer1.0.forward(&x)?)?;
        let pooled = x.adaptive_avg_pool2d((1, 1))?.flatten(1, -1)?;
        self.fc.forward_dyn(&pooled)
    }
}

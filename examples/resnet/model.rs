//! torchvision's ResNet-18 (`torchvision.models.resnet18`) as generic `#[model]` structs,
//! with the names its state dict uses, so `load_safetensors` takes torchvision's weights
//! strictly. The widths and the class count are const parameters: [`ResNet18`] is the
//! published network, and a narrower one (same structure and names) trains or tests fast.

use rumus::nn::{BatchNorm2d, MaxPool2d};
use rumus::prelude::*;

/// torchvision's `downsample`: `nn.Sequential(conv1x1 stride 2, BatchNorm2d)`, fields `0`
/// and `1`. A tuple struct's forward runs its fields in order.
#[model]
pub struct Downsample<const IN: usize, const OUT: usize>(
    #[conv(stride = 2, bias = false)] pub Conv2d<IN, OUT, 1>,
    pub BatchNorm2d<OUT>,
);

/// torchvision's `BasicBlock` that keeps width and resolution: the shortcut is `x` itself.
#[model]
pub struct Block<const C: usize> {
    #[conv(padding = 1, bias = false)]
    pub conv1: Conv2d<C, C, 3>,
    pub bn1: BatchNorm2d<C>,
    #[conv(padding = 1, bias = false)]
    pub conv2: Conv2d<C, C, 3>,
    pub bn2: BatchNorm2d<C>,
}

#[model]
impl<const C: usize> Block<C> {
    tensor_fn! {
        pub fn forward(&self, x: [B, C, H, W]) -> [B, C, H, W] {
            let h = relu(self.bn1(self.conv1(x)));
            relu(self.bn2(self.conv2(h)) + x)
        }
    }
}

/// The `BasicBlock` that opens stages 2-4: stride 2, `IN` to `OUT` channels, with the
/// projection shortcut.
#[model]
pub struct DownBlock<const IN: usize, const OUT: usize> {
    #[conv(stride = 2, padding = 1, bias = false)]
    pub conv1: Conv2d<IN, OUT, 3>,
    pub bn1: BatchNorm2d<OUT>,
    #[conv(padding = 1, bias = false)]
    pub conv2: Conv2d<OUT, OUT, 3>,
    pub bn2: BatchNorm2d<OUT>,
    pub downsample: Downsample<IN, OUT>,
}

#[model]
impl<const IN: usize, const OUT: usize> DownBlock<IN, OUT> {
    tensor_fn! {
        pub fn forward(&self, x: [B, IN, H, W]) -> [B, OUT, _, _] {
            let h = relu(self.bn1(self.conv1(x)));
            let shortcut: [B, OUT, _, _] = self.downsample(x);
            relu(self.bn2(self.conv2(h)) + shortcut)
        }
    }
}

/// `layer1`: two blocks at the stem's width.
#[model]
pub struct FirstStage<const C: usize>(pub Block<C>, pub Block<C>);

/// `layer2` to `layer4`: halve the resolution and widen, then one more block.
#[model]
pub struct Stage<const IN: usize, const OUT: usize>(pub DownBlock<IN, OUT>, pub Block<OUT>);

/// ResNet-18's layout (stem, four stages of two blocks, average pool, classifier) at the
/// widths `W1..W4`.
#[model]
pub struct ResNet<
    const W1: usize,
    const W2: usize,
    const W3: usize,
    const W4: usize,
    const CLASSES: usize,
> {
    #[conv(stride = 2, padding = 3, bias = false)]
    pub conv1: Conv2d<3, W1, 7>,
    pub bn1: BatchNorm2d<W1>,
    #[pool(kernel = 3, stride = 2, padding = 1)]
    pub maxpool: MaxPool2d,
    pub layer1: FirstStage<W1>,
    pub layer2: Stage<W1, W2>,
    pub layer3: Stage<W2, W3>,
    pub layer4: Stage<W3, W4>,
    pub fc: Linear<W4, CLASSES>,
}

#[model]
impl<const W1: usize, const W2: usize, const W3: usize, const W4: usize, const CLASSES: usize>
    ResNet<W1, W2, W3, W4, CLASSES>
{
    tensor_fn! {
        pub fn forward(&self, x: [B, 3, H, W]) -> [B, CLASSES] {
            let x = self.maxpool(relu(self.bn1(self.conv1(x))));
            let x: [B, W1, _, _] = self.layer1(x);
            let x: [B, W2, _, _] = self.layer2(x);
            let x: [B, W3, _, _] = self.layer3(x);
            let x: [B, W4, _, _] = self.layer4(x);
            self.fc(x.adaptive_avg_pool2d([1, 1]).flatten(1))
        }
    }
}

/// `torchvision.models.resnet18()`: 11,689,512 parameters.
pub type ResNet18 = ResNet<64, 128, 256, 512, 1000>;

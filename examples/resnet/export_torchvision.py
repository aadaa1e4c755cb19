#!/usr/bin/env python3
"""Saves torchvision's ResNet-18 weights for examples/resnet, as a user would
(safetensors.torch.save_file of its state_dict), and beside them PATH.check.safetensors: an
input batch and torchvision's eval-mode logits for it, which the example compares with its
own.

    pip install torch torchvision safetensors
    python3 examples/resnet/export_torchvision.py resnet18.safetensors [--pretrained]

--pretrained downloads the ImageNet weights (torchvision's IMAGENET1K_V1); without it the
network is torchvision's fresh initialisation with running statistics from a few batches.
"""

import sys

import torch
import torchvision
from safetensors.torch import save_file

path = sys.argv[1]
torch.manual_seed(0)
weights = "IMAGENET1K_V1" if "--pretrained" in sys.argv[2:] else None
model = torchvision.models.resnet18(weights=weights)
if weights is None:
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(4, 3, 64, 64))
model.eval()
save_file(model.state_dict(), path)
x = torch.randn(2, 3, 224, 224)
with torch.no_grad():
    logits = model(x)
save_file({"x": x, "logits": logits}, path.replace(".safetensors", ".check.safetensors"))
print(f"wrote {path} ({sum(p.numel() for p in model.parameters())} parameters) and its check")

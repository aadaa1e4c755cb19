#!/usr/bin/env python3
"""Side-by-side graph benchmark: rumus (examples/bench_gnn.rs) and PyTorch / PyTorch Geometric
on one stochastic block model graph (100,000 nodes in 10 blocks, 1,000,000 directed edges,
80% inside a block), 64 features, same thread count, in one run. Prints a table of medians
and ratios (rumus / reference; below 1 means rumus is faster).

    python3 tests/bench/compare_gnn.py [--threads 1,2]   # needs torch and torch_geometric
    python3 tests/bench/compare_gnn.py --device cuda --binary target/release/examples/bench_gnn
        # rumus on CUDA (or --device gpu: wgpu) against PyTorch Geometric on CUDA

Workloads: `spmm` is the GCN-normalised adjacency times [nodes, 64] (torch.sparse.mm on a CSR
tensor); `gcn_conv_fwd_bwd` one GCNConv(64, 64) forward and backward (PyG's GCNConv with
cached=True, given the edge index, as its examples use it); `gcn_epoch` and `gat_epoch` one
full-batch training epoch (cross-entropy, Adam) of a two-layer GCN (64-64-8, dropout 0.5)
and GAT (8 heads of 8, then 1 head of 8).
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import GATConv, GCNConv
from torch_geometric.nn.conv.gcn_conv import gcn_norm

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NODES, EDGES, BLOCKS, FEATURES, CLASSES = 100_000, 1_000_000, 10, 64, 8


def sbm_edges(seed=0):
    g = torch.Generator().manual_seed(seed)
    block = NODES // BLOCKS
    sources = torch.randint(0, NODES, (EDGES,), generator=g)
    inside = torch.rand(EDGES, generator=g) < 0.8
    same_block = (sources // block) * block + torch.randint(0, block, (EDGES,), generator=g)
    anywhere = torch.randint(0, NODES, (EDGES,), generator=g)
    targets = torch.where(inside, same_block, anywhere)
    return torch.stack([sources, targets])


def median_ms(warmup, reps, f, cuda=False):
    def run():
        f()
        if cuda:
            torch.cuda.synchronize()

    for _ in range(warmup):
        run()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        run()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[reps // 2]


def torch_workloads(edge_index, threads, device="cpu"):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    cuda = device != "cpu"

    def timed(warmup, reps, f):
        return median_ms(warmup, reps, f, cuda)

    edge_index = edge_index.to(device)
    x = torch.randn(NODES, FEATURES, device=device)
    labels = torch.arange(NODES, device=device) % CLASSES
    looped, weight = gcn_norm(edge_index, None, NODES, add_self_loops=True)
    adjacency = torch.sparse_coo_tensor(torch.stack([looped[1], looped[0]]), weight,
                                        (NODES, NODES)).coalesce().to_sparse_csr()
    out = {"spmm": timed(3, 21, lambda: torch.sparse.mm(adjacency, x))}

    layer = GCNConv(FEATURES, FEATURES, cached=True).to(device)
    x_grad = x.clone().requires_grad_()

    def conv():
        layer(x_grad, edge_index).sum().backward()

    out["gcn_conv_fwd_bwd"] = timed(3, 15, conv)

    conv1 = GCNConv(FEATURES, 64, cached=True).to(device)
    conv2 = GCNConv(64, CLASSES, cached=True).to(device)
    opt = torch.optim.Adam(list(conv1.parameters()) + list(conv2.parameters()), lr=1e-3)

    def gcn_epoch():
        opt.zero_grad()
        h = F.dropout(F.relu(conv1(x, edge_index)), 0.5, training=True)
        F.cross_entropy(conv2(h, edge_index), labels).backward()
        opt.step()

    out["gcn_epoch"] = timed(2, 11, gcn_epoch)

    gat1, gat2 = GATConv(FEATURES, 8, heads=8).to(device), GATConv(64, CLASSES, heads=1).to(device)
    opt = torch.optim.Adam(list(gat1.parameters()) + list(gat2.parameters()), lr=1e-3)

    def gat_epoch():
        opt.zero_grad()
        h = F.relu(gat1(x, edge_index))
        F.cross_entropy(gat2(h, edge_index), labels).backward()
        opt.step()

    out["gat_epoch"] = timed(1, 5, gat_epoch)
    return out


def rumus_workloads(path, threads, device="cpu", binary=None):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    command = [binary] if binary else ["cargo", "run", "--quiet", "--release", "--example", "bench_gnn", "--"]
    text = subprocess.run(command + [path, str(NODES), device],
                          cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in text.splitlines())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--device", default="cpu", help="cpu, gpu (wgpu) or cuda: rumus's device")
    parser.add_argument("--binary", help="a built bench_gnn (default: cargo run --release)")
    args = parser.parse_args()
    edge_index = sbm_edges()
    with tempfile.NamedTemporaryFile(suffix=".i64", delete=False) as f:
        f.write(edge_index.numpy().astype("<i8").tobytes())
        path = f.name
    print(f"torch {torch.__version__}, {NODES} nodes, {EDGES} edges, {FEATURES} features")
    print("| workload | threads | rumus ms | reference ms | ratio |")
    print("|---|---|---|---|---|")
    threads_list = [int(t) for t in args.threads.split(",")] if args.device == "cpu" else [1]
    for threads in threads_list:
        ours = rumus_workloads(path, threads, args.device, args.binary)
        theirs = torch_workloads(edge_index, threads, "cpu" if args.device == "cpu" else "cuda")
        for name, ms in ours.items():
            print(f"| {name} | {threads} | {ms:.2f} | {theirs[name]:.2f} | {ms / theirs[name]:.2f} |")
    os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())

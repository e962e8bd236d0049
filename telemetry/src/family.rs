//! A labelled family: one child metric per set of label values, with the number of sets capped so
//! a hostile label value cannot grow memory without bound.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use crate::counter::Counter;
use crate::exposition::label_pairs;
use crate::gauge::Gauge;
use crate::histogram::Histogram;
use crate::metric::Metric;

/// Distinct label sets a family keeps; observations for further sets go to the overflow child.
pub const MAX_LABEL_SETS: usize = 1000;

/// The value every label of the overflow child has.
pub const OVERFLOW_LABEL: &str = "_overflow";

/// Label values are cut to this many bytes (at a character boundary), so a thousand label sets
/// stay small however long the values offered.
pub const MAX_LABEL_VALUE_BYTES: usize = 256;

pub type CounterVec = Family<Counter>;
pub type GaugeVec = Family<Gauge>;
pub type HistogramVec = Family<Histogram>;

/// Children of one metric type, by label values; the label names are fixed at registration.
/// An unlabelled metric is a family with no label names and its one child.
#[derive(Debug)]
pub struct Family<M: Metric> {
    label_names: Vec<String>,
    shape: M::Shape,
    children: Mutex<BTreeMap<Vec<String>, Arc<M>>>,
}

impl<M: Metric> Family<M> {
    pub(crate) fn new(label_names: Vec<String>, shape: M::Shape) -> Self {
        Self { label_names, shape, children: Mutex::new(BTreeMap::new()) }
    }

    /// The child for these label values (in the order of the label names), made on first use.
    /// Once [`MAX_LABEL_SETS`] sets exist, a new set gets the overflow child (every label
    /// [`OVERFLOW_LABEL`]); so does a call with the wrong number of values, which is a bug in the
    /// caller and logged as one.
    pub fn with_label_values(&self, values: &[&str]) -> Arc<M> {
        let key = label_key(&self.label_names, values);
        // A poisoned lock only means another observer panicked; the map itself is intact.
        let mut children = self.children.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(child) = children.get(&key) {
            return child.clone();
        }
        let overflow = overflow_key(self.label_names.len());
        let kept = children.len() - usize::from(children.contains_key(&overflow));
        let key = if kept >= MAX_LABEL_SETS { overflow } else { key };
        children.entry(key).or_insert_with(|| Arc::new(M::with_shape(&self.shape))).clone()
    }

    pub fn label_names(&self) -> &[String] {
        &self.label_names
    }

    /// Label sets with a child, the overflow one included.
    pub fn label_sets(&self) -> usize {
        self.children.lock().unwrap_or_else(PoisonError::into_inner).len()
    }

    pub(crate) fn shape(&self) -> &M::Shape {
        &self.shape
    }

    /// Every child's samples, in label-value order.
    pub(crate) fn write_samples(&self, name: &str, out: &mut String) {
        let children: Vec<(Vec<String>, Arc<M>)> = self
            .children
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .iter()
            .map(|(values, child)| (values.clone(), child.clone()))
            .collect();
        // Written without the lock: observers never wait for a scrape.
        for (values, child) in children {
            child.write_samples(name, &label_pairs(&self.label_names, &values), out);
        }
    }
}

/// The owned, bounded key of `values`, or the overflow key when their number is wrong.
pub(crate) fn label_key(label_names: &[String], values: &[&str]) -> Vec<String> {
    if values.len() != label_names.len() {
        tracing::warn!(
            labels = ?label_names,
            values = ?values,
            "a metric was observed with the wrong number of label values; counted as overflow"
        );
        return overflow_key(label_names.len());
    }
    values.iter().map(|value| bounded(value).to_owned()).collect()
}

pub(crate) fn overflow_key(labels: usize) -> Vec<String> {
    vec![OVERFLOW_LABEL.to_owned(); labels]
}

fn bounded(value: &str) -> &str {
    &value[..value.floor_char_boundary(MAX_LABEL_VALUE_BYTES)]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn family(labels: &[&str]) -> CounterVec {
        Family::new(labels.iter().map(|label| (*label).to_owned()).collect(), ())
    }

    #[test]
    fn the_same_values_get_the_same_child() {
        let family = family(&["a", "b"]);
        family.with_label_values(&["x", "y"]).inc();
        family.with_label_values(&["x", "y"]).inc();
        family.with_label_values(&["y", "x"]).inc();
        assert_eq!(family.with_label_values(&["x", "y"]).get(), 2);
        assert_eq!(family.label_sets(), 2);
    }

    #[test]
    fn label_sets_beyond_the_cap_are_counted_as_overflow() {
        let family = family(&["host"]);
        for n in 0..MAX_LABEL_SETS + 500 {
            family.with_label_values(&[&format!("attacker-{n}.example")]).inc();
        }
        assert_eq!(family.label_sets(), MAX_LABEL_SETS + 1, "the cap, plus the overflow child");
        assert_eq!(family.with_label_values(&[OVERFLOW_LABEL]).get(), 500);
        family.with_label_values(&["attacker-0.example"]).inc();
        assert_eq!(family.with_label_values(&["attacker-0.example"]).get(), 2, "kept sets still count");
        family.with_label_values(&["one more"]).inc();
        assert_eq!(family.with_label_values(&[OVERFLOW_LABEL]).get(), 501);
    }

    #[test]
    fn the_wrong_number_of_values_is_overflow_and_long_values_are_cut() {
        let family = family(&["a"]);
        family.with_label_values(&[]).inc();
        family.with_label_values(&["x", "y"]).inc();
        assert_eq!(family.with_label_values(&[OVERFLOW_LABEL]).get(), 2);
        let long = "é".repeat(MAX_LABEL_VALUE_BYTES);
        family.with_label_values(&[&long]).inc();
        let mut out = String::new();
        family.write_samples("c", &mut out);
        let cut = "é".repeat(MAX_LABEL_VALUE_BYTES / 2);
        assert!(out.contains(&format!("c{{a=\"{cut}\"}} 1\n")), "{out}");
    }
}

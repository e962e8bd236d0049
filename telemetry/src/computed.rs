//! Families computed when scraped rather than recorded as things happen: a value that already
//! lives elsewhere (executions by phase, in the store) is read then, not mirrored into a gauge.

use std::collections::BTreeMap;

use crate::exposition::{FloatText, NameError, check_family, label_pairs, write_header, write_sample};
use crate::family::{MAX_LABEL_SETS, label_key, overflow_key};

/// One counter or gauge family with its samples, built for one scrape and handed to
/// [`Registry::render_with`](crate::Registry::render_with). Label names are fixed at construction
/// and values given per sample, as for a registered family, with the same cap on label sets.
///
/// ```
/// use roundtable_telemetry::{ComputedFamily, Registry};
///
/// let mut executions = ComputedFamily::gauge("demo_executions", "Executions by phase.", &["phase"]);
/// for phase in ["Running", "Succeeded", "Running"] {
///     executions.add(&[phase], 1.0);
/// }
/// let text = Registry::new().render_with(&[executions]);
/// assert!(text.contains("demo_executions{phase=\"Running\"} 2\n"));
/// ```
#[derive(Debug, Clone)]
pub struct ComputedFamily {
    name: String,
    help: String,
    kind: &'static str,
    label_names: Vec<String>,
    samples: BTreeMap<Vec<String>, f64>,
}

impl ComputedFamily {
    pub fn gauge(name: &str, help: &str, label_names: &[&str]) -> Self {
        Self::new(name, help, "gauge", label_names)
    }

    /// A counter read from elsewhere (it must only ever grow, across scrapes too).
    pub fn counter(name: &str, help: &str, label_names: &[&str]) -> Self {
        Self::new(name, help, "counter", label_names)
    }

    fn new(name: &str, help: &str, kind: &'static str, label_names: &[&str]) -> Self {
        Self {
            name: name.to_owned(),
            help: help.to_owned(),
            kind,
            label_names: label_names.iter().map(|label| (*label).to_owned()).collect(),
            samples: BTreeMap::new(),
        }
    }

    /// Sets the sample with these label values.
    pub fn set(&mut self, label_values: &[&str], value: f64) -> &mut Self {
        *self.slot(label_values) = value;
        self
    }

    /// Adds to the sample with these label values (from zero), to count things while iterating.
    pub fn add(&mut self, label_values: &[&str], amount: f64) -> &mut Self {
        *self.slot(label_values) += amount;
        self
    }

    pub fn name(&self) -> &str {
        &self.name
    }

    fn slot(&mut self, label_values: &[&str]) -> &mut f64 {
        let mut key = label_key(&self.label_names, label_values);
        if self.samples.len() >= MAX_LABEL_SETS && !self.samples.contains_key(&key) {
            key = overflow_key(self.label_names.len());
        }
        self.samples.entry(key).or_insert(0.0)
    }

    pub(crate) fn check(&self) -> Result<(), NameError> {
        check_family(&self.name, &self.label_names, false)
    }

    pub(crate) fn write(&self, out: &mut String) {
        write_header(out, &self.name, &self.help, self.kind);
        for (values, value) in &self.samples {
            write_sample(out, &self.name, &label_pairs(&self.label_names, values), FloatText(*value));
        }
    }
}

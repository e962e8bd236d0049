//! What a family needs of its metric type: how to make a child and how to write one out.

mod sealed {
    /// Keeps [`super::Metric`] to the three types the exposition knows.
    pub trait Sealed {}
}

pub(crate) use sealed::Sealed;

/// A metric type a [`Family`](crate::Family) holds: [`Counter`](crate::Counter),
/// [`Gauge`](crate::Gauge) or [`Histogram`](crate::Histogram). Sealed.
pub trait Metric: Sealed + Send + Sync + 'static {
    /// What every child of one family shares: nothing for counters and gauges, the bucket
    /// bounds for histograms. Registering a name again must ask for the same shape.
    type Shape: Clone + PartialEq + std::fmt::Debug + Send + Sync + 'static;

    /// The word on the `# TYPE` line.
    const TYPE: &'static str;

    /// A fresh child (zero) of a family with this shape.
    fn with_shape(shape: &Self::Shape) -> Self;

    /// Appends this child's sample lines. `labels` is the child's label pairs, already escaped
    /// and joined (`a="x",b="y"`), or empty.
    #[doc(hidden)]
    fn write_samples(&self, name: &str, labels: &str, out: &mut String);
}

//! The bodies the broker streams. Up: the agent's request body, frame by frame, counted and cut
//! when it passes the cap. Down: the provider's response body, frame by frame with an idle
//! timeout, each frame counted (and fed to the usage meter) as it passes, or a whole body (a
//! refusal, a masked error); either way the request's [`Record`] finishes at its end. A custom
//! route's 2xx stream is masked on the way; a 2xx stream the agent leaves is read on (bounded)
//! for its usage.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use hyper::body::{Body, Frame, Incoming, SizeHint};
use tokio::time::Sleep;

use crate::mask::StreamMask;
use crate::record::Record;

pub(crate) type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// The agent's body on its way up.
pub(crate) struct RequestBody {
    inner: Incoming,
    cap: u64,
    sent: u64,
    counted: Arc<AtomicU64>,
    /// Set when the cap was passed, so the failed exchange is told apart from a provider's.
    pub(crate) over_cap: Arc<AtomicBool>,
}

impl RequestBody {
    pub(crate) fn new(inner: Incoming, cap: u64, counted: Arc<AtomicU64>, over_cap: Arc<AtomicBool>) -> Self {
        Self { inner, cap, sent: 0, counted, over_cap }
    }
}

impl Body for RequestBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        match Pin::new(&mut this.inner).poll_frame(cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Some(data) = frame.data_ref() {
                    this.sent += data.len() as u64;
                    if this.sent > this.cap {
                        this.over_cap.store(true, Ordering::Relaxed);
                        return Poll::Ready(Some(Err("the request body is over the broker's cap".into())));
                    }
                    this.counted.fetch_add(data.len() as u64, Ordering::Relaxed);
                }
                Poll::Ready(Some(Ok(frame)))
            }
            Poll::Ready(Some(Err(error))) => Poll::Ready(Some(Err(error.into()))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

enum Source {
    Whole(Option<Bytes>),
    Stream { inner: Incoming, idle: Pin<Box<Sleep>>, idle_for: Duration, mask: Option<StreamMask> },
}

/// A response body on its way to the agent.
pub struct Outgoing {
    source: Source,
    record: Option<Record>,
}

impl Outgoing {
    /// No body and no request of the ledger's: the `200` that opens a tunnel.
    pub(crate) fn empty() -> Self {
        Self { source: Source::Whole(None), record: None }
    }

    pub(crate) fn whole(bytes: Bytes, record: Record) -> Self {
        Self { source: Source::Whole(Some(bytes)), record: Some(record) }
    }

    pub(crate) fn stream(inner: Incoming, idle_for: Duration, mask: Option<StreamMask>, record: Record) -> Self {
        let idle = Box::pin(tokio::time::sleep(idle_for));
        Self { source: Source::Stream { inner, idle, idle_for, mask }, record: Some(record) }
    }

    fn finish(&mut self) {
        if let Some(mut record) = self.record.take() {
            record.finish();
        }
    }
}

impl Body for Outgoing {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        let this = self.get_mut();
        let polled = match &mut this.source {
            Source::Whole(bytes) => Poll::Ready(bytes.take().map(|bytes| Ok(Frame::data(bytes)))),
            Source::Stream { inner, idle, idle_for, mask } => match Pin::new(&mut *inner).poll_frame(cx) {
                Poll::Ready(Some(Ok(frame))) => {
                    idle.as_mut().reset(tokio::time::Instant::now() + *idle_for);
                    if inner.is_end_stream()
                        && let Some(record) = &mut this.record
                    {
                        record.upstream_complete = true;
                    }
                    // Only data passes. Trailers are a second head after the body, which no
                    // mask reads: a trailers frame goes on as an empty data frame (which hyper
                    // skips), so the provider's never reach the agent, whatever the headers say
                    // and whatever `TE` the agent sent.
                    let data = frame.into_data().unwrap_or_default();
                    let data = match mask.as_mut() {
                        Some(mask) => mask.push(&data),
                        None => data,
                    };
                    Poll::Ready(Some(Ok(Frame::data(data))))
                }
                Poll::Ready(Some(Err(error))) => {
                    if let Some(record) = &mut this.record {
                        record.cut(format!("the provider's body failed: {error}"));
                    }
                    Poll::Ready(Some(Err(error.into())))
                }
                Poll::Ready(None) => match {
                    if let Some(record) = &mut this.record {
                        record.upstream_complete = true;
                    }
                    mask.as_mut()
                }
                .and_then(StreamMask::flush)
                {
                    Some(tail) => Poll::Ready(Some(Ok(Frame::data(tail)))),
                    None => Poll::Ready(None),
                },
                Poll::Pending => match idle.as_mut().poll(cx) {
                    Poll::Ready(()) => {
                        if let Some(record) = &mut this.record {
                            record.cut(format!("no byte from the provider for {idle_for:?}"));
                        }
                        Poll::Ready(Some(Err("the provider's body went idle".into())))
                    }
                    Poll::Pending => Poll::Pending,
                },
            },
        };
        match &polled {
            Poll::Ready(Some(Ok(frame))) => {
                if let (Some(data), Some(record)) = (frame.data_ref(), &mut this.record) {
                    record.passed(data);
                }
            }
            Poll::Ready(None) | Poll::Ready(Some(Err(_))) => this.finish(),
            Poll::Pending => {}
        }
        polled
    }

    fn is_end_stream(&self) -> bool {
        match &self.source {
            Source::Whole(bytes) => bytes.is_none(),
            Source::Stream { inner, mask, .. } => {
                inner.is_end_stream() && mask.as_ref().is_none_or(StreamMask::drained)
            }
        }
    }

    fn size_hint(&self) -> SizeHint {
        match &self.source {
            Source::Whole(Some(bytes)) => SizeHint::with_exact(bytes.len() as u64),
            Source::Whole(None) => SizeHint::with_exact(0),
            // A mask changes the length.
            Source::Stream { mask: Some(_), .. } => SizeHint::default(),
            Source::Stream { inner, .. } => inner.size_hint(),
        }
    }
}

impl Drop for Outgoing {
    fn drop(&mut self) {
        // An agent that leaves mid-stream does not stop the provider billing the whole answer:
        // the rest is read (bounded) for its usage before the request settles.
        if let Some(record) = self.record.take_if(|record| record.wants_usage())
            && let Source::Stream { inner, idle_for, .. } = std::mem::replace(&mut self.source, Source::Whole(None))
            && let Ok(runtime) = tokio::runtime::Handle::try_current()
        {
            runtime.spawn(drain(inner, idle_for, record));
            return;
        }
        self.finish();
    }
}

/// The longest an abandoned answer is read on for its usage.
const DRAIN_LIMIT: Duration = Duration::from_secs(300);

/// Reads what is left of a body nobody will see until its usage is known, the provider
/// stalls, or [`DRAIN_LIMIT`] passes; then settles.
async fn drain(mut inner: Incoming, idle_for: Duration, mut record: Record) {
    use http_body_util::BodyExt;
    record.cut("the agent went away mid-answer; the rest was read for its usage".to_owned());
    let deadline = tokio::time::Instant::now() + DRAIN_LIMIT;
    while !record.usage_known() {
        let Ok(frame) =
            tokio::time::timeout_at(deadline.min(tokio::time::Instant::now() + idle_for), inner.frame()).await
        else {
            break;
        };
        match frame {
            Some(Ok(frame)) => {
                if let Some(data) = frame.data_ref() {
                    record.drained(data);
                }
                if inner.is_end_stream() {
                    record.upstream_complete = true;
                }
            }
            None => record.upstream_complete = true,
            Some(Err(_)) => break,
        }
    }
    record.finish();
}

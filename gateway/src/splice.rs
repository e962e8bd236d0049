//! Carrying bytes both ways through a tunnel, each direction with a buffer that adapts to the
//! traffic: it doubles (up to 256 KiB) while reads fill it, so a bulk transfer moves in large
//! reads, and halves (down to 16 KiB) when reads come back small, so the many quiet, chatty
//! tunnels of agents do not each hold a bulk-sized buffer in the daemon. When one side ends, the
//! other side's write half is shut down and the other direction runs to its own end; when one
//! direction fails (the peer went away), the other still gets a short grace to deliver what is in
//! flight, so a refusal written just before a close is not lost to a broken pipe the other way.
//!
//! This is the copy path. Between two sockets the gateway prefers the kernel path
//! (`zero_copy.rs`), which keeps these semantics and falls back to the pieces here.

use std::time::Duration;

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

const MIN_BUFFER: usize = 16 * 1024;
const MAX_BUFFER: usize = 256 * 1024;
/// How long the surviving direction may go on after the other failed.
const DRAIN_AFTER_FAILURE: Duration = Duration::from_secs(2);

/// Copies `a → b` and `b → a` until both directions have ended; the first error, if any.
pub async fn splice<A, B>(a: A, b: B) -> std::io::Result<()>
where
    A: AsyncRead + AsyncWrite + Unpin,
    B: AsyncRead + AsyncWrite + Unpin,
{
    let (a_read, a_write) = tokio::io::split(a);
    let (b_read, b_write) = tokio::io::split(b);
    let forward = pump(a_read, b_write);
    let backward = pump(b_read, a_write);
    tokio::pin!(forward, backward);
    tokio::select! {
        first = &mut forward => finish(first, backward).await,
        first = &mut backward => finish(first, forward).await,
    }
}

/// Lets the other direction run to its end after a clean end, or for a grace after a failure.
pub(crate) async fn finish(
    first: std::io::Result<()>,
    other: impl Future<Output = std::io::Result<()>>,
) -> std::io::Result<()> {
    match first {
        Ok(()) => other.await,
        Err(error) => {
            let _ = tokio::time::timeout(DRAIN_AFTER_FAILURE, other).await;
            Err(error)
        }
    }
}

/// One direction: read, write all, adapt; at the end of input, shut down the writer.
pub(crate) async fn pump<R: AsyncRead + Unpin, W: AsyncWrite + Unpin>(mut from: R, mut to: W) -> std::io::Result<()> {
    let mut buffer = vec![0u8; MIN_BUFFER];
    loop {
        let read = from.read(&mut buffer).await?;
        if read == 0 {
            return to.shutdown().await;
        }
        to.write_all(&buffer[..read]).await?;
        resize(&mut buffer, read);
    }
}

/// Doubles a buffer that a read filled, halves one that a read used less than a quarter of.
fn resize(buffer: &mut Vec<u8>, read: usize) {
    let size = buffer.len();
    if read == size && size < MAX_BUFFER {
        buffer.resize(size * 2, 0);
    } else if read < size / 4 && size > MIN_BUFFER {
        buffer.truncate(size / 2);
        buffer.shrink_to_fit();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_grow_under_bulk_and_shrink_when_quiet() {
        let mut buffer = vec![0u8; MIN_BUFFER];
        for _ in 0..10 {
            let full = buffer.len();
            resize(&mut buffer, full);
        }
        assert_eq!(buffer.len(), MAX_BUFFER);
        for _ in 0..10 {
            resize(&mut buffer, 100);
        }
        assert_eq!(buffer.len(), MIN_BUFFER);
        assert!(buffer.capacity() < 2 * MIN_BUFFER, "the memory is given back, not just the length");
    }

    #[tokio::test]
    async fn both_directions_arrive_whole_and_an_end_is_passed_on() {
        let (client, client_side) = tokio::io::duplex(1 << 16);
        let (upstream, upstream_side) = tokio::io::duplex(1 << 16);
        let spliced = tokio::spawn(splice(client_side, upstream_side));
        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i % 251) as u8).collect();
        let (mut client_read, mut client_write) = tokio::io::split(client);
        let (mut upstream_read, mut upstream_write) = tokio::io::split(upstream);
        let sent = payload.clone();
        let up = tokio::spawn(async move {
            client_write.write_all(&sent).await.expect("write");
            client_write.shutdown().await.expect("half-close");
        });
        let mut arrived = Vec::new();
        upstream_read.read_to_end(&mut arrived).await.expect("read to the client's end");
        assert!(arrived == payload, "client → upstream differs");
        up.await.expect("writer");
        upstream_write.write_all(b"answer after the client's half-close").await.expect("write");
        upstream_write.shutdown().await.expect("close");
        let mut answer = Vec::new();
        client_read.read_to_end(&mut answer).await.expect("read");
        assert_eq!(answer, b"answer after the client's half-close");
        spliced.await.expect("task").expect("splice");
    }

    #[tokio::test]
    async fn an_answer_written_before_a_close_survives_a_broken_pipe_the_other_way() {
        let (mut client, client_side) = tokio::io::duplex(1 << 10);
        let (mut upstream, upstream_side) = tokio::io::duplex(1 << 10);
        // The upstream answers and leaves at once, before reading anything.
        upstream.write_all(b"HTTP/1.1 429 Too Many Requests\r\n\r\n").await.expect("answer");
        drop(upstream);
        // The client's request reaches the splice first: its copy upstream fails.
        client.write_all(b"CONNECT a.example.com:443 HTTP/1.1\r\n\r\n").await.expect("request");
        let spliced = tokio::spawn(splice(client_side, upstream_side));
        let mut answer = Vec::new();
        client.read_to_end(&mut answer).await.expect("read");
        assert_eq!(answer, b"HTTP/1.1 429 Too Many Requests\r\n\r\n");
        assert!(spliced.await.expect("task").is_err(), "the broken pipe is still reported");
    }
}

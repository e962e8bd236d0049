//! The kernel path of a tunnel's splice (Linux): each direction moves its bytes socket → pipe →
//! socket with `splice(2)`, so they are never copied into the gateway's memory. It keeps the copy
//! path's semantics (`splice.rs`): the same byte counts, an end passed on as a half-close, a
//! failed direction leaving the other a grace. A direction whose first splice the kernel refuses
//! (a seccomp filter without `splice`, a socket type without it) carries on by copying.

use std::future::Future;
use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::pin::Pin;
use std::task::{Context, Poll};

use rustix::io::Errno;
use rustix::pipe::{self, PipeFlags, SpliceFlags, fcntl_getpipe_size, fcntl_setpipe_size, pipe_with};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt, Interest, ReadBuf};
use tokio::net::{TcpStream, UnixStream, tcp, unix};

use crate::settings::SplicePath;

/// The capacity a pipe starts with (the kernel's default) and shrinks back to when its tunnel is
/// quiet. Below it a pipe is not worth having: an unprivileged user past
/// `fs.pipe-user-pages-soft` gets 8 KiB pipes, which would move bytes in smaller steps than the
/// copy path does.
const MIN_PIPE_CAPACITY: usize = 64 * 1024;
/// The capacity a pipe grows to under a bulk transfer (the default `fs.pipe-max-size`): each
/// splice then moves up to 1 MiB, for about a quarter less CPU per byte than in 64 KiB steps
/// (measured on loopback).
const MAX_PIPE_CAPACITY: usize = 1024 * 1024;
/// How much of a pipe's content is read per step when a direction falls back to copying.
const DRAIN_CHUNK: usize = 64 * 1024;

/// A socket the kernel can splice from and into, with tokio's readiness.
pub trait Socket: AsFd + Send + Sync {
    type ReadHalf<'a>: AsyncRead + AsRef<Self> + Unpin + Send
    where
        Self: 'a;
    type WriteHalf<'a>: AsyncWrite + AsRef<Self> + Unpin + Send
    where
        Self: 'a;

    /// Borrowed halves: the write half shuts the socket's write side down, and both halves are
    /// what a direction copies with if the kernel refuses it.
    fn halves(&mut self) -> (Self::ReadHalf<'_>, Self::WriteHalf<'_>);

    /// Runs `syscall` each time tokio's reactor reports the socket ready for `interest`, until
    /// it answers something other than `WouldBlock` (which clears the readiness). Each run counts
    /// against the task's budget, so a tunnel that never waits still lets other tunnels run.
    fn when_ready<R: Send>(
        &self,
        interest: Interest,
        syscall: impl FnMut() -> io::Result<R> + Send,
    ) -> impl Future<Output = io::Result<R>> + Send;
}

/// Tokio's TCP and Unix streams are sockets the same way.
macro_rules! socket {
    ($stream:ty, $halves:ident) => {
        impl Socket for $stream {
            type ReadHalf<'a> = $halves::ReadHalf<'a>;
            type WriteHalf<'a> = $halves::WriteHalf<'a>;

            fn halves(&mut self) -> (Self::ReadHalf<'_>, Self::WriteHalf<'_>) {
                self.split()
            }

            fn when_ready<R: Send>(
                &self,
                interest: Interest,
                syscall: impl FnMut() -> io::Result<R> + Send,
            ) -> impl Future<Output = io::Result<R>> + Send {
                self.async_io(interest, syscall)
            }
        }
    };
}

socket!(TcpStream, tcp);
socket!(UnixStream, unix);

/// A stream a tunnel's client arrives on. Sockets offer themselves to the kernel path; any other
/// stream (an in-memory one in a test) is spliced by copying.
pub trait ClientStream: AsyncRead + AsyncWrite + Unpin + Send {
    fn socket(&mut self) -> Option<ClientSocket<'_>> {
        None
    }
}

/// The socket under a client stream.
pub enum ClientSocket<'a> {
    Tcp(&'a mut TcpStream),
    Unix(&'a mut UnixStream),
}

impl ClientStream for TcpStream {
    fn socket(&mut self) -> Option<ClientSocket<'_>> {
        Some(ClientSocket::Tcp(self))
    }
}

impl ClientStream for UnixStream {
    fn socket(&mut self) -> Option<ClientSocket<'_>> {
        Some(ClientSocket::Unix(self))
    }
}

impl ClientStream for tokio::io::DuplexStream {}

/// Hears of the bytes that pass through the first socket of a splice (a tunnel's client).
pub trait Tally: Sync {
    /// Bytes read from the socket.
    fn read(&self, bytes: usize);
    /// Bytes written to the socket.
    fn written(&self, bytes: usize);
}

/// One pipe: what a direction has taken from its source and not yet given to its destination.
/// Its capacity adapts like the copy path's buffer: it doubles (up to 1 MiB) while fills use
/// most of it and halves (down to 64 KiB) when they come back small, so the kernel memory and
/// pipe quota of the many quiet tunnels stay at the default.
struct Pipe {
    read: OwnedFd,
    write: OwnedFd,
    capacity: usize,
    /// The kernel refused to grow it (the user's pipe quota): not asked again.
    growth_refused: bool,
}

impl Pipe {
    fn new() -> io::Result<Self> {
        // Non-blocking, so an empty or full pipe answers EAGAIN instead of parking a runtime thread.
        let (read, write) = pipe_with(PipeFlags::NONBLOCK | PipeFlags::CLOEXEC)?;
        let capacity = fcntl_getpipe_size(&write)?;
        if capacity < MIN_PIPE_CAPACITY {
            return Err(io::Error::other(format!(
                "a {capacity}-byte pipe (the user's pipe quota is spent) would move bytes in smaller steps than copying"
            )));
        }
        Ok(Self { read, write, capacity, growth_refused: false })
    }

    /// Resizes an empty pipe after a fill of `filled` bytes: the kernel will not shrink a pipe
    /// below its content, and an empty one has none.
    fn adapt(&mut self, filled: usize) {
        let wanted = if filled >= self.capacity / 2 && self.capacity < MAX_PIPE_CAPACITY && !self.growth_refused {
            self.capacity * 2
        } else if filled < self.capacity / 4 && self.capacity > MIN_PIPE_CAPACITY {
            self.capacity / 2
        } else {
            return;
        };
        match fcntl_setpipe_size(&self.write, wanted) {
            Ok(capacity) => self.capacity = capacity,
            // Past the quota the pipe keeps working at its size.
            Err(_) if wanted > self.capacity => self.growth_refused = true,
            Err(_) => {}
        }
    }
}

/// A pipe per direction, made before a tunnel commits to the kernel path: a tunnel that cannot
/// have them (out of descriptors, pipe quota spent) is copied instead, from its first byte.
pub struct Pipes {
    forward: Pipe,
    backward: Pipe,
}

impl Pipes {
    pub fn new() -> io::Result<Self> {
        Ok(Self { forward: Pipe::new()?, backward: Pipe::new()? })
    }

    /// The pipes for a kernel splice when `path` asks for one and they can be had; `None` means
    /// copying instead.
    pub fn when(path: SplicePath) -> Option<Self> {
        if path != SplicePath::Kernel {
            return None;
        }
        Self::new().inspect_err(|error| tracing::debug!(%error, "no pipes for a kernel splice; copying instead")).ok()
    }
}

/// Carries `a → b` and `b → a` until both directions have ended; the first error, if any.
/// `tally` hears of every byte read from `a` and written to `a`.
pub async fn splice<A: Socket, B: Socket>(a: &mut A, b: &mut B, pipes: Pipes, tally: &impl Tally) -> io::Result<()> {
    let (a_read, a_write) = a.halves();
    let (b_read, b_write) = b.halves();
    let Pipes { forward, backward } = pipes;
    let forward = direction(a_read, b_write, forward, |bytes| tally.read(bytes), |_| {});
    let backward = direction(b_read, a_write, backward, |_| {}, |bytes| tally.written(bytes));
    tokio::pin!(forward, backward);
    tokio::select! {
        first = &mut forward => crate::splice::finish(first, backward).await,
        first = &mut backward => crate::splice::finish(first, forward).await,
    }
}

/// One direction: fill the pipe from `from`, empty it into `to`, until `from` ends; then shut
/// `to`'s write side down. `taken` hears of bytes taken from `from`, `given` of bytes given to
/// `to`.
async fn direction<F, T, R, W>(
    from: R,
    mut to: W,
    mut pipe: Pipe,
    taken: impl Fn(usize),
    given: impl Fn(usize),
) -> io::Result<()>
where
    F: Socket,
    T: Socket,
    R: AsyncRead + AsRef<F> + Unpin,
    W: AsyncWrite + AsRef<T> + Unpin,
{
    let mut filled_once = false;
    let mut emptied_once = false;
    loop {
        // The pipe is empty here. Filling only an empty pipe means an EAGAIN can only come from
        // the socket, so clearing the socket's readiness on it is right.
        let mut pending = match fill(from.as_ref(), &pipe).await {
            Ok(0) => return to.shutdown().await,
            Ok(bytes) => bytes,
            Err(error) if !filled_once && refused(&error) => {
                tracing::debug!(%error, "the kernel refuses to splice from this socket; copying instead");
                return copy_instead(from, to, pipe, 0, taken, given).await;
            }
            Err(error) => return Err(error),
        };
        filled_once = true;
        taken(pending);
        let filled = pending;
        while pending > 0 {
            match empty(&pipe, to.as_ref(), pending).await {
                Ok(bytes) => {
                    emptied_once = true;
                    pending -= bytes;
                    given(bytes);
                }
                Err(error) if !emptied_once && refused(&error) => {
                    tracing::debug!(%error, "the kernel refuses to splice into this socket; copying instead");
                    return copy_instead(from, to, pipe, pending, taken, given).await;
                }
                Err(error) => return Err(error),
            }
        }
        pipe.adapt(filled);
    }
}

/// Moves what `from` has into the (empty) pipe, waiting for it to have something; 0 at its end.
async fn fill<F: Socket>(from: &F, pipe: &Pipe) -> io::Result<usize> {
    from.when_ready(Interest::READABLE, || splice_once(from, &pipe.write, pipe.capacity)).await
}

/// Moves up to `pending` bytes (all in the pipe) into `to`, waiting for it to take some.
async fn empty<T: Socket>(pipe: &Pipe, to: &T, pending: usize) -> io::Result<usize> {
    match to.when_ready(Interest::WRITABLE, || splice_once(&pipe.read, to, pending)).await? {
        // The pipe still holds bytes and its write end is open: nothing moved is no progress.
        0 => Err(io::Error::new(io::ErrorKind::WriteZero, "the socket took none of the pipe's bytes")),
        moved => Ok(moved),
    }
}

fn splice_once(from: impl AsFd, to: impl AsFd, len: usize) -> io::Result<usize> {
    // NONBLOCK keeps the pipe side from blocking; the sockets are non-blocking already. MOVE is a
    // hint that pages may be handed over instead of copied.
    Ok(pipe::splice(from, None, to, None, len, SpliceFlags::NONBLOCK | SpliceFlags::MOVE)?)
}

/// Whether an error from a direction's first splice one way means "not here" rather than a
/// broken connection: no such syscall (an old kernel, a sandbox), a seccomp filter that answers
/// EPERM, or a descriptor that does not support splicing.
fn refused(error: &io::Error) -> bool {
    matches!(Errno::from_io_error(error), Some(Errno::INVAL | Errno::NOSYS | Errno::OPNOTSUPP | Errno::PERM))
}

/// The rest of a direction the kernel would not splice: the bytes already in the pipe go first,
/// in order, then the copy path's pump. Counting goes on as before.
async fn copy_instead<R, W>(
    from: R,
    to: W,
    pipe: Pipe,
    pending: usize,
    taken: impl Fn(usize),
    given: impl Fn(usize),
) -> io::Result<()>
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut to = Counted { inner: to, count: &given };
    drain(&pipe.read, pending, &mut to).await?;
    drop(pipe);
    crate::splice::pump(Counted { inner: from, count: &taken }, to).await
}

/// Writes the `pending` bytes held in a pipe to `to` through a buffer.
async fn drain<W: AsyncWrite + Unpin>(pipe: impl AsFd, mut pending: usize, to: &mut W) -> io::Result<()> {
    let mut buffer = vec![0u8; pending.min(DRAIN_CHUNK)];
    while pending > 0 {
        let want = pending.min(buffer.len());
        // The bytes are in the pipe already, so this read never waits.
        let read = rustix::io::read(&pipe, &mut buffer[..want])?;
        if read == 0 {
            return Err(io::Error::new(io::ErrorKind::UnexpectedEof, "the pipe held fewer bytes than it was given"));
        }
        to.write_all(&buffer[..read]).await?;
        pending -= read;
    }
    Ok(())
}

/// A half whose bytes are counted as they pass (reads for a read half, writes for a write half).
struct Counted<S, C> {
    inner: S,
    count: C,
}

impl<S: AsyncRead + Unpin, C: Fn(usize) + Unpin> AsyncRead for Counted<S, C> {
    fn poll_read(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let poll = Pin::new(&mut this.inner).poll_read(cx, buf);
        if let Poll::Ready(Ok(())) = poll {
            (this.count)(buf.filled().len() - before);
        }
        poll
    }
}

impl<S: AsyncWrite + Unpin, C: Fn(usize) + Unpin> AsyncWrite for Counted<S, C> {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = self.get_mut();
        let poll = Pin::new(&mut this.inner).poll_write(cx, buf);
        if let Poll::Ready(Ok(written)) = poll {
            (this.count)(written);
        }
        poll
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};

    use tokio::io::AsyncReadExt;
    use tokio::net::TcpListener;

    use super::*;

    #[derive(Default)]
    struct Counts {
        read: AtomicUsize,
        written: AtomicUsize,
    }

    impl Tally for Counts {
        fn read(&self, bytes: usize) {
            self.read.fetch_add(bytes, Ordering::Relaxed);
        }

        fn written(&self, bytes: usize) {
            self.written.fetch_add(bytes, Ordering::Relaxed);
        }
    }

    async fn tcp_pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let address = listener.local_addr().expect("address");
        let (connected, accepted) = tokio::join!(TcpStream::connect(address), listener.accept());
        (connected.expect("connect"), accepted.expect("accept").0)
    }

    #[tokio::test]
    async fn both_directions_arrive_whole_and_counted_and_an_end_is_passed_on() {
        // The daemon's shape: a unix socket on the client side, TCP upstream.
        let (client, mut client_side) = UnixStream::pair().expect("pair");
        let (upstream, mut upstream_side) = tcp_pair().await;
        let counts = Counts::default();
        let pipes = Pipes::new().expect("pipes");
        let spliced = splice(&mut client_side, &mut upstream_side, pipes, &counts);
        let payload: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
        let peers = async {
            let (mut client_read, mut client_write) = client.into_split();
            let (mut upstream_read, mut upstream_write) = upstream.into_split();
            let send = async {
                client_write.write_all(&payload).await.expect("write");
                client_write.shutdown().await.expect("half-close");
            };
            let mut arrived = Vec::new();
            let receive = upstream_read.read_to_end(&mut arrived);
            let ((), received) = tokio::join!(send, receive);
            received.expect("read to the client's end");
            assert!(arrived == payload, "client → upstream differs");
            upstream_write.write_all(b"answer after the client's half-close").await.expect("write");
            upstream_write.shutdown().await.expect("close");
            let mut answer = Vec::new();
            client_read.read_to_end(&mut answer).await.expect("read");
            assert_eq!(answer, b"answer after the client's half-close");
        };
        let (spliced, ()) = tokio::join!(spliced, peers);
        spliced.expect("splice");
        assert_eq!(counts.read.load(Ordering::Relaxed), payload.len());
        assert_eq!(counts.written.load(Ordering::Relaxed), 36);
    }

    #[tokio::test]
    async fn an_answer_written_before_a_close_survives_a_broken_pipe_the_other_way() {
        let (mut client, mut client_side) = UnixStream::pair().expect("pair");
        let (mut upstream, mut upstream_side) = UnixStream::pair().expect("pair");
        // The upstream answers and leaves at once, before reading anything.
        upstream.write_all(b"HTTP/1.1 429 Too Many Requests\r\n\r\n").await.expect("answer");
        drop(upstream);
        // The client's request reaches the splice first: its splice upstream fails.
        client.write_all(b"CONNECT a.example.com:443 HTTP/1.1\r\n\r\n").await.expect("request");
        let counts = Counts::default();
        let pipes = Pipes::new().expect("pipes");
        let spliced = splice(&mut client_side, &mut upstream_side, pipes, &counts);
        let mut answer = Vec::new();
        let (spliced, read) = tokio::join!(spliced, client.read_to_end(&mut answer));
        read.expect("read");
        assert_eq!(answer, b"HTTP/1.1 429 Too Many Requests\r\n\r\n");
        assert!(spliced.is_err(), "the broken pipe is still reported");
    }

    #[tokio::test]
    async fn bytes_already_in_the_pipe_go_first_when_a_direction_falls_back() {
        let pipe = Pipe::new().expect("pipe");
        let held: Vec<u8> = (0..60_000u32).map(|i| (i % 251) as u8).collect();
        let mut put = 0;
        while put < held.len() {
            put += rustix::io::write(&pipe.write, &held[put..]).expect("into the pipe");
        }
        let (mut to, mut peer) = tokio::io::duplex(1 << 20);
        drain(&pipe.read, held.len(), &mut to).await.expect("drain");
        drop(to);
        let mut arrived = Vec::new();
        peer.read_to_end(&mut arrived).await.expect("read");
        assert!(arrived == held, "the pipe's bytes arrive whole and in order");
        let mut nothing = [0u8; 1];
        assert_eq!(rustix::io::read(&pipe.read, &mut nothing), Err(Errno::AGAIN), "the pipe is left empty");
    }

    #[test]
    fn only_a_refused_splice_means_copying_instead() {
        let cases = [
            (Errno::INVAL, true),
            (Errno::NOSYS, true),
            (Errno::OPNOTSUPP, true),
            (Errno::PERM, true),
            (Errno::PIPE, false),
            (Errno::CONNRESET, false),
            (Errno::AGAIN, false),
            (Errno::NOMEM, false),
        ];
        for (errno, expected) in cases {
            assert_eq!(refused(&io::Error::from(errno)), expected, "{errno:?}");
        }
        assert!(!refused(&io::Error::other("not an errno")));
    }

    #[test]
    fn pipes_grow_under_bulk_and_shrink_when_quiet() {
        let mut pipe = Pipe::new().expect("pipe");
        assert!(pipe.capacity >= MIN_PIPE_CAPACITY, "{}", pipe.capacity);
        let mut nothing = [0u8; 1];
        assert_eq!(rustix::io::read(&pipe.read, &mut nothing), Err(Errno::AGAIN), "an empty pipe does not block");
        for _ in 0..10 {
            let full = pipe.capacity;
            pipe.adapt(full);
        }
        assert_eq!(pipe.capacity, MAX_PIPE_CAPACITY);
        assert_eq!(fcntl_getpipe_size(&pipe.write), Ok(MAX_PIPE_CAPACITY), "the kernel's pipe grew too");
        // Between a half and a quarter used: left as it is.
        pipe.adapt(MAX_PIPE_CAPACITY / 3);
        assert_eq!(pipe.capacity, MAX_PIPE_CAPACITY);
        for _ in 0..10 {
            pipe.adapt(100);
        }
        assert_eq!(pipe.capacity, MIN_PIPE_CAPACITY);
        assert_eq!(fcntl_getpipe_size(&pipe.write), Ok(MIN_PIPE_CAPACITY), "the kernel's pipe shrank too");
    }
}

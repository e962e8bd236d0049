//! A scripted DNS server on UDP: each name answers from its own sequence of replies (the last
//! repeats), so a test can rebind a name between lookups or poison one answer with a private
//! address, drop the queries of one type, and count how many lookups the gateway made.

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use hickory_resolver::proto::op::{Message, ResponseCode};
use hickory_resolver::proto::rr::rdata::{A, AAAA};
use hickory_resolver::proto::rr::{RData, Record, RecordType};
use tokio::net::UdpSocket;
use tokio::task::JoinHandle;

/// One scripted answer for a name.
#[derive(Debug, Clone)]
pub enum Reply {
    /// A records for the IPv4 addresses, AAAA records for the IPv6 ones.
    Addresses(Vec<IpAddr>),
    NxDomain,
    ServFail,
    /// No reply at all: the resolver times out.
    Silence,
    /// No reply to the queries of one family (as some middleboxes drop AAAA); the other family's
    /// queries get the inner reply.
    Drop(Family, Box<Reply>),
}

/// The address family a query asks for: A (IPv4) or AAAA (IPv6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    V4,
    V6,
}

#[derive(Default)]
struct Script {
    replies: HashMap<String, Vec<Reply>>,
    /// A-query counts per name: one per lookup the gateway makes.
    lookups: HashMap<String, usize>,
}

/// The server; stopped when dropped.
pub struct FakeDns {
    address: SocketAddr,
    script: Arc<Mutex<Script>>,
    task: JoinHandle<()>,
}

impl FakeDns {
    /// Listens on `bind` (port 0 for any free port).
    pub async fn start(bind: SocketAddr) -> io::Result<Self> {
        let socket = UdpSocket::bind(bind).await?;
        let address = socket.local_addr()?;
        let script = Arc::new(Mutex::new(Script::default()));
        let task = tokio::spawn(serve(socket, script.clone()));
        Ok(Self { address, script, task })
    }

    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// Scripts `name` (without the trailing dot): lookup n gets `replies[n]`, the last repeating.
    pub fn answer(&self, name: &str, replies: Vec<Reply>) {
        if let Ok(mut script) = self.script.lock() {
            script.replies.insert(name.to_ascii_lowercase(), replies);
        }
    }

    /// How many lookups of `name` arrived.
    pub fn lookups(&self, name: &str) -> usize {
        self.script.lock().map(|script| script.lookups.get(name).copied().unwrap_or(0)).unwrap_or(0)
    }
}

impl Drop for FakeDns {
    fn drop(&mut self) {
        self.task.abort();
    }
}

async fn serve(socket: UdpSocket, script: Arc<Mutex<Script>>) {
    let mut buffer = vec![0u8; 4096];
    loop {
        let Ok((length, peer)) = socket.recv_from(&mut buffer).await else { return };
        let Ok(query) = Message::from_vec(&buffer[..length]) else { continue };
        if let Some(reply) = respond(&query, &script)
            && let Ok(bytes) = reply.to_vec()
        {
            let _ = socket.send_to(&bytes, peer).await;
        }
    }
}

fn respond(query: &Message, script: &Mutex<Script>) -> Option<Message> {
    let question = query.queries.first()?;
    let name = question.name().to_ascii().trim_end_matches('.').to_ascii_lowercase();
    let kind = question.query_type();
    let reply = {
        let mut script = script.lock().ok()?;
        let lookup = script.lookups.get(&name).copied().unwrap_or(0);
        // The AAAA query of a lookup follows its A query: both use the same scripted reply.
        let index = if kind == RecordType::A {
            *script.lookups.entry(name.clone()).or_default() += 1;
            lookup
        } else {
            lookup.saturating_sub(1)
        };
        let replies = script.replies.get(&name)?;
        replies.get(index).or(replies.last())?.clone()
    };
    let asked = if kind == RecordType::AAAA { Family::V6 } else { Family::V4 };
    let reply = match reply {
        Reply::Drop(dropped, _) if dropped == asked => return None,
        Reply::Drop(_, inner) => *inner,
        other => other,
    };
    let id = query.metadata.id;
    let op_code = query.metadata.op_code;
    let mut message = match reply {
        Reply::Silence | Reply::Drop(..) => return None,
        Reply::ServFail => Message::error_msg(id, op_code, ResponseCode::ServFail),
        Reply::NxDomain => Message::error_msg(id, op_code, ResponseCode::NXDomain),
        Reply::Addresses(addresses) => {
            let mut message = Message::response(id, op_code);
            for address in addresses {
                let data = match (address, kind) {
                    (IpAddr::V4(v4), RecordType::A) => RData::A(A(v4)),
                    (IpAddr::V6(v6), RecordType::AAAA) => RData::AAAA(AAAA(v6)),
                    _ => continue,
                };
                message.add_answer(Record::from_rdata(question.name().clone(), 0, data));
            }
            message
        }
    };
    message.metadata.recursion_available = true;
    message.add_query(question.clone());
    Some(message)
}

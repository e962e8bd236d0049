//! The capability authority: the MCP tokens agents present. Random 256-bit tokens, held only as
//! SHA-256 digests, pinned to one session and its socket, with a role, an expiry and revocation.
//! Every tool call checks the token again (constant-time), so revocation takes effect mid-stream.
//! Nothing is persisted: a controller that restarts has revoked every token it had issued.

use std::collections::HashMap;
use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use sha2::{Digest as _, Sha256};
use subtle::ConstantTimeEq as _;

/// Who holds a capability, which decides the tools it may call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Role {
    Implementer,
    Reviewer,
    /// The controller itself: the only holder of `proposal.create`. Never given to an agent.
    Supervisor,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Implementer => "implementer",
            Role::Reviewer => "reviewer",
            Role::Supervisor => "supervisor",
        }
    }
}

impl From<roundtable_specs::assignment::Role> for Role {
    fn from(role: roundtable_specs::assignment::Role) -> Self {
        match role {
            roundtable_specs::assignment::Role::Implementer => Role::Implementer,
            roundtable_specs::assignment::Role::Reviewer => Role::Reviewer,
        }
    }
}

/// A token as issued: shown once, to be put in the agent exec's environment. Its `Debug` never
/// prints it, so it cannot leak into a log by accident.
pub struct Token(String);

impl Token {
    /// The secret itself; only the launch reads it.
    pub fn reveal(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Token(<redacted>)")
    }
}

/// Why a token was refused. The messages never say whether some other session has this token.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    #[error("unknown capability for this session")]
    Unknown,
    #[error("capability revoked")]
    Revoked,
    #[error("capability expired")]
    Expired,
    #[error("capability presented on a socket it is not pinned to")]
    WrongSocket,
    #[error("no token presented")]
    Missing,
}

/// Why a token could not be issued.
#[derive(Debug, thiserror::Error)]
#[error("the system random source failed: {0}")]
pub struct IssueError(String);

struct Grant {
    digest: [u8; 32],
    socket: PathBuf,
    role: Role,
    expires: Instant,
    revoked: bool,
}

/// The authority of one controller. Shared by the execution manager (issue, revoke) and the MCP
/// endpoints (check).
#[derive(Default)]
pub struct Authority {
    grants: Mutex<HashMap<String, Grant>>,
}

fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.as_bytes()).into()
}

impl Authority {
    pub fn new() -> Self {
        Self::default()
    }

    fn grants(&self) -> std::sync::MutexGuard<'_, HashMap<String, Grant>> {
        self.grants.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// A new token for `session` on `socket`; replaces (and so revokes) any earlier one.
    pub fn issue(&self, session: &str, socket: &Path, role: Role, ttl: Duration) -> Result<Token, IssueError> {
        let mut secret = [0u8; 32];
        getrandom::fill(&mut secret).map_err(|error| IssueError(error.to_string()))?;
        let token = Token(format!("rtcap_{}", roundtable_specs::digest::hex(&secret)));
        let grant = Grant {
            digest: digest(&token.0),
            socket: socket.to_owned(),
            role,
            expires: Instant::now() + ttl,
            revoked: false,
        };
        self.grants().insert(session.to_owned(), grant);
        Ok(token)
    }

    /// The role `token` grants on `session`'s `socket`, checked in constant time.
    pub fn check(&self, token: &str, session: &str, socket: &Path) -> Result<Role, Refused> {
        if token.is_empty() {
            return Err(Refused::Missing);
        }
        let presented = digest(token);
        let grants = self.grants();
        let grant = grants.get(session).ok_or(Refused::Unknown)?;
        if !bool::from(grant.digest.ct_eq(&presented)) {
            return Err(Refused::Unknown);
        }
        if grant.revoked {
            return Err(Refused::Revoked);
        }
        if Instant::now() >= grant.expires {
            return Err(Refused::Expired);
        }
        if grant.socket != socket {
            return Err(Refused::WrongSocket);
        }
        Ok(grant.role)
    }

    /// Revokes `session`'s token; calls on connections already open fail from now on.
    pub fn revoke(&self, session: &str) {
        if let Some(grant) = self.grants().get_mut(session) {
            grant.revoked = true;
        }
    }

    /// Forgets `session` (after revocation, once its endpoint is closed).
    pub fn forget(&self, session: &str) {
        self.grants().remove(session);
    }

    /// Tokens that would be accepted now.
    pub fn live(&self) -> usize {
        let now = Instant::now();
        self.grants().values().filter(|g| !g.revoked && now < g.expires).count()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOUR: Duration = Duration::from_secs(3600);

    #[test]
    fn a_token_works_only_for_its_session_and_socket() {
        let authority = Authority::new();
        let (a_sock, b_sock) = (Path::new("/run/a/mcp.sock"), Path::new("/run/b/mcp.sock"));
        let a = authority.issue("a", a_sock, Role::Implementer, HOUR).expect("issue");
        let b = authority.issue("b", b_sock, Role::Reviewer, HOUR).expect("issue");
        assert_eq!(authority.check(a.reveal(), "a", a_sock), Ok(Role::Implementer));
        assert_eq!(authority.check(b.reveal(), "b", b_sock), Ok(Role::Reviewer));
        assert_eq!(authority.check(a.reveal(), "b", b_sock), Err(Refused::Unknown), "A's token on B's socket");
        assert_eq!(authority.check(a.reveal(), "a", b_sock), Err(Refused::WrongSocket));
        assert_eq!(authority.check("", "a", a_sock), Err(Refused::Missing));
        assert_eq!(authority.check("rtcap_00", "a", a_sock), Err(Refused::Unknown));
    }

    #[test]
    fn revoked_and_expired_tokens_are_refused() {
        let authority = Authority::new();
        let socket = Path::new("/run/a/mcp.sock");
        let token = authority.issue("a", socket, Role::Implementer, HOUR).expect("issue");
        authority.revoke("a");
        assert_eq!(authority.check(token.reveal(), "a", socket), Err(Refused::Revoked));
        let short = authority.issue("s", socket, Role::Implementer, Duration::ZERO).expect("issue");
        assert_eq!(authority.check(short.reveal(), "s", socket), Err(Refused::Expired));
        assert_eq!(authority.live(), 0);
    }

    #[test]
    fn tokens_are_random_256_bit_and_never_printed() {
        let authority = Authority::new();
        let socket = Path::new("/s");
        let one = authority.issue("a", socket, Role::Implementer, HOUR).expect("issue");
        let two = authority.issue("b", socket, Role::Implementer, HOUR).expect("issue");
        assert_ne!(one.reveal(), two.reveal());
        assert_eq!(one.reveal().len(), "rtcap_".len() + 64);
        assert!(!format!("{one:?}").contains(one.reveal()));
        // Reissuing replaces the earlier token.
        let again = authority.issue("a", socket, Role::Implementer, HOUR).expect("issue");
        assert_eq!(authority.check(one.reveal(), "a", socket), Err(Refused::Unknown));
        assert!(authority.check(again.reveal(), "a", socket).is_ok());
    }
}

//! Roundtable's state store: the one owner of every migration and table. SQLite in WAL mode
//! under the state directory; statements are kept portable to PostgreSQL.

mod admission;
pub mod audit;
mod board;
mod diagnostics;
mod events;
mod executions;
pub mod idempotency;
pub mod lock;
mod objects;
mod overrides;
mod scan;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use sqlx::sqlite::{SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous};

pub use admission::Canary;
pub use board::{Claim, Claimed, Note, paths_overlap};
pub use events::{EventRecord, NewEvent, Severity};
pub use executions::{ProposalRecord, SessionRecord, cutoff};
pub use objects::{IndexEntry, ObjectRecord, Recorded, SpecSnapshot};
pub use overrides::{AgentOverride, OverrideChange, OverrideState, StartRefused};
pub use scan::FileError;

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "state.db";

static MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");

/// What can go wrong with the state store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot prepare the state directory {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the state database {path}")]
    Open {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot migrate the state database {path}")]
    Migrate {
        path: PathBuf,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    #[error("state database query failed")]
    Query(#[from] sqlx::Error),
    #[error("stored value is corrupt: {0}")]
    Corrupt(String),
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A handle on the state database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: SqlitePool,
    path: PathBuf,
}

/// Creates the state directory, with a `.gitignore` that keeps it out of commits.
pub fn prepare_state_dir(state_dir: &Path) -> Result<()> {
    let fail = |source| Error::StateDir { path: state_dir.to_owned(), source };
    std::fs::create_dir_all(state_dir).map_err(fail)?;
    let ignore = state_dir.join(".gitignore");
    if !ignore.exists() {
        std::fs::write(&ignore, "# Roundtable's runtime state; never commit it.\n*\n").map_err(fail)?;
    }
    Ok(())
}

impl Store {
    /// Opens (creating if needed) the database in `state_dir` and applies pending migrations.
    pub async fn open(state_dir: &Path) -> Result<Self> {
        prepare_state_dir(state_dir)?;
        let path = state_dir.join(DATABASE_FILE);
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|source| Error::Open { path: path.clone(), source })?
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Normal)
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(4)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open { path: path.clone(), source })?;
        // The daemon and the CLI may open a new database at the same moment; one migrates.
        let _guard = lock::migration_guard(state_dir)
            .await
            .map_err(|source| Error::StateDir { path: state_dir.to_owned(), source })?;
        MIGRATIONS.run(&pool).await.map_err(|source| Error::Migrate { path: path.clone(), source })?;
        Ok(Self { pool, path })
    }

    /// A throw-away in-memory store with the same schema, for read-only views of a project
    /// whose state directory does not exist yet.
    pub async fn open_in_memory() -> Result<Self> {
        let path = PathBuf::from(":memory:");
        let options = SqliteConnectOptions::from_str("sqlite::memory:")
            .map_err(|source| Error::Open { path: path.clone(), source })?;
        let pool = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open { path: path.clone(), source })?;
        MIGRATIONS.run(&pool).await.map_err(|source| Error::Migrate { path: path.clone(), source })?;
        Ok(Self { pool, path })
    }

    /// Opens the store only if its database exists; never creates anything.
    pub async fn open_existing(state_dir: &Path) -> Result<Option<Self>> {
        if state_dir.join(DATABASE_FILE).is_file() { Self::open(state_dir).await.map(Some) } else { Ok(None) }
    }

    /// A transaction that takes the write lock up front (`BEGIN IMMEDIATE`): a deferred one that
    /// reads and then writes fails at once with SQLITE_BUSY_SNAPSHOT when another connection
    /// wrote in between, which no busy timeout can wait out. On PostgreSQL this is plain `BEGIN`.
    pub(crate) async fn write_transaction(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }

    /// Writes a transactionally consistent copy of the database to `file` (which must not
    /// exist) while others keep writing, then checks the copy's integrity.
    pub async fn backup_to(&self, file: &Path) -> Result<()> {
        let text = file.to_str().ok_or_else(|| Error::Corrupt(format!("{} is not UTF-8", file.display())))?;
        sqlx::query("VACUUM INTO $1").bind(text).execute(&self.pool).await?;
        {
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o600))
                .map_err(|source| Error::StateDir { path: file.to_owned(), source })?;
        }
        let options = SqliteConnectOptions::from_str("sqlite://")
            .map_err(|source| Error::Open { path: file.to_owned(), source })?
            .filename(file)
            .read_only(true);
        let copy = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open { path: file.to_owned(), source })?;
        let verdict: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&copy).await?;
        copy.close().await;
        if verdict != "ok" {
            return Err(Error::Corrupt(format!("the copy at {} fails its integrity check: {verdict}", file.display())));
        }
        Ok(())
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// Now, as RFC 3339 UTC text with a fixed nine-digit fraction, so that timestamps sort as text:
/// the portable timestamp format of every table.
pub fn now() -> String {
    at(time::OffsetDateTime::now_utc())
}

/// The time `after` from now, in the store's format (for expiries).
pub fn later(after: Duration) -> String {
    at(time::OffsetDateTime::now_utc() + after)
}

fn at(moment: time::OffsetDateTime) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");
    moment.format(FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000000000Z".into())
}

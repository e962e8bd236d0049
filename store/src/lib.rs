//! Roundtable's state store: the one owner of every migration and table. SQLite in WAL mode
//! under the state directory for one controller, or PostgreSQL for several; the statements are
//! portable and each dialect has its own migrations.

mod admission;
pub mod audit;
mod board;
mod changes;
mod decisions;
mod diagnostics;
mod events;
mod executions;
mod fingerprints;
pub mod idempotency;
pub mod leases;
pub mod lock;
mod objects;
mod observe;
mod overrides;
mod repository;
mod revision;
mod scan;
#[cfg(feature = "scratch")]
pub mod scratch;
mod source;
mod space;
pub mod state_dir;
pub mod transfer;

use std::fmt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use sqlx::AnyPool;
use sqlx::any::{AnyConnectOptions, AnyPoolOptions};

pub use board::{Claim, Claimed, Note, NoteQuota, NoteRefused, paths_overlap};
pub use changes::{Changed, Touched};
pub use decisions::{AcceptClaim, ClaimOutcome};
pub use events::{EventRecord, NewEvent, Severity};
pub use executions::{ProposalRecord, SessionRecord, cutoff};
pub use leases::{ControllerRecord, Fenced, Lease, LeaseRecord, Registration};
pub use objects::{Identity, IndexEntry, ObjectRecord, Recorded, SpecSnapshot};
pub use observe::{
    AdapterState, ExecutionReads, ExecutionState, Further, Observation, Reads, TouchedReads, TouchedState,
};
pub use overrides::{AgentOverride, OverrideChange, OverrideState, StartRefused};
pub use repository::RepositoryKey;
pub use revision::DesiredRevision;
pub use scan::FileError;
pub use source::SourceSync;
pub use space::DiskFull;
pub use state_dir::Tightened;

/// The database file inside the state directory.
pub const DATABASE_FILE: &str = "state.db";

static SQLITE_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/sqlite");
static POSTGRES_MIGRATIONS: sqlx::migrate::Migrator = sqlx::migrate!("./migrations/postgres");

/// The advisory lock every PostgreSQL write transaction takes, so that writes serialise as
/// SQLite's `BEGIN IMMEDIATE` makes them (the audit chain's read-then-append relies on it).
/// The number is arbitrary; it only has to be the same in every controller.
const WRITE_LOCK: i64 = 0x726f_756e_6474_626c;

/// What can go wrong with the state store.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("cannot prepare the state directory {path}")]
    StateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error("cannot open the state store {location}")]
    Open {
        location: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("cannot migrate the state store {location}")]
    Migrate {
        location: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
    #[error(
        "{path} is not a SQLite database (it does not begin with SQLite's header); it was left as it is: \
         restore the state from a backup (`roundtable state backup` makes one), or move the file aside to start afresh"
    )]
    NotSqlite { path: PathBuf },
    #[error(
        "{path} already exists (a file or a symbolic link); a copy of the state is only written to a new file: \
         name one that does not exist"
    )]
    TargetExists { path: PathBuf },
    #[error("state database query failed")]
    Query(#[from] sqlx::Error),
    #[error("stored value is corrupt: {0}")]
    Corrupt(String),
    #[error("an audited record does not serialise")]
    Record(#[source] serde_json::Error),
    #[error("{0}")]
    Unsupported(String),
    #[error("the operating system gave no randomness for a new object's uid: {0}")]
    Randomness(String),
    #[error("the store's desired state now comes from revision {held}, not {pinned}: this checkout is behind")]
    Behind { held: String, pinned: String },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A `--store` value that is neither `sqlite:PATH` nor a PostgreSQL URL.
#[derive(Debug, thiserror::Error)]
#[error("--store {given:?}: {why} (expected sqlite:PATH or postgres://USER@HOST/DATABASE)")]
pub struct UrlError {
    given: String,
    why: &'static str,
}

/// Where the state lives: a SQLite file, which one controller owns, or a PostgreSQL database,
/// which several controllers share.
#[derive(Clone, PartialEq, Eq)]
pub enum StoreUrl {
    Sqlite(PathBuf),
    Postgres(String),
}

impl StoreUrl {
    /// `sqlite:PATH` (the database file), or `postgres://…` / `postgresql://…` in libpq's URL
    /// form (`?host=/run/postgresql` for a Unix socket).
    pub fn parse(text: &str) -> Result<Self, UrlError> {
        let error = |why| UrlError { given: Self::redact(text), why };
        if let Some(path) = text.strip_prefix("sqlite:") {
            let path = path.strip_prefix("//").unwrap_or(path);
            if path.is_empty() {
                return Err(error("names no database file"));
            }
            return Ok(Self::Sqlite(PathBuf::from(path)));
        }
        if text.starts_with("postgres://") || text.starts_with("postgresql://") {
            url_is_valid(text).map_err(|_| error("is not a valid URL"))?;
            return Ok(Self::Postgres(text.to_owned()));
        }
        Err(error("names no known store"))
    }

    /// The default: the database file in the state directory.
    pub fn in_state_dir(state_dir: &Path) -> Self {
        Self::Sqlite(state_dir.join(DATABASE_FILE))
    }

    /// The URL as given, password included: for handing to a child process, never for display.
    pub fn expose(&self) -> String {
        match self {
            Self::Sqlite(path) => format!("sqlite:{}", path.display()),
            Self::Postgres(url) => url.clone(),
        }
    }

    /// Whether several controllers may share it.
    pub fn is_shared(&self) -> bool {
        matches!(self, Self::Postgres(_))
    }

    /// The URL with any password replaced by `***`, for messages and `status`.
    fn redact(text: &str) -> String {
        match (text.find("://"), text.find('@')) {
            (Some(scheme), Some(at)) if at > scheme => {
                let credentials = &text[scheme + 3..at];
                match credentials.split_once(':') {
                    Some((user, _)) => format!("{}{user}:***{}", &text[..scheme + 3], &text[at..]),
                    None => text.to_owned(),
                }
            }
            _ => text.to_owned(),
        }
    }
}

fn url_is_valid(text: &str) -> Result<(), sqlx::Error> {
    text.parse::<AnyConnectOptions>().map(drop)
}

/// Shown without the password.
impl fmt::Display for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Sqlite(path) => write!(f, "sqlite:{}", path.display()),
            Self::Postgres(url) => f.write_str(&Self::redact(url)),
        }
    }
}

impl fmt::Debug for StoreUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The SQL dialect behind a store; only the store's own modules look at it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Dialect {
    Sqlite,
    Postgres,
}

/// A handle on the state database; cheap to clone.
#[derive(Debug, Clone)]
pub struct Store {
    pool: AnyPool,
    dialect: Dialect,
    url: StoreUrl,
    /// The desired revision spec writes through this handle require (see
    /// [`Store::pinned_to_revision`]).
    revision_pin: Option<std::sync::Arc<str>>,
    /// Counts the writes made through this handle and its clones that `status` shows (objects,
    /// conditions, sessions, proposals, events, overrides, the source), so a view of them can
    /// wait for the next instead of polling. Writes by other processes on a shared store are not
    /// counted: such a view also refreshes on a timer.
    writes: std::sync::Arc<tokio::sync::watch::Sender<u64>>,
    /// What each counted write touched (see [`Store::changes_since`]).
    journal: std::sync::Arc<std::sync::Mutex<changes::Journal>>,
    /// Counts the round trips made through this handle and its clones (see [`Store::round_trips`]).
    round_trips: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

/// Creates the state directory (0700, with a `.gitignore` that keeps it out of commits) and
/// tightens whatever in it others can reach; what was tightened, for the caller to say.
pub fn prepare_state_dir(state_dir: &Path) -> Result<Vec<Tightened>> {
    state_dir::prepare(state_dir)
}

/// Pragmas of every SQLite connection: WAL so readers never block the writer, a busy timeout
/// so writers queue instead of failing, foreign keys on, and a page cache of 1 MiB instead of
/// SQLite's 2 MiB (the pool's 4 connections kept 8 MiB of pages at 10,000 objects, the largest
/// holder of a daemon's memory; the file's pages stay in the kernel's cache anyway).
const SQLITE_PRAGMAS: &str = "PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; \
     PRAGMA foreign_keys = ON; PRAGMA cache_size = -1024;";

impl Store {
    /// Opens (creating if needed) the database in `state_dir` and applies pending migrations.
    pub async fn open(state_dir: &Path) -> Result<Self> {
        prepare_state_dir(state_dir)?;
        Self::connect(&StoreUrl::in_state_dir(state_dir)).await
    }

    /// Opens the store at `url`, creating a SQLite file (and its folder) if missing, and applies
    /// pending migrations (on PostgreSQL under the migrator's advisory lock, so controllers
    /// starting together migrate once).
    pub async fn connect(url: &StoreUrl) -> Result<Self> {
        sqlx::any::install_default_drivers();
        let location = url.to_string();
        let open = |source| Error::Open { location: location.clone(), source };
        match url {
            StoreUrl::Sqlite(path) => {
                let folder = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
                std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                    .create(folder)
                    .map_err(|source| Error::StateDir { path: folder.to_owned(), source })?;
                // Before SQLite sees it: a file that is not a database is refused at once, and
                // never opened for writing (SQLite would retry it until the pool timed out).
                refuse_foreign_file(path)?;
                // SQLite creates the database (and its -wal and -shm files like it) by the umask.
                state_dir::create_private(path)?;
                let pool = sqlite_pool(path, 4).await.map_err(open)?;
                // The daemon and the CLI may open a new database at the same moment; one migrates.
                let _guard = lock::migration_guard(folder)
                    .await
                    .map_err(|source| Error::StateDir { path: folder.to_owned(), source })?;
                SQLITE_MIGRATIONS.run(&pool).await.map_err(|source| Error::Migrate { location, source })?;
                Ok(Self {
                    pool,
                    dialect: Dialect::Sqlite,
                    url: url.clone(),
                    revision_pin: None,
                    writes: Default::default(),
                    journal: Default::default(),
                    round_trips: Default::default(),
                })
            }
            StoreUrl::Postgres(text) => {
                let options: AnyConnectOptions = text.parse().map_err(open)?;
                let pool = AnyPoolOptions::new()
                    .max_connections(8)
                    .acquire_timeout(Duration::from_secs(10))
                    .after_release(kept_after_release)
                    .connect_with(options)
                    .await
                    .map_err(open)?;
                POSTGRES_MIGRATIONS.run(&pool).await.map_err(|source| Error::Migrate { location, source })?;
                Ok(Self {
                    pool,
                    dialect: Dialect::Postgres,
                    url: url.clone(),
                    revision_pin: None,
                    writes: Default::default(),
                    journal: Default::default(),
                    round_trips: Default::default(),
                })
            }
        }
    }

    /// Opens a new store at `url` to copy the state into: a SQLite file is created here, 0600,
    /// and anything already at its path (a symbolic link among them) is refused. A PostgreSQL
    /// database is opened as by [`Store::connect`]; [`Store::copy_into`] refuses it unless empty.
    pub async fn connect_new(url: &StoreUrl) -> Result<Self> {
        if let StoreUrl::Sqlite(path) = url {
            if let Some(folder) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::os::unix::fs::DirBuilderExt::mode(std::fs::DirBuilder::new().recursive(true), 0o700)
                    .create(folder)
                    .map_err(|source| Error::StateDir { path: folder.to_owned(), source })?;
            }
            state_dir::create_new_private(path)?;
        }
        Self::connect(url).await
    }

    /// A throw-away in-memory store with the same schema, for read-only views of a project
    /// whose state directory does not exist yet.
    pub async fn open_in_memory() -> Result<Self> {
        sqlx::any::install_default_drivers();
        let location = "sqlite::memory:".to_owned();
        let options: AnyConnectOptions =
            location.parse().map_err(|source| Error::Open { location: location.clone(), source })?;
        let pool = AnyPoolOptions::new()
            .max_connections(1)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open { location: location.clone(), source })?;
        SQLITE_MIGRATIONS.run(&pool).await.map_err(|source| Error::Migrate { location, source })?;
        Ok(Self {
            pool,
            dialect: Dialect::Sqlite,
            url: StoreUrl::Sqlite(PathBuf::from(":memory:")),
            revision_pin: None,
            writes: Default::default(),
            journal: Default::default(),
            round_trips: Default::default(),
        })
    }

    /// Opens the store only if there is one: a SQLite file that exists, or any PostgreSQL
    /// database (which is migrated if it is empty).
    pub async fn open_existing(url: &StoreUrl) -> Result<Option<Self>> {
        match url {
            StoreUrl::Sqlite(path) if !path.is_file() => Ok(None),
            _ => Self::connect(url).await.map(Some),
        }
    }

    /// Follows [`Store::wrote`]: the count changes after each write that `status` shows.
    pub fn writes(&self) -> tokio::sync::watch::Receiver<u64> {
        self.writes.subscribe()
    }

    /// How many round trips to the database this handle and its clones have made: each statement
    /// run on its own and each transaction (however many statements it holds) counts once, as each
    /// takes a connection from the pool (on SQLite, a hand-off to that connection's worker thread).
    /// A cheap counter, for tests that a quiet daemon asks nothing and for the
    /// `roundtable_store_round_trips_total` metric.
    pub fn round_trips(&self) -> u64 {
        self.round_trips.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The pool, for one round trip: every query and transaction takes it through here, so
    /// [`Store::round_trips`] counts it.
    pub(crate) fn pool(&self) -> &AnyPool {
        self.round_trips.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        &self.pool
    }

    /// What the writes counted after `after` (a count [`Store::writes`] gave, or this call)
    /// touched, and the count that covers: a caller that reads what they touched next, and
    /// passes that count to its next call, misses no write this handle and its clones make.
    pub fn changes_since(&self, after: u64) -> (u64, Changed) {
        let journal = self.journal.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let count = *self.writes.borrow();
        // A count that went back (it wraps, in theory) is read as "everything".
        let changed = if after > count { Changed::Everything } else { journal.since(after) };
        (count, changed)
    }

    /// Counts a committed write (see [`Store::writes`]) and what it touched among what `status`
    /// shows (see [`Store::changes_since`]).
    pub(crate) fn wrote(&self, touched: impl IntoIterator<Item = Touched>) {
        // Counted and journalled under one lock, so a reader never sees a count whose entries
        // are not there yet.
        let mut journal = self.journal.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut counted = 0;
        self.writes.send_modify(|count| {
            *count = count.wrapping_add(1);
            counted = *count;
        });
        journal.record(counted, touched);
    }

    /// A transaction that takes the write lock up front. On SQLite that is `BEGIN IMMEDIATE`: a
    /// deferred one that reads and then writes fails at once with SQLITE_BUSY_SNAPSHOT when
    /// another connection wrote in between, which no busy timeout can wait out. On PostgreSQL it
    /// is a transaction-scoped advisory lock, which serialises writers across controllers.
    pub(crate) async fn write_transaction(&self) -> Result<sqlx::Transaction<'static, sqlx::Any>> {
        match self.dialect {
            Dialect::Sqlite => Ok(self.pool().begin_with("BEGIN IMMEDIATE").await?),
            Dialect::Postgres => {
                let mut tx = self.pool().begin().await?;
                sqlx::query("SELECT pg_advisory_xact_lock($1)").bind(WRITE_LOCK).execute(&mut *tx).await?;
                Ok(tx)
            }
        }
    }

    /// Writes a transactionally consistent copy of the database to `file` (which must not
    /// exist; a symbolic link there is refused, never followed) while others keep writing, then
    /// checks the copy's integrity. SQLite only: a PostgreSQL store is backed up with `pg_dump`.
    pub async fn backup_to(&self, file: &Path) -> Result<()> {
        if self.dialect == Dialect::Postgres {
            return Err(Error::Unsupported(format!(
                "the store is PostgreSQL ({}): back it up with pg_dump, which gives a consistent copy while controllers write",
                self.url
            )));
        }
        let StoreUrl::Sqlite(database) = &self.url else {
            return Err(Error::Unsupported(format!("the store {} has no database file to back up", self.url)));
        };
        // Created here, 0600 and new (O_EXCL): a link planted at `file` is refused, and nothing
        // but this descriptor ever writes the copy.
        let mut created = state_dir::create_new_private(file)?;
        // SQLite's `VACUUM INTO` opens the path it is given, so it writes into the private state
        // folder (0700, where nobody else can plant a link), and the checked copy is then
        // streamed into the new file.
        let folder = database.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let staging_dir = folder.join(format!(".backup-{}-{}", std::process::id(), now()));
        std::os::unix::fs::DirBuilderExt::mode(&mut std::fs::DirBuilder::new(), 0o700)
            .create(&staging_dir)
            .map_err(|source| Error::StateDir { path: staging_dir.clone(), source })?;
        let staging = staging_dir.join(DATABASE_FILE);
        let copied = self.checked_copy(&staging).await.and_then(|()| {
            let mut source =
                std::fs::File::open(&staging).map_err(|source| Error::StateDir { path: staging.clone(), source })?;
            std::io::copy(&mut source, &mut created)
                .and_then(|_| created.sync_all())
                .map_err(|source| Error::StateDir { path: file.to_owned(), source })
        });
        let _ = std::fs::remove_dir_all(&staging_dir);
        if copied.is_err() && same_file(&created, file) {
            // Only what this call created, and only while the path still names it.
            let _ = std::fs::remove_file(file);
        }
        copied
    }

    /// `VACUUM INTO` a new file at `copy`, then its integrity check.
    async fn checked_copy(&self, copy: &Path) -> Result<()> {
        let text = copy.to_str().ok_or_else(|| Error::Corrupt(format!("{} is not UTF-8", copy.display())))?;
        sqlx::query("VACUUM INTO $1").bind(text).execute(self.pool()).await?;
        let pool = sqlite_pool_read_only(copy)
            .await
            .map_err(|source| Error::Open { location: format!("sqlite:{}", copy.display()), source })?;
        let verdict: String = sqlx::query_scalar("PRAGMA integrity_check").fetch_one(&pool).await?;
        pool.close().await;
        if verdict != "ok" {
            return Err(Error::Corrupt(format!("the copy at {} fails its integrity check: {verdict}", copy.display())));
        }
        Ok(())
    }

    /// Where the store is (a PostgreSQL URL without its password).
    pub fn url(&self) -> &StoreUrl {
        &self.url
    }

    /// Whether several controllers may share this store (and so must lease executions).
    pub fn is_shared(&self) -> bool {
        self.dialect == Dialect::Postgres
    }

    pub async fn close(&self) {
        self.pool.close().await;
    }
}

/// The first sixteen bytes of every SQLite database file.
const SQLITE_HEADER: &[u8; 16] = b"SQLite format 3\0";

/// Refuses a file at `path` that is neither empty (a database about to be made) nor missing nor
/// a SQLite database. It is only read.
fn refuse_foreign_file(path: &Path) -> Result<()> {
    use std::io::Read as _;
    let file = match std::fs::File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(source) => return Err(Error::StateDir { path: path.to_owned(), source }),
    };
    let mut head = Vec::with_capacity(SQLITE_HEADER.len());
    file.take(SQLITE_HEADER.len() as u64)
        .read_to_end(&mut head)
        .map_err(|source| Error::StateDir { path: path.to_owned(), source })?;
    if head.is_empty() || head == SQLITE_HEADER { Ok(()) } else { Err(Error::NotSqlite { path: path.to_owned() }) }
}

/// Whether `path` still names the file `opened` was opened as.
fn same_file(opened: &std::fs::File, path: &Path) -> bool {
    use std::os::unix::fs::MetadataExt as _;
    match (opened.metadata(), std::fs::symlink_metadata(path)) {
        (Ok(a), Ok(b)) => a.dev() == b.dev() && a.ino() == b.ino(),
        _ => false,
    }
}

/// A SQLite URL for `path` (made absolute; the URL form has no relative paths), opened in
/// `mode` (`rwc` creates the file, `ro` only reads).
fn sqlite_url(path: &Path, mode: &str) -> Result<AnyConnectOptions, sqlx::Error> {
    let path = std::path::absolute(path)?;
    let mut options: AnyConnectOptions = "sqlite:///".parse()?;
    options.database_url.set_path(&path.to_string_lossy());
    options.database_url.set_query(Some(&format!("mode={mode}")));
    Ok(options)
}

async fn sqlite_pool(path: &Path, connections: u32) -> Result<AnyPool, sqlx::Error> {
    AnyPoolOptions::new()
        .max_connections(connections)
        .after_connect(|connection, _| {
            Box::pin(async move {
                sqlx::raw_sql(SQLITE_PRAGMAS).execute(connection).await?;
                Ok(())
            })
        })
        .after_release(kept_after_release)
        .connect_with(sqlite_url(path, "rwc")?)
        .await
}

/// Whether a connection that comes back to the pool is kept: not when it is still inside a
/// transaction, which happens when its commit failed (SQLite rolls back by itself on a full
/// disk, after which sqlx's own rollback fails and it still counts the transaction open). Such a
/// connection is closed, not reused: every later transaction on it would fail with "begin at
/// non-zero transaction depth".
fn kept_after_release(
    connection: &mut sqlx::AnyConnection,
    _: sqlx::pool::PoolConnectionMetadata,
) -> std::pin::Pin<Box<dyn Future<Output = Result<bool, sqlx::Error>> + Send + '_>> {
    let open = sqlx::Connection::is_in_transaction(connection);
    if open {
        tracing::warn!("a store connection came back inside a transaction (a failed commit): closing it");
    }
    Box::pin(std::future::ready(Ok(!open)))
}

/// Calls `each` with every row `query` returns, one at a time as it is read: a large table is
/// never held twice (sqlx's `fetch_all` keeps every row's raw values until the last is read, which
/// at 10,000 objects was the largest allocation of a status refresh).
async fn for_each_row<'q>(
    pool: &AnyPool,
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    mut each: impl FnMut(&sqlx::any::AnyRow) -> Result<()>,
) -> Result<()> {
    let mut rows = query.fetch(pool);
    while let Some(row) = futures::TryStreamExt::try_next(&mut rows).await? {
        each(&row)?;
    }
    Ok(())
}

/// Every row `query` returns, mapped by `map` as it is read (see [`for_each_row`]).
async fn fetch_mapped<'q, T>(
    pool: &AnyPool,
    query: sqlx::query::Query<'q, sqlx::Any, sqlx::any::AnyArguments>,
    mut map: impl FnMut(&sqlx::any::AnyRow) -> Result<T>,
) -> Result<Vec<T>> {
    let mut out = Vec::new();
    for_each_row(pool, query, |row| {
        out.push(map(row)?);
        Ok(())
    })
    .await?;
    Ok(out)
}

async fn sqlite_pool_read_only(path: &Path) -> Result<AnyPool, sqlx::Error> {
    AnyPoolOptions::new().max_connections(1).connect_with(sqlite_url(path, "ro")?).await
}

/// `HEAD VALUES ($1, …), (…)` for `rows` rows of `columns` values each: numbered placeholders,
/// which both dialects read (sqlx's query builder writes `?` for the Any driver, which
/// PostgreSQL does not).
pub(crate) fn values_insert(head: &str, columns: usize, rows: usize) -> String {
    use std::fmt::Write as _;
    let mut sql = format!("{head} VALUES ");
    for row in 0..rows {
        sql.push_str(if row == 0 { "(" } else { ", (" });
        for column in 0..columns {
            let _ = write!(sql, "{}${}", if column == 0 { "" } else { ", " }, row * columns + column + 1);
        }
        sql.push(')');
    }
    sql
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

/// How long ago `at` (a timestamp of the store's, or any RFC 3339 time) was; `None` when it does not
/// read, zero when it is in the future (a clock stepped back).
pub fn since(at: &str) -> Option<Duration> {
    let then = time::OffsetDateTime::parse(at, &time::format_description::well_known::Rfc3339).ok()?;
    Some((time::OffsetDateTime::now_utc() - then).try_into().unwrap_or(Duration::ZERO))
}

fn at(moment: time::OffsetDateTime) -> String {
    const FORMAT: &[time::format_description::BorrowedFormatItem<'_>] =
        time::macros::format_description!("[year]-[month]-[day]T[hour]:[minute]:[second].[subsecond digits:9]Z");
    moment.format(FORMAT).unwrap_or_else(|_| "1970-01-01T00:00:00.000000000Z".into())
}

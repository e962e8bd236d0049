//! The store contract suite runs each test on every backend: a SQLite file always, and a fresh
//! database in a scratch PostgreSQL cluster whenever one can be started (CI requires it).

#![allow(dead_code)]

use roundtable_store::scratch::Cluster;
use roundtable_store::{Store, StoreUrl};

/// One backend's store, with the folder its SQLite file (or the audit key) lives in.
pub struct Scratch {
    pub store: Store,
    pub url: StoreUrl,
    pub dir: tempfile::TempDir,
    pub backend: Backend,
}

#[derive(Debug, Clone, Copy)]
pub enum Backend {
    Sqlite,
    Postgres(&'static Cluster),
}

/// SQLite, then PostgreSQL when a scratch cluster runs.
pub fn backends() -> Vec<Backend> {
    let mut all = vec![Backend::Sqlite];
    all.extend(roundtable_store::scratch::cluster().map(Backend::Postgres));
    all
}

impl Backend {
    /// A new, empty, migrated store.
    pub async fn fresh(self) -> Scratch {
        let dir = tempfile::tempdir().expect("tempdir");
        let url = self.new_url(dir.path()).await;
        let store = Store::connect(&url).await.expect("open the store");
        Scratch { store, url, dir, backend: self }
    }

    /// The URL of another empty store of this backend.
    pub async fn new_url(self, dir: &std::path::Path) -> StoreUrl {
        match self {
            Self::Sqlite => StoreUrl::Sqlite(dir.join(format!("state-{}.db", fastrand()))),
            Self::Postgres(cluster) => cluster.database().await,
        }
    }
}

fn fastrand() -> u128 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_nanos()).unwrap_or(0)
}

/// A fresh store of every backend.
pub async fn each_store() -> Vec<Scratch> {
    let mut all = Vec::new();
    for backend in backends() {
        all.push(backend.fresh().await);
    }
    all
}

impl Scratch {
    /// Runs raw SQL on the store's database over a connection of its own, as an attacker with
    /// access to the database would.
    pub async fn tamper(&self, sql: &'static str) {
        sqlx::any::install_default_drivers();
        let url = match &self.url {
            StoreUrl::Sqlite(path) => format!("sqlite://{}", path.display()),
            StoreUrl::Postgres(url) => url.clone(),
        };
        let pool = sqlx::AnyPool::connect(&url).await.expect("connect");
        sqlx::query(sql).execute(&pool).await.expect(sql);
        pool.close().await;
    }
}

//! File-watch hints: filesystem events under a directory, debounced, as "something changed"
//! signals. Events are hints, never the truth: a rescan decides what changed, and a watcher
//! overflow asks for one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use notify::{Event, RecursiveMode, Watcher as _};
use tokio::sync::mpsc;

/// What the watcher reports.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hint {
    /// These paths changed (created, modified, removed or renamed); rescan them.
    Changed(Vec<PathBuf>),
    /// Events were lost (overflow) or could not be read; rescan everything.
    Rescan,
}

impl Hint {
    /// Folds a later hint of the same burst into this one.
    fn merge(self, later: Hint) -> Hint {
        match (self, later) {
            (Hint::Changed(mut paths), Hint::Changed(more)) => {
                for path in more {
                    if !paths.contains(&path) {
                        paths.push(path);
                    }
                }
                Hint::Changed(paths)
            }
            _ => Hint::Rescan,
        }
    }
}

/// What can go wrong starting the watcher.
#[derive(Debug, thiserror::Error)]
#[error("cannot watch {path}")]
pub struct WatchError {
    path: PathBuf,
    #[source]
    source: notify::Error,
}

/// A running watcher; dropping it stops the watch.
pub struct SpecWatcher {
    _watcher: notify::RecommendedWatcher,
}

fn ignored(path: &Path, ignored_dirs: &[PathBuf]) -> bool {
    ignored_dirs.iter().any(|dir| path.starts_with(dir))
}

/// Watches `dir` recursively, ignoring events under `ignored_dirs`, and sends one hint per burst
/// of events (a burst ends after `debounce` of quiet).
pub fn watch(
    dir: &Path,
    ignored_dirs: Vec<PathBuf>,
    debounce: Duration,
) -> Result<(SpecWatcher, mpsc::Receiver<Hint>), WatchError> {
    let (raw_tx, mut raw_rx) = mpsc::unbounded_channel::<Hint>();
    let canonical_ignored: Vec<PathBuf> = ignored_dirs
        .iter()
        .map(|d| d.canonicalize().unwrap_or_else(|_| d.clone()))
        .chain(ignored_dirs.iter().cloned())
        .collect();
    let mut watcher = notify::recommended_watcher(move |event: notify::Result<Event>| {
        let hint = match event {
            Ok(event) if event.need_rescan() => Some(Hint::Rescan),
            // Reads (our own scans among them) change nothing; reacting to them would loop.
            Ok(event) if matches!(event.kind, notify::EventKind::Access(_)) => None,
            Ok(event) if event.paths.iter().all(|p| ignored(p, &canonical_ignored)) && !event.paths.is_empty() => None,
            Ok(event) if event.paths.is_empty() => Some(Hint::Rescan),
            Ok(event) => {
                Some(Hint::Changed(event.paths.into_iter().filter(|p| !ignored(p, &canonical_ignored)).collect()))
            }
            Err(_) => Some(Hint::Rescan),
        };
        if let Some(hint) = hint {
            let _ = raw_tx.send(hint);
        }
    })
    .map_err(|source| WatchError { path: dir.to_owned(), source })?;
    watcher.watch(dir, RecursiveMode::Recursive).map_err(|source| WatchError { path: dir.to_owned(), source })?;

    let (tx, rx) = mpsc::channel(16);
    tokio::spawn(async move {
        while let Some(first) = raw_rx.recv().await {
            let mut hint = first;
            // Collect the burst until it goes quiet.
            while let Ok(Some(next)) = tokio::time::timeout(debounce, raw_rx.recv()).await {
                hint = hint.merge(next);
            }
            if tx.send(hint).await.is_err() {
                return;
            }
        }
    });
    Ok((SpecWatcher { _watcher: watcher }, rx))
}

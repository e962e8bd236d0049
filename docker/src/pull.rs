//! Pulling an image (`POST /images/create`) and removing what a pull named: the reference handed
//! over whole and never name-only (a name with no tag or digest would pull every tag), the
//! registry's credentials from the Docker config (`credentials.rs`), and the engine's progress
//! lines summed into one [`PullProgress`]. Bounding the pull in time and checking what it got
//! are the caller's (the Adapter's pulls, `reconcilers/src/pull.rs`): this module trusts nothing
//! it is told, and decides nothing.

use std::collections::BTreeMap;

use bollard::models::CreateImageInfo;
use bollard::query_parameters::{CreateImageOptionsBuilder, RemoveImageOptionsBuilder};
use futures::StreamExt as _;
use roundtable_session_runtime::{PullProgress, RuntimeError};
use roundtable_specs::names::ImageRef;
use tokio::sync::watch;

use crate::engine::Engine;
use crate::errors::{already_gone, engine_error};

/// Pulls `reference` into the engine, sending the progress to `progress` as it changes.
pub(crate) async fn pull(
    engine: &Engine,
    reference: &str,
    progress: watch::Sender<PullProgress>,
) -> Result<(), RuntimeError> {
    let parsed: ImageRef = reference.parse().map_err(|error: roundtable_specs::names::NameError| {
        RuntimeError::Protocol { step: "pull", detail: error.0 }
    })?;
    let (Some(registry), Some(from_image)) = (parsed.registry(), parsed.pullable()) else {
        return Err(RuntimeError::Unsupported { what: "pull a bare image ID (only its own engine has it)" });
    };
    // The whole reference as `fromImage`, as Podman wants it; a tag the spec left out is
    // `latest`, said out loud.
    let options = CreateImageOptionsBuilder::default().from_image(&from_image).build();
    let credentials = crate::credentials::for_registry(registry);
    tracing::info!(reference, registry, with_credentials = credentials.is_some(), "pulling an image");
    let mut lines = engine.docker().create_image(Some(options), None, credentials);
    let mut layers = Layers::default();
    while let Some(line) = lines.next().await {
        let line = line.map_err(engine_error("pull the image"))?;
        if layers.read(&line) {
            progress.send_replace(layers.progress());
        }
    }
    Ok(())
}

/// Removes the name `reference`: the engine deletes the image too only when nothing else names
/// it and no container uses it (no `force`), and keeps its parents' layers that others share.
pub(crate) async fn remove(engine: &Engine, reference: &str) -> Result<(), RuntimeError> {
    let options = RemoveImageOptionsBuilder::default().force(false).noprune(false).build();
    match engine.docker().remove_image(reference, Some(options), None).await {
        Ok(_) => Ok(()),
        Err(error) if already_gone(&error) => Ok(()),
        Err(error) => Err(engine_error("remove the pulled image")(error)),
    }
}

/// One layer a pull downloads.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Layer {
    current: u64,
    total: u64,
    done: bool,
}

/// The layers of one pull, by the short ID the engine's progress lines name them by.
#[derive(Debug, Default)]
struct Layers(BTreeMap<String, Layer>);

impl Layers {
    /// Reads one progress line; whether it changed the progress.
    fn read(&mut self, line: &CreateImageInfo) -> bool {
        let (Some(id), Some(status)) = (&line.id, &line.status) else { return false };
        let before = self.progress();
        match status.as_str() {
            // The engine has it: nothing is downloaded for it.
            "Already exists" => {
                self.0.remove(id);
            }
            "Pulling fs layer" | "Waiting" => {
                self.0.entry(id.clone()).or_default();
            }
            "Downloading" => {
                let layer = self.0.entry(id.clone()).or_default();
                let detail = line.progress_detail.as_ref();
                let number = |n: Option<i64>| n.and_then(|n| u64::try_from(n).ok());
                if let Some(total) = detail.and_then(|d| number(d.total)) {
                    layer.total = total;
                }
                if let Some(current) = detail.and_then(|d| number(d.current)) {
                    layer.current = current;
                }
            }
            // Downloaded (extracting reports its own counts, which are not the download's).
            "Verifying Checksum" | "Download complete" | "Extracting" | "Pull complete" => {
                if let Some(layer) = self.0.get_mut(id) {
                    layer.done = true;
                    layer.current = layer.total;
                }
            }
            _ => {}
        }
        self.progress() != before
    }

    fn progress(&self) -> PullProgress {
        let layers = self.0.values();
        PullProgress {
            current: layers.clone().map(|l| l.current.min(l.total)).sum(),
            total: layers.clone().map(|l| l.total).sum(),
            layers_done: u32::try_from(layers.clone().filter(|l| l.done).count()).unwrap_or(u32::MAX),
            layers: u32::try_from(self.0.len()).unwrap_or(u32::MAX),
        }
    }
}

#[cfg(test)]
mod tests {
    use bollard::models::ProgressDetail;

    use super::*;

    fn line(id: &str, status: &str, current: Option<i64>, total: Option<i64>) -> CreateImageInfo {
        CreateImageInfo {
            id: Some(id.into()),
            status: Some(status.into()),
            progress_detail: Some(ProgressDetail { current, total }),
            ..CreateImageInfo::default()
        }
    }

    #[test]
    fn progress_counts_downloaded_bytes_of_the_layers_the_engine_lacks() {
        let mut layers = Layers::default();
        let lines = [
            line("aaaa", "Already exists", None, None),
            line("bbbb", "Pulling fs layer", None, None),
            line("cccc", "Waiting", None, None),
            line("bbbb", "Downloading", Some(1 << 20), Some(4 << 20)),
            line("cccc", "Downloading", Some(0), Some(2 << 20)),
            line("bbbb", "Download complete", None, None),
            // Extraction counts its own bytes, not the download's.
            line("bbbb", "Extracting", Some(10), Some(4 << 20)),
            line("cccc", "Downloading", Some(1 << 20), Some(2 << 20)),
        ];
        for l in &lines {
            layers.read(l);
        }
        let progress = layers.progress();
        assert_eq!(progress, PullProgress { current: 5 << 20, total: 6 << 20, layers_done: 1, layers: 2 });
        assert_eq!(progress.to_string(), "5.0 of 6.0 MiB");
        assert!(!layers.read(&CreateImageInfo { status: Some("Digest: sha256:…".into()), ..Default::default() }));
        assert!(!layers.read(&line("cccc", "Downloading", Some(-5), Some(-1))), "nonsense is ignored");
    }
}

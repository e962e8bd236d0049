//! The engine's event stream (`GET /events`) as [`EngineHint`]s: image tag moves and managed
//! containers ending. One long request; when it is cut (the engine restarted, the connection
//! dropped) it is made again with backoff once the engine answers a ping, and the stream says
//! [`EngineHint::Resumed`], since what happened in between was not reported.

use std::collections::HashMap;
use std::time::Duration;

use bollard::Docker;
use bollard::models::{EventMessage, EventMessageTypeEnum};
use bollard::query_parameters::EventsOptionsBuilder;
use futures::StreamExt as _;
use futures::stream::BoxStream;
use roundtable_session_runtime::EngineHint;
use roundtable_session_runtime::labels::{ASSIGNMENT, MANAGED_BY, PROJECT};

/// Image actions that can move what a reference resolves to, or remove it.
const IMAGE_ACTIONS: [&str; 6] = ["tag", "untag", "delete", "import", "load", "pull"];
/// Container actions that end a session's container.
const CONTAINER_ACTIONS: [&str; 3] = ["die", "oom", "destroy"];
const FIRST_BACKOFF: Duration = Duration::from_millis(500);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// The event request lasts as long as the engine runs; the client's usual request timeout would
/// cut it every two minutes.
const STREAM_TIMEOUT: Duration = Duration::from_secs(365 * 24 * 3600);

type Events = BoxStream<'static, Result<EventMessage, bollard::errors::Error>>;

struct Subscription {
    docker: Docker,
    events: Option<Events>,
    backoff: Duration,
    /// Whether no subscription has been tried yet (the first is made at once).
    first: bool,
    /// Whether events may have been missed since the last subscription was made.
    missed: bool,
}

/// The hints of the engine `docker` reaches, for as long as the stream is polled.
pub(crate) fn hints(docker: &Docker) -> BoxStream<'static, EngineHint> {
    let state = Subscription {
        docker: docker.clone().with_timeout(STREAM_TIMEOUT),
        events: None,
        backoff: FIRST_BACKOFF,
        first: true,
        missed: false,
    };
    futures::stream::unfold(state, next).boxed()
}

async fn next(mut state: Subscription) -> Option<(EngineHint, Subscription)> {
    loop {
        let Some(events) = state.events.as_mut() else {
            if !state.first {
                tokio::time::sleep(state.backoff).await;
                state.backoff = (state.backoff * 2).min(MAX_BACKOFF);
            }
            state.first = false;
            match state.docker.ping().await {
                Ok(_) => {
                    state.events = Some(subscribe(&state.docker));
                    if std::mem::take(&mut state.missed) {
                        tracing::info!("engine event stream resumed; what happened meanwhile is looked at again");
                        return Some((EngineHint::Resumed, state));
                    }
                }
                Err(error) => {
                    tracing::debug!(%error, backoff = ?state.backoff, "engine event stream: the engine does not answer");
                    state.missed = true;
                }
            }
            continue;
        };
        match events.next().await {
            Some(Ok(event)) => {
                state.backoff = FIRST_BACKOFF;
                if let Some(hint) = hint(&event) {
                    return Some((hint, state));
                }
            }
            Some(Err(error)) => {
                tracing::warn!(%error, "engine event stream cut; subscribing again");
                (state.events, state.missed) = (None, true);
            }
            None => {
                tracing::warn!("engine event stream ended; subscribing again");
                (state.events, state.missed) = (None, true);
            }
        }
    }
}

fn subscribe(docker: &Docker) -> Events {
    let actions: Vec<&str> = IMAGE_ACTIONS.iter().chain(&CONTAINER_ACTIONS).copied().collect();
    // Container labels are filtered here, not by the engine: a `label` filter would drop every
    // image event, which carries none.
    let filters = HashMap::from([("type", vec!["image", "container"]), ("event", actions)]);
    let options = EventsOptionsBuilder::default().filters(&filters).build();
    docker.events(Some(options)).boxed()
}

/// The hint an event gives, if any.
fn hint(event: &EventMessage) -> Option<EngineHint> {
    let action = event.action.as_deref()?;
    let actor = event.actor.as_ref();
    let attributes = actor.and_then(|a| a.attributes.as_ref());
    match event.typ? {
        EventMessageTypeEnum::IMAGE if IMAGE_ACTIONS.contains(&action) => {
            let mut names: Vec<String> = actor.and_then(|a| a.id.clone()).into_iter().collect();
            if let Some(name) = attributes.and_then(|a| a.get("name")) {
                names.push(name.clone());
            }
            names.retain(|name| !name.is_empty());
            names.dedup();
            Some(EngineHint::Image { names })
        }
        EventMessageTypeEnum::CONTAINER if CONTAINER_ACTIONS.contains(&action) => {
            let attributes = attributes?;
            if attributes.get(MANAGED_BY).map(String::as_str) != Some("roundtable") {
                return None;
            }
            Some(EngineHint::Container {
                project: attributes.get(PROJECT)?.clone(),
                assignment: attributes.get(ASSIGNMENT).cloned(),
            })
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use bollard::models::EventActor;

    use super::*;

    fn event(typ: EventMessageTypeEnum, action: &str, id: &str, attributes: &[(&str, &str)]) -> EventMessage {
        EventMessage {
            typ: Some(typ),
            action: Some(action.into()),
            actor: Some(EventActor {
                id: Some(id.into()),
                attributes: Some(attributes.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()),
            }),
            ..EventMessage::default()
        }
    }

    #[test]
    fn image_events_name_the_image_and_managed_container_endings_their_assignment() {
        let tagged =
            event(EventMessageTypeEnum::IMAGE, "tag", "sha256:ab", &[("name", "roundtable-test/agent:latest")]);
        assert_eq!(
            hint(&tagged),
            Some(EngineHint::Image { names: vec!["sha256:ab".into(), "roundtable-test/agent:latest".into()] })
        );
        let deleted = event(EventMessageTypeEnum::IMAGE, "delete", "sha256:ab", &[("name", "sha256:ab")]);
        assert_eq!(hint(&deleted), Some(EngineHint::Image { names: vec!["sha256:ab".into()] }));
        assert_eq!(hint(&event(EventMessageTypeEnum::IMAGE, "save", "sha256:ab", &[])), None);

        let ours = [(MANAGED_BY, "roundtable"), (PROJECT, "p1"), (ASSIGNMENT, "fix-bug")];
        let died = event(EventMessageTypeEnum::CONTAINER, "die", "c1", &ours);
        assert_eq!(
            hint(&died),
            Some(EngineHint::Container { project: "p1".into(), assignment: Some("fix-bug".into()) })
        );
        let probe =
            event(EventMessageTypeEnum::CONTAINER, "destroy", "c2", &[(MANAGED_BY, "roundtable"), (PROJECT, "p1")]);
        assert_eq!(hint(&probe), Some(EngineHint::Container { project: "p1".into(), assignment: None }));
        assert_eq!(hint(&event(EventMessageTypeEnum::CONTAINER, "die", "c3", &[(PROJECT, "p1")])), None, "not ours");
        assert_eq!(hint(&event(EventMessageTypeEnum::CONTAINER, "start", "c1", &ours)), None);
    }
}

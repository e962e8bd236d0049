//! `status --watch` and `events --watch`: a table (or list), then each change as it comes, the
//! way `kubectl get -w` prints them. From the running daemon's watch streams when one runs here;
//! `status --watch` without one recomputes every 2 s and prints what changed.

use std::io::Write as _;
use std::process::ExitCode;
use std::time::Duration;

use roundtable_api::client::{self, EventStream};
use roundtable_api::status_view::{self, ChangeType};
use roundtable_specs::output::{EventItem, ObjectStatus};
use serde::Serialize;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::commands::status::{DEFAULT_RETENTION, HEADERS, cells, daemon_message};
use crate::render;

/// How often `status --watch` recomputes without a daemon.
const LOCAL_PERIOD: Duration = Duration::from_secs(2);

/// One change, as `-o json` prints it (`kubectl get -w --output-watch-events`).
#[derive(Serialize)]
struct Watched<'a, T> {
    #[serde(rename = "type")]
    type_: &'a str,
    object: &'a T,
}

/// Prints a watch: the first rows as one table, then a line per change in the same columns.
struct Printer {
    format: Format,
    columns: Option<render::Columns>,
}

impl Printer {
    fn first(&mut self, rows: &[ObjectStatus]) -> std::io::Result<()> {
        if matches!(self.format, Format::Text | Format::Wide) {
            let table: Vec<Vec<String>> = rows.iter().map(cells).collect();
            let columns = render::Columns::fitting(&HEADERS, &table);
            print!("{}", columns.render(&HEADERS, &table));
            self.columns = Some(columns);
        } else {
            for row in rows {
                self.change(ChangeType::Added, row)?;
            }
        }
        std::io::stdout().flush()
    }

    fn change(&mut self, type_: ChangeType, row: &ObjectStatus) -> std::io::Result<()> {
        match self.format {
            Format::Text | Format::Wide => {
                let mut cells = cells(row);
                if type_ == ChangeType::Deleted
                    && let Some(message) = cells.last_mut()
                {
                    *message = "(no longer listed)".into();
                }
                let columns = self.columns.get_or_insert_with(|| render::Columns::fitting(&HEADERS, &[]));
                print!("{}", columns.line(&cells));
            }
            format => print_change(format, type_.as_str(), row)?,
        }
        std::io::stdout().flush()
    }
}

/// One change as a JSON line or a YAML document.
fn print_change<T: Serialize>(format: Format, type_: &str, object: &T) -> std::io::Result<()> {
    let watched = Watched { type_, object };
    match format {
        // A stream of YAML documents, each begun by `---`.
        Format::Yaml => print!("---\n{}", render::document(Format::Yaml, &watched).map_err(std::io::Error::other)?),
        // Drawn from the object that changed, as `kubectl get -w -o name` prints it.
        Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, object).map_err(std::io::Error::other)?)
        }
        _ => println!("{}", serde_json::to_string(&watched).map_err(std::io::Error::other)?),
    }
    std::io::stdout().flush()
}

/// The daemon's stream at `path`, when a daemon runs here and answers; `None` without one.
async fn daemon_stream(global: &Global, path: &str) -> anyhow::Result<Option<EventStream>> {
    let state_dir = global.state_dir();
    if roundtable_store::lock::holder(&state_dir).is_none() {
        return Ok(None);
    }
    match client::stream(&state_dir, path).await {
        Ok(Ok(stream)) => Ok(Some(stream)),
        Ok(Err(answer)) => anyhow::bail!("the daemon answered {}: {}", answer.status, daemon_message(&answer.body)),
        Err(error) if error.no_daemon() => Ok(None),
        Err(error) => Err(error.into()),
    }
}

pub async fn status(global: &Global, format: Format, retention: Option<Duration>) -> anyhow::Result<ExitCode> {
    let mut printer = Printer { format, columns: None };
    if retention.is_none()
        && let Some(stream) = daemon_stream(global, "/v1/status?watch=true").await?
    {
        return status_from_daemon(stream, &mut printer).await;
    }
    status_here(global, &mut printer, retention.unwrap_or(DEFAULT_RETENTION)).await
}

async fn status_from_daemon(mut stream: EventStream, printer: &mut Printer) -> anyhow::Result<ExitCode> {
    let mut first: Option<Vec<ObjectStatus>> = Some(Vec::new());
    while let Some(event) = stream.next().await? {
        let type_ = match event.event.as_str() {
            "ADDED" => ChangeType::Added,
            "MODIFIED" => ChangeType::Modified,
            "DELETED" => ChangeType::Deleted,
            "BOOKMARK" => {
                if let Some(rows) = first.take() {
                    printer.first(&rows)?;
                }
                continue;
            }
            "ERROR" => anyhow::bail!("the daemon ended the watch: {}", daemon_message(event.data.as_bytes())),
            _ => continue,
        };
        let row: ObjectStatus = serde_json::from_str(&event.data)
            .map_err(|error| anyhow::anyhow!("the daemon sent a row that is not a status row: {error}"))?;
        match &mut first {
            Some(rows) => rows.push(row),
            None => printer.change(type_, &row)?,
        }
    }
    eprintln!("roundtable: the daemon stopped; the watch ended");
    Ok(ExitCode::from(1))
}

async fn status_here(global: &Global, printer: &mut Printer, retention: Duration) -> anyhow::Result<ExitCode> {
    let service = open_for_reading(global).await?;
    let mut version = 0;
    let (mut rows, _) = status_view::diff(&[], service.status(retention).await?, &mut version);
    let first: Vec<ObjectStatus> = rows.iter().map(|row| row.status()).collect::<Result<_, _>>()?;
    printer.first(&first)?;
    loop {
        tokio::time::sleep(LOCAL_PERIOD).await;
        let (next, changes) = status_view::diff(&rows, service.status(retention).await?, &mut version);
        for change in &changes {
            printer.change(change.type_, &change.row.status()?)?;
        }
        rows = next;
    }
}

/// After `events` listed what was, each new event (of `object` only, when given) as it comes.
pub async fn events(
    global: &Global,
    object: Option<&str>,
    format: Format,
    columns: render::Columns,
) -> anyhow::Result<ExitCode> {
    let Some(mut stream) = daemon_stream(global, "/v1/events?watch=true").await? else {
        eprintln!(
            "error: events --watch needs a running daemon (`roundtable start`); none runs for {}",
            global.state_dir().display()
        );
        return Ok(ExitCode::from(1));
    };
    // Each new event is a line of the list above: its columns, its order (oldest first).
    while let Some(event) = stream.next().await? {
        if event.event != "ADDED" {
            continue;
        }
        let item: EventItem = serde_json::from_str(&event.data)
            .map_err(|error| anyhow::anyhow!("the daemon sent an event that is not one: {error}"))?;
        if object.is_some_and(|object| object != item.object) {
            continue;
        }
        match format {
            Format::Text | Format::Wide => {
                print!("{}", columns.line(&crate::commands::events::cells(&item)));
                std::io::stdout().flush()?;
            }
            format => print_change(format, "ADDED", &item)?,
        }
    }
    eprintln!("roundtable: the daemon stopped; the watch ended");
    Ok(ExitCode::from(1))
}

//! `roundtable sessions register` and `roundtable resume`: recording a session run elsewhere, and
//! the briefing that resumes an Assignment. Agent-written text is escaped before it is printed.

use std::process::ExitCode;

use roundtable_service::resume::RegisterRequest;
use roundtable_specs::List;
use roundtable_specs::audit::SessionRegistered;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_writing;
use crate::render;

pub async fn register(global: &Global, request: RegisterRequest, format: Format) -> anyhow::Result<ExitCode> {
    let item = open_for_writing(global).await?.register_session(request).await?;
    let record = SessionRegistered::Cli {
        assignment: &item.assignment,
        adapter: &item.adapter,
        external_session_id: item.external_session_id.as_deref(),
    };
    crate::commands::audit::record_operator(global, &item.id, record).await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &List::of(vec![item]))?)
        }
        Format::Text | Format::Wide => {
            println!("registered session {} for assignment {}", item.id, item.assignment);
            match item.detail.agent.as_ref().and_then(|agent| agent.resume_command.as_ref()) {
                Some(argv) => println!("resume command: {}", render::command_line(argv)),
                None => println!("{}", render::sanitize(&item.message)),
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

pub async fn resume(global: &Global, assignment: Option<&str>, format: Format) -> anyhow::Result<ExitCode> {
    let briefing = open_for_writing(global).await?.resume(assignment).await?;
    match format {
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &briefing)?)
        }
        Format::Text | Format::Wide => {
            print!("{}", render::sanitize_block(&briefing.text));
            for claim in &briefing.released {
                eprintln!(
                    "released the claim on {} of finished session {}",
                    render::sanitize(&claim.path),
                    claim.session_id
                );
            }
            let resumable = briefing.sessions.iter().find_map(|s| s.detail.agent.as_ref()?.resume_command.clone());
            if let Some(argv) = resumable {
                eprintln!(
                    "resume the newest resumable session with (the briefing above as its last argument):\n  {}",
                    render::command_line(&argv)
                );
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

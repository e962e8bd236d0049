//! `roundtable describe KIND/NAME`: conditions, the stored spec and recent events.

use std::process::ExitCode;

use anyhow::Context as _;
use roundtable_service::ServiceError;
use roundtable_specs::ObjectKey;
use roundtable_specs::output::DescribeItem;

use crate::cli::{Format, Global};
use crate::commands::state::open_for_reading;
use crate::commands::status::{health_text, sync_text};
use crate::render;

/// The object a `KIND/NAME` argument names (clap has checked the shape): an unknown kind names
/// no object, like an unknown name, and exits 1.
pub fn parse_key(text: &str) -> anyhow::Result<ObjectKey> {
    ObjectKey::parse(text).with_context(|| {
        let kind = text.split_once('/').map_or(text, |(kind, _)| kind);
        format!("{text:?} names no object: unknown kind {kind:?} (kinds: Adapter, Assignment, AdmissionPolicy)")
    })
}

pub async fn run(global: &Global, object: &str, format: Format) -> anyhow::Result<ExitCode> {
    let key = parse_key(object)?;
    let item = match open_for_reading(global).await?.describe(&key).await {
        Ok(item) => item,
        Err(error @ ServiceError::UnknownObject { .. }) => {
            eprintln!("error: {error}");
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    match format {
        // One object, as `GET /v1/assignments/{name}` answers, not a list of one.
        Format::Json | Format::Yaml | Format::Name | Format::JsonPath(_) => {
            print!("{}", render::document(format, &item)?)
        }
        Format::Text | Format::Wide => print!("{}", render::sanitize_block(&text(&item))),
    }
    Ok(ExitCode::SUCCESS)
}

fn text(item: &DescribeItem) -> String {
    let status = &item.status;
    let number = |n: Option<i64>| n.map_or_else(|| "-".into(), |n| n.to_string());
    let mut out = format!(
        "Kind:        {}\nName:        {}\nSource:      {}\nGeneration:  {} (observed {})\nSync:        {}\nHealth:      {}\nMessage:     {}\n",
        status.kind,
        render::sanitize(&status.name),
        render::sanitize(item.source_file.as_deref().unwrap_or("-")),
        number(status.generation),
        number(status.observed_generation),
        sync_text(status.sync),
        health_text(status.health),
        render::sanitize(&status.message),
    );
    if let Some(observed) = &item.observed {
        // An Adapter's is its admission, shown readable below rather than as a blob.
        let admission = admission_text(observed);
        if admission.is_empty() {
            out.push_str(&format!("Observed:    {}\n", render::sanitize(&observed.to_string())));
        }
        out.push_str(&admission);
    }
    if let Some(spec) = item.spec.as_ref().map(|resource| &resource["spec"]).filter(|spec| !spec.is_null()) {
        out.push_str("\nSpec:\n");
        out.push_str(&indent(&render::yaml(spec)));
    }
    out.push_str("\nConditions:\n");
    let conditions: Vec<Vec<String>> = status
        .conditions
        .iter()
        .map(|c| {
            vec![
                c.type_.clone(),
                format!("{:?}", c.status),
                c.reason.clone(),
                render::timestamp(&c.last_transition_time),
                c.message.clone(),
            ]
        })
        .collect();
    out.push_str(&indent(&render::table(&["TYPE", "STATUS", "REASON", "LAST TRANSITION", "MESSAGE"], &conditions)));
    out.push_str("\nEvents:\n");
    let events: Vec<Vec<String>> = item
        .events
        .iter()
        .map(|e| vec![render::age(&e.at), e.type_.clone(), e.reason.clone(), e.message.clone()])
        .collect();
    out.push_str(&indent(&render::table(&["AGE", "TYPE", "REASON", "MESSAGE"], &events)));
    out
}

/// An Adapter's admission, readable: the receipt (id, verdict, expiry) and the evidence.
fn admission_text(observed: &serde_json::Value) -> String {
    let text = |value: &serde_json::Value| render::sanitize(value.as_str().unwrap_or("-"));
    let time =
        |value: &serde_json::Value| render::sanitize(&value.as_str().map_or_else(|| "-".into(), render::timestamp));
    let mut out = String::new();
    let (receipt, evidence) = (&observed["receipt"], &observed["evidence"]);
    if observed["admission"].is_array() {
        out.push_str("\nAdmission:\n");
        out.push_str(&format!("  Mode:          {}\n", text(&observed["admissionMode"])));
        for decision in observed["admission"].as_array().into_iter().flatten() {
            let verdict = match decision["reason"].as_str() {
                Some(reason) => format!("refused ({reason})"),
                None => "admitted".into(),
            };
            out.push_str(&format!(
                "  {:<14} {verdict}: {}\n",
                format!("{}:", text(&decision["gate"])),
                text(&decision["message"])
            ));
        }
        match receipt.is_object() {
            true => out.push_str(&format!(
                "  Receipt:       {} ({}) sealed {}, expires {}\n",
                text(&receipt["id"]),
                text(&receipt["verdict"]),
                time(&receipt["generatedAt"]),
                time(&receipt["expiresAt"])
            )),
            false => out.push_str("  Receipt:       none\n"),
        }
    }
    if evidence.is_object() {
        out.push_str(&format!("  Image ID:      {}\n", text(&evidence["imageId"])));
        out.push_str(&format!("  Version:       {}\n", text(&evidence["installedVersion"])));
        out.push_str(&format!(
            "  Contract:      {} ({})\n",
            text(&evidence["contract"]),
            text(&evidence["contractHash"])
        ));
        out.push_str(&format!(
            "  Conformance:   {}: {}\n",
            text(&evidence["conformance"]),
            text(&evidence["conformanceDetail"])
        ));
        for transcript in evidence["transcripts"].as_array().into_iter().flatten() {
            let passed = if transcript["passed"] == true { "replays clean" } else { "diverged" };
            out.push_str(&format!("  Transcript:    {}: {passed}\n", text(&transcript["name"])));
        }
        out.push_str(&format!("  Canary:        {}\n", text(&evidence["canary"])));
        out.push_str(&format!("  Fingerprint:   {}\n", text(&evidence["replayFingerprint"])));
    }
    out
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

//! strobe's own endpoints on the run history (beside OTG's): the runs the server's database
//! holds — the command line's too when they share it — listed, read whole, compared (CCDF
//! points for a browser to draw) and deleted. Every database access runs off the async
//! workers; a server started with `--db none` answers 404 with the reason.

use std::collections::HashMap;
use std::sync::Arc;

use axum::extract::{Path, Query, State};
use axum::response::Response;
use serde_json::json;
use strobe_control::history::{Filter, History, HistoryError};

use crate::reply::{error, internal, ok_json, validation, OtgError};
use crate::{blocking, Server};

type Reply = Result<Response, OtgError>;

fn history_error(e: HistoryError) -> OtgError {
    match e {
        e @ HistoryError::NoRun(_) => error(404, "validation", vec![e.to_string()]),
        e => internal(vec![e.to_string()]),
    }
}

/// Runs `work` on the server's history off the async workers.
async fn with_history<T: Send + 'static>(
    server: &Server,
    work: impl FnOnce(&mut History) -> Result<T, OtgError> + Send + 'static,
) -> Result<T, OtgError> {
    let Some(history) = server.options.history.clone() else {
        return Err(error(
            404,
            "validation",
            vec!["this server records no runs (it was started with --db none)".into()],
        ));
    };
    blocking(move || {
        let mut db = History::open(&history.path).map_err(history_error)?;
        work(&mut db)
    })
    .await?
}

/// `GET /strobe/runs?kind=&grep=&since=&limit=`: the runs, oldest first, as `strobe runs
/// list --json` prints them (limit 0: all; default 50).
pub async fn list(
    State(server): State<Arc<Server>>,
    Query(query): Query<HashMap<String, String>>,
) -> Reply {
    let known = ["kind", "grep", "since", "limit"];
    if let Some(unknown) = query.keys().find(|k| !known.contains(&k.as_str())) {
        return Err(validation(vec![format!(
            "runs: no parameter `{unknown}` (accepted: {})",
            known.join(", ")
        )]));
    }
    let since = query
        .get("since")
        .map(|s| strobe_control::history::parse_since(s, strobe_control::history::now_unix_ns()))
        .transpose()
        .map_err(|e| validation(vec![e.replace("--since", "since")]))?;
    let limit = match query.get("limit") {
        None => Some(50),
        Some(text) => match text.parse::<u64>() {
            Ok(0) => None,
            Ok(n) => Some(n),
            Err(_) => {
                return Err(validation(vec![format!(
                    "runs: limit `{text}` is not a count (0: all)"
                )]))
            }
        },
    };
    let filter = Filter {
        kind: query.get("kind").cloned().filter(|k| !k.is_empty()),
        text: query.get("grep").cloned().filter(|t| !t.is_empty()),
        since_unix_ns: since,
        limit,
    };
    let rows = with_history(&server, move |db| db.list(&filter).map_err(history_error)).await?;
    Ok(ok_json(json!(rows)))
}

/// `GET /strobe/runs/{id}`: one run whole (histograms in base64), as `strobe runs show
/// --json` prints it.
pub async fn show(State(server): State<Arc<Server>>, Path(id): Path<String>) -> Reply {
    let id = run_id(&id)?;
    let run = with_history(&server, move |db| db.get(id).map_err(history_error)).await?;
    Ok(ok_json(
        serde_json::to_value(&run).map_err(|e| internal(vec![e.to_string()]))?,
    ))
}

/// `DELETE /strobe/runs/{id}`.
pub async fn delete(State(server): State<Arc<Server>>, Path(id): Path<String>) -> Reply {
    let id = run_id(&id)?;
    with_history(&server, move |db| db.delete(id).map_err(history_error)).await?;
    Ok(ok_json(json!({ "deleted": id })))
}

/// `PUT /strobe/runs/{id}/label` with `{"label": TEXT}` (null or "" removes it): the note
/// `strobe runs label` sets, shown in lists and comparisons.
pub async fn label(
    State(server): State<Arc<Server>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Reply {
    let id = run_id(&id)?;
    let value: serde_json::Value = serde_json::from_slice(&body)
        .map_err(|e| validation(vec![format!("runs label: the body is not JSON: {e}")]))?;
    let label = match value.get("label") {
        Some(serde_json::Value::String(text)) if !text.is_empty() => Some(text.clone()),
        Some(serde_json::Value::String(_)) | Some(serde_json::Value::Null) => None,
        _ => {
            return Err(validation(vec![
                "runs label: give {\"label\": TEXT} (null or \"\" removes it)".into(),
            ]))
        }
    };
    if label.as_ref().is_some_and(|l| l.len() > MAX_LABEL) {
        return Err(validation(vec![format!(
            "runs label: at most {MAX_LABEL} bytes"
        )]));
    }
    let reply = json!({ "id": id, "label": label });
    with_history(&server, move |db| {
        db.set_label(id, label.as_deref()).map_err(history_error)
    })
    .await?;
    Ok(ok_json(reply))
}

/// The longest label taken (a note, not a document).
const MAX_LABEL: usize = 1000;

/// `GET /strobe/runs/compare?ids=1,2[&flow=NAME]`: the runs' latency side by side — per run
/// and flow its statistics and CCDF points `[latency_ns, fraction slower]`.
pub async fn compare(
    State(server): State<Arc<Server>>,
    Query(query): Query<HashMap<String, String>>,
) -> Reply {
    let ids = query
        .get("ids")
        .map(String::as_str)
        .unwrap_or("")
        .split(',')
        .filter(|s| !s.trim().is_empty())
        .map(|s| run_id(s.trim()))
        .collect::<Result<Vec<_>, _>>()?;
    if ids.is_empty() {
        return Err(validation(vec![
            "runs/compare: give the runs as ids=1,2,…".into()
        ]));
    }
    let flow = query.get("flow").cloned().filter(|f| !f.is_empty());
    let value = with_history(&server, move |db| {
        let runs = ids
            .iter()
            .map(|&id| db.get(id))
            .collect::<Result<Vec<_>, _>>()
            .map_err(history_error)?;
        strobe_control::history::compare::compare(&runs, flow.as_deref())
            .map(|c| c.to_json())
            .map_err(|e| validation(vec![e]))
    })
    .await?;
    Ok(ok_json(value))
}

fn run_id(text: &str) -> Result<i64, OtgError> {
    text.parse::<i64>()
        .ok()
        .filter(|&id| id > 0)
        .ok_or_else(|| validation(vec![format!("runs: `{text}` is not a run id")]))
}

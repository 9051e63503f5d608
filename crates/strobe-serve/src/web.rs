//! The dashboard at `/`: a page, its script and style (web/ in the repository) and the
//! uPlot chart library (embedded by build.rs), all inside the binary. The page reads the
//! same endpoints as any client, with the same token.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../../../web/index.html");
const APP_JS: &str = include_str!("../../../web/app.js");
const APP_CSS: &str = include_str!("../../../web/app.css");
const UPLOT_JS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/uPlot.iife.min.js"));
const UPLOT_CSS: &[u8] = include_bytes!(concat!(env!("OUT_DIR"), "/uPlot.min.css"));

fn asset(content_type: &'static str, body: &'static [u8]) -> Response {
    (
        [
            (header::CONTENT_TYPE, content_type),
            // A new strobe may serve a new page: never a stale script.
            (header::CACHE_CONTROL, "no-cache"),
        ],
        body,
    )
        .into_response()
}

pub async fn index() -> Response {
    asset("text/html; charset=utf-8", INDEX.as_bytes())
}

pub async fn app_js() -> Response {
    asset("text/javascript; charset=utf-8", APP_JS.as_bytes())
}

pub async fn app_css() -> Response {
    asset("text/css; charset=utf-8", APP_CSS.as_bytes())
}

pub async fn uplot_js() -> Response {
    asset("text/javascript; charset=utf-8", UPLOT_JS)
}

pub async fn uplot_css() -> Response {
    asset("text/css; charset=utf-8", UPLOT_CSS)
}

//! The dashboard at `/`: a page, its script and style (web/ in the repository) and the
//! uPlot chart library (vendored in web/vendor/uplot), all inside the binary. The page reads
//! the same endpoints as any client, with the same token.

use axum::http::header;
use axum::response::{IntoResponse, Response};

const INDEX: &str = include_str!("../../../web/index.html");
const APP_JS: &str = include_str!("../../../web/app.js");
const APP_CSS: &str = include_str!("../../../web/app.css");
const UPLOT_JS: &[u8] = include_bytes!("../../../web/vendor/uplot/uPlot.iife.min.js");
const UPLOT_CSS: &[u8] = include_bytes!("../../../web/vendor/uplot/uPlot.min.css");

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

#[cfg(test)]
mod tests {
    use super::*;

    /// The vendored chart library's version (web/vendor/uplot/README.md), as its banner names it.
    const UPLOT_VERSION: &str = "1.6.32";

    /// The embedded chart library is uPlot's real build of the pinned version, not a stand-in:
    /// its banner names the version and the script defines `uPlot`.
    #[test]
    fn the_embedded_chart_library_is_the_pinned_uplot() {
        let script = std::str::from_utf8(UPLOT_JS).expect("uPlot's script is UTF-8");
        let banner = script.lines().next().unwrap_or_default();
        assert!(
            banner.contains("leeoniya/uPlot") && banner.contains(&format!("(v{UPLOT_VERSION})")),
            "unexpected banner: {banner}"
        );
        assert!(
            script.contains("var uPlot=function()"),
            "the script defines no uPlot"
        );
        assert!(script.len() > 40_000, "the script is too short to be uPlot");
        let style = std::str::from_utf8(UPLOT_CSS).expect("uPlot's style is UTF-8");
        assert!(
            style.contains(".uplot"),
            "the style sheet has no uPlot rules"
        );
    }
}

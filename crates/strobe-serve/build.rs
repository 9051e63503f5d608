//! The dashboard's chart library (uPlot, pinned in web/package-lock.json and installed with
//! `npm ci --prefix web`, which the README's set-up commands run) is embedded into the
//! binary from web/node_modules. Without it the server still builds; its dashboard then
//! says which command installs the library, instead of drawing charts.

use std::path::{Path, PathBuf};

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("set by cargo"));
    let dist = manifest.join("../../web/node_modules/uplot/dist");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("set by cargo"));
    println!("cargo:rerun-if-changed={}", dist.display());
    println!(
        "cargo:rerun-if-changed={}",
        manifest.join("../../web/package-lock.json").display()
    );
    let copied = ["uPlot.iife.min.js", "uPlot.min.css"]
        .iter()
        .all(|file| copy(&dist.join(file), &out.join(file)));
    if !copied {
        println!(
            "cargo:warning=the dashboard's chart library is missing: run `npm ci --prefix web` \
             and build again (the server works; its dashboard shows no charts)"
        );
        let missing = "window.STROBE_CHARTS_MISSING = \"this strobe was built without the \
                       dashboard's chart library: run npm ci --prefix web, then build strobe \
                       again\";\n";
        let _ = std::fs::write(out.join("uPlot.iife.min.js"), missing);
        let _ = std::fs::write(out.join("uPlot.min.css"), "");
    }
}

fn copy(from: &Path, to: &Path) -> bool {
    std::fs::copy(from, to).is_ok()
}

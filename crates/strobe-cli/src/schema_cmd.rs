//! `strobe schema [KIND]`: the JSON Schema of a `--json` document, as the code defines it
//! (docs/schema/KIND.schema.json holds the same text; a test keeps them equal).

use clap::Args;

use crate::failure::Failure;

#[derive(Args)]
pub struct SchemaArgs {
    /// Which document: gen (a run's results), gen-rates (a `--rates` sweep), rfc2544, y1564,
    /// trains, analyze, reflect, runs-list, runs-show or study.
    #[arg(default_value = "gen")]
    kind: String,
}

pub fn run(args: SchemaArgs) -> Result<(), Failure> {
    let kinds = strobe_control::results::SCHEMA_KINDS;
    let schema = strobe_control::results::json_schema(&args.kind).ok_or_else(|| {
        Failure::BadInput(format!(
            "no schema for `{}`: the kinds with one are {}",
            args.kind,
            kinds.join(", ")
        ))
    })?;
    println!(
        "{}",
        serde_json::to_string_pretty(&schema).unwrap_or_default()
    );
    Ok(())
}

//! What a new user reads in the first hour: the help names every port form, the commands
//! strobe suggests work as printed, the demo explains itself, the HTML report carries its
//! context. (The lab tests need root.)

mod common;
use common::lab::TestLab;
use common::*;

fn help(args: &[&str]) -> String {
    ok(strobe().args(args).output().unwrap())
}

/// The help text of one option: from its flag to the next line that starts another option.
fn option_help<'a>(help: &'a str, flag: &str) -> &'a str {
    let start = help
        .find(&format!("{flag} "))
        .unwrap_or_else(|| panic!("{flag} missing from:\n{help}"));
    let rest = &help[start + flag.len()..];
    let end = rest.find("\n      --").unwrap_or(rest.len());
    &rest[..end]
}

#[test]
fn help_lists_every_port_form() {
    let all = [
        "lab:tx",
        "lab:rx",
        "@afxdp",
        "afpacket:[NETNS/]IFACE",
        "afpacket-gso:[NETNS/]IFACE",
        "afxdp:[NETNS/]IFACE[@QUEUE]",
        "auto:[NETNS/]IFACE[@QUEUE]",
        "pcap:FILE",
        "null",
    ];
    let receiving = [
        "lab:rx",
        "lab:tx",
        "lab:rx@afxdp",
        "afpacket:[NETNS/]IFACE",
        "afxdp:[NETNS/]IFACE[@QUEUE]",
        "auto:[NETNS/]IFACE[@QUEUE]",
    ];
    for flag in ["--help", "-h"] {
        let gen = help(&["gen", flag]);
        let port = option_help(&gen, "--port");
        for form in all {
            assert!(
                port.contains(form),
                "gen {flag}: --port lacks {form}:\n{port}"
            );
        }
        let rx = option_help(&gen, "--rx");
        for form in receiving {
            assert!(rx.contains(form), "gen {flag}: --rx lacks {form}:\n{rx}");
        }
        for mac in ["--src-mac", "--dst-mac"] {
            let text = option_help(&gen, mac);
            assert!(
                text.contains("MAC") && text.contains("e.g."),
                "gen {flag}: {mac} has no help: {text:?}"
            );
        }
        let reflect = help(&["reflect", flag]);
        for form in receiving {
            assert!(
                reflect.contains(form),
                "reflect {flag}: PORT lacks {form}:\n{reflect}"
            );
        }
    }
}

/// `strobe lab up --prefix P` suggests a command; run exactly that command.
#[test]
fn the_command_lab_up_suggests_runs_on_that_lab() {
    let lab = TestLab::up("fc", "cable");
    for listing in [
        help(&["lab", "up", "--prefix", &lab.prefix, "--dut", "cable"]),
        help(&["lab", "status", "--prefix", &lab.prefix]),
    ] {
        let line = listing
            .lines()
            .find_map(|l| l.trim().strip_prefix("e.g.: "))
            .unwrap_or_else(|| panic!("no suggestion in:\n{listing}"));
        let words: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(words[0], "strobe", "{line}");
        assert!(
            line.contains(&format!("--lab {}", lab.prefix)),
            "the suggestion does not name the lab: {line}"
        );
        let out = ok(strobe().args(&words[1..]).output().unwrap());
        assert!(out.contains("lost"), "{out}");
        // The DUT by its name and in words, not as Rust's debug form (`Cable`, `Tbf {`).
        assert!(
            listing.contains("device under test: cable (a plain veth pair"),
            "{listing}"
        );
        assert!(
            !listing.contains("Cable") && !listing.contains('{'),
            "{listing}"
        );
    }
    // A lab that is not up: the message says how to bring up that very lab.
    let out = strobe()
        .args(["gen", "--lab", "nolab", "--port", "lab:tx"])
        .args(["--udp", "198.18.0.1:1000-198.18.1.1:2000", "--count", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("strobe lab up --prefix nolab"), "{err}");
}

/// The demo explains each part in plain words and ends each with a verdict; the backend
/// jargon appears only with -v. Each part is recorded in the run history.
#[test]
fn the_demo_explains_itself_and_keeps_jargon_for_verbose() {
    let jargon = ["TPACKET_V2", "qdisc bypass", "re-anchored", "TSC"];
    let dir = Scratch::new("demo-history");
    let db = dir.path("runs.db");
    let plain = ok(strobe()
        .args(["demo", "--seconds", "0.5", "--db", &db])
        .output()
        .unwrap());
    let list = ok(strobe()
        .args(["runs", "--db", &db, "list", "--json"])
        .output()
        .unwrap());
    let list: serde_json::Value = serde_json::from_str(&list).unwrap();
    let runs = list["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2, "{list}");
    for (run, part) in runs.iter().zip(["throughput", "latency"]) {
        assert_eq!(
            (&run["kind"], &run["outcome"]),
            (&"demo".into(), &"completed".into())
        );
        let id = run["id"].to_string();
        let shown = ok(strobe()
            .args(["runs", "--db", &db, "show", &id, "--json"])
            .output()
            .unwrap());
        let shown = serde_json::from_str::<serde_json::Value>(&shown).unwrap()["run"].clone();
        assert_eq!(shown["config"]["part"], part, "{shown}");
        assert!(
            run["summary"]["frames_rx"].as_u64().unwrap() > 1000,
            "{run}"
        );
        assert!(
            plain.contains(&format!("recorded as run {id} in")),
            "{plain}"
        );
    }
    for part in ["== 1.", "== 2. Throughput", "== 3. Latency"] {
        assert!(plain.contains(part), "{part} missing:\n{plain}");
    }
    for wanted in [
        "64-byte UDP frames, sent as fast as strobe can",
        "this part has no planned end",
        "the DUT queues frames",
        "late frames: ",
        "-v shows the full report",
    ] {
        assert!(plain.contains(wanted), "{wanted:?} missing:\n{plain}");
    }
    assert_eq!(plain.matches("=> verdict: ").count(), 2, "{plain}");
    for word in jargon {
        assert!(!plain.contains(word), "{word} in the plain demo:\n{plain}");
    }
    let verbose = ok(strobe()
        .args(["demo", "--seconds", "0.5", "-v"])
        .output()
        .unwrap());
    for word in ["TPACKET_V2", "qdisc bypass"] {
        assert!(verbose.contains(word), "{word} missing with -v:\n{verbose}");
    }
    assert_eq!(verbose.matches("=> verdict: ").count(), 2, "{verbose}");
}

/// The rows of the HTML report's context block, as (label, text) with tags stripped.
fn context_rows(html: &str) -> Vec<(String, String)> {
    let start = html
        .find("<table class=\"context\">")
        .expect("the report has a context block");
    let block = &html[start..start + html[start..].find("</table>").unwrap()];
    let text = |cell: &str| {
        let mut out = String::new();
        let mut in_tag = false;
        for c in cell.chars() {
            match c {
                '<' => in_tag = true,
                '>' => in_tag = false,
                c if !in_tag => out.push(c),
                _ => {}
            }
        }
        out.replace("&amp;", "&")
            .replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", "\"")
    };
    block
        .split("<tr>")
        .skip(1)
        .map(|row| {
            let th_end = row.find("</th>").unwrap();
            let td = &row[th_end..];
            (
                text(&row[..th_end]),
                text(&td[td.find("<td>").unwrap()..td.rfind("</td>").unwrap()]),
            )
        })
        .collect()
}

#[test]
fn the_html_report_carries_its_context() {
    let dir = Scratch::new("fc-html");
    let lab = TestLab::up("fh", "bridge");
    let report = dir.path("report.html");
    lab.gen_text(&[
        "--rate",
        "10kpps",
        "--count",
        "15000",
        "--hdr-interval",
        "250ms",
        "--latency-html",
        &report,
    ]);
    let html = std::fs::read_to_string(&report).unwrap();
    let rows = context_rows(&html);
    let row = |label: &str| {
        rows.iter()
            .find(|(l, _)| l == label)
            .map(|(_, v)| v.as_str())
            .unwrap_or_else(|| panic!("no {label} in the context: {rows:?}"))
    };
    let labels: Vec<&str> = rows.iter().map(|(l, _)| l.as_str()).collect();
    assert_eq!(
        labels,
        [
            "date",
            "command",
            "ports",
            "device under test",
            "traffic",
            "results",
            "timestamps",
            "clock"
        ]
    );
    // An RFC 3339 date of this century, in UTC.
    let date = row("date");
    assert!(
        date.starts_with("20") && date.contains('T') && date.contains("Z "),
        "{date}"
    );
    let command = row("command");
    for word in [
        "strobe gen",
        "--lab",
        &lab.prefix,
        "--latency-html",
        "--count 15000",
    ] {
        assert!(command.contains(word), "{word} not in {command:?}");
    }
    let ports = row("ports");
    assert!(
        ports.contains(&format!("transmit port0: afpacket:{}/", lab.ns("tx")))
            && ports.contains(&format!("receive rx: afpacket:{}/", lab.ns("rx"))),
        "{ports}"
    );
    let dut = row("device under test");
    assert!(
        dut.contains("Linux bridge") && dut.contains(&lab.prefix),
        "{dut}"
    );
    let traffic = row("traffic");
    assert!(
        traffic.contains("10 kpps, constant rate")
            && traffic.contains("64 B")
            && traffic.contains("15000 frames"),
        "{traffic}"
    );
    let results = row("results");
    assert!(
        results.contains("tx 15000 frames, rx 15000, lost 0") && results.contains("jitter "),
        "{results}"
    );
    let stamps = row("timestamps");
    assert!(
        stamps.contains("tx: user space: CLOCK_REALTIME")
            && stamps.contains("rx: kernel software receive timestamp"),
        "{stamps}"
    );
    // Latency over time, from the 250 ms intervals, beside the CCDF.
    assert!(
        html.contains("udp: latency over time"),
        "no figure over time"
    );
    assert!(
        html.contains("of each 0.25 s interval"),
        "no intervals drawn"
    );
    assert_eq!(html.matches("no samples").count(), 0);
}

//! What a new user meets in the first hour: the help names every port form, and the
//! commands strobe suggests work as printed. (The lab tests need root.)

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

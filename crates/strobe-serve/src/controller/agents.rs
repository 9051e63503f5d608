//! The agents a controller drives: where each is (its URL), how it is trusted (a CA for
//! HTTPS) and the token it asks for; and the OTG client that talks to one.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

/// One agent as the user named it (`--agent NAME=URL` or a table of `--agents FILE`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentSpec {
    /// What port locations call it (`NAME/LOCATION`).
    pub name: String,
    /// Its OTG endpoint, without a token in it.
    pub url: String,
    pub token: Option<String>,
    /// A certificate (PEM) to trust for its HTTPS: its own self-signed one, or its CA.
    pub ca: Option<PathBuf>,
}

/// Agent names: what may come before the `/` of a port location.
fn name_ok(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
}

impl AgentSpec {
    /// `NAME=URL`, the token in the URL as OTG clients give it
    /// (`https://strobe:TOKEN@HOST:PORT`); `ca` is `--agent-ca`.
    pub fn from_flag(text: &str, ca: Option<&Path>) -> Result<AgentSpec, String> {
        let (name, url) = text.split_once('=').ok_or_else(|| {
            format!(
                "--agent `{}`: give NAME=URL, e.g. hostb=https://strobe:TOKEN@198.18.250.2:8443",
                redacted(text)
            )
        })?;
        AgentSpec::new(name, url, None, ca.map(Path::to_path_buf))
            .map_err(|e| format!("--agent `{name}={}`: {e}", redacted(url)))
    }

    /// `--agents FILE`: one TOML table per agent, `[NAME] url = "…"`, with `token` (or
    /// `token_file`) and `ca` optional; relative paths are relative to the file.
    pub fn from_file(text: &str, dir: &Path) -> Result<Vec<AgentSpec>, String> {
        let table: toml::Table = text.parse().map_err(|e: toml::de::Error| e.to_string())?;
        let mut agents = Vec::new();
        for (name, value) in table {
            let toml::Value::Table(agent) = value else {
                return Err(format!(
                    "`{name}` is not a table — write [{name}] with url = \"https://HOST:PORT\""
                ));
            };
            if let Some(key) = agent
                .keys()
                .find(|k| !["url", "token", "token_file", "ca"].contains(&k.as_str()))
            {
                return Err(format!(
                    "[{name}]: unknown key `{key}` (accepted: url, token, token_file, ca)"
                ));
            }
            let text_of = |key: &str| -> Result<Option<String>, String> {
                match agent.get(key) {
                    None => Ok(None),
                    Some(toml::Value::String(s)) => Ok(Some(s.clone())),
                    Some(other) => Err(format!(
                        "[{name}] {key} is {} — give a string",
                        other.type_str()
                    )),
                }
            };
            let url = text_of("url")?.ok_or_else(|| format!("[{name}]: give its url"))?;
            let token = match (text_of("token")?, text_of("token_file")?) {
                (Some(_), Some(_)) => {
                    return Err(format!("[{name}]: give token or token_file, not both"))
                }
                (Some(t), None) => Some(t),
                (None, Some(file)) => {
                    let path = dir.join(file);
                    let text = std::fs::read_to_string(&path)
                        .map_err(|e| format!("[{name}] token_file {}: {e}", path.display()))?;
                    Some(text.trim().to_string())
                }
                (None, None) => None,
            };
            let ca = text_of("ca")?.map(|p| dir.join(p));
            agents.push(
                AgentSpec::new(&name, &url, token, ca).map_err(|e| format!("[{name}]: {e}"))?,
            );
        }
        Ok(agents)
    }

    fn new(
        name: &str,
        url: &str,
        token: Option<String>,
        ca: Option<PathBuf>,
    ) -> Result<AgentSpec, String> {
        if !name_ok(name) {
            return Err(format!(
                "agent name `{name}`: use 1-64 of A-Z, a-z, 0-9, `-`, `_`, `.`"
            ));
        }
        let mut parsed =
            reqwest::Url::parse(url).map_err(|e| format!("url `{}`: {e}", redacted(url)))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!(
                "url `{}`: give http://HOST:PORT or https://HOST:PORT",
                redacted(url)
            ));
        }
        let in_url = parsed.password().map(str::to_string);
        let token = match (token, in_url) {
            (Some(_), Some(_)) => {
                return Err("a token both in the url and beside it: give one".into());
            }
            (given, in_url) => given.or(in_url),
        };
        let _ = parsed.set_username("");
        let _ = parsed.set_password(None);
        let url = parsed.as_str().trim_end_matches('/').to_string();
        Ok(AgentSpec {
            name: name.to_string(),
            url,
            token,
            ca,
        })
    }
}

/// Where an agent's clock offset check answers: UDP on the address and port of its URL
/// (resolves names: blocking).
pub fn udp_target(url: &str) -> Option<std::net::SocketAddr> {
    use std::net::ToSocketAddrs;
    let url = reqwest::Url::parse(url).ok()?;
    let host = url
        .host_str()?
        .trim_start_matches('[')
        .trim_end_matches(']');
    let port = url.port_or_known_default()?;
    (host, port).to_socket_addrs().ok()?.next()
}

/// `url` without a password in it, for messages.
fn redacted(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut u) if u.password().is_some() => {
            let _ = u.set_password(Some("REDACTED"));
            u.to_string()
        }
        _ => url.to_string(),
    }
}

/// How a request to an agent failed: every message names the agent and where it is.
#[derive(Clone, Debug)]
pub struct AgentError {
    pub agent: String,
    pub message: String,
    /// The agent answered, refusing (an OTG error of its own), as opposed to not answering.
    pub refused: bool,
}

impl std::fmt::Display for AgentError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "agent `{}`: {}", self.agent, self.message)
    }
}

/// An OTG client of one agent.
pub struct Agent {
    pub spec: AgentSpec,
    client: reqwest::Client,
}

/// How long an agent may take to connect: a host that does not answer by then is down.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);

impl Agent {
    pub fn new(spec: AgentSpec) -> Result<Agent, String> {
        let mut builder = reqwest::Client::builder()
            .connect_timeout(CONNECT_TIMEOUT)
            .user_agent(concat!("strobe-controller/", env!("CARGO_PKG_VERSION")));
        if let Some(ca) = &spec.ca {
            let pem = std::fs::read(ca)
                .map_err(|e| format!("agent `{}`: ca {}: {e}", spec.name, ca.display()))?;
            let certificate = reqwest::Certificate::from_pem(&pem).map_err(|e| {
                format!(
                    "agent `{}`: ca {}: not a PEM certificate ({e})",
                    spec.name,
                    ca.display()
                )
            })?;
            builder = builder.add_root_certificate(certificate);
        }
        let client = builder
            .build()
            .map_err(|e| format!("agent `{}`: cannot make its client: {e}", spec.name))?;
        Ok(Agent { spec, client })
    }

    fn fault(&self, message: String, refused: bool) -> AgentError {
        AgentError {
            agent: self.spec.name.clone(),
            message,
            refused,
        }
    }

    async fn send(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<reqwest::Response, AgentError> {
        let url = format!("{}{path}", self.spec.url);
        let mut request = self.client.request(method, url).timeout(timeout);
        if let Some(body) = body {
            request = request.json(body);
        }
        if let Some(token) = &self.spec.token {
            request = request.bearer_auth(token);
        }
        let response = request.send().await.map_err(|e| {
            let what = if e.is_timeout() {
                format!("no answer to {path} within {} s", timeout.as_secs_f64())
            } else if e.is_connect() && root_cause(&e).contains("certificate") {
                format!(
                    "its certificate is not trusted at {} ({}) — give the certificate or its \
                     CA with --agent-ca, or `ca` in --agents",
                    self.spec.url,
                    root_cause(&e)
                )
            } else if e.is_connect() {
                format!("unreachable at {} ({})", self.spec.url, root_cause(&e))
            } else {
                format!("{path} failed at {}: {}", self.spec.url, root_cause(&e))
            };
            self.fault(what, false)
        })?;
        let status = response.status();
        if status.is_success() {
            return Ok(response);
        }
        let text = response.text().await.unwrap_or_default();
        let errors = serde_json::from_str::<Value>(&text)
            .ok()
            .and_then(|v| {
                v.get("errors")?.as_array().map(|a| {
                    a.iter()
                        .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
                        .collect::<Vec<_>>()
                        .join("; ")
                })
            })
            .unwrap_or(text);
        let message = if status == reqwest::StatusCode::UNAUTHORIZED {
            format!("refused the controller's token ({errors}) — give the agent's token in its url or token_file")
        } else {
            format!("{path}: {errors}")
        };
        Err(self.fault(message, true))
    }

    /// Sends `body` (JSON, if any) to `path` with `method` and reads the JSON reply.
    async fn json_reply(
        &self,
        method: reqwest::Method,
        path: &str,
        body: Option<&Value>,
        timeout: Duration,
    ) -> Result<Value, AgentError> {
        let response = self.send(method, path, body, timeout).await?;
        response
            .json()
            .await
            .map_err(|e| self.fault(format!("{path}: its reply is not JSON ({e})"), false))
    }

    /// POSTs `body` (JSON) to `path` and reads the JSON reply.
    pub async fn post(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, AgentError> {
        self.json_reply(reqwest::Method::POST, path, Some(body), timeout)
            .await
    }

    /// PATCHes `path` with `body` (JSON) and reads the JSON reply.
    pub async fn patch(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Value, AgentError> {
        self.json_reply(reqwest::Method::PATCH, path, Some(body), timeout)
            .await
    }

    /// GETs `path` and reads the JSON reply.
    pub async fn get(&self, path: &str, timeout: Duration) -> Result<Value, AgentError> {
        self.json_reply(reqwest::Method::GET, path, None, timeout)
            .await
    }

    /// POSTs `body` to `path` and reads the reply's bytes (a capture).
    pub async fn post_bytes(
        &self,
        path: &str,
        body: &Value,
        timeout: Duration,
    ) -> Result<Vec<u8>, AgentError> {
        let response = self
            .send(reqwest::Method::POST, path, Some(body), timeout)
            .await?;
        response
            .bytes()
            .await
            .map(|b| b.to_vec())
            .map_err(|e| self.fault(format!("{path}: reading its reply failed ({e})"), false))
    }
}

/// The innermost cause of a client error (reqwest's own message is "error sending request").
fn root_cause(e: &dyn std::error::Error) -> String {
    let mut cause = e;
    while let Some(next) = cause.source() {
        cause = next;
    }
    cause.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_take_the_token_from_the_url_and_keep_it_out_of_it() {
        let a = AgentSpec::from_flag(
            "hostb=https://strobe:abcdefghijklmnop@198.18.250.2:8443/",
            None,
        )
        .unwrap();
        assert_eq!(a.name, "hostb");
        assert_eq!(a.url, "https://198.18.250.2:8443");
        assert_eq!(a.token.as_deref(), Some("abcdefghijklmnop"));
        let plain = AgentSpec::from_flag("a=http://127.0.0.1:1", None).unwrap();
        assert_eq!(plain.token, None);
        for bad in [
            "hostb",
            "=http://x:1",
            "a b=http://x:1",
            "a=ftp://x",
            "a=not a url",
        ] {
            assert!(AgentSpec::from_flag(bad, None).is_err(), "{bad}");
        }
    }

    #[test]
    fn files_name_one_agent_per_table() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("b.token"), "tokenfromafile01\n").unwrap();
        let agents = AgentSpec::from_file(
            "[hosta]\nurl = \"http://198.18.250.1:8443\"\ntoken = \"abcdefghijklmnop\"\n\
             [hostb]\nurl = \"https://198.18.250.2:8443\"\ntoken_file = \"b.token\"\nca = \"b.pem\"\n",
            dir.path(),
        )
        .unwrap();
        assert_eq!(agents.len(), 2);
        assert_eq!(agents[1].token.as_deref(), Some("tokenfromafile01"));
        assert_eq!(agents[1].ca, Some(dir.path().join("b.pem")));
        for (bad, needle) in [
            ("hosta = 1", "not a table"),
            ("[a]\ntoken = \"x\"", "give its url"),
            ("[a]\nurl = \"http://x:1\"\nport = 3", "unknown key `port`"),
            (
                "[a]\nurl = \"http://x:1\"\ntoken_file = \"missing\"",
                "token_file",
            ),
        ] {
            let e = AgentSpec::from_file(bad, dir.path()).unwrap_err();
            assert!(e.contains(needle), "{bad}: {e}");
        }
    }
}

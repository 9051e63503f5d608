//! OTG over gRPC: the `Openapi` service of OTG's own proto (strobe-otg-proto), as a thin
//! front end over the REST routes. A request is written as the JSON the REST route takes
//! (the proto's JSON mapping with OTG's field names, which is what snappi sends over HTTP:
//! 64-bit integers in strings, enums by name), handed to the same router (an agent's, or a
//! controller's, which relays it to its agents), and its JSON reply read back into the proto
//! response. An OTG error becomes a gRPC status whose message
//! is the OTG `Error` as JSON, with `code` the gRPC code, which is how snappi and gosnappi
//! read errors over gRPC.

use std::sync::Arc;

use axum::body::{Body, Bytes};
use axum::http::{header, Method};
use axum::response::IntoResponse;
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Value};
use strobe_otg_proto::otg;
use strobe_otg_proto::otg::openapi_server::{Openapi, OpenapiServer};
use subtle::ConstantTimeEq;
use tonic::{Code, Request, Response, Status};
use tower::ServiceExt;

use crate::{Reply, ServeOptions, MAX_BODY};

/// The calls strobe serves, named in the error of every other one.
const SUPPORTED: &str = "SetConfig, GetConfig, UpdateConfig, SetControlState, GetMetrics, \
     GetCapture and GetVersion (SetControlAction and GetStates answer what strobe supports)";

/// The `Openapi` service over the REST routes of the same process (and so over their
/// state), calling them with the server's token.
pub(crate) struct OtgGrpc {
    routes: axum::Router,
    token: Option<Arc<str>>,
}

impl OtgGrpc {
    /// `method path` with `body` through the REST routes; the reply's body, or its OTG
    /// error as a gRPC status.
    async fn call(&self, method: Method, path: &str, body: Bytes) -> Result<Bytes, Status> {
        let mut request = axum::http::Request::builder()
            .method(method)
            .uri(path)
            .header(header::CONTENT_TYPE, "application/json");
        if let Some(token) = &self.token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        let request = request.body(Body::from(body)).map_err(|e| {
            otg_status(
                Code::Internal,
                "internal",
                vec![format!("cannot write the request: {e}")],
            )
        })?;
        let response = match self.routes.clone().oneshot(request).await {
            Ok(response) => response,
            Err(never) => match never {},
        };
        reply_body(Ok(response)).await
    }

    /// [`OtgGrpc::call`], the reply read as the proto message `T`.
    async fn message<T: DeserializeOwned>(
        &self,
        method: Method,
        path: &str,
        body: Bytes,
    ) -> Result<T, Status> {
        let body = self.call(method, path, body).await?;
        serde_json::from_slice(&body).map_err(|e| {
            otg_status(
                Code::Internal,
                "internal",
                vec![format!(
                    "the reply does not fit OTG's model: {e} (a strobe bug: please report it)"
                )],
            )
        })
    }
}

/// Serves REST on `rest` and gRPC on `grpc`, both over one server state (a controller's
/// gRPC relayed to its agents as its REST is), until `shutdown` completes; a run still
/// going is stopped first. With `tls`, both over TLS with the same certificate (HTTPS, and
/// gRPC as snappi's secure channel and gosnappi's TLS dial it).
pub async fn serve_with_grpc(
    rest: tokio::net::TcpListener,
    grpc: tokio::net::TcpListener,
    tls: Option<&crate::Tls>,
    options: ServeOptions,
    shutdown: impl std::future::Future<Output = ()> + Send + 'static,
) -> std::io::Result<()> {
    let tls = match tls {
        Some(tls) => Some(TlsFiles::read(tls).await?),
        None => None,
    };
    let token = options.token.as_deref().map(Arc::<str>::from);
    let (routes, handle) = crate::router_with_shutdown(options)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e))?;
    let _echo = crate::clock_echo(rest.local_addr()?);
    // One shutdown for both: the REST server and the gRPC server each wait on it.
    let (stop_tx, stop_rx) = tokio::sync::watch::channel(false);
    tokio::spawn(async move {
        crate::telling(handle, shutdown).await;
        let _ = stop_tx.send(true);
    });
    let stopped = |mut rx: tokio::sync::watch::Receiver<bool>| async move {
        // An error means the sender is gone: stop too.
        let _ = rx.wait_for(|stop| *stop).await;
    };
    let mut builder = tonic::transport::Server::builder();
    if let Some(files) = &tls {
        let identity = tonic::transport::Identity::from_pem(&files.cert, &files.key);
        builder = builder
            .tls_config(tonic::transport::ServerTlsConfig::new().identity(identity))
            .map_err(|e| files.refused(e))?;
    }
    let grpc = builder
        .add_service(service(routes.clone(), token))
        .serve_with_incoming_shutdown(
            tonic::transport::server::TcpIncoming::from(grpc),
            stopped(stop_rx.clone()),
        );
    let grpc = async { grpc.await.map_err(std::io::Error::other) };
    let rest = async move {
        let Some(files) = tls else {
            return axum::serve(rest, routes)
                .with_graceful_shutdown(stopped(stop_rx))
                .await;
        };
        let config =
            axum_server::tls_rustls::RustlsConfig::from_pem(files.cert.clone(), files.key.clone())
                .await
                .map_err(|e| files.refused(e))?;
        let handle = axum_server::Handle::new();
        let watcher = handle.clone();
        tokio::spawn(async move {
            stopped(stop_rx).await;
            watcher.graceful_shutdown(Some(std::time::Duration::from_secs(5)));
        });
        axum_server::from_tcp_rustls(rest.into_std()?, config)
            .handle(handle)
            .serve(routes.into_make_service())
            .await
    };
    tokio::try_join!(rest, grpc).map(|_| ())
}

/// A certificate and its key as read from their PEM files, for both servers.
struct TlsFiles {
    cert: Vec<u8>,
    key: Vec<u8>,
    names: String,
}

impl TlsFiles {
    async fn read(tls: &crate::Tls) -> std::io::Result<TlsFiles> {
        // ring: the provider that builds with a C compiler alone (as HTTPS alone uses).
        let _ = rustls::crypto::ring::default_provider().install_default();
        let names = format!(
            "certificate {} with key {}",
            tls.cert.display(),
            tls.key.display()
        );
        let read = |path: &std::path::Path| {
            let path = path.to_path_buf();
            let names = names.clone();
            async move {
                tokio::fs::read(&path).await.map_err(|e| {
                    std::io::Error::new(
                        std::io::ErrorKind::InvalidInput,
                        format!("cannot use {names}: {}: {e}", path.display()),
                    )
                })
            }
        };
        Ok(TlsFiles {
            cert: read(&tls.cert).await?,
            key: read(&tls.key).await?,
            names,
        })
    }

    fn refused(&self, e: impl std::fmt::Display) -> std::io::Error {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("cannot use {}: {e} (give PEM files)", self.names),
        )
    }
}

/// The service with its token check: like REST, every call needs the token when there is
/// one, as `authorization: Bearer TOKEN` metadata.
fn service(
    routes: axum::Router,
    token: Option<Arc<str>>,
) -> tonic::service::interceptor::InterceptedService<
    OpenapiServer<OtgGrpc>,
    impl tonic::service::Interceptor + Clone,
> {
    let service = OpenapiServer::new(OtgGrpc {
        routes,
        token: token.clone(),
    })
    .max_decoding_message_size(MAX_BODY)
    .max_encoding_message_size(usize::MAX);
    tonic::service::interceptor::InterceptedService::new(service, move |request: Request<()>| {
        match &token {
            Some(token) if !carries_token(request.metadata(), token) => Err(otg_status(
                Code::Unauthenticated,
                "validation",
                vec![
                    "this server requires its token (printed when it started, or given with \
                     --token): send it as gRPC metadata `authorization: Bearer TOKEN`"
                        .into(),
                ],
            )),
            _ => Ok(request),
        }
    })
}

/// Whether `metadata` carries `authorization: Bearer TOKEN` (compared in constant time).
fn carries_token(metadata: &tonic::metadata::MetadataMap, token: &str) -> bool {
    let Some(value) = metadata.get("authorization").and_then(|v| v.to_str().ok()) else {
        return false;
    };
    let Some((scheme, given)) = value.trim().split_once(' ') else {
        return false;
    };
    scheme.eq_ignore_ascii_case("bearer")
        && bool::from(given.trim().as_bytes().ct_eq(token.as_bytes()))
}

/// A gRPC status carrying an OTG `Error` (its `code` the gRPC code, as OTG asks).
fn otg_status(code: Code, kind: &str, errors: Vec<String>) -> Status {
    let error = json!({ "code": code as i32, "kind": kind, "errors": errors });
    Status::new(code, error.to_string())
}

/// The gRPC code of an OTG error's HTTP status.
fn grpc_code(http: u16) -> Code {
    match http {
        401 => Code::Unauthenticated,
        403 => Code::PermissionDenied,
        404 => Code::NotFound,
        409 => Code::FailedPrecondition,
        429 => Code::ResourceExhausted,
        501 => Code::Unimplemented,
        503 => Code::Unavailable,
        400..=499 => Code::InvalidArgument,
        _ => Code::Internal,
    }
}

/// `message` as the JSON body its REST route takes.
fn request_body<T: Serialize>(message: &T) -> Result<Bytes, Status> {
    serde_json::to_vec(message).map(Bytes::from).map_err(|e| {
        otg_status(
            Code::Internal,
            "internal",
            vec![format!("cannot write the request as OTG JSON: {e}")],
        )
    })
}

/// The body of a REST handler's reply, or its OTG error as a gRPC status.
async fn reply_body(reply: Reply) -> Result<Bytes, Status> {
    let response = reply.unwrap_or_else(IntoResponse::into_response);
    let http = response.status();
    let body = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| {
            otg_status(
                Code::Internal,
                "internal",
                vec![format!("cannot read the reply: {e}")],
            )
        })?;
    if http.is_success() {
        return Ok(body);
    }
    let code = grpc_code(http.as_u16());
    // The REST error's kind and errors, with the gRPC code in place of the HTTP one.
    let error: Value = serde_json::from_slice(&body).unwrap_or_else(|_| json!({}));
    let kind = error
        .get("kind")
        .and_then(Value::as_str)
        .unwrap_or(if code == Code::Internal {
            "internal"
        } else {
            "validation"
        });
    let errors = match error.get("errors").and_then(Value::as_array) {
        Some(errors) => errors
            .iter()
            .map(|e| e.as_str().map_or_else(|| e.to_string(), str::to_string))
            .collect(),
        None => vec![String::from_utf8_lossy(&body).into_owned()],
    };
    Err(otg_status(code, kind, errors))
}

fn unsupported(call: &str) -> Status {
    otg_status(
        Code::Unimplemented,
        "validation",
        vec![format!(
            "{call} is not supported: strobe serves {SUPPORTED} over gRPC"
        )],
    )
}

/// The server streams of the streaming calls, none of which strobe serves.
type NoStream = futures_util::stream::Empty<Result<otg::Data, Status>>;

#[tonic::async_trait]
impl Openapi for OtgGrpc {
    async fn set_config(
        &self,
        request: Request<otg::SetConfigRequest>,
    ) -> Result<Response<otg::SetConfigResponse>, Status> {
        let config = request.into_inner().config.unwrap_or_default();
        let warning = self
            .message(Method::POST, "/config", request_body(&config)?)
            .await?;
        Ok(Response::new(otg::SetConfigResponse {
            warning: Some(warning),
        }))
    }

    async fn get_config(
        &self,
        _request: Request<()>,
    ) -> Result<Response<otg::GetConfigResponse>, Status> {
        let config = self.message(Method::GET, "/config", Bytes::new()).await?;
        Ok(Response::new(otg::GetConfigResponse {
            config: Some(config),
        }))
    }

    async fn set_control_state(
        &self,
        request: Request<otg::SetControlStateRequest>,
    ) -> Result<Response<otg::SetControlStateResponse>, Status> {
        let state = request.into_inner().control_state.unwrap_or_default();
        let body = request_body(&state)?;
        let warning = self.message(Method::POST, "/control/state", body).await?;
        Ok(Response::new(otg::SetControlStateResponse {
            warning: Some(warning),
        }))
    }

    async fn get_metrics(
        &self,
        request: Request<otg::GetMetricsRequest>,
    ) -> Result<Response<otg::GetMetricsResponse>, Status> {
        let wanted = request.into_inner().metrics_request.unwrap_or_default();
        let body = request_body(&wanted)?;
        // strobe's `x_strobe` detail has no place in the proto: it is dropped on reading.
        let metrics = self.message(Method::POST, "/monitor/metrics", body).await?;
        Ok(Response::new(otg::GetMetricsResponse {
            metrics_response: Some(metrics),
        }))
    }

    async fn get_capture(
        &self,
        request: Request<otg::GetCaptureRequest>,
    ) -> Result<Response<otg::GetCaptureResponse>, Status> {
        let wanted = request.into_inner().capture_request.unwrap_or_default();
        let body = request_body(&wanted)?;
        let bytes = self.call(Method::POST, "/monitor/capture", body).await?;
        Ok(Response::new(otg::GetCaptureResponse {
            response_bytes: bytes.to_vec(),
        }))
    }

    async fn get_version(
        &self,
        _request: Request<()>,
    ) -> Result<Response<otg::GetVersionResponse>, Status> {
        let version = self
            .message(Method::GET, "/capabilities/version", Bytes::new())
            .await?;
        Ok(Response::new(otg::GetVersionResponse {
            version: Some(version),
        }))
    }

    async fn update_config(
        &self,
        request: Request<otg::UpdateConfigRequest>,
    ) -> Result<Response<otg::UpdateConfigResponse>, Status> {
        let update = request.into_inner().config_update.unwrap_or_default();
        let body = request_body(&update)?;
        let warning = self.message(Method::PATCH, "/config", body).await?;
        Ok(Response::new(otg::UpdateConfigResponse {
            warning: Some(warning),
        }))
    }

    async fn append_config(
        &self,
        _request: Request<otg::AppendConfigRequest>,
    ) -> Result<Response<otg::AppendConfigResponse>, Status> {
        Err(unsupported("AppendConfig"))
    }

    async fn delete_config(
        &self,
        _request: Request<otg::DeleteConfigRequest>,
    ) -> Result<Response<otg::DeleteConfigResponse>, Status> {
        Err(unsupported("DeleteConfig"))
    }

    // Both answer, as their REST routes do, an OTG error saying what strobe supports.
    async fn set_control_action(
        &self,
        request: Request<otg::SetControlActionRequest>,
    ) -> Result<Response<otg::SetControlActionResponse>, Status> {
        let action = request.into_inner().control_action.unwrap_or_default();
        let response = self
            .message(Method::POST, "/control/action", request_body(&action)?)
            .await?;
        Ok(Response::new(otg::SetControlActionResponse {
            control_action_response: Some(response),
        }))
    }

    async fn get_states(
        &self,
        request: Request<otg::GetStatesRequest>,
    ) -> Result<Response<otg::GetStatesResponse>, Status> {
        let wanted = request.into_inner().states_request.unwrap_or_default();
        let states = self
            .message(Method::POST, "/monitor/states", request_body(&wanted)?)
            .await?;
        Ok(Response::new(otg::GetStatesResponse {
            states_response: Some(states),
        }))
    }

    async fn stream_set_config(
        &self,
        _request: Request<tonic::Streaming<otg::Data>>,
    ) -> Result<Response<otg::SetConfigResponse>, Status> {
        Err(unsupported("streamSetConfig"))
    }

    type streamGetConfigStream = NoStream;

    async fn stream_get_config(
        &self,
        _request: Request<()>,
    ) -> Result<Response<Self::streamGetConfigStream>, Status> {
        Err(unsupported("streamGetConfig"))
    }

    async fn stream_set_control_state(
        &self,
        _request: Request<tonic::Streaming<otg::Data>>,
    ) -> Result<Response<otg::SetControlStateResponse>, Status> {
        Err(unsupported("streamSetControlState"))
    }

    async fn stream_set_control_action(
        &self,
        _request: Request<tonic::Streaming<otg::Data>>,
    ) -> Result<Response<otg::SetControlActionResponse>, Status> {
        Err(unsupported("streamSetControlAction"))
    }

    type streamGetMetricsStream = NoStream;

    async fn stream_get_metrics(
        &self,
        _request: Request<otg::GetMetricsRequest>,
    ) -> Result<Response<Self::streamGetMetricsStream>, Status> {
        Err(unsupported("streamGetMetrics"))
    }

    type streamGetStatesStream = NoStream;

    async fn stream_get_states(
        &self,
        _request: Request<otg::GetStatesRequest>,
    ) -> Result<Response<Self::streamGetStatesStream>, Status> {
        Err(unsupported("streamGetStates"))
    }

    type streamGetCaptureStream = NoStream;

    async fn stream_get_capture(
        &self,
        _request: Request<otg::GetCaptureRequest>,
    ) -> Result<Response<Self::streamGetCaptureStream>, Status> {
        Err(unsupported("streamGetCapture"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proto_config_reads_as_the_otg_json_rest_takes() {
        // As snappi's gRPC transport sends it: 64-bit rates become strings in proto JSON.
        let config: otg::Config = serde_json::from_value(json!({
            "ports": [{"name": "tx", "location": "null"}, {"name": "rx", "location": "null"}],
            "flows": [{
                "name": "f",
                "tx_rx": {"choice": "port", "port": {"tx_name": "tx", "rx_names": ["rx"]}},
                "rate": {"choice": "pps", "pps": 1234},
                "size": {"choice": "fixed", "fixed": 100},
                "duration": {"choice": "fixed_packets", "fixed_packets": {"packets": 10}},
                "packet": [{"choice": "ethernet", "ethernet": {}}]
            }]
        }))
        .unwrap();
        let body: Value = serde_json::from_slice(&request_body(&config).unwrap()).unwrap();
        assert_eq!(body["flows"][0]["rate"]["pps"], "1234");
        assert_eq!(body["flows"][0]["rate"]["choice"], "pps");
        let read = strobe_control::otg::scenario_from_otg(&body, &[]).unwrap();
        assert_eq!(read.scenario.flows.len(), 1);
    }

    #[test]
    fn otg_errors_keep_their_words_with_the_grpc_code() {
        let status =
            futures_util::FutureExt::now_or_never(reply_body(Err(crate::reply::validation(vec![
                "port x: no such interface".into(),
            ]))))
            .unwrap()
            .unwrap_err();
        assert_eq!(status.code(), Code::InvalidArgument);
        let error: Value = serde_json::from_str(status.message()).unwrap();
        assert_eq!(
            error,
            json!({"code": 3, "kind": "validation", "errors": ["port x: no such interface"]})
        );
        assert_eq!(grpc_code(500), Code::Internal);
        assert_eq!(grpc_code(401), Code::Unauthenticated);
    }

    #[test]
    fn only_the_bearer_token_gets_in() {
        let with = |value: &str| {
            let mut m = tonic::metadata::MetadataMap::new();
            m.insert("authorization", value.parse().unwrap());
            carries_token(&m, "abcdefghijklmnop")
        };
        assert!(with("Bearer abcdefghijklmnop"));
        assert!(with("bearer abcdefghijklmnop"));
        assert!(!with("Bearer abcdefghijklmnoq"));
        assert!(!with("Basic abcdefghijklmnop"));
        assert!(!carries_token(
            &tonic::metadata::MetadataMap::new(),
            "abcdefghijklmnop"
        ));
    }
}

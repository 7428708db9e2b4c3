//! `lockstep ctl serve`: the HTTP/JSON front of [`Controller`] (axum on a
//! current-thread tokio runtime).
//!
//! Every request takes one mutex around the controller (admission state, allocator,
//! database): requests are serialised, there is one writer. Before each request the
//! one-shot reservations that have expired are removed; a timer does the same every
//! [`EXPIRY_TICK`] while nobody asks. Changes need `Authorization: Bearer <token>`
//! when a token file was given (401 without the header, 403 with a wrong token);
//! reads are open. `GET /nodes/{name}/schedule?after=V&wait=10s` is a long poll: it
//! answers when the schedule version passes `V`, or after the wait.
//!
//! A client cannot hold the server: request headers must arrive within
//! [`Timeouts::header`] of the connection opening or of the previous answer (so a
//! connection that sends nothing, or sits idle between requests, is closed then), and
//! a request body within [`Timeouts::body`] of its headers (else a JSON 408 and the
//! connection is closed). A stop closes connections that have sent nothing at once
//! and gives the others [`STOP_GRACE`].

use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration as StdDuration;

use axum::body::{Body, Bytes};
use axum::extract::{Path, Query, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http_body_util::BodyExt;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use serde::Deserialize;
use serde_json::json;
use tokio::sync::watch;

use super::api::ApiError;
use super::state::{Answer, Controller};

/// How often the timer looks for expired one-shot reservations.
pub const EXPIRY_TICK: StdDuration = StdDuration::from_millis(20);
/// Longest long poll of a schedule.
pub const MAX_WAIT: StdDuration = StdDuration::from_secs(30);

/// How long the server waits for a client.
#[derive(Clone, Copy, Debug)]
pub struct Timeouts {
    /// For a request's headers, counted from the connection opening or from the
    /// previous answer on it: also how long an idle kept-alive connection stays open.
    pub header: StdDuration,
    /// For a request's body, counted from its headers.
    pub body: StdDuration,
}

struct Shared {
    ctl: Mutex<Controller>,
    token: Option<String>,
    version: watch::Sender<u64>,
    /// Set when a stop was asked for: long polls answer at once.
    stopping: watch::Sender<bool>,
}

type St = Arc<Shared>;

/// Wall-clock (CLOCK_REALTIME) nanoseconds: one-shot expiry survives a restart.
pub fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| i64::try_from(d.as_nanos()).unwrap_or(i64::MAX))
        .unwrap_or(0)
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Controller> {
        // A handler that panicked cannot have left the state half-changed: every
        // change is decided before it is applied. Keep serving.
        self.ctl.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Runs `f` on the controller after expiring one-shots; tells long polls about a
    /// new schedule version.
    fn with<F>(&self, f: F) -> Result<Answer, ApiError>
    where
        F: FnOnce(&mut Controller, i64) -> Result<Answer, ApiError>,
    {
        let mut ctl = self.lock();
        let now = now_ns();
        ctl.expire(now)?;
        let out = f(&mut ctl, now);
        let v = ctl.version();
        drop(ctl);
        self.version.send_if_modified(|old| {
            let changed = *old != v;
            *old = v;
            changed
        });
        out
    }

    fn authorize(&self, headers: &HeaderMap) -> Result<(), ApiError> {
        let Some(token) = &self.token else {
            return Ok(());
        };
        let Some(value) = headers.get("authorization") else {
            return Err(ApiError {
                status: 401,
                body: json!({ "error": "this change needs Authorization: Bearer <token>" }),
            });
        };
        let given = value
            .to_str()
            .ok()
            .and_then(|v| v.strip_prefix("Bearer "))
            .map(str::trim)
            .unwrap_or("");
        if !same(given.as_bytes(), token.as_bytes()) {
            return Err(ApiError {
                status: 403,
                body: json!({ "error": "wrong token" }),
            });
        }
        Ok(())
    }

    fn change<F>(&self, headers: &HeaderMap, f: F) -> Response
    where
        F: FnOnce(&mut Controller, i64) -> Result<Answer, ApiError>,
    {
        respond(self.authorize(headers).and_then(|()| self.with(f)))
    }

    fn read<F>(&self, f: F) -> Response
    where
        F: FnOnce(&Controller) -> Result<Answer, ApiError>,
    {
        respond(self.with(|c, _| f(c)))
    }
}

/// Compares without stopping at the first difference.
fn same(a: &[u8], b: &[u8]) -> bool {
    if a.len() != b.len() {
        return false;
    }
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

fn respond(r: Result<Answer, ApiError>) -> Response {
    let (status, body) = match r {
        Ok(a) => a,
        Err(e) => (e.status, e.body),
    };
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (code, Json(body)).into_response()
}

/// The routes (see `docs/CONTROLLER.md`); bodies are read within `body_timeout`.
fn router(state: St, body_timeout: StdDuration) -> Router {
    Router::new()
        .route("/network", get(|State(s): State<St>| async move { s.read(|c| Ok(c.network())) }))
        .route(
            "/flows",
            get(|State(s): State<St>| async move { s.read(|c| Ok(c.list())) }).post(
                |State(s): State<St>, h: HeaderMap, body: Bytes| async move {
                    s.change(&h, |c, now| c.add_flow(&body, now))
                },
            ),
        )
        .route(
            "/flows/{name}",
            get(|State(s): State<St>, Path(n): Path<String>| async move {
                s.read(|c| c.show(&n))
            })
            .delete(
                |State(s): State<St>, h: HeaderMap, Path(n): Path<String>| async move {
                    s.change(&h, |c, _| c.remove(&n))
                },
            ),
        )
        .route(
            "/best-effort/{sender}/standing",
            post(
                |State(s): State<St>, h: HeaderMap, Path(n): Path<String>, body: Bytes| async move {
                    s.change(&h, |c, now| c.add_standing(&n, &body, now))
                },
            )
            .delete(
                |State(s): State<St>, h: HeaderMap, Path(n): Path<String>| async move {
                    s.change(&h, |c, _| c.remove_standing(&n))
                },
            ),
        )
        .route(
            "/best-effort/{sender}/oneshot",
            post(
                |State(s): State<St>, h: HeaderMap, Path(n): Path<String>, body: Bytes| async move {
                    s.change(&h, |c, now| c.add_oneshot(&n, &body, now))
                },
            ),
        )
        .route(
            "/tdp/flows",
            get(|State(s): State<St>| async move { s.read(|c| c.list_tdp()) }).post(
                |State(s): State<St>, h: HeaderMap, body: Bytes| async move {
                    s.change(&h, |c, now| c.add_tdp(&body, now))
                },
            ),
        )
        .route(
            "/tdp/flows/{name}",
            get(|State(s): State<St>, Path(n): Path<String>| async move {
                s.read(|c| c.show_tdp(&n))
            })
            .delete(
                |State(s): State<St>, h: HeaderMap, Path(n): Path<String>| async move {
                    s.change(&h, |c, _| c.remove_tdp(&n))
                },
            ),
        )
        .route("/nodes/{name}/schedule", get(schedule))
        .fallback(|| async {
            respond(Err(ApiError::not_found(
                "no such endpoint (see docs/CONTROLLER.md)",
            )))
        })
        .layer(axum::middleware::from_fn_with_state(body_timeout, read_body))
        .with_state(state)
}

/// Largest request body accepted.
const MAX_BODY: usize = 64 * 1024;

/// Reads the whole request body before the handler runs: at most [`MAX_BODY`] (else
/// 413) within `limit` of the headers (else 408); both close the connection, whose
/// unread rest cannot be told from the next request.
async fn read_body(State(limit): State<StdDuration>, req: Request, next: Next) -> Response {
    let (parts, body) = req.into_parts();
    let limited = http_body_util::Limited::new(body, MAX_BODY);
    let error = match tokio::time::timeout(limit, limited.collect()).await {
        Ok(Ok(collected)) => {
            let req = Request::from_parts(parts, Body::from(collected.to_bytes()));
            return next.run(req).await;
        }
        Err(_) => ApiError {
            status: 408,
            body: json!({
                "error": format!(
                    "the request body did not arrive within {}",
                    lockstep_core::Duration(i64::try_from(limit.as_nanos()).unwrap_or(i64::MAX))
                ),
                "field": null,
            }),
        },
        Ok(Err(e))
            if e.downcast_ref::<http_body_util::LengthLimitError>()
                .is_some() =>
        {
            ApiError {
                status: 413,
                body: json!({
                    "error": format!("the request body is larger than {} KiB", MAX_BODY / 1024),
                    "field": null,
                }),
            }
        }
        Ok(Err(e)) => ApiError::bad_request(None, format!("cannot read the request body: {e}")),
    };
    let mut res = respond(Err(error));
    res.headers_mut()
        .insert(header::CONNECTION, HeaderValue::from_static("close"));
    res
}

#[derive(Deserialize)]
struct ScheduleQuery {
    /// Answer once the version is above this.
    after: Option<u64>,
    /// How long to wait for that (`10s`; at most [`MAX_WAIT`]).
    wait: Option<String>,
}

async fn schedule(
    State(s): State<St>,
    Path(node): Path<String>,
    q: Result<Query<ScheduleQuery>, axum::extract::rejection::QueryRejection>,
) -> Response {
    let q = match q {
        Ok(Query(q)) => q,
        Err(e) => return respond(Err(ApiError::bad_request(None, e.body_text()))),
    };
    let wait = match q.wait.as_deref().map(lockstep_core::Duration::parse) {
        None => StdDuration::from_secs(10),
        Some(Ok(d)) if !d.is_negative() => {
            StdDuration::from_nanos(d.as_nanos() as u64).min(MAX_WAIT)
        }
        Some(Ok(d)) => {
            let why = format!("expected a duration of 0 or more like 10s, got \"{d}\"");
            return respond(Err(ApiError::field("wait", why)));
        }
        Some(Err(e)) => return respond(Err(ApiError::field("wait", e.to_string()))),
    };
    let deadline = tokio::time::Instant::now() + wait;
    let mut rx = s.version.subscribe();
    let mut stop = s.stopping.subscribe();
    loop {
        let r = s.with(|c, _| c.schedule(&node));
        let newer = match (&r, q.after) {
            (Ok((_, v)), Some(after)) => v["version"].as_u64().is_some_and(|v| v > after),
            _ => true,
        };
        if newer || tokio::time::Instant::now() >= deadline {
            return respond(r);
        }
        if *stop.borrow() {
            return respond(r);
        }
        let woken = tokio::select! {
            changed = tokio::time::timeout_at(deadline, rx.changed()) => changed.is_ok(),
            _ = stop.changed() => false,
        };
        if !woken {
            return respond(s.with(|c, _| c.schedule(&node)));
        }
    }
}

/// Serves until SIGINT/SIGTERM. `on_listen` gets the bound address (port 0 picks one).
pub fn serve(
    ctl: Controller,
    listen: SocketAddr,
    token: Option<String>,
    timeouts: Timeouts,
    on_listen: impl FnOnce(SocketAddr),
) -> std::io::Result<()> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let listener = tokio::net::TcpListener::bind(listen).await?;
        on_listen(listener.local_addr()?);
        let version = watch::Sender::new(ctl.version());
        let shared = Arc::new(Shared {
            ctl: Mutex::new(ctl),
            token,
            version,
            stopping: watch::Sender::new(false),
        });
        let timer = shared.clone();
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(EXPIRY_TICK);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let mut c = timer.lock();
                if c.next_expiry().is_some_and(|t| t <= now_ns()) {
                    if let Err(e) = c.expire(now_ns()) {
                        eprintln!(
                            "lockstep ctl: expiring one-shot reservations: {}",
                            e.message()
                        );
                    }
                }
            }
        });
        let app = router(shared.clone(), timeouts.body);
        let mut http = hyper::server::conn::http1::Builder::new();
        http.timer(TokioTimer::new())
            .header_read_timeout(timeouts.header);
        let mut conns = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((tcp, _)) => {
                        let conn = http.serve_connection(
                            TokioIo::new(tcp),
                            TowerToHyperService::new(app.clone()),
                        );
                        let mut stop = shared.stopping.subscribe();
                        conns.spawn(async move {
                            tokio::pin!(conn);
                            tokio::select! {
                                _ = conn.as_mut() => return,
                                _ = stop.wait_for(|s| *s) => {}
                            }
                            // closes at once if nothing was received; else after the
                            // answer in progress
                            conn.as_mut().graceful_shutdown();
                            let _ = conn.await;
                        });
                    }
                    // out of file descriptors and the like: the clients in flight
                    // finish, then accepting goes on
                    Err(e) => {
                        eprintln!("lockstep ctl: accepting a connection: {e}");
                        tokio::time::sleep(StdDuration::from_millis(100)).await;
                    }
                },
                Some(_) = conns.join_next(), if !conns.is_empty() => {}
                _ = stop_requested() => break,
            }
        }
        drop(listener);
        // long polls answer at once; requests in flight get STOP_GRACE to finish, a
        // client that is slow to send or read is not waited for longer
        shared.stopping.send_replace(true);
        let _ = tokio::time::timeout(STOP_GRACE, async {
            while conns.join_next().await.is_some() {}
        })
        .await;
        conns.abort_all();
        Ok(())
    })
}

/// How long a stopping controller waits for requests in flight.
pub const STOP_GRACE: StdDuration = StdDuration::from_millis(1500);

/// Resolves once SIGINT or SIGTERM arrived.
async fn stop_requested() {
    while !lockstep_linux::signal::stop_requested() {
        tokio::time::sleep(StdDuration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::same;

    #[test]
    fn token_comparison() {
        assert!(same(b"abc", b"abc"));
        assert!(!same(b"abc", b"abd"));
        assert!(!same(b"abc", b"ab"));
        assert!(same(b"", b""));
    }
}

//! The course's XP award behind axum-idempotent, as its README sets it up,
//! for `idem probe` to judge (see the README's "A guard from crates.io").
//!
//! `POST /lessons/{lesson}/complete` does the same work as idem's app: a
//! 20 ms service call, then one row in `experience_points`. The middleware
//! uses the `Idempotency-Key` header as its key and requires it; responses
//! live in an in-memory session store (moka). `POST /session` starts a
//! session and answers with its cookie, for a client that wants one.
//!
//! DATABASE_URL names the database (it creates its table there); PORT=0
//! takes a free port; the first line printed says where it listens.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::routing::post;
use axum::{Json, Router};
use axum_idempotent::{IdempotentLayer, IdempotentOptions};
use ruts::store::Ttl;
use ruts::store::moka::MokaStore;
use ruts::{CookieOptions, Session, SessionLayer};
use serde::Deserialize;
use serde_json::{Value, json};
use tower_cookies::CookieManagerLayer;

#[derive(Deserialize)]
struct Award {
    user_id: i64,
    amount: i32,
}

async fn complete(
    State(db): State<Arc<tokio_postgres::Client>>,
    Path(lesson): Path<i32>,
    Json(award): Json<Award>,
) -> Result<(StatusCode, Json<Value>), (StatusCode, String)> {
    tokio::time::sleep(Duration::from_millis(20)).await; // the service call
    let row = db
        .query_one(
            "INSERT INTO experience_points (user_id, amount, lesson) VALUES ($1, $2, $3) RETURNING id",
            &[&award.user_id, &award.amount, &lesson],
        )
        .await
        .map_err(|e| (StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    let xp: i64 = row.get(0);
    let body =
        json!({ "xp_id": xp, "user_id": award.user_id, "amount": award.amount, "lesson": lesson });
    Ok((StatusCode::CREATED, Json(body)))
}

async fn start_session(session: Session<MokaStore>) -> StatusCode {
    let ttl = Ttl::new(3600).expect("an hour is a valid TTL");
    match session.set("user_id", &42_i64, ttl, None).await {
        Ok(()) => StatusCode::NO_CONTENT,
        Err(_) => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[tokio::main]
async fn main() {
    let url = std::env::var("DATABASE_URL").expect("set DATABASE_URL");
    let (db, connection) = tokio_postgres::connect(&url, tokio_postgres::NoTls)
        .await
        .expect("the database accepts a connection");
    tokio::spawn(connection);
    db.batch_execute(
        "CREATE TABLE IF NOT EXISTS experience_points (
             id bigserial PRIMARY KEY, user_id bigint NOT NULL,
             amount integer NOT NULL, lesson integer NOT NULL)",
    )
    .await
    .expect("the table is made");

    let store = Arc::new(MokaStore::builder().build());
    let idempotency = IdempotentOptions::default()
        .use_idempotency_key_header(Some("Idempotency-Key"), true)
        .replay_header_name("Idempotent-Replayed");
    let app = Router::new()
        .route("/lessons/{lesson}/complete", post(complete))
        .layer(IdempotentLayer::<MokaStore>::new(idempotency))
        .route("/session", post(start_session))
        .layer(
            SessionLayer::new(store).with_cookie_options(
                CookieOptions::build()
                    .name("session")
                    .max_age(3600)
                    .path("/"),
            ),
        )
        .layer(CookieManagerLayer::new())
        .with_state(Arc::new(db));

    let port = std::env::var("PORT").unwrap_or_else(|_| "4568".into());
    let listener = tokio::net::TcpListener::bind(format!("127.0.0.1:{port}"))
        .await
        .expect("the port is free");
    println!("listening on http://{}", listener.local_addr().unwrap());
    axum::serve(listener, app).await.unwrap();
}

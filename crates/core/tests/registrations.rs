//! The registration functions of `hold_lib.lua` (`reg_entry`, `reg_read`,
//! `reg_register`, `reg_drop`, `reg_grant`), run on a real server: one
//! entry layout for every primitive that grants inside a release, read back
//! field by field, registered once per field, removed only by its own
//! attempt, and granted with the claim counted from the registration.

use deadbolt_core::scripts::{LuaScript, HOLD_LIB, MSG_LIB};
use deadbolt_testkit::RedisServer;

/// Runs one registration function per call: ARGV[1] names it, KEYS[1] is
/// the hash a registration lives in.
static REG: LuaScript = LuaScript::with_libs(
    "reg_probe",
    &[MSG_LIB, HOLD_LIB],
    "-- reg_probe — one of hold_lib.lua's registration functions per call.
-- KEYS[1]  the hash a registration lives in
-- ARGV[1]  'entry' | 'read' | 'register' | 'drop' | 'grant', then its
--          arguments
-- Reply: what the function returned, as a flat array of strings
local f, a = ARGV[1], {}
for i = 2, #ARGV do
  a[i - 1] = ARGV[i]
end
local function fields(e)
  if not e then
    return {'none'}
  end
  return {e.owner, e.attempt, tostring(e.claim), e.secret,
    string.format('%.0f', e.at), e.extra or '-'}
end
if f == 'entry' then
  return reg_entry(a[1], a[2], a[3], a[4], a[5], tonumber(a[6]), a[7])
elseif f == 'read' then
  return fields(reg_read(a[1]))
elseif f == 'register' then
  local fresh, secret = reg_register(KEYS[1], a[1], a[2], a[3], a[4])
  return {tostring(fresh), tostring(secret)}
elseif f == 'drop' then
  return tostring(reg_drop(KEYS[1], a[1], a[2]))
end
local line, c = reg_grant(reg_read(a[1]), a[2], tonumber(a[3]))
return {line, tostring(c)}
",
);

async fn call<T: redis::FromRedisValue>(
    conn: &mut redis::aio::MultiplexedConnection,
    args: &[&str],
) -> T {
    let script = redis::Script::new(REG.source());
    let mut inv = script.key("reg:h");
    for a in args {
        inv.arg(*a);
    }
    inv.invoke_async(conn).await.expect("reg_probe")
}

#[tokio::test]
async fn one_entry_layout_reads_back_field_by_field() {
    let srv = RedisServer::start().expect("redis-server");
    let mut c = srv.conn().await;
    let e: String = call(
        &mut c,
        &[
            "entry",
            "c1:h1",
            "a1s7",
            "30000",
            "500",
            "42",
            "1700000000123",
        ],
    )
    .await;
    // The claim kept is at most the lease: what a grant holds for.
    assert_eq!(e, "c1:h1 a1s7 500 42 1700000000123");
    let short: String = call(
        &mut c,
        &["entry", "h1", "a1s7", "200", "500", "42", "1700000000123"],
    )
    .await;
    assert_eq!(short, "h1 a1s7 200 42 1700000000123");
    let with_n: String = call(
        &mut c,
        &[
            "entry",
            "c1:h1",
            "a1s7",
            "30000",
            "500",
            "42",
            "1700000000123",
            "3",
        ],
    )
    .await;
    assert_eq!(with_n, "c1:h1 a1s7 500 42 1700000000123 3");
    let read: Vec<String> = call(&mut c, &["read", &e]).await;
    assert_eq!(read, ["c1:h1", "a1s7", "500", "42", "1700000000123", "-"]);
    let read: Vec<String> = call(&mut c, &["read", &with_n]).await;
    assert_eq!(read[5], "3");
    // Anything else is no registration: too few fields, a garbled text.
    for other in [
        "c1:h1 500 42 1700000000123",
        "c1:h1 30000 500 42",
        "c1:h1 a1 x 500 42 1",
        "",
    ] {
        let read: Vec<String> = call(&mut c, &["read", other]).await;
        assert_eq!(read, ["none"], "{other:?}");
    }
}

#[tokio::test]
async fn a_field_is_registered_once_and_dropped_only_by_its_attempt() {
    let srv = RedisServer::start().expect("redis-server");
    let mut c = srv.conn().await;
    let mine = "c1:h1 a1 500 11 1000";
    let r: Vec<String> = call(&mut c, &["register", "d:c1", mine, "a1", "11"]).await;
    assert_eq!(r, ["1", "11"]);
    // A later call of the same attempt finds its registration and the
    // secret it was made with, not its own.
    let again = "c1:h1 a1 500 99 2000";
    let r: Vec<String> = call(&mut c, &["register", "d:c1", again, "a1", "99"]).await;
    assert_eq!(r, ["0", "11"]);
    // Another attempt of the client is not registered over it.
    let other = "c1:h2 a2 500 77 2000";
    let r: Vec<String> = call(&mut c, &["register", "d:c1", other, "a2", "77"]).await;
    assert_eq!(r, ["nil", "nil"]);
    let dropped: String = call(&mut c, &["drop", "d:c1", "a2"]).await;
    assert_eq!(dropped, "false");
    let kept: Option<String> = redis::cmd("HGET")
        .arg("reg:h")
        .arg("d:c1")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(kept.as_deref(), Some(mine));
    let dropped: String = call(&mut c, &["drop", "d:c1", "a1"]).await;
    assert_eq!(dropped, "true");
    let gone: Option<String> = redis::cmd("HGET")
        .arg("reg:h")
        .arg("d:c1")
        .query_async(&mut c)
        .await
        .unwrap();
    assert_eq!(gone, None);
    // A key of another type registers nothing and drops nothing, by pcall.
    let _: () = redis::cmd("SET")
        .arg("reg:h")
        .arg("x")
        .query_async(&mut c)
        .await
        .unwrap();
    let r: Vec<String> = call(&mut c, &["register", "d:c1", mine, "a1", "11"]).await;
    assert_eq!(r, ["nil", "nil"]);
    let dropped: String = call(&mut c, &["drop", "d:c1", "a1"]).await;
    assert_eq!(dropped, "false");
}

#[tokio::test]
async fn a_grant_holds_for_the_claim_counted_from_the_registration() {
    let srv = RedisServer::start().expect("redis-server");
    let mut c = srv.conn().await;
    // Registered at 1000 under a claim of 500 ms, granted at 1300: the
    // hold's TTL is the claim, the waiter's validity the claim plus the
    // 300 ms it waited (it counts from its request).
    let e = "c1:h1 a1 500 11 1000";
    let r: Vec<String> = call(&mut c, &["grant", e, "77", "1300"]).await;
    assert_eq!(r, ["g:a1 77 800 11 500", "500"]);
}

//! The database helpers: owned statements merged into multi-row inserts, run on a real SQLite
//! database.

use llembas_server::db::{self, Stmt};

#[test]
fn runs_of_one_insert_become_multi_row_inserts_and_others_stay_in_order() {
    let insert = "INSERT INTO t (a, b, c) VALUES ($1, 'x', $2)";
    let update = "UPDATE t SET a = $1 WHERE a = $2";
    let stmts = vec![
        Stmt::new(insert).int(1).text(Some("one")),
        Stmt::new(insert).int(2).text(None),
        Stmt::new(insert).int(3).text(Some("three")),
        Stmt::new(update).int(30).int(3),
        Stmt::new(insert).int(4).text(Some("four")),
    ];
    let merged = Stmt::merged(&stmts, 2);
    let shown: Vec<String> = merged.iter().map(|s| format!("{s:?}")).collect();
    assert_eq!(merged.len(), 4, "{shown:#?}");
    assert!(
        shown[0].contains("VALUES ($1, 'x', $2), ($3, 'x', $4)"),
        "{}",
        shown[0]
    );
    assert!(shown[1].contains("VALUES ($1, 'x', $2)\""), "{}", shown[1]);
    assert!(shown[2].contains(update), "{}", shown[2]);
    assert!(shown[3].contains("VALUES ($1, 'x', $2)\""), "{}", shown[3]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merged_statements_store_every_row_with_its_own_values() {
    let dir = tempfile::tempdir().unwrap();
    let pool = db::open(&db::sqlite_url(&dir.path().join("t.db")))
        .await
        .unwrap();
    sqlx::query("CREATE TABLE t (a INTEGER, b TEXT, c TEXT)")
        .execute(&pool)
        .await
        .unwrap();
    let insert = "INSERT INTO t (a, b, c) VALUES ($1, 'x', $2)";
    let stmts: Vec<Stmt> = (1..=37)
        .map(|i| Stmt::new(insert).int(i).text(Some(&format!("v{i}"))))
        .collect();
    for s in Stmt::merged(&stmts, 16) {
        db::execute(&pool, s.query()).await.unwrap();
    }
    let rows: Vec<(i64, String, String)> = sqlx::query_as("SELECT a, b, c FROM t ORDER BY a")
        .fetch_all(&pool)
        .await
        .unwrap();
    assert_eq!(rows.len(), 37);
    for (i, (a, b, c)) in rows.into_iter().enumerate() {
        let i = i64::try_from(i).unwrap() + 1;
        assert_eq!((a, b.as_str(), c), (i, "x", format!("v{i}")));
    }
}

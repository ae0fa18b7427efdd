//! The file-backed local engine indexes its stream table, and SQLite uses those indexes for the
//! engine's two per-write and per-read stream queries. The queries below are dynoxide 3.2's own
//! (`Storage::next_stream_sequence_number` and `Storage::stream_records_with_event_ids`): if an
//! upgrade words them differently this test fails, and the indexes in `Engine::start` need
//! another look.

use gridline_local::Engine;

const NEXT_SEQUENCE: &str = "SELECT COALESCE(MAX(CAST(sequence_number AS INTEGER)), 0) + 1 \
     FROM _stream_records WHERE table_name = ?1";
const READ_RECORDS: &str = "SELECT event_name, keys_json, new_image, old_image, sequence_number, \
     created_at, user_identity, event_id FROM _stream_records \
     WHERE table_name = ?1 AND shard_id = ?2 AND CAST(sequence_number AS INTEGER) > ?3 \
     ORDER BY CAST(sequence_number AS INTEGER) ASC LIMIT ?4";

fn plan(conn: &rusqlite::Connection, sql: &str) -> String {
    let mut stmt = conn
        .prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
        .expect("prepare");
    let rows = stmt
        .query_map(
            rusqlite::params_from_iter(
                ["t", "s", "1", "100"].iter().take(sql.matches('?').count()),
            ),
            |r| r.get::<_, String>(3),
        )
        .expect("plan");
    rows.map(|r| r.expect("row")).collect::<Vec<_>>().join("; ")
}

#[tokio::test]
async fn a_file_backed_engine_reads_and_extends_its_stream_through_an_index() {
    let dir = std::env::temp_dir().join(format!("gridline-engine-{}", std::process::id()));
    let db = dir.join("engine.db");
    // Twice: the second start finds the indexes already there.
    for _ in 0..2 {
        let engine = Engine::start(Some(&db), 0).await.expect("engine");
        let conn = rusqlite::Connection::open(&db).expect("open");
        let next = plan(&conn, NEXT_SEQUENCE);
        assert!(next.contains("gridline_stream_next"), "{next}");
        let read = plan(&conn, READ_RECORDS);
        assert!(read.contains("gridline_stream_read"), "{read}");
        assert!(!read.contains("TEMP B-TREE"), "reads must not sort: {read}");
        drop(engine);
    }
    let _ = std::fs::remove_dir_all(dir);
}

//! Bench helper (bench/qdrant_gcide.py) when the full `searchd` binary is not built: the
//! same library calls as `searchd gt`, `searchd ingest --vectors` and `searchd ingest --to
//! qdrant://`, without the embedder's dependencies.
//!
//! ```text
//! qdrant_prep gt BASE.npy QUERIES.npy OUT.npy K
//! qdrant_prep collection DOCS.jsonl BASE.npy OUT_DIR
//! qdrant_prep upload COLL_DIR qdrant://HOST:6334/NAME [SHARDS REPLICAS] > report.json
//! ```

use std::path::Path;
use std::sync::Arc;

fn unit(v: &searchd_vecio::Vectors) -> Vec<f32> {
    let mut out = v.as_slice().to_vec();
    for r in out.chunks_mut(v.dim()) {
        let n = r.iter().map(|x| x * x).sum::<f32>().sqrt();
        if n > 0.0 {
            r.iter_mut().for_each(|x| *x /= n);
        }
    }
    out
}

fn main() {
    let a: Vec<String> = std::env::args().collect();
    let fail = |m: String| -> ! {
        eprintln!("error: {m}");
        std::process::exit(2)
    };
    match a.get(1).map(String::as_str) {
        Some("gt") if a.len() == 6 => {
            let base = searchd_vecio::read_vectors(Path::new(&a[2])).unwrap_or_else(|e| fail(e.to_string()));
            let q = searchd_vecio::read_vectors(Path::new(&a[3])).unwrap_or_else(|e| fail(e.to_string()));
            let k: usize = a[5].parse().unwrap_or(10);
            let res = searchd_engine::exact::knn(
                searchd_engine::Metric::Cosine,
                &unit(&base),
                &unit(&q),
                base.dim(),
                k,
                &|_| {},
            );
            let ids: Vec<i32> = res.iter().flat_map(|r| r.iter().map(|n| n.id as i32)).collect();
            searchd_vecio::write_ids(Path::new(&a[4]), &ids, q.n(), k).unwrap_or_else(|e| fail(e.to_string()));
        }
        Some("collection") if a.len() == 5 => {
            let mut c = searchd_collection::ingest::IngestConfig::new(&a[2], &a[4]);
            c.vectors_file = Some(a[3].clone().into());
            c.build.threads = 2;
            c.build.force = true;
            c.lexical = None;
            let r = searchd_collection::ingest::ingest(&c, None, &|_| {}).unwrap_or_else(|e| fail(e.to_string()));
            println!("{{\"docs\": {}, \"build_s\": {:.1}}}", r.docs, r.build_seconds);
        }
        Some("upload") if a.len() == 4 || a.len() == 6 => {
            let (url, name) = searchd_server::qdrant::admin::parse_target(&a[3]).unwrap_or_else(|e| fail(e));
            let coll = Arc::new(
                searchd_collection::LiveDocs::open(Path::new(&a[2]), &Default::default())
                    .unwrap_or_else(|e| fail(e.to_string())),
            );
            let mut o = searchd_server::qdrant::admin::IngestOptions {
                existing: searchd_server::qdrant::admin::Existing::Recreate,
                ..Default::default()
            };
            if a.len() == 6 {
                o.shards = a[4].parse().unwrap_or(1);
                o.replicas = a[5].parse().unwrap_or(1);
            }
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .enable_all()
                .build()
                .unwrap();
            let r = rt
                .block_on(searchd_server::qdrant::admin::ingest_collection(&url, &name, coll, &o, Arc::new(|_| {})))
                .unwrap_or_else(|e| fail(e));
            println!("{}", serde_json::to_string(&r).unwrap());
        }
        _ => fail("usage: qdrant_prep gt BASE QUERIES OUT K | collection DOCS BASE OUT | upload COLL qdrant://H:P/NAME [SHARDS REPLICAS]".into()),
    }
}

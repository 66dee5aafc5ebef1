//! Building a lexical index: rows in order, then one merged tantivy segment.

use std::path::{Path, PathBuf};
use std::time::Instant;

use tantivy::indexer::{IndexWriterOptions, NoMergePolicy};
use tantivy::schema::{
    Field, IndexRecordOption, NumericOptions, Schema, TextFieldIndexing, TextOptions,
};
use tantivy::tokenizer::TextAnalyzer;
use tantivy::{Index, IndexSettings, IndexSortByField, IndexWriter, Order, TantivyDocument};

use crate::{
    index_files, write_meta, Error, LexicalConfig, LexicalMeta, Result, BM25_B, BM25_K1, FORMAT,
    MIN_HEAP_BYTES_PER_THREAD,
};

pub(crate) const TEXT_FIELD: &str = "text";
pub(crate) const ROW_FIELD: &str = "row";
/// The row's exact token count (the fieldnorm is quantized above 40 tokens): what a
/// collection subtracts from the total when the row is deleted.
pub(crate) const LEN_FIELD: &str = "len";

/// tantivy allows at most this many indexing threads.
const MAX_THREADS: usize = 8;
/// tantivy's per-thread budget must stay below `u32::MAX - 1 MB`.
const MAX_HEAP_BYTES_PER_THREAD: usize = u32::MAX as usize - 2_000_000;

/// Writes the lexical index of one segment. Rows are added as 0, 1, 2, ...;
/// [`finish`](LexicalWriter::finish) commits and merges. Dropping the writer without
/// `finish` leaves an unusable directory (no `searchd-lexical.json`) for the caller to remove.
pub struct LexicalWriter {
    dir: PathBuf,
    cfg: LexicalConfig,
    writer: IndexWriter<TantivyDocument>,
    text: Field,
    row: Field,
    len: Field,
    /// The documents' analyzer, to count each row's tokens.
    counter: TextAnalyzer,
    next_row: u64,
    started: Instant,
}

fn check_config(cfg: &LexicalConfig) -> Result<()> {
    if cfg.threads == 0 || cfg.threads > MAX_THREADS {
        return Err(Error::InvalidConfig(format!(
            "threads = {} (must be 1..={MAX_THREADS})",
            cfg.threads
        )));
    }
    let per_thread = cfg.writer_heap_bytes / cfg.threads;
    if per_thread < MIN_HEAP_BYTES_PER_THREAD {
        return Err(Error::InvalidConfig(format!(
            "writer_heap_bytes = {} is too small for {} thread(s): tantivy needs at least \
             {MIN_HEAP_BYTES_PER_THREAD} bytes per thread",
            cfg.writer_heap_bytes, cfg.threads
        )));
    }
    if per_thread >= MAX_HEAP_BYTES_PER_THREAD {
        return Err(Error::InvalidConfig(format!(
            "writer_heap_bytes = {} is too large for {} thread(s): at most \
             {MAX_HEAP_BYTES_PER_THREAD} bytes per thread",
            cfg.writer_heap_bytes, cfg.threads
        )));
    }
    Ok(())
}

pub(crate) fn schema(analyzer: crate::Analyzer) -> (Schema, Field, Field, Field) {
    let mut b = Schema::builder();
    let indexing = TextFieldIndexing::default()
        .set_tokenizer(analyzer.tokenizer_name())
        .set_index_option(IndexRecordOption::WithFreqs)
        .set_fieldnorms(true);
    let text = b.add_text_field(
        TEXT_FIELD,
        TextOptions::default().set_indexing_options(indexing),
    );
    let row = b.add_u64_field(ROW_FIELD, NumericOptions::default().set_fast());
    let len = b.add_u64_field(LEN_FIELD, NumericOptions::default().set_fast());
    (b.build(), text, row, len)
}

impl LexicalWriter {
    /// Starts an index in `dir`, which must not exist or be empty (it is created).
    pub fn create(dir: &Path, cfg: &LexicalConfig) -> Result<LexicalWriter> {
        check_config(cfg)?;
        match std::fs::read_dir(dir) {
            Ok(mut entries) => {
                if entries.next().is_some() {
                    return Err(Error::NotEmpty {
                        path: dir.to_path_buf(),
                    });
                }
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                std::fs::create_dir_all(dir).map_err(|e| Error::io(dir, e))?;
            }
            Err(e) => return Err(Error::io(dir, e)),
        }
        let (schema, text, row, len) = schema(cfg.analyzer);
        let settings = IndexSettings {
            // Sorting by row makes the merged segment's doc ids equal the rows whatever
            // order tantivy's threads and segments held them in.
            sort_by_field: Some(IndexSortByField {
                field: ROW_FIELD.to_string(),
                order: Order::Asc,
            }),
            ..IndexSettings::default()
        };
        let index = Index::builder()
            .schema(schema)
            .settings(settings)
            .create_in_dir(dir)
            .map_err(|e| Error::tantivy(dir, e))?;
        index
            .tokenizers()
            .register(cfg.analyzer.tokenizer_name(), cfg.analyzer.text_analyzer());
        let options = IndexWriterOptions::builder()
            .num_worker_threads(cfg.threads)
            .memory_budget_per_thread(cfg.writer_heap_bytes / cfg.threads)
            .build();
        let writer = index
            .writer_with_options(options)
            .map_err(|e| Error::tantivy(dir, e))?;
        // One merge at the end instead of merges while indexing.
        writer.set_merge_policy(Box::new(NoMergePolicy));
        Ok(LexicalWriter {
            dir: dir.to_path_buf(),
            cfg: cfg.clone(),
            writer,
            text,
            row,
            len,
            counter: cfg.analyzer.text_analyzer(),
            next_row: 0,
            started: Instant::now(),
        })
    }

    /// Adds row `row` with `text` (may be empty: a document with no terms). Rows must come as
    /// 0, 1, 2, ... with none skipped.
    pub fn add(&mut self, row: u32, text: &str) -> Result<()> {
        if u64::from(row) != self.next_row {
            return Err(Error::OutOfOrder {
                expected: self.next_row,
                got: row,
            });
        }
        // The same analyzer tantivy runs on the field, so the same count it adds to the
        // field's total (`LexicalIndex::open` checks the column's sum against it).
        let mut tokens = 0u64;
        let mut stream = self.counter.token_stream(text);
        while stream.advance() {
            tokens += 1;
        }
        let mut doc = TantivyDocument::new();
        doc.add_text(self.text, text);
        doc.add_u64(self.row, u64::from(row));
        doc.add_u64(self.len, tokens);
        self.writer
            .add_document(doc)
            .map_err(|e| Error::tantivy(&self.dir, e))?;
        self.next_row += 1;
        Ok(())
    }

    /// Rows added so far.
    pub fn len(&self) -> u64 {
        self.next_row
    }

    /// No row added yet.
    pub fn is_empty(&self) -> bool {
        self.next_row == 0
    }

    /// Commits, merges everything into one tantivy segment (waiting for the merge), removes
    /// the merged-away files and writes `searchd-lexical.json` with each file's size and
    /// CRC32.
    pub fn finish(mut self) -> Result<LexicalMeta> {
        let dir = self.dir.clone();
        let t = |e| Error::tantivy(&dir, e);
        let indexed = self.started.elapsed();
        self.writer.commit().map_err(t)?;
        let segments = self.writer.index().searchable_segment_ids().map_err(t)?;
        let n_segments = segments.len();
        if segments.len() > 1 {
            self.writer.merge(&segments).wait().map_err(t)?;
        }
        self.writer.garbage_collect_files().wait().map_err(t)?;
        let after = self.writer.index().searchable_segment_ids().map_err(t)?;
        self.writer.wait_merging_threads().map_err(t)?;
        if after.len() > 1 {
            return Err(Error::format(
                &dir,
                format!("merge left {} tantivy segments, expected one", after.len()),
            ));
        }
        // The writer is gone (`wait_merging_threads` took it): no file changes after this.
        let files = index_files(&dir)?;
        let meta = LexicalMeta {
            analyzer: self.cfg.analyzer,
            docs: self.next_row,
            bytes: files.iter().map(|f| f.bytes).sum(),
            k1: BM25_K1,
            b: BM25_B,
            format: FORMAT,
            files,
        };
        write_meta(&dir, &meta)?;
        tracing::debug!(
            dir = %dir.display(),
            docs = meta.docs,
            bytes = meta.bytes,
            segments_merged = n_segments,
            index_s = indexed.as_secs_f64(),
            total_s = self.started.elapsed().as_secs_f64(),
            "lexical index written"
        );
        Ok(meta)
    }
}
